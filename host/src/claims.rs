//! Which guest of this host may write an object: two guests of one host
//! never fight over one object. Owns the two halves of that rule: the check
//! at load ([`static_overlap`]) and the per-object reservations and claims
//! at plan validation ([`Claims`]). It never writes anything, never watches
//! anything (it is told), and never decides what a guest may write at all
//! (that is the manifest's rules and the operator's policy).
//!
//! # At load
//! [`static_overlap`] compares the write rules of a guest with those of
//! every other guest of the host: two rules that both list names and can
//! name one object (same group and kind, whatever the version; namespaces
//! that can be equal; a name in common) refuse the later guest.
//!
//! # At plan validation
//! Where a rule names no objects (any name) the overlap cannot be decided
//! at load, and [`Claims`] decides per object:
//! - a name another guest's rule lists is *reserved* for that guest;
//! - any other object that another loaded guest's rules can name is
//!   *claimed* by the first guest whose plan writes it, until the object is
//!   deleted (by anyone: the outputs cache reports it, [`Claims::gone`]) or
//!   that guest is unloaded;
//! - a plan writing an object reserved or claimed by another guest is
//!   refused whole (finalizer writes claim nothing).
//!
//! # Lifetime
//! An object no other guest can name is recorded nowhere, so a one-guest
//! host keeps no claims; when a guest that can name such objects is loaded,
//! those its neighbours wrote and still exist are claimed for them first
//! ([`Claims::seed`]), and when it is unloaded the claims only it contested
//! are dropped. Claims live in memory: after a restart, the first writer
//! claims again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::guest::{GuestManifest, Gvk, ObjectKey, PlannedWrite, WriteRule};
use crate::sync::lock;

/// Two write rules of two guests that can name one object, both with
/// names: decided at load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "guest {guest}: writes[{rule}] ({rule_text}) can name the same object as writes[{other_rule}] ({other_rule_text}) of guest {other}: {object}; two guests of one host may not write one object"
)]
pub struct Overlap {
    /// The guest being loaded (refused).
    pub guest: String,
    /// Its rule's position.
    pub rule: usize,
    /// Its rule, as text.
    pub rule_text: String,
    /// The guest already loaded.
    pub other: String,
    /// Its rule's position.
    pub other_rule: usize,
    /// Its rule, as text.
    pub other_rule_text: String,
    /// An object both rules can name, e.g. `v1/ConfigMap ops/gpu-summary`
    /// (`*/name` when both rules allow every namespace).
    pub object: String,
}

/// A rule as the operator reads it: `v1/ConfigMap in namespace ops, names
/// a, b` (`in all namespaces`, `any name`).
pub fn rule_text(rule: &WriteRule) -> String {
    let ns = match &rule.namespace {
        Some(ns) => format!("in namespace {ns}"),
        None => "in all namespaces".into(),
    };
    let names = if rule.names.is_empty() {
        "any name".to_string()
    } else {
        format!("names {}", rule.names.join(", "))
    };
    format!("{} {ns}, {names}", rule.gvk)
}

fn same_kind(a: &Gvk, b: &Gvk) -> bool {
    a.group == b.group && a.kind == b.kind
}

/// The namespace both rules can write in (`Some(None)`: every namespace
/// for both), or None when they cannot meet.
fn common_namespace<'a>(a: &'a WriteRule, b: &'a WriteRule) -> Option<Option<&'a str>> {
    match (a.namespace.as_deref(), b.namespace.as_deref()) {
        (Some(x), Some(y)) if x != y => None,
        (Some(x), _) | (_, Some(x)) => Some(Some(x)),
        (None, None) => Some(None),
    }
}

/// How two write rules of two guests can meet on one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleOverlap {
    /// Both list names and share this one, in this namespace (None: any).
    Static {
        /// A namespace both may write in; None when both allow every one.
        namespace: Option<String>,
        /// A name both list.
        name: String,
    },
    /// At least one names no objects: decided per object, by [`Claims`].
    Dynamic,
}

/// Whether (and how) rules `a` and `b` can name one object.
pub fn rules_overlap(a: &WriteRule, b: &WriteRule) -> Option<RuleOverlap> {
    if !same_kind(&a.gvk, &b.gvk) {
        return None;
    }
    let namespace = common_namespace(a, b)?;
    if a.names.is_empty() || b.names.is_empty() {
        return Some(RuleOverlap::Dynamic);
    }
    let name = a.names.iter().find(|n| b.names.contains(n))?;
    Some(RuleOverlap::Static {
        namespace: namespace.map(str::to_string),
        name: name.clone(),
    })
}

