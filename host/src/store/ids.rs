//! An object's uid and resourceVersion as a cache keeping identities holds
//! them ([`Ids`]): in 32 bytes and no allocation when they have the forms
//! the API server gives them (a lowercase hyphenated UUID, a decimal
//! number), else both texts in one allocation. Either way each reads back
//! as exactly the text it came as. It never interprets either (a
//! resourceVersion is opaque: only ever given back) and never decides
//! what a cache keeps.

use std::sync::Arc;

use uuid::fmt::Hyphenated;
use uuid::Uuid;

/// A uid and a resourceVersion, packed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ids {
    /// A uid that is a UUID as `Uuid::hyphenated` writes it, and a
    /// resourceVersion that is a decimal number as `u64` writes it.
    Usual { uid: Uuid, resource_version: u64 },
    /// Any other: the uid's text followed by the resourceVersion's, the
    /// uid's `split` bytes long.
    Text { text: Box<str>, split: usize },
}

/// The text of a uid, on the stack.
pub(super) type UidBuffer = [u8; Hyphenated::LENGTH];

/// `uid` as a UUID when it reads back as exactly the same text.
fn usual_uid(uid: &str) -> Option<Uuid> {
    let parsed = Uuid::try_parse(uid).ok()?;
    let mut buffer = [0; Hyphenated::LENGTH];
    (parsed.hyphenated().encode_lower(&mut buffer) == uid).then_some(parsed)
}

/// `rv` as a number when it reads back as exactly the same text: digits
/// only, no leading zero (but "0"), no sign, within `u64`.
fn usual_resource_version(rv: &str) -> Option<u64> {
    let digits = !rv.is_empty() && rv.bytes().all(|b| b.is_ascii_digit());
    let canonical = digits && (rv.len() == 1 || !rv.starts_with('0'));
    canonical.then(|| rv.parse().ok()).flatten()
}

impl Ids {
    /// The packed form of `uid` and `resource_version`.
    pub(super) fn new(uid: &str, resource_version: &str) -> Self {
        match (usual_uid(uid), usual_resource_version(resource_version)) {
            (Some(uid), Some(resource_version)) => Ids::Usual {
                uid,
                resource_version,
            },
            _ => Ids::Text {
                text: [uid, resource_version].concat().into_boxed_str(),
                split: uid.len(),
            },
        }
    }

    /// The uid's text, written to `buffer` when it is packed.
    pub(super) fn uid_in<'a>(&'a self, buffer: &'a mut UidBuffer) -> &'a str {
        match self {
            Ids::Usual { uid, .. } => uid.hyphenated().encode_lower(buffer),
            Ids::Text { text, split } => text.get(..*split).unwrap_or(""),
        }
    }

    /// The uid.
    pub(super) fn uid(&self) -> Arc<str> {
        Arc::from(self.uid_in(&mut [0; Hyphenated::LENGTH]))
    }

    /// Whether the uid is `uid`.
    pub(super) fn uid_is(&self, uid: &str) -> bool {
        self.uid_in(&mut [0; Hyphenated::LENGTH]) == uid
    }

    /// Whether both hold the same uid (resourceVersions aside).
    pub(super) fn same_uid(&self, other: &Ids) -> bool {
        match (self, other) {
            (Ids::Usual { uid: a, .. }, Ids::Usual { uid: b, .. }) => a == b,
            _ => other.uid_is(self.uid_in(&mut [0; Hyphenated::LENGTH])),
        }
    }

    /// The resourceVersion.
    pub(super) fn resource_version(&self) -> Arc<str> {
        match self {
            Ids::Usual {
                resource_version, ..
            } => Arc::from(resource_version.to_string()),
            Ids::Text { text, split } => Arc::from(text.get(*split..).unwrap_or("")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "5f0c2b1e-8d3a-4c6f-9b2e-1a7d3e5f9c01";

    fn round_trip(uid: &str, rv: &str) -> Ids {
        let ids = Ids::new(uid, rv);
        assert_eq!(
            (&*ids.uid(), &*ids.resource_version()),
            (uid, rv),
            "{ids:?}"
        );
        assert!(ids.uid_is(uid));
        ids
    }

    #[test]
    fn the_usual_forms_are_packed_without_an_allocation() {
        assert!(matches!(round_trip(UID, "1234567"), Ids::Usual { .. }));
        assert!(matches!(round_trip(UID, "0"), Ids::Usual { .. }));
        assert!(matches!(
            round_trip(UID, &u64::MAX.to_string()),
            Ids::Usual { .. }
        ));
        assert_eq!(std::mem::size_of::<Ids>(), 32);
    }

    #[test]
    fn any_other_text_reads_back_exactly_as_it_came() {
        let upper = UID.to_uppercase();
        let simple = UID.replace('-', "");
        let braced = format!("{{{UID}}}");
        let too_big = format!("{}0", u64::MAX);
        for (uid, rv) in [
            (upper.as_str(), "12"),
            (simple.as_str(), "12"),
            (braced.as_str(), "12"),
            ("", ""),
            ("u", ""),
            ("", "7"),
            (UID, ""),
            (UID, "007"),
            (UID, "+7"),
            (UID, "-7"),
            (UID, "7 "),
            (UID, "١٢"),
            (UID, too_big.as_str()),
            (UID, "MTIz"),
            ("ünïcødé", "rv/ü"),
        ] {
            assert!(
                matches!(round_trip(uid, rv), Ids::Text { .. }),
                "{uid:?} {rv:?}"
            );
        }
    }

    #[test]
    fn uids_compare_by_text_whatever_their_packing() {
        let packed = Ids::new(UID, "1");
        let text = Ids::new(UID, "not a number");
        let other = Ids::new("5f0c2b1e-8d3a-4c6f-9b2e-1a7d3e5f9c02", "1");
        assert!(packed.same_uid(&text) && text.same_uid(&packed));
        assert!(
            packed.same_uid(&Ids::new(UID, "2")),
            "resourceVersions aside"
        );
        assert!(!packed.same_uid(&other) && !text.same_uid(&other));
        assert!(!packed.same_uid(&Ids::new(&UID.to_uppercase(), "1")));
        assert!(!packed.uid_is(&UID.to_uppercase()));
        assert!(Ids::new("", "").same_uid(&Ids::new("", "5")));
    }
}
