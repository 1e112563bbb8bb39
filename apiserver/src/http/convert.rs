//! Conversion between API versions that share one storage bucket:
//! `events.k8s.io/v1` Events, stored (like the real server does) as core
//! `v1` Events, and `autoscaling/v1` HPAs, stored as `autoscaling/v2` (the
//! CPU target and current utilization; what v1 cannot say is dropped from a
//! v1 read, not kept in annotations as the real server does). Pure JSON;
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
    (info.group == "events.k8s.io" && info.plural == "events") || is_hpa_v1(info)
}

fn is_hpa_v1(info: &ResourceInfo) -> bool {
    info.group == "autoscaling" && info.version == "v1" && info.plural == "horizontalpodautoscalers"
}

/// A v2 metric (spec) or metric status with a CPU utilization.
fn cpu_metric(target: &str, value: Value) -> Value {
    serde_json::json!([{"type": "Resource", "resource": {"name": "cpu",
        target: {"type": "Utilization", "averageUtilization": value}}}])
}

/// The CPU utilization of a v2 metrics list (`target` or `current`).
fn cpu_utilization(metrics: Option<&Value>, target: &str) -> Option<Value> {
    metrics?.as_array()?.iter().find_map(|m| {
        let r = m.get("resource").filter(|r| r["name"] == "cpu")?;
        r.get(target)?.get("averageUtilization").cloned()
    })
}

/// `autoscaling/v1` HPA to its `v2` storage form.
fn hpa_to_v2(mut obj: Value) -> Value {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        if let Some(cpu) = spec.remove("targetCPUUtilizationPercentage") {
            spec.insert("metrics".into(), cpu_metric("target", cpu));
        }
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        if let Some(cpu) = status.remove("currentCPUUtilizationPercentage") {
            status.insert("currentMetrics".into(), cpu_metric("current", cpu));
        }
    }
    obj["apiVersion"] = "autoscaling/v2".into();
    obj
}

/// A stored `v2` HPA as `autoscaling/v1`.
fn hpa_to_v1(mut obj: Value) -> Value {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        let cpu = cpu_utilization(spec.get("metrics"), "target");
        spec.remove("metrics");
        spec.remove("behavior");
        if let Some(cpu) = cpu {
            spec.insert("targetCPUUtilizationPercentage".into(), cpu);
        }
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        let cpu = cpu_utilization(status.get("currentMetrics"), "current");
        status.remove("currentMetrics");
        status.remove("conditions");
        if let Some(cpu) = cpu {
            status.insert("currentCPUUtilizationPercentage".into(), cpu);
        }
    }
    obj["apiVersion"] = "autoscaling/v1".into();
    obj
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
    if !needs_conversion(info) || !obj.is_object() {
        return obj;
    }
    if is_hpa_v1(info) {
        return hpa_to_v2(obj);
    }
    rename(&mut obj, EVENT_FIELDS.iter().copied());
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), "v1".into());
    }
    obj
}

/// Converts a stored object to `info`'s form.
pub fn from_storage(info: &ResourceInfo, mut obj: Value) -> Value {
    if !needs_conversion(info) || !obj.is_object() {
        return obj;
    }
    if is_hpa_v1(info) {
        return hpa_to_v1(obj);
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

    #[test]
    fn autoscaling_v1_hpas_are_stored_as_v2_with_their_cpu_target() {
        let info = Registry::new()
            .lookup("autoscaling", "v1", "horizontalpodautoscalers")
            .unwrap();
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
            "spec": {"maxReplicas": 3, "targetCPUUtilizationPercentage": 50}});
        let v2 = to_storage(&info, v1.clone());
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            50
        );
        assert_eq!(from_storage(&info, v2), v1);
    }
}