/// The first pair of rules, one of `guest`'s and one of `other`'s, that
/// both name one object: `guest` must be refused.
pub fn static_overlap(guest: &GuestManifest, other: &GuestManifest) -> Option<Overlap> {
    for (i, a) in guest.writes.iter().enumerate() {
        for (j, b) in other.writes.iter().enumerate() {
            if let Some(RuleOverlap::Static { namespace, name }) = rules_overlap(a, b) {
                let object = match namespace {
                    Some(ns) => format!("{} {ns}/{name}", a.gvk),
                    None => format!("{} */{name}", a.gvk),
                };
                return Some(Overlap {
                    guest: guest.name.clone(),
                    rule: i,
                    rule_text: rule_text(a),
                    other: other.name.clone(),
                    other_rule: j,
                    other_rule_text: rule_text(b),
                    object,
                });
            }
        }
    }
    None
}

/// An object as claims know it: the version does not matter (one object
/// served at two versions is one object).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Object {
    group: String,
    kind: String,
    namespace: Option<String>,
    name: String,
}

impl From<&ObjectKey> for Object {
    fn from(k: &ObjectKey) -> Self {
        Object {
            group: k.gvk.group.clone(),
            kind: k.gvk.kind.clone(),
            namespace: k.namespace.clone(),
            name: k.name.clone(),
        }
    }
}

/// Whether `rule` can name `o`, whatever the version.
fn can_name(rule: &WriteRule, o: &Object) -> bool {
    rule.gvk.group == o.group
        && rule.gvk.kind == o.kind
        && rule
            .namespace
            .as_ref()
            .is_none_or(|ns| o.namespace.as_ref() == Some(ns))
        && (rule.names.is_empty() || rule.names.contains(&o.name))
}

/// Whether `rule` lists `o`'s name (reserves it).
fn reserves(rule: &WriteRule, o: &Object) -> bool {
    !rule.names.is_empty() && can_name(rule, o)
}

/// A plan refused because it writes an object another guest of this host
/// owns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{verb} of {object} refused: guest {owner} of this host {how} it (a name its write rules list is reserved for it; otherwise the first guest to write an object another guest can name claims it until the object is deleted or that guest is unloaded); two guests of one host may not write one object")]
pub struct Claimed {
    /// The guest whose plan is refused.
    pub guest: String,
    /// The guest that owns the object.
    pub owner: String,
    /// The write refused.
    pub verb: &'static str,
    /// The object.
    pub object: String,
    /// `reserves` or `claimed`.
    pub how: &'static str,
}

#[derive(Debug, Default)]
struct State {
    /// Each loaded guest's write rules.
    rules: BTreeMap<String, Vec<WriteRule>>,
    /// Claimed objects, and by which guest: only objects another loaded
    /// guest's rules can name.
    claimed: BTreeMap<Object, String>,
}

impl State {
    /// Whether a guest other than `guest` can name `o`.
    fn contested(&self, guest: &str, o: &Object) -> bool {
        self.rules
            .iter()
            .filter(|(g, _)| g.as_str() != guest)
            .any(|(_, rs)| rs.iter().any(|r| can_name(r, o)))
    }

    /// Drops every claim no other guest can contest any more.
    fn prune(&mut self) {
        let claimed = std::mem::take(&mut self.claimed);
        self.claimed = claimed
            .into_iter()
            .filter(|(o, owner)| self.contested(owner, o))
            .collect();
    }
}

/// Who owns which object among the guests of one host (see the module
/// doc). Clones share one registry.
#[derive(Debug, Clone, Default)]
pub struct Claims {
    state: Arc<Mutex<State>>,
}

/// Whether a write makes its object the writer's (finalizers are added
/// and removed entry by entry, by name: they are no one's object).
fn claims_object(w: &PlannedWrite) -> bool {
    !matches!(
        w,
        PlannedWrite::AddFinalizer { .. } | PlannedWrite::RemoveFinalizer { .. }
    )
}

impl Claims {
    /// A new, empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `manifest`'s write rules (replacing an earlier version's):
    /// every name they list is reserved for its guest, and what they can
    /// name is contested for every other guest. Claims that no other guest
    /// can contest any more are dropped.
    pub fn reserve(&self, manifest: &GuestManifest) {
        let mut s = lock(&self.state);
        s.rules
            .insert(manifest.name.clone(), manifest.writes.clone());
        s.prune();
    }

