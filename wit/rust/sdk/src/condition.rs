//! Status conditions (`metav1.Condition`) the way controller-runtime's
//! `meta.SetStatusCondition` keeps them: `lastTransitionTime` changes only
//! when a condition's `status` changes, so a guest that recomputes the same
//! conditions on every reconcile writes the same status and the host skips
//! the write. Also how to read the conditions an object already has from a
//! snapshot ([`ConditionFields`]), without a JSON parser: the projection's
//! `[*]` paths line up element by element.

use serde::Serialize;

use crate::snapshot::{Field, Object, SchemaError, WatchSchema};
use crate::time::rfc3339;

/// One status condition, serialised in `metav1.Condition`'s field order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, e.g. `Ready` (the list's map key).
    pub r#type: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The `.metadata.generation` the condition was computed from (omitted
    /// when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
    /// UpperCamelCase machine-readable reason, e.g. `OverLimit`.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Condition {
    /// A condition of `type` whose status is `True` or `False`, with no
    /// transition time yet ([`set_condition`] stamps it).
    pub fn new(r#type: &str, status: bool, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            r#type: r#type.to_string(),
            status: if status { "True" } else { "False" }.to_string(),
            reason: reason.to_string(),
            message: message.into(),
            ..Condition::default()
        }
    }

    /// Computed from `generation` of the object.
    #[must_use]
    pub fn observed_generation(mut self, generation: i64) -> Self {
        self.observed_generation = generation;
        self
    }

    /// Whether `status` is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// The condition of type `r#type`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], r#type: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.r#type == r#type)
}

