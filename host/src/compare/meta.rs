//! Readers of a live object's metadata the write path decides on: its
//! resourceVersion and its controller owner's uid. Pure functions of JSON.

use serde_json::Value as Json;

/// The resourceVersion of a live object.
pub fn resource_version(live: &Json) -> Option<&str> {
    live.pointer("/metadata/resourceVersion")
        .and_then(Json::as_str)
}

/// The uid of `obj`'s controller owner reference, if it has one.
pub fn controller_uid(obj: &Json) -> Option<&str> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Json::as_bool) == Some(true))?
        .get("uid")?
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_uid_reads_the_controller_reference_only() {
        let obj = serde_json::json!({"metadata": {"ownerReferences": [
            {"uid": "a", "controller": false},
            {"uid": "b"},
            {"uid": "c", "controller": true},
        ]}});
        assert_eq!(controller_uid(&obj), Some("c"));
        assert_eq!(controller_uid(&serde_json::json!({"metadata": {}})), None);
    }
}