    /// Forgets everything `guest` reserved and claimed (it is unloaded),
    /// and the claims only it could contest. Whether it held any claim.
    pub fn release_guest(&self, guest: &str) -> bool {
        let mut s = lock(&self.state);
        s.rules.remove(guest);
        let before = s.claimed.len();
        s.claimed.retain(|_, owner| owner != guest);
        let held = before != s.claimed.len();
        s.prune();
        held
    }

    /// Checks every object `writes` write for `guest`: refused (naming the
    /// first object another guest reserves or claims) or, all at once,
    /// claimed for `guest` where another loaded guest's rules can name it
    /// (an object no other guest can name is recorded nowhere).
    pub fn claim(&self, guest: &str, writes: &[PlannedWrite]) -> Result<(), Claimed> {
        let mut s = lock(&self.state);
        let mut mine = BTreeSet::new();
        for w in writes.iter().filter(|w| claims_object(w)) {
            let object = Object::from(w.target());
            let refused = |owner: &str, how| Claimed {
                guest: guest.to_string(),
                owner: owner.to_string(),
                verb: w.verb(),
                object: w.target().to_string(),
                how,
            };
            if let Some((owner, _)) = s
                .rules
                .iter()
                .filter(|(g, _)| g.as_str() != guest)
                .find(|(_, rs)| rs.iter().any(|r| reserves(r, &object)))
            {
                return Err(refused(owner, "reserves"));
            }
            if let Some(owner) = s.claimed.get(&object).filter(|o| o.as_str() != guest) {
                return Err(refused(owner, "claimed"));
            }
            if s.contested(guest, &object) {
                mine.insert(object);
            }
        }
        for object in mine {
            s.claimed.insert(object, guest.to_string());
        }
        Ok(())
    }

    /// Ends `guest`'s claims on the objects `writes` deleted.
    pub fn deleted(&self, guest: &str, writes: &[PlannedWrite]) {
        let mut s = lock(&self.state);
        for w in writes {
            if let PlannedWrite::Delete { target, .. } = w {
                let object = Object::from(target);
                if s.claimed.get(&object).is_some_and(|o| o == guest) {
                    s.claimed.remove(&object);
                }
            }
        }
    }

    /// How many objects are claimed.
    pub fn len(&self) -> usize {
        lock(&self.state).claimed.len()
    }

    /// Whether no object is claimed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends any claim on `target`: it is gone (deleted by anyone).
    pub fn gone(&self, target: &ObjectKey) {
        lock(&self.state).claimed.remove(&Object::from(target));
    }

    /// Claims for `guest` the live objects it wrote while no other guest
    /// could name them, where one now can (another guest was loaded);
    /// an object another guest reserves or has claimed meanwhile is left
    /// to it.
    pub fn seed(&self, guest: &str, written: &[ObjectKey]) {
        let mut s = lock(&self.state);
        for object in written.iter().map(Object::from) {
            let reserved = s
                .rules
                .iter()
                .filter(|(g, _)| g.as_str() != guest)
                .any(|(_, rs)| rs.iter().any(|r| reserves(r, &object)));
            if !reserved && s.contested(guest, &object) {
                s.claimed.entry(object).or_insert_with(|| guest.to_string());
            }
        }
    }