/// Whether the condition of type `r#type` is present and `True`, as
/// `meta.IsStatusConditionTrue` answers.
pub fn is_condition_true(conditions: &[Condition], r#type: &str) -> bool {
    find_condition(conditions, r#type).is_some_and(Condition::is_true)
}

/// The conditions of a controller that owns one condition type, as it
/// writes them: `new`, set over `existing`'s entry of its type as
/// [`set_condition`] does (so its `lastTransitionTime` is kept unless the
/// status changes), and no other entry, since applying another
/// controller's conditions would make this guest co-own them. `existing`
/// is what the object holds now (read through a `#[conditions]` view
/// field or [`ConditionFields`]).
pub fn owned_conditions(existing: Vec<Condition>, new: Condition, now_ms: u64) -> Vec<Condition> {
    let mut conditions: Vec<Condition> = existing
        .into_iter()
        .filter(|c| c.r#type == new.r#type)
        .collect();
    set_condition(&mut conditions, new, now_ms);
    conditions
}

/// Sets `new` in `conditions` (by type) as `meta.SetStatusCondition` does:
/// a new condition, or one whose `status` changes, gets
/// `lastTransitionTime` = `new`'s if set, else `now_ms` (the environment's
/// `now-ms`); otherwise the existing time is kept (and filled in with
/// `now_ms` if it was missing, since the API requires one). Reason, message
/// and observedGeneration always follow `new`. Returns whether anything
/// changed.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition, now_ms: u64) -> bool {
    let stamp = |c: &Condition| {
        if c.last_transition_time.is_empty() {
            rfc3339(now_ms)
        } else {
            c.last_transition_time.clone()
        }
    };
    let Some(old) = conditions.iter_mut().find(|c| c.r#type == new.r#type) else {
        let time = stamp(&new);
        conditions.push(Condition {
            last_transition_time: time,
            ..new
        });
        return true;
    };
    let mut changed = false;
    if old.status != new.status {
        old.last_transition_time = stamp(&new);
        old.status = new.status;
        changed = true;
    } else if old.last_transition_time.is_empty() {
        old.last_transition_time = stamp(&new);
        changed = true;
    }
    if old.reason != new.reason {
        old.reason = new.reason;
        changed = true;
    }
    if old.message != new.message {
        old.message = new.message;
        changed = true;
    }
    if old.observed_generation != new.observed_generation {
        old.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// The projection paths of a conditions list at `prefix` (normally
/// `status.conditions`), one per condition field, in [`ConditionFields`]'s
/// order: add them to the watch's `fields`.
pub fn condition_paths(prefix: &str) -> [String; 6] {
    [
        "type",
        "status",
        "observedGeneration",
        "lastTransitionTime",
        "reason",
        "message",
    ]
    .map(|field| format!("{prefix}[*].{field}"))
}

/// The resolved fields of a conditions list, for reading the conditions an
/// object has now (to keep their transition times).
#[derive(Clone, Copy, Debug)]
pub struct ConditionFields {
    r#type: Field,
    status: Field,
    observed_generation: Field,
    last_transition_time: Field,
    reason: Field,
    message: Field,
}

impl ConditionFields {
    /// Resolves [`condition_paths`]`(prefix)` in `watch`; an error names the
    /// first path the watch does not project.
    pub fn resolve(watch: &WatchSchema<'_>, prefix: &str) -> Result<Self, SchemaError> {
        let [t, s, g, l, r, m] = condition_paths(prefix);
        Ok(ConditionFields {
            r#type: watch.field(&t)?,
            status: watch.field(&s)?,
            observed_generation: watch.field(&g)?,
            last_transition_time: watch.field(&l)?,
            reason: watch.field(&r)?,
            message: watch.field(&m)?,
        })
    }

    /// The object's conditions, in list order. Entries without a type are
    /// dropped (the API server would not have admitted them); missing
    /// fields read as empty.
    pub fn read(&self, object: &Object<'_>) -> Vec<Condition> {
        let text = |field: Field, i: usize| object.text_at(field, i).unwrap_or("").to_string();
        (0..object.len(self.r#type))
            .filter(|&i| {
                object
                    .text_at(self.r#type, i)
                    .is_some_and(|t| !t.is_empty())
            })
            .map(|i| Condition {
                r#type: text(self.r#type, i),
                status: text(self.status, i),
                observed_generation: object.int_at(self.observed_generation, i).unwrap_or(0),
                last_transition_time: text(self.last_transition_time, i),
                reason: text(self.reason, i),
                message: text(self.message, i),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_796_096_640_000; // 2026-12-01T03:44:00Z
    const T1: u64 = T0 + 60_000;

    #[test]
    fn transition_time_changes_only_with_status() {
        let ready = |ok: bool, reason: &str| Condition::new("Ready", ok, reason, "m");
        let mut cs = Vec::new();
        assert!(set_condition(
            &mut cs,
            ready(true, "WithinLimit").observed_generation(1),
            T0
        ));
        assert_eq!(cs[0].last_transition_time, "2026-12-01T03:44:00Z");
        // Same status, same everything: nothing changes, time kept.
        assert!(!set_condition(
            &mut cs,
            ready(true, "WithinLimit").observed_generation(1),
            T1
        ));
        // Same status, new generation and reason: updated, time kept.
        assert!(set_condition(
            &mut cs,
            ready(true, "Other").observed_generation(2),
            T1
        ));
        assert_eq!(
            (cs[0].observed_generation, cs[0].reason.as_str()),
            (2, "Other")
        );
        assert_eq!(cs[0].last_transition_time, "2026-12-01T03:44:00Z");
        // Status flips: new time.
        assert!(set_condition(&mut cs, ready(false, "OverLimit"), T1));
        assert_eq!(cs[0].last_transition_time, "2026-12-01T03:45:00Z");
        assert_eq!(cs.len(), 1);
        assert!(!cs[0].is_true());
    }

    #[test]
    fn other_types_are_kept_and_explicit_times_win() {
        let mut cs = vec![Condition {
            last_transition_time: "2020-01-01T00:00:00Z".into(),
            ..Condition::new("Synced", true, "Ok", "")
        }];
        let mut ready = Condition::new("Ready", true, "Ok", "");
        ready.last_transition_time = "2021-01-01T00:00:00Z".into();
        set_condition(&mut cs, ready, T0);
        assert_eq!(cs.len(), 2);
        assert_eq!(cs[0].last_transition_time, "2020-01-01T00:00:00Z");
        assert_eq!(
            find_condition(&cs, "Ready").map(|c| c.last_transition_time.as_str()),
            Some("2021-01-01T00:00:00Z")
        );
        // A kept condition that lost its time gets one.
        cs[0].last_transition_time.clear();
        assert!(set_condition(
            &mut cs,
            Condition::new("Synced", true, "Ok", ""),
            T0
        ));
        assert_eq!(cs[0].last_transition_time, "2026-12-01T03:44:00Z");
    }

    #[test]
    fn owned_conditions_keep_only_the_owned_type_and_its_transition_time() {
        let synced = Condition::new("Synced", true, "Ok", "");
        let ready = Condition {
            last_transition_time: "2020-01-01T00:00:00Z".into(),
            ..Condition::new("Ready", true, "Old", "m")
        };
        let existing = vec![synced, ready];
        let same = Condition::new("Ready", true, "New", "n").observed_generation(2);
        let owned = owned_conditions(existing.clone(), same, T0);
        assert_eq!(owned.len(), 1);
        assert_eq!(
            (owned[0].reason.as_str(), owned[0].observed_generation),
            ("New", 2)
        );
        assert_eq!(owned[0].last_transition_time, "2020-01-01T00:00:00Z");
        assert!(is_condition_true(&owned, "Ready"));
        assert!(!is_condition_true(&owned, "Synced"));
        let flipped = owned_conditions(existing, Condition::new("Ready", false, "R", ""), T0);
        assert_eq!(flipped[0].last_transition_time, "2026-12-01T03:44:00Z");
        assert!(!is_condition_true(&flipped, "Ready"));
        let fresh = owned_conditions(Vec::new(), Condition::new("Ready", true, "R", ""), T1);
        assert_eq!(fresh[0].last_transition_time, "2026-12-01T03:45:00Z");
    }

    #[test]
    fn serialises_in_metav1_order_and_omits_generation_zero() {
        let mut c = Condition::new("Ready", false, "OverLimit", "5 of 4");
        c.last_transition_time = "2026-12-01T03:44:00Z".into();
        assert_eq!(
            serde_json::to_string(&c).ok().as_deref(),
            Some(
                r#"{"type":"Ready","status":"False","lastTransitionTime":"2026-12-01T03:44:00Z","reason":"OverLimit","message":"5 of 4"}"#
            )
        );
        let c = c.observed_generation(3);
        assert!(serde_json::to_string(&c)
            .unwrap_or_default()
            .contains(r#""status":"False","observedGeneration":3,"#));
    }
}
