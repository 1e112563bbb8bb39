//! Conversion between API versions that share one storage bucket: today
//! `events.k8s.io/v1` Events, stored (like the real server does) as core
//! `v1` Events so both APIs see the same objects. Pure JSON field renames;
//! never touches storage.

use serde_json::{Map, Value};

use crate::storage::registry::ResourceInfo;

/// `(events.k8s.io/v1 field, core/v1 field)` pairs with identical content.
const EVENT_FIELDS: [(&str, &str); 8] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    // same name in both; listed so a missing value is not mistaken for a rename
    ("reportingInstance", "reportingInstance"),
];

/// True if objects of `info` are stored in another version's form.
pub fn needs_conversion(info: &ResourceInfo) -> bool {
    info.group == "events.k8s.io" && info.plural == "events"
}

fn rename(obj: &mut Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) {
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    let mut moved = Map::new();
    for (from, to) in pairs {
        if from == to {
            continue;
        }
        if let Some(v) = m.remove(from) {
            moved.insert(to.to_string(), v);
        }
    }
    m.extend(moved);
}

/// Converts an object in `info`'s form to its storage form.
pub fn to_storage(info: &ResourceInfo, mut obj: Value) -> Value {
    if !needs_conversion(info) {
        return obj;
    }
    rename(&mut obj, EVENT_FIELDS.iter().copied());
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), "v1".into());
    }
    obj
}

/// Converts a stored object to `info`'s form.
pub fn from_storage(info: &ResourceInfo, mut obj: Value) -> Value {
    if !needs_conversion(info) {
        return obj;
    }
    rename(&mut obj, EVENT_FIELDS.iter().map(|(a, b)| (*b, *a)));
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), info.api_version().into());
    }
    obj
}

/// [`from_storage`] on serialized JSON; returns the input untouched when no conversion is needed.
pub fn bytes_from_storage(info: &ResourceInfo, json: &[u8]) -> Vec<u8> {
    if !needs_conversion(info) {
        return json.to_vec();
    }
    let v: Value = serde_json::from_slice(json).unwrap_or(Value::Null);
    serde_json::to_vec(&from_storage(info, v)).unwrap_or_else(|_| json.to_vec())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::storage::registry::Registry;
    use serde_json::json;

    #[test]
    fn events_k8s_io_round_trips_through_core_form() {
        let info = Registry::new()
            .lookup("events.k8s.io", "v1", "events")
            .unwrap();
        let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hello", "reason": "R",
            "reportingController": "c", "reportingInstance": "i", "deprecatedCount": 2});
        let core = to_storage(&info, ev.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["reportingComponent"], "c");
        assert_eq!(core["count"], 2);
        assert_eq!(from_storage(&info, core), ev);
    }
}