    /// The guest that claimed an object, if any (for tests and logs).
    pub fn owner(&self, target: &ObjectKey) -> Option<String> {
        lock(&self.state)
            .claimed
            .get(&Object::from(target))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn cm() -> Gvk {
        Gvk::from_api_version("v1", "ConfigMap")
    }

    fn rule(namespace: Option<&str>, names: &[&str]) -> WriteRule {
        WriteRule {
            gvk: cm(),
            namespace: namespace.map(str::to_string),
            names: names.iter().map(|n| n.to_string()).collect(),
            status: false,
        }
    }

    fn manifest(name: &str, writes: Vec<WriteRule>) -> GuestManifest {
        GuestManifest {
            name: name.into(),
            watches: vec![],
            writes,
            resync: None,
        }
    }

    fn apply(namespace: &str, name: &str) -> PlannedWrite {
        PlannedWrite::Apply {
            target: ObjectKey {
                gvk: cm(),
                namespace: Some(namespace.into()),
                name: name.into(),
            },
            doc: serde_json::json!({}),
        }
    }

    fn delete(namespace: &str, name: &str) -> PlannedWrite {
        PlannedWrite::Delete {
            target: ObjectKey {
                gvk: cm(),
                namespace: Some(namespace.into()),
                name: name.into(),
            },
            uid: None,
        }
    }

    #[test]
    fn named_rules_sharing_a_name_in_a_namespace_overlap_statically() {
        let summary = rule(Some("ops"), &["gpu-summary"]);
        let thief = rule(Some("ops"), &["x", "gpu-summary"]);
        assert_eq!(
            rules_overlap(&thief, &summary),
            Some(RuleOverlap::Static {
                namespace: Some("ops".into()),
                name: "gpu-summary".into()
            })
        );
        // Every namespace includes ops.
        let anywhere = rule(None, &["gpu-summary"]);
        assert!(matches!(
            rules_overlap(&anywhere, &summary),
            Some(RuleOverlap::Static { namespace: Some(ns), .. }) if ns == "ops"
        ));
        // Another version of one kind is one object.
        let mut v2 = summary.clone();
        v2.gvk.version = "v2".into();
        assert!(rules_overlap(&v2, &summary).is_some());
    }

    #[test]
    fn rules_that_cannot_name_one_object_do_not_overlap() {
        let summary = rule(Some("ops"), &["gpu-summary"]);
        assert_eq!(
            rules_overlap(&rule(Some("ops"), &["other"]), &summary),
            None
        );
        assert_eq!(rules_overlap(&rule(Some("ml"), &[]), &summary), None);
        let mut secret = rule(Some("ops"), &["gpu-summary"]);
        secret.gvk = Gvk::from_api_version("v1", "Secret");
        assert_eq!(rules_overlap(&secret, &summary), None);
        let mut other_group = summary.clone();
        other_group.gvk.group = "example.com".into();
        assert_eq!(rules_overlap(&other_group, &summary), None);
    }

    #[test]
    fn a_rule_without_names_overlaps_only_dynamically() {
        let summary = rule(Some("ops"), &["gpu-summary"]);
        assert_eq!(
            rules_overlap(&rule(None, &[]), &summary),
            Some(RuleOverlap::Dynamic)
        );
        assert_eq!(
            rules_overlap(&rule(Some("ops"), &[]), &rule(Some("ops"), &[])),
            Some(RuleOverlap::Dynamic)
        );
    }

    #[test]
    fn a_static_overlap_names_both_guests_both_rules_and_the_object() {
        let summary = manifest("gpu-summary", vec![rule(Some("ops"), &["gpu-summary"])]);
        let thief = manifest(
            "thief",
            vec![rule(Some("ml"), &[]), rule(None, &["gpu-summary"])],
        );
        let o = static_overlap(&thief, &summary).unwrap();
        assert_eq!(
            o.to_string(),
            "guest thief: writes[1] (v1/ConfigMap in all namespaces, names gpu-summary) can name the same object as writes[0] (v1/ConfigMap in namespace ops, names gpu-summary) of guest gpu-summary: v1/ConfigMap ops/gpu-summary; two guests of one host may not write one object"
        );
        let app = manifest("app", vec![rule(None, &[])]);
        assert_eq!(static_overlap(&app, &summary), None);
        assert_eq!(static_overlap(&summary, &app), None);
    }

    #[test]
    fn a_reserved_name_is_refused_to_every_other_guest_whoever_writes_first() {
        let claims = Claims::new();
        claims.reserve(&manifest(
            "gpu-summary",
            vec![rule(Some("ops"), &["gpu-summary"])],
        ));
        let e = claims
            .claim(
                "rogue",
                &[apply("ops", "free"), apply("ops", "gpu-summary")],
            )
            .unwrap_err();
        assert_eq!((e.owner.as_str(), e.how), ("gpu-summary", "reserves"));
        assert!(
            e.to_string().contains("v1/ConfigMap ops/gpu-summary"),
            "{e}"
        );
        // Refused whole: not even the free object was claimed.
        assert_eq!(
            claims.owner(apply("ops", "free").target()),
            None,
            "nothing claimed"
        );
        claims
            .claim("gpu-summary", &[apply("ops", "gpu-summary")])
            .unwrap();
        // Elsewhere the name is free.
        claims
            .claim("rogue", &[apply("ml", "gpu-summary")])
            .unwrap();
    }

    #[test]
    fn the_first_writer_claims_until_it_deletes_the_object_or_is_unloaded() {
        let claims = Claims::new();
        claims.reserve(&manifest("a", vec![rule(Some("ops"), &[])]));
        claims.reserve(&manifest("b", vec![rule(None, &[])]));
        claims.claim("a", &[apply("ops", "shared")]).unwrap();
        claims.claim("a", &[apply("ops", "shared")]).unwrap();
        let e = claims.claim("b", &[apply("ops", "shared")]).unwrap_err();
        assert_eq!(
            (e.guest.as_str(), e.owner.as_str(), e.how),
            ("b", "a", "claimed")
        );
        // Nor may b delete it.
        assert!(claims.claim("b", &[delete("ops", "shared")]).is_err());
        claims.deleted("a", &[delete("ops", "shared")]);
        claims.claim("b", &[apply("ops", "shared")]).unwrap();
        assert!(claims.claim("a", &[apply("ops", "shared")]).is_err());
        assert!(claims.release_guest("b"));
        claims.reserve(&manifest("b", vec![rule(None, &[])]));
        claims.claim("a", &[apply("ops", "shared")]).unwrap();
        assert!(!claims.release_guest("b"), "b holds nothing any more");
    }

    #[test]
    fn a_guest_alone_on_its_host_claims_nothing() {
        let claims = Claims::new();
        claims.reserve(&manifest("a", vec![rule(None, &[])]));
        // Another guest that cannot name the objects: no contest either.
        claims.reserve(&manifest("b", vec![rule(Some("ml"), &[])]));
        for i in 0..100 {
            claims
                .claim("a", &[apply("ops", &format!("cm-{i}"))])
                .unwrap();
        }
        assert_eq!(claims.owner(apply("ops", "cm-0").target()), None);
        assert_eq!(claims.len(), 0, "nothing recorded");
        // What b can name, a claims.
        claims.claim("a", &[apply("ml", "x")]).unwrap();
        assert_eq!(
            claims.owner(apply("ml", "x").target()).as_deref(),
            Some("a")
        );
        assert_eq!(claims.len(), 1);
    }

    #[test]
    fn two_guests_whose_rules_can_name_one_object_refuse_each_others() {
        let claims = Claims::new();
        claims.reserve(&manifest("a", vec![rule(Some("ops"), &[])]));
        claims.reserve(&manifest("b", vec![rule(None, &[])]));
        claims.claim("a", &[apply("ops", "shared")]).unwrap();
        assert!(claims.claim("b", &[apply("ops", "shared")]).is_err());
        assert!(claims.claim("b", &[delete("ops", "shared")]).is_err());
        claims.claim("b", &[apply("ops", "b-only")]).unwrap();
        assert!(claims.claim("a", &[apply("ops", "b-only")]).is_err());
        // Outside a's namespace nobody contests b: nothing claimed.
        claims.claim("b", &[apply("ml", "x")]).unwrap();
        assert_eq!(claims.owner(apply("ml", "x").target()), None);
    }

    #[test]
    fn a_claim_ends_when_its_object_is_deleted_by_someone_else() {
        let claims = Claims::new();
        claims.reserve(&manifest("a", vec![rule(Some("ops"), &[])]));
        claims.reserve(&manifest("b", vec![rule(Some("ops"), &[])]));
        claims.claim("a", &[apply("ops", "shared")]).unwrap();
        assert!(claims.claim("b", &[apply("ops", "shared")]).is_err());
        // A person, a script or b's own delete: the object is gone.
        claims.gone(apply("ops", "shared").target());
        assert_eq!(claims.owner(apply("ops", "shared").target()), None);
        assert_eq!(claims.len(), 0);
        claims.claim("b", &[apply("ops", "shared")]).unwrap();
        assert_eq!(
            claims.owner(apply("ops", "shared").target()).as_deref(),
            Some("b")
        );
    }

    #[test]
    fn objects_written_before_a_rival_was_loaded_stay_their_writers() {
        let claims = Claims::new();
        claims.reserve(&manifest("a", vec![rule(Some("ops"), &[])]));
        claims.claim("a", &[apply("ops", "early")]).unwrap();
        assert_eq!(claims.len(), 0, "alone: nothing recorded");
        claims.reserve(&manifest("b", vec![rule(None, &[])]));
        claims.seed("a", &[apply("ops", "early").target().clone()]);
        assert!(claims.claim("b", &[apply("ops", "early")]).is_err());
        // When b is unloaded, nobody contests a's objects any more.
        claims.release_guest("b");
        assert_eq!(claims.len(), 0, "claims nobody can contest are dropped");
    }

    #[test]
    fn finalizers_claim_nothing() {
        let claims = Claims::new();
        claims.claim("a", &[apply("ops", "x")]).unwrap();
        let add = PlannedWrite::AddFinalizer {
            target: apply("ops", "x").target().clone(),
            uid: "u".into(),
            finalizer: "b.example.com/f".into(),
        };
        claims.claim("b", &[add]).unwrap();
    }
}
