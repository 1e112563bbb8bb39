//! Cell formatting shared by the printers, each the Go helper it copies:
//! `duration.HumanDuration`, `translateTimestampSince`, `layoutContainerCells`, `labels.FormatLabels`,
//! `metav1.FormatLabelSelector` and the selector's `String()`, and plain
//! field reads with Go's zero values for absent fields.

use serde_json::{json, Map, Value};

/// `duration.HumanDuration`, the age the real server prints (`5s`,
/// `3m12s`, `4h`, `2d`, `3y12d`): `<invalid>` more than a second in the
/// future, `0s` for less.
pub fn human_duration(secs: i64) -> String {
    let s = secs;
    if s < -1 {
        return "<invalid>".into();
    }
    if s < 0 {
        return "0s".into();
    }
    if s < 120 {
        return format!("{s}s");
    }
    let minutes = s / 60;
    if minutes < 10 {
        return match s % 60 {
            0 => format!("{minutes}m"),
            sec => format!("{minutes}m{sec}s"),
        };
    }
    if minutes < 3 * 60 {
        return format!("{minutes}m");
    }
    let hours = s / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The object's name cell.
pub(super) fn name(obj: &Value) -> Value {
    obj.pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null)
}

/// A string field, "" when absent (Go's zero value).
pub(super) fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// An integer field, 0 when absent.
pub(super) fn int(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// An array field's items (none when absent).
pub(super) fn items<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// How many keys a map field has.
pub(super) fn keys(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len() as i64)
}

/// `s`, or `fallback` when empty.
pub(super) fn or(s: &str, fallback: &str) -> String {
    if s.is_empty() { fallback } else { s }.to_string()
}

/// Seconds since an RFC 3339 time, None if absent or unparsable.
pub(super) fn seconds_since(time: &str) -> Option<i64> {
    let t = chrono::DateTime::parse_from_rfc3339(time).ok()?;
    Some((chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds())
}

/// `translateTimestampSince`: the age of an RFC 3339 time as
/// `duration.HumanDuration` prints it, `<unknown>` for a zero (absent) one.
pub(super) fn since(time: &str) -> String {
    match seconds_since(time) {
        Some(s) => human_duration(s),
        None => "<unknown>".into(),
    }
}

/// The Age cell.
pub(super) fn age(obj: &Value) -> Value {
    json!(since(text(obj, "/metadata/creationTimestamp")))
}

/// `layoutContainerCells`: the containers' names and images, each joined
/// with ",".
pub(super) fn containers(obj: &Value, pointer: &str) -> [Value; 2] {
    let cs = items(obj, pointer);
    let join = |field: &str| {
        cs.iter()
            .map(|c| c[field].as_str().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(",")
    };
    [json!(join("name")), json!(join("image"))]
}

/// `labels.FormatLabels`: `k=v` pairs sorted by key, joined with ",";
/// `<none>` when there are none.
pub(super) fn format_labels(map: Option<&Value>) -> String {
    let pairs = map.and_then(Value::as_object).map(|m| {
        let mut pairs: Vec<String> = m
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect();
        pairs.sort();
        pairs.join(",")
    });
    or(&pairs.unwrap_or_default(), "<none>")
}

/// `metav1.LabelSelectorAsSelector(sel).String()`: requirements sorted by
/// key, `matchLabels` as `k=v`, expressions as `k in (a,b)`,
/// `k notin (a,b)`, `k`, `!k`; "" for a nil or empty selector, None for an
/// invalid one.
pub(super) fn selector_string(sel: Option<&Value>) -> Option<String> {
    let Some(sel) = sel.and_then(Value::as_object) else {
        return Some(String::new());
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", v.as_str()?)));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let key = e.get("key")?.as_str()?;
        let mut values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        values.dedup();
        let text = match e.get("operator")?.as_str()? {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        reqs.into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: the selector's string, `<none>` when
/// empty, `<error>` when invalid.
pub(super) fn format_label_selector(sel: Option<&Value>) -> String {
    match selector_string(sel) {
        Some(s) => or(&s, "<none>"),
        None => "<error>".into(),
    }
}

/// The condition of `type_` among `conditions`, if any.
pub(super) fn condition<'a>(
    conditions: &'a [Value],
    type_: &str,
) -> Option<&'a Map<String, Value>> {
    conditions
        .iter()
        .filter_map(Value::as_object)
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_selectors_print_sorted_like_go() {
        assert_eq!(format_labels(Some(&json!({"b": "2", "a": "1"}))), "a=1,b=2");
        assert_eq!(format_labels(None), "<none>");
        let sel = json!({"matchLabels": {"tier": "web", "app": "x"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]},
                                 {"key": "gone", "operator": "DoesNotExist"}]});
        assert_eq!(
            format_label_selector(Some(&sel)),
            "app=x,env in (dev,prod),!gone,tier=web"
        );
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        assert_eq!(format_label_selector(None), "<none>");
        let bad = json!({"matchExpressions": [{"key": "k", "operator": "Near"}]});
        assert_eq!(format_label_selector(Some(&bad)), "<error>");
    }

    #[test]
    fn containers_are_laid_out_on_one_line() {
        let o = json!({"c": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:2"}]});
        assert_eq!(containers(&o, "/c"), [json!("a,b"), json!("x:1,y:2")]);
        assert_eq!(since(""), "<unknown>");
    }
}
