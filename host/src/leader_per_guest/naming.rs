//! What the Leases of per-guest leadership are named and labelled: one
//! Lease per guest and one presence Lease per replica, all derived from
//! the host's lease name.
//!
//! Owns the names (valid DNS-1123 subdomains and labels, at most 63
//! characters, distinct inputs giving distinct names through a hash
//! suffix when anything had to be changed or cut) and the labels that let
//! one LIST find every Lease of a group. It never talks to the API server.

use sha2::{Digest, Sha256};

/// The label every Lease of one group carries: the host's lease name (as a
/// label value).
pub const GROUP_LABEL: &str = "wasmctrl.dev/lease-group";
/// The label telling a guest's Lease ([`ROLE_GUEST`]) from a replica's
/// presence Lease ([`ROLE_REPLICA`]).
pub const ROLE_LABEL: &str = "wasmctrl.dev/lease-role";
/// [`ROLE_LABEL`] of a guest's Lease.
pub const ROLE_GUEST: &str = "guest";
/// [`ROLE_LABEL`] of a replica's presence Lease.
pub const ROLE_REPLICA: &str = "replica";
/// The label of a guest's Lease naming the guest (as a label value).
pub const GUEST_LABEL: &str = "wasmctrl.dev/guest";
/// The label of a bucket's Lease naming the bucket.
pub const BUCKET_LABEL: &str = "wasmctrl.dev/bucket";

/// Separates a guest's name from a bucket in a unit (never in a name).
const UNIT_SEPARATOR: char = '\u{1f}';

/// The longest name or label value written: a DNS-1123 label, so a name
/// is valid wherever Kubernetes wants a label or a subdomain.
const MAX_LEN: usize = 63;
/// Hex digits of the hash suffix added when a name had to be changed.
const HASH_LEN: usize = 8;

/// The Lease of guest `guest` in the group `group` (the host's lease name):
/// `GROUP-g-GUEST`.
pub fn guest_lease(group: &str, guest: &str) -> String {
    dns_label(&format!("{group}-g-{guest}"))
}

/// The presence Lease of the replica `identity` in the group `group`:
/// `GROUP-r-IDENTITY`.
pub fn replica_lease(group: &str, identity: &str) -> String {
    dns_label(&format!("{group}-r-{identity}"))
}

/// The Lease of bucket `bucket` of the sharded guest `guest`:
/// `GROUP-s-GUEST-BUCKET`.
pub fn bucket_lease(group: &str, guest: &str, bucket: u32) -> String {
    dns_label(&format!("{group}-s-{guest}-{bucket}"))
}

/// What one Lease leads, as the spreading rule counts it: a whole guest
/// (its name) or one bucket of a sharded guest's keys.
pub fn unit(guest: &str, bucket: Option<u32>) -> String {
    match bucket {
        Some(b) => format!("{guest}{UNIT_SEPARATOR}{b}"),
        None => guest.to_string(),
    }
}

/// The guest and bucket of a [`unit`].
pub fn guest_of(unit: &str) -> (&str, Option<u32>) {
    match unit.rsplit_once(UNIT_SEPARATOR) {
        Some((guest, b)) => match b.parse() {
            Ok(b) => (guest, Some(b)),
            Err(_) => (unit, None),
        },
        None => (unit, None),
    }
}

/// The Lease of a [`unit`].
pub fn unit_lease(group: &str, unit: &str) -> String {
    match guest_of(unit) {
        (guest, Some(b)) => bucket_lease(group, guest, b),
        (guest, None) => guest_lease(group, guest),
    }
}

/// `s` as a DNS-1123 label: returned unchanged when it already is one;
/// otherwise lowercased, every other character replaced by `-`, trimmed to
/// start and end alphanumeric, cut to fit, and suffixed with a hash of the
/// original, so two inputs never share a name by being cleaned alike.
pub fn dns_label(s: &str) -> String {
    if is_dns_label(s) {
        return s.to_string();
    }
    let cleaned: String = s
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    let hash = hex::encode(Sha256::digest(s.as_bytes()));
    let keep = MAX_LEN - HASH_LEN - 1;
    let head: String = cleaned.chars().take(keep).collect();
    let head = head.trim_matches('-');
    if head.is_empty() {
        return format!("x-{}", &hash[..HASH_LEN]);
    }
    format!("{head}-{}", &hash[..HASH_LEN])
}

/// Whether `s` is a DNS-1123 label: 1–63 characters of `a-z0-9-`,
/// starting and ending alphanumeric.
pub fn is_dns_label(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= MAX_LEN
        && s.chars().all(|c| alnum(c) || c == '-')
        && s.starts_with(alnum)
        && s.ends_with(alnum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_valid_name_is_kept_as_it_is() {
        assert_eq!(
            guest_lease("wasmctrl", "gpu-summary"),
            "wasmctrl-g-gpu-summary"
        );
        assert_eq!(replica_lease("wasmctrl", "host-0"), "wasmctrl-r-host-0");
    }

    #[test]
    fn a_long_or_odd_name_is_cut_and_hashed_into_a_label() {
        let long = "a".repeat(300);
        let name = guest_lease("wasmctrl", &long);
        assert!(is_dns_label(&name), "{name}");
        assert_ne!(name, guest_lease("wasmctrl", &"a".repeat(299)));
        let odd = replica_lease("Wasmctrl", "Pod_1.example.com");
        assert!(is_dns_label(&odd), "{odd}");
        assert!(odd.starts_with("wasmctrl-r-pod-1-example-com-"), "{odd}");
    }

    #[test]
    fn a_unit_names_its_guest_and_bucket_and_its_own_lease() {
        assert_eq!(guest_of(&unit("app", Some(3))), ("app", Some(3)));
        assert_eq!(guest_of(&unit("app", None)), ("app", None));
        assert_eq!(unit_lease("w", &unit("app", Some(3))), "w-s-app-3");
        assert_eq!(unit_lease("w", &unit("app", None)), "w-g-app");
    }

    proptest! {
        #[test]
        fn every_derived_name_is_a_dns_label_and_distinct_inputs_stay_distinct(
            group in "[a-zA-Z0-9._-]{1,80}",
            a in "\\PC{1,100}",
            b in "\\PC{1,100}",
        ) {
            let (na, nb) = (guest_lease(&group, &a), guest_lease(&group, &b));
            prop_assert!(is_dns_label(&na), "{}", na);
            prop_assert!(is_dns_label(&replica_lease(&group, &a)));
            if a != b {
                prop_assert_ne!(na, nb);
            }
        }
    }
}
