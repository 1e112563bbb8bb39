//! How two plans are compared: normalised (writes and events as sorted
//! multisets of canonical JSON, object keys sorted) and diffed into the
//! writes and events only one side has, shortened for a report. Pure
//! functions over printed plans; it never calls a guest.

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

/// The longest a write or event is shown in a report, in bytes.
pub(super) const SHOWN_BYTES: usize = 1024;

/// The writes and events only one of the two plans has.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Diff {
    pub(super) active_only: Vec<String>,
    pub(super) shadow_only: Vec<String>,
}

/// A printed plan ([`ValidatedPlan::to_json`](crate::guest::ValidatedPlan::to_json)) in a form two plans can
/// be compared by: its writes and events as sorted lists of canonical JSON
/// (object keys sorted), its requeue as it is.
pub fn normalise(plan: &Json) -> Json {
    let sorted = |field: &str| -> Json {
        let mut items: Vec<String> = plan
            .get(field)
            .and_then(Json::as_array)
            .map(|a| a.iter().map(canonical).collect())
            .unwrap_or_default();
        items.sort();
        Json::from(items)
    };
    json!({
        "writes": sorted("writes"),
        "events": sorted("events"),
        "requeue-after-ms": plan.get("requeue-after-ms").cloned().unwrap_or(Json::Null),
    })
}

/// `v` as JSON text with every object's keys sorted.
pub(super) fn canonical(v: &Json) -> String {
    fn sort(v: &Json) -> Json {
        match v {
            Json::Object(m) => {
                let sorted: BTreeMap<&String, Json> = m.iter().map(|(k, v)| (k, sort(v))).collect();
                Json::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Json::Array(a) => Json::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

/// What differs between two normalised plans (see [`normalise`]): the
/// writes and events only the first has, and those only the second has;
/// None when they are the same.
pub fn plan_diff(a: &Json, b: &Json) -> Option<(Vec<String>, Vec<String>)> {
    diff(a, b).map(|d| (d.active_only, d.shadow_only))
}

/// What differs between two normalised plans, if anything.
pub(super) fn diff(active: &Json, shadow: &Json) -> Option<Diff> {
    if active == shadow {
        return None;
    }
    let items = |p: &Json, field: &str| -> Vec<String> {
        p.get(field)
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Json::as_str)
                    .map(|s| format!("{field}: {s}"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut active_only = Vec::new();
    let mut shadow_only = items(shadow, "writes");
    shadow_only.extend(items(shadow, "events"));
    for item in items(active, "writes")
        .into_iter()
        .chain(items(active, "events"))
    {
        match shadow_only.iter().position(|s| *s == item) {
            Some(at) => {
                shadow_only.remove(at);
            }
            None => active_only.push(item),
        }
    }
    let requeue = |p: &Json| p.get("requeue-after-ms").cloned().unwrap_or(Json::Null);
    if requeue(active) != requeue(shadow) {
        active_only.push(format!("requeue-after-ms: {}", requeue(active)));
        shadow_only.push(format!("requeue-after-ms: {}", requeue(shadow)));
    }
    Some(Diff {
        active_only: active_only.into_iter().map(shorten).collect(),
        shadow_only: shadow_only.into_iter().map(shorten).collect(),
    })
}

pub(super) fn shorten(mut s: String) -> String {
    if s.len() > SHOWN_BYTES {
        let mut at = SHOWN_BYTES;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(writes: &[Json]) -> Json {
        normalise(&json!({"writes": writes, "events": [], "requeue-after-ms": null}))
    }

    #[test]
    fn plans_equal_up_to_write_order_and_key_order_are_the_same() {
        let a = plan(&[
            json!({"apply": {"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}}}),
            json!({"delete": {"name": "b"}}),
        ]);
        let b = plan(&[
            json!({"delete": {"name": "b"}}),
            json!({"apply": {"data": {"y": "2", "x": "1"}, "metadata": {"name": "a"}, "kind": "ConfigMap"}}),
        ]);
        assert_eq!(diff(&a, &b), None);
    }

    #[test]
    fn a_changed_write_shows_on_both_sides_and_a_shared_one_on_neither() {
        let a = plan(&[
            json!({"apply": {"data": {"n1": "2"}}}),
            json!({"delete": {"name": "x"}}),
        ]);
        let b = plan(&[
            json!({"apply": {"data": {"n1": "3"}}}),
            json!({"delete": {"name": "x"}}),
        ]);
        let d = diff(&a, &b).expect("differs");
        assert_eq!(d.active_only, [r#"writes: {"apply":{"data":{"n1":"2"}}}"#]);
        assert_eq!(d.shadow_only, [r#"writes: {"apply":{"data":{"n1":"3"}}}"#]);
    }

    #[test]
    fn a_duplicated_write_counts_as_many_times_as_it_appears() {
        let w = json!({"apply": {"metadata": {"name": "a"}}});
        let d = diff(&plan(std::slice::from_ref(&w)), &plan(&[w.clone(), w])).expect("differs");
        assert!(d.active_only.is_empty());
        assert_eq!(d.shadow_only.len(), 1);
    }

    #[test]
    fn a_different_requeue_differs() {
        let a = normalise(&json!({"writes": [], "events": [], "requeue-after-ms": 1000}));
        let b = normalise(&json!({"writes": [], "events": [], "requeue-after-ms": null}));
        let d = diff(&a, &b).expect("differs");
        assert_eq!(d.active_only, ["requeue-after-ms: 1000"]);
    }
}
