//! The core/v1 Event printer (`printEvent`): LAST SEEN (the series' last
//! observation, else `lastTimestamp`, else FIRST SEEN), TYPE, REASON,
//! OBJECT (`kind/name`, lower-cased kind), MESSAGE (trimmed); wide:
//! SUBOBJECT, SOURCE (component and host, else the reporting controller
//! and instance), FIRST SEEN (`firstTimestamp`, else `eventTime`), COUNT
//! (the series' count, else `count`, 1 when unset) and NAME. Unlike other
//! printers its Name column is last and wide.

use serde_json::{json, Value};

use super::column::{col, wide, Column, Printer};
use super::descriptions as d;
use super::format::{int, name, since, text};

pub(super) static EVENT: Printer = Printer::new(
    &[
        col("Last Seen", "string", d::EVENT_LAST_TIMESTAMP),
        col("Type", "string", d::EVENT_TYPE),
        col("Reason", "string", d::EVENT_REASON),
        col("Object", "string", d::EVENT_INVOLVED_OBJECT),
        wide("Subobject", "string", d::EVENT_FIELD_PATH),
        wide("Source", "string", d::EVENT_SOURCE),
        col("Message", "string", d::EVENT_MESSAGE),
        wide("First Seen", "string", d::EVENT_FIRST_TIMESTAMP),
        wide("Count", "string", d::EVENT_COUNT),
        Column {
            priority: 1,
            ..super::column::NAME
        },
    ],
    event,
);

/// The first non-empty of two strings (`firstNonEmpty`).
fn first<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() {
        b
    } else {
        a
    }
}

fn event(obj: &Value) -> Vec<Value> {
    let first_seen = match text(obj, "/firstTimestamp") {
        "" => since(text(obj, "/eventTime")),
        t => since(t),
    };
    let mut last_seen = match text(obj, "/lastTimestamp") {
        "" => first_seen.clone(),
        t => since(t),
    };
    let mut count = int(obj, "/count");
    if let Some(series) = obj.get("series").filter(|s| s.is_object()) {
        last_seen = since(text(series, "/lastObservedTime"));
        count = int(series, "/count");
    } else if count == 0 {
        count = 1;
    }
    let kind = text(obj, "/involvedObject/kind").to_lowercase();
    let target = match text(obj, "/involvedObject/name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = first(
        text(obj, "/source/component"),
        text(obj, "/reportingComponent"),
    );
    let instance = first(text(obj, "/source/host"), text(obj, "/reportingInstance"));
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last_seen),
        json!(text(obj, "/type")),
        json!(text(obj, "/reason")),
        json!(target),
        json!(text(obj, "/involvedObject/fieldPath")),
        json!(source),
        json!(text(obj, "/message").trim()),
        json!(first_seen),
        json!(count),
        name(obj),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ago(secs: i64) -> String {
        (chrono::Utc::now() - chrono::Duration::seconds(secs)).to_rfc3339()
    }

    #[test]
    fn a_repeated_event_and_a_new_style_singleton() {
        let e = json!({"metadata": {"name": "web.1"}, "type": "Warning", "reason": "BackOff",
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{c}"},
            "source": {"component": "kubelet", "host": "n1"}, "message": " Back-off restarting \n",
            "firstTimestamp": ago(600), "lastTimestamp": ago(30), "count": 7});
        assert_eq!(
            event(&e),
            [
                json!("30s"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web"),
                json!("spec.containers{c}"),
                json!("kubelet, n1"),
                json!("Back-off restarting"),
                json!("10m"),
                json!(7),
                json!("web.1")
            ]
        );
        let single = json!({"type": "Normal", "involvedObject": {"kind": "Node"},
            "eventTime": ago(5), "reportingComponent": "scheduler"});
        let c = event(&single);
        assert_eq!(c[0], "5s");
        assert_eq!(c[3], "node");
        assert_eq!(c[5], "scheduler");
        assert_eq!(c[7..9], [json!("5s"), json!(1)]);
        let series = json!({"firstTimestamp": ago(100), "count": 2,
            "series": {"count": 9, "lastObservedTime": ago(3)}});
        assert_eq!(event(&series)[0], "3s");
        assert_eq!(event(&series)[8], 9);
    }
}
