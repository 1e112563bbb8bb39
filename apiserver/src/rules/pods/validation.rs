//! `ValidatePodCreate` / `ValidatePodUpdate` of kube-apiserver
//! (`pkg/apis/core/validation/validation.go`), the parts a controller's
//! pods meet: extended resources (integers only, request equal to limit, a
//! request needs a limit; `validateResourceRequirements`,
//! `ValidateResourceQuantityValue`), lifecycle hooks and probes on regular
//! init containers (`validateInitContainers`), and which spec fields an
//! update may change (`ValidatePodUpdate`: images, activeDeadlineSeconds
//! downwards, added tolerations, removed scheduling gates, a negative
//! terminationGracePeriodSeconds to 1). Errors are `(field, message)` as
//! `field.Error` prints them. It never defaults and never looks at status.

use serde_json::{json, Value};

use wasmctrl_kube_rules::quantity::GoQuantity as Quantity;

/// The real server's list of what a pod update may change
/// (`updatablePodSpecFields`), as its Forbidden message joins it.
const UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `helper.IsNativeResource`: no domain, or a `kubernetes.io/` one.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `helper.IsExtendedResourceName`: what must be a whole number.
fn is_extended(name: &str) -> bool {
    !is_native(name) && !name.starts_with("requests.")
}

/// `helper.IsOvercommitAllowed`.
fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !name.starts_with("hugepages-")
}

/// The decoded quantity `v` (trimmed, as `Quantity.UnmarshalJSON` trims);
/// `None` when it is none (decoding has refused those already).
fn amount(v: &Value) -> Option<Quantity> {
    match v {
        Value::String(s) => Quantity::parse(s.trim()).ok(),
        Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    }
}

/// Errors of a (defaulted) pod's spec, as on create and on every update.
pub(crate) fn validate_spec(pod: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    for list in ["initContainers", "containers"] {
        let Some(cs) = pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for (i, c) in cs.iter().enumerate() {
            let path = format!("spec.{list}[{i}]");
            if list == "initContainers" && c.get("restartPolicy").is_none() {
                for hook in [
                    "lifecycle",
                    "livenessProbe",
                    "readinessProbe",
                    "startupProbe",
                ] {
                    if c.get(hook).is_some_and(|h| !h.is_null()) {
                        errs.push((
                            format!("{path}.{hook}"),
                            "Forbidden: may not be set for init containers without restartPolicy=Always".into(),
                        ));
                    }
                }
            }
            resources(c, &format!("{path}.resources"), &mut errs);
        }
    }
    errs
}

fn resources(c: &Value, path: &str, errs: &mut Vec<(String, String)>) {
    let list = |k: &str| {
        c.pointer(&format!("/resources/{k}"))
            .and_then(Value::as_object)
    };
    let (limits, requests) = (list("limits"), list("requests"));
    let not_integer = |field: String, q: &Quantity| {
        (
            field,
            format!("Invalid value: {}: must be an integer", q.go_struct()),
        )
    };
    for (name, v) in limits.into_iter().flatten() {
        if let Some(q) = amount(v).filter(|q| is_extended(name) && !q.is_integer()) {
            errs.push(not_integer(format!("{path}.limits[{name}]"), &q));
        }
    }
    for (name, v) in requests.into_iter().flatten() {
        let Some(q) = amount(v) else { continue };
        if is_extended(name) && !q.is_integer() {
            errs.push(not_integer(format!("{path}.requests[{name}]"), &q));
        }
        match limits.and_then(|l| l.get(name)).and_then(amount) {
            Some(limit) if !overcommit_allowed(name) && !q.same_amount(&limit) => errs.push((
                format!("{path}.requests"),
                format!(
                    "Invalid value: {}: must be equal to {name} limit of {}",
                    json!(q.canonical()),
                    limit.canonical()
                ),
            )),
            None if !overcommit_allowed(name) && limits.is_none_or(|l| !l.contains_key(name)) => {
                errs.push((
                    format!("{path}.limits"),
                    "Required value: Limit must be set for non overcommitable resources".into(),
                ))
            }
            _ => {}
        }
    }
}

