//! The App decision, as plain functions: the data of the child ConfigMap an
//! App should have, and the status the App should show. No snapshot, no
//! plan, no I/O: the glue in `lib.rs` reads the snapshot (the view
//! [`App`]), calls these and writes the results (the child's owner reference and the finalizer's
//! release are the SDK's `controller_ref` and `Lifecycle`).

use std::collections::BTreeMap;

use serde::Serialize;
use wasmctrl_guest_sdk::{is_condition_true, owned_conditions, Condition};

use crate::App;

/// The condition type this controller owns.
pub const READY: &str = "Ready";
/// The reason of `Ready=True`: the child exists.
pub const CHILD_READY: &str = "ChildReady";
/// The reason of `Ready=False`: the child is not there (yet); this
/// reconcile's plan creates it.
pub const CHILD_MISSING: &str = "ChildMissing";

/// The child's `data` keys.
pub const MESSAGE_KEY: &str = "message";
/// See [`MESSAGE_KEY`].
pub const REPLICAS_KEY: &str = "replicas";
/// See [`MESSAGE_KEY`].
pub const BANNER_KEY: &str = "banner";

/// The child's `data`: `message` and `replicas` (as a decimal string) from
/// the App's spec, `banner` from the namespace's `shared-settings`
/// ConfigMap. A value that is absent (no such spec field; no
/// `shared-settings` ConfigMap, or one without `data.banner`) has no key,
/// so the child tells "no banner" apart from an empty one; an entry the
/// guest stops planning is removed from the child by the host's apply.
pub fn child_data(spec: &App<'_>, banner: Option<&str>) -> BTreeMap<&'static str, String> {
    let mut data = BTreeMap::new();
    if let Some(message) = spec.message {
        data.insert(MESSAGE_KEY, message.to_string());
    }
    if let Some(replicas) = spec.replicas {
        data.insert(REPLICAS_KEY, replicas.to_string());
    }
    if let Some(banner) = banner {
        data.insert(BANNER_KEY, banner.to_string());
    }
    data
}

/// `status` of an App, in the CRD's field names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppStatus {
    /// The generation this status was computed from.
    pub observed_generation: i64,
    /// Only the conditions this controller owns (`Ready`): applying
    /// another controller's entries would make us co-own them.
    pub conditions: Vec<Condition>,
}

impl AppStatus {
    /// Whether `Ready` is `True`.
    pub fn is_ready(&self) -> bool {
        is_condition_true(&self.conditions, READY)
    }
}

/// The status of an App at `generation` whose child `child` names
/// (`namespace/name`) does or does not exist yet, keeping the
/// `lastTransitionTime` of the `Ready` condition in `existing` unless its
/// status flips (`now_ms` stamps a flip).
pub fn status(
    generation: i64,
    child: &str,
    child_exists: bool,
    existing: Vec<Condition>,
    now_ms: u64,
) -> AppStatus {
    let ready = if child_exists {
        Condition::new(
            READY,
            true,
            CHILD_READY,
            format!("ConfigMap {child} is applied"),
        )
    } else {
        Condition::new(
            READY,
            false,
            CHILD_MISSING,
            format!("ConfigMap {child} does not exist yet"),
        )
    };
    let conditions = owned_conditions(existing, ready.observed_generation(generation), now_ms);
    AppStatus {
        observed_generation: generation,
        conditions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_data_has_a_key_for_every_value_present_only() {
        let full = App {
            message: Some("hi"),
            replicas: Some(3),
            conditions: Vec::new(),
        };
        assert_eq!(
            child_data(&full, Some("")),
            BTreeMap::from([
                (BANNER_KEY, String::new()),
                (MESSAGE_KEY, "hi".to_string()),
                (REPLICAS_KEY, "3".to_string()),
            ])
        );
        assert_eq!(
            child_data(&full, None).keys().copied().collect::<Vec<_>>(),
            [MESSAGE_KEY, REPLICAS_KEY]
        );
        assert!(child_data(&App::default(), None).is_empty());
    }

    #[test]
    fn ready_follows_the_child_and_keeps_only_our_condition() {
        let other = Condition::new("Synced", true, "Ok", "");
        for (exists, ready, reason) in [(true, true, CHILD_READY), (false, false, CHILD_MISSING)] {
            let s = status(4, "ns/a", exists, vec![other.clone()], 0);
            assert_eq!(s.is_ready(), ready);
            assert_eq!(s.conditions.len(), 1);
            assert_eq!(s.conditions[0].reason, reason);
            assert_eq!(
                (s.observed_generation, s.conditions[0].observed_generation),
                (4, 4)
            );
        }
    }
}
