//! Who owns what, read from an object's `managedFields`: the entries of
//! one manager or of the others, and whether another manager also owns an
//! entry of a map. Pure readers of JSON, shared by the stored-form compare
//! and the merge-patch decision; they never judge a write.

use serde_json::Value as Json;

/// Whose `managedFields` entries [`entries`] yields.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Whose {
    /// Every entry of this manager.
    Mine,
    /// This manager's Apply entry.
    MyApply,
    /// Every other manager's.
    Others,
}

/// The `fieldsV1` of the main-resource `managedFields` entries `whose`.
pub(super) fn entries<'a>(
    live: &'a Json,
    manager: &'a str,
    whose: Whose,
) -> impl Iterator<Item = &'a Json> {
    live.pointer("/metadata/managedFields")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter(move |e| {
            let mine = e.get("manager").and_then(Json::as_str) == Some(manager);
            let wanted = match whose {
                Whose::Mine => mine,
                Whose::Others => !mine,
                Whose::MyApply => {
                    mine && e.get("operation").and_then(Json::as_str) == Some("Apply")
                }
            };
            wanted && e.get("subresource").and_then(Json::as_str).is_none()
        })
        .filter_map(|e| e.get("fieldsV1"))
}

/// Whether one of `fields` (fieldsV1) names entry `entry` of map `field`.
pub(super) fn names(fields: &Json, field: &str, entry: &str) -> bool {
    fields
        .get(format!("f:{field}"))
        .and_then(|f| f.get(format!("f:{entry}")))
        .is_some()
}

/// Whether any manager claims entries of map `field` one by one.
pub(super) fn claimed_by_entry(live: &Json, field: &str) -> bool {
    live.pointer("/metadata/managedFields")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("fieldsV1")?.get(format!("f:{field}"))?.as_object())
        .any(|m| m.keys().any(|k| k.starts_with("f:")))
}

/// Whether a manager other than `manager` also owns entry `entry` of map
/// `field` (the apply would then leave the value and only drop ours).
pub(super) fn co_owned(live: &Json, manager: &str, field: &str, entry: &str) -> bool {
    entries(live, manager, Whose::Others).any(|f| names(f, field, entry))
}

/// Whether `manager`'s Apply entry owns entry `entry` of map `field`.
pub(super) fn applied_owns(live: &Json, manager: &str, field: &str, entry: &str) -> bool {
    entries(live, manager, Whose::MyApply).any(|f| names(f, field, entry))
}