/// Errors of changing the stored pod `old` into `new` through the main
/// resource (both defaulted).
pub(crate) fn validate_update(old: &Value, new: &Value) -> Vec<(String, String)> {
    let mut errs = validate_spec(new);
    let old_spec = old.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut munged = new.get("spec").cloned().unwrap_or_else(|| json!({}));
    for list in ["containers", "initContainers"] {
        let olds = old_spec
            .get(list)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let news = munged.get_mut(list).and_then(Value::as_array_mut);
        let count = news.as_ref().map_or(0, |n| n.len());
        if count != olds.len() {
            errs.push((
                format!("spec.{list}"),
                "Forbidden: pod updates may not add or remove containers".into(),
            ));
            return errs;
        }
        for (n, o) in news.into_iter().flatten().zip(&olds) {
            match (n.as_object_mut(), o.get("image")) {
                (Some(n), Some(img)) => {
                    n.insert("image".into(), img.clone());
                }
                (Some(n), None) => {
                    n.remove("image");
                }
                _ => {}
            }
        }
    }
    let new_deadline = munged.get("activeDeadlineSeconds").and_then(Value::as_i64);
    match (
        old_spec
            .get("activeDeadlineSeconds")
            .and_then(Value::as_i64),
        new_deadline,
    ) {
        (Some(o), Some(n)) if n > o => errs.push((
            "spec.activeDeadlineSeconds".into(),
            format!("Invalid value: {n}: must be less than or equal to previous value"),
        )),
        (Some(_), None) => errs.push((
            "spec.activeDeadlineSeconds".into(),
            "Invalid value: \"null\": must not update from a positive integer to nil value".into(),
        )),
        _ => {}
    }
    let old_gates = old_spec.get("schedulingGates").and_then(Value::as_array);
    for gate in munged
        .get("schedulingGates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if old_gates.is_none_or(|o| !o.contains(gate)) {
            let name = gate.get("name").and_then(Value::as_str).unwrap_or_default();
            errs.push((
                "spec.schedulingGates".into(),
                format!(
                    "Forbidden: only deletion is allowed, but found new scheduling gate '{name}'"
                ),
            ));
        }
    }
    let old_tolerations = old_spec.get("tolerations").and_then(Value::as_array);
    let new_tolerations = munged.get("tolerations").and_then(Value::as_array);
    if old_tolerations
        .into_iter()
        .flatten()
        .any(|t| new_tolerations.is_none_or(|n| !n.contains(t)))
    {
        errs.push((
            "spec.tolerations".into(),
            "Forbidden: existing toleration can not be modified except its tolerationSeconds"
                .into(),
        ));
    }
    let Some(m) = munged.as_object_mut() else {
        return errs;
    };
    for k in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
        match old_spec.get(k) {
            Some(v) => m.insert(k.into(), v.clone()),
            None => m.remove(k),
        };
    }
    let old_grace = old_spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    if old_grace.is_some_and(|g| g < 0) && m.get("terminationGracePeriodSeconds") == Some(&json!(1))
    {
        m.insert("terminationGracePeriodSeconds".into(), json!(old_grace));
    }
    if munged != old_spec {
        errs.push((
            "spec".into(),
            format!(
                "Forbidden: pod updates may not change fields other than {UPDATABLE}\n{}",
                diff(&old_spec, &munged)
            ),
        ));
    }
    errs
}

/// A short account of what changed, one `-`/`+` line per changed top-level
/// spec field. (The real server prints Go's `cmp.Diff` of its internal
/// type here, which this server does not reproduce.)
fn diff(old: &Value, new: &Value) -> String {
    let empty = serde_json::Map::new();
    let (o, n) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::from("  core.PodSpec{\n");
    for k in keys {
        if o.get(k) != n.get(k) {
            if let Some(v) = o.get(k) {
                out.push_str(&format!("- \t{k}: {v},\n"));
            }
            if let Some(v) = n.get(k) {
                out.push_str(&format!("+ \t{k}: {v},\n"));
            }
        }
    }
    out.push_str("  }\n");
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pod(resources: Value) -> Value {
        json!({"spec": {"containers": [{"name": "c", "image": "x:1", "resources": resources}]}})
    }

    fn msgs(errs: Vec<(String, String)>) -> Vec<String> {
        errs.into_iter().map(|(f, m)| format!("{f}: {m}")).collect()
    }

    #[test]
    fn extended_resources_are_whole_equal_and_limited() {
        assert!(validate_spec(&pod(
            json!({"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}})
        ))
        .is_empty());
        assert!(validate_spec(&pod(
            json!({"limits": {"cpu": "1"}, "requests": {"cpu": "500m"}})
        ))
        .is_empty());
        assert_eq!(
            msgs(validate_spec(&pod(json!({"requests": {"nvidia.com/gpu": "1"}})))),
            ["spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"]
        );
        assert_eq!(
            msgs(validate_spec(&pod(
                json!({"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "2"}})
            ))),
            [
                r#"spec.containers[0].resources.requests: Invalid value: "2": must be equal to nvidia.com/gpu limit of 1"#
            ]
        );
        let half = msgs(validate_spec(&pod(
            json!({"limits": {"nvidia.com/gpu": "500m"}, "requests": {"nvidia.com/gpu": "500m"}}),
        )));
        assert_eq!(half.len(), 2);
        assert!(half[0].starts_with("spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: resource.Quantity{i:resource.int64Amount{value:500, scale:-3}"));
        assert!(half[0].ends_with(": must be an integer"));
    }

    #[test]
    fn only_images_deadlines_tolerations_and_gates_may_change() {
        let old =
            json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x:1"}]}});
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("x:2");
        new["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
        assert!(validate_update(&old, &new).is_empty());
        new["spec"]["nodeName"] = json!("n2");
        let errs = msgs(validate_update(&old, &new));
        assert_eq!(errs.len(), 1);
        assert!(errs[0].starts_with(&format!(
            "spec: Forbidden: pod updates may not change fields other than {UPDATABLE}\n"
        )));
        assert!(errs[0].contains("nodeName"));
    }
}
