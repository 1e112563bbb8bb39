//! Validation of the spec fields a controller's children are most often
//! refused for: a Service's node ports and selector, and the selectors of
//! the workloads (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
//! ReplicationController) against their pod templates, generated (a Job's)
//! and immutable on update where the real server makes them so, as
//! `field.ErrorList` entries of a 422 worded as the real server words them.
//!
//! Sources (Kubernetes 1.32): `pkg/apis/core/validation/validation.go`
//! (`ValidateService`: `nodePort` forbidden on a `ClusterIP` Service,
//! duplicate node ports per protocol, the selector checked as labels),
//! `pkg/apis/apps/validation/validation.go`
//! (`ValidateDeploymentSpec`, `ValidateReplicaSetSpec`,
//! `ValidateStatefulSetSpec`/`Update`, `ValidateDaemonSetSpec`,
//! `ValidatePodTemplateSpecForReplicaSet`), the apps registry strategies'
//! selector immutability, `pkg/apis/batch/validation/validation.go`
//! (`ValidateGeneratedSelector`, `ValidateJobSpec`, `ValidateJobSpecUpdate`),
//! `ValidateReplicationControllerSpec`, `ValidateHasLabel` and
//! `field.Invalid`'s value formatting (`%#v` for maps and structs).
//!
//! This module owns those rules and their wording; it never allocates and
//! never checks a value against other Services (`services` does), never
//! reads the store and never decides the HTTP error.

use std::collections::{BTreeMap, HashSet};

use serde_json::{json, Value};
use wasmctrl_kube_rules::names::{label_value_errors, qualified_name_errors};

use crate::rules::go_words::go_quote;
use crate::storage::registry::ResourceInfo;

/// The problems of `obj` (a write of `info`'s kind) that this module
/// judges, as (field, message) pairs in Go's order.
pub(crate) fn validate(info: &ResourceInfo, obj: &Value) -> Vec<(String, String)> {
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "Service") => service_errors(obj),
        ("apps", "Deployment") => deployment_errors(obj),
        _ => Vec::new(),
    }
}

fn ports(svc: &Value) -> impl Iterator<Item = (usize, &Value)> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

fn service_errors(svc: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    let ty = svc
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if ty == "ClusterIP" {
        for (i, p) in ports(svc) {
            if p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                errs.push((
                    format!("spec.ports[{i}].nodePort"),
                    "Forbidden: may not be used when `type` is 'ClusterIP'".into(),
                ));
            }
        }
    }
    if let Some(selector) = svc.pointer("/spec/selector").and_then(Value::as_object) {
        let sorted: BTreeMap<&String, &Value> = selector.iter().collect();
        for (k, v) in sorted {
            for m in qualified_name_errors(k) {
                errs.push(("spec.selector".into(), invalid_str(k, &m)));
            }
            for m in label_value_errors(v.as_str().unwrap_or_default()) {
                errs.push((
                    "spec.selector".into(),
                    invalid_str(v.as_str().unwrap_or_default(), &m),
                ));
            }
        }
    }
    let mut seen = HashSet::new();
    for (i, p) in ports(svc) {
        let n = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if n == 0 {
            continue;
        }
        let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
        if !seen.insert((protocol.to_string(), n)) {
            errs.push((
                format!("spec.ports[{i}].nodePort"),
                format!("Duplicate value: {n}"),
            ));
        }
    }
    errs
}

/// A workload's `spec.selector` (a `metav1.LabelSelector`) against its
/// pod template's labels, as `ValidateDeploymentSpec`,
/// `ValidateReplicaSetSpec`, `ValidateStatefulSetSpec` and
/// `ValidateDaemonSetSpec` judge it: `required` unless a DaemonSet; an
/// empty selector is invalid "for `kind_word`" (a ReplicaSet's message says
/// "deployment", as the real server's does); a missing one selects nothing
/// (`LabelSelectorAsSelector(nil)`), so it never matches the template.
fn selector_errors(obj: &Value, required: bool, kind_word: &str) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    let labels = obj.pointer("/spec/template/metadata/labels");
    let Some(selector) = obj.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        if required {
            errs.push(("spec.selector".into(), "Required value".into()));
        }
        errs.push(template_mismatch(labels));
        return errs;
    };
    if selector_terms(selector) == 0 {
        errs.push((
            "spec.selector".into(),
            format!(
                "Invalid value: {}: empty selector is invalid for {kind_word}",
                go_label_selector(selector)
            ),
        ));
    } else if !selector_matches(selector, labels) {
        errs.push(template_mismatch(labels));
    }
    errs
}

fn deployment_errors(dep: &Value) -> Vec<(String, String)> {
    selector_errors(dep, true, "deployment")
}

/// How many terms a `metav1.LabelSelector` has.
fn selector_terms(selector: &Value) -> usize {
    selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
        + selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
}

fn template_mismatch(labels: Option<&Value>) -> (String, String) {
    (
        "spec.template.metadata.labels".into(),
        format!(
            "Invalid value: {}: `selector` does not match template `labels`",
            go_string_map(labels)
        ),
    )
}

/// Whether the `metav1.LabelSelector` `selector` selects `labels` (an
/// object of strings, or none).
fn selector_matches(selector: &Value, labels: Option<&Value>) -> bool {
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let labels_match = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    let expressions_match = expressions.into_iter().flatten().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e.get("operator").and_then(Value::as_str) {
            Some("In") => label(key).is_some_and(|v| values.contains(&v)),
            Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
            Some("Exists") => label(key).is_some(),
            Some("DoesNotExist") => label(key).is_none(),
            // An unknown operator fails LabelSelectorAsSelector first, which
            // this module leaves to the typed decoding.
            _ => true,
        }
    });
    labels_match && expressions_match
}

/// The rules that judge a workload as it is about to be stored — defaulted
/// (a ReplicationController's selector comes from its template's labels)
/// and, for a Job, with its generated selector — and, on update (`old`:
/// the stored object), the fields that may not change: an apps/v1
/// selector (the strategies' `ValidateImmutableField`), a Job's selector,
/// and a StatefulSet's spec beyond the fields
/// `ValidateStatefulSetUpdate` lets change.
pub(crate) fn validate_prepared(
    info: &ResourceInfo,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<(String, String)> {
    let kind = (info.group.as_str(), info.kind.as_str());
    let mut errs = match kind {
        ("apps", "StatefulSet") => selector_errors(obj, true, "statefulset"),
        ("apps", "DaemonSet") => selector_errors(obj, false, "daemonset"),
        ("apps", "ReplicaSet") => selector_errors(obj, true, "deployment"),
        ("", "ReplicationController") => replication_controller_errors(obj),
        ("batch", "Job") => job_errors(obj),
        _ => Vec::new(),
    };
    let Some(old) = old else {
        return errs;
    };
    match kind {
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") | ("batch", "Job") => {
            let selector = |v: &Value| v.pointer("/spec/selector").cloned();
            if selector(obj) != selector(old) {
                let shown = match obj.pointer("/spec/selector").filter(|s| !s.is_null()) {
                    Some(s) => go_label_selector(s),
                    None => go_quote("null"),
                };
                errs.push((
                    "spec.selector".into(),
                    format!("Invalid value: {shown}: field is immutable"),
                ));
            }
        }
        ("apps", "StatefulSet") => {
            let fixed = |v: &Value| {
                let mut spec = v.get("spec").cloned().unwrap_or_else(|| json!({}));
                if let Some(m) = spec.as_object_mut() {
                    for k in STATEFULSET_MUTABLE {
                        m.remove(k);
                    }
                }
                spec
            };
            if fixed(obj) != fixed(old) {
                errs.push((
                    "spec".into(),
                    "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden".into(),
                ));
            }
        }
        _ => {}
    }
    errs
}

/// The StatefulSet spec fields an update may change.
const STATEFULSET_MUTABLE: [&str; 6] = [
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

/// `ValidateReplicationControllerSpec`: a selector (a plain label map,
/// defaulted from the template's labels) that is non-empty and matches
/// the template; a template.
fn replication_controller_errors(rc: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    let selector = rc
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty());
    if selector.is_none() {
        errs.push(("spec.selector".into(), "Required value".into()));
    }
    let Some(template) = rc.pointer("/spec/template").filter(|t| !t.is_null()) else {
        errs.push(("spec.template".into(), "Required value".into()));
        return errs;
    };
    if let Some(selector) = selector {
        let labels = template.pointer("/metadata/labels");
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        if !selector.iter().all(|(k, v)| label(k) == v.as_str()) {
            errs.push(template_mismatch(labels));
        }
    }
    errs
}

/// The labels a Job's generated selector stands on, legacy ones first
/// (`ValidateGeneratedSelector`), each with what it names: its uid or its
/// name.
const JOB_LABELS: [(&str, bool); 4] = [
    ("controller-uid", true),
    ("job-name", false),
    ("batch.kubernetes.io/controller-uid", true),
    ("batch.kubernetes.io/job-name", false),
];

/// `ValidateGeneratedSelector` (unless `manualSelector`: the template
/// carries the generated labels, and the selector selects them) then
/// `ValidateJobSpec`'s selector rules (required; matches the template).
fn job_errors(job: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    let selector = job.pointer("/spec/selector").filter(|s| !s.is_null());
    let labels = job.pointer("/spec/template/metadata/labels");
    let manual = job.pointer("/spec/manualSelector") == Some(&json!(true));
    if let (false, Some(selector)) = (manual, selector) {
        let meta = |k: &str| {
            job.pointer(&format!("/metadata/{k}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let mut expected = serde_json::Map::new();
        for (key, is_uid) in JOB_LABELS {
            let want = if is_uid { meta("uid") } else { meta("name") };
            let field = format!("spec.template.metadata.labels[{key}]");
            match labels.and_then(|l| l.get(key)).and_then(Value::as_str) {
                None => errs.push((field, format!("Required value: {want}"))),
                Some(have) if have != want => errs.push((
                    field,
                    format!("Invalid value: {}: must be '{want}'", go_string_map(labels)),
                )),
                Some(_) => {}
            }
            expected.insert(key.into(), json!(want));
        }
        if !selector_matches(selector, Some(&Value::Object(expected))) {
            errs.push((
                "spec.selector".into(),
                format!(
                    "Invalid value: {}: `selector` not auto-generated",
                    go_label_selector(selector)
                ),
            ));
        }
    }
    match selector {
        None => {
            errs.push(("spec.selector".into(), "Required value".into()));
            errs.push(template_mismatch(labels));
        }
        Some(s) if selector_terms(s) > 0 && !selector_matches(s, labels) => {
            errs.push(template_mismatch(labels));
        }
        Some(_) => {}
    }
    errs
}

/// `field.Invalid`'s body for a string value.
fn invalid_str(value: &str, msg: &str) -> String {
    format!("Invalid value: {}: {msg}", go_quote(value))
}

/// A `map[string]string` as Go's `%#v` prints it: keys sorted, `(nil)`
/// when absent.
fn go_string_map(map: Option<&Value>) -> String {
    let Some(m) = map.and_then(Value::as_object) else {
        return "map[string]string(nil)".into();
    };
    let sorted: BTreeMap<&String, &Value> = m.iter().collect();
    let entries: Vec<String> = sorted
        .into_iter()
        .map(|(k, v)| {
            format!(
                "{}:{}",
                go_quote(k),
                go_quote(v.as_str().unwrap_or_default())
            )
        })
        .collect();
    format!("map[string]string{{{}}}", entries.join(", "))
}

/// An empty `metav1.LabelSelector` as Go's `%#v` prints it.
fn go_label_selector(selector: &Value) -> String {
    let labels = go_string_map(selector.get("matchLabels"));
    let expressions = if selector
        .get("matchExpressions")
        .is_some_and(Value::is_array)
    {
        "[]v1.LabelSelectorRequirement{}"
    } else {
        "[]v1.LabelSelectorRequirement(nil)"
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn node_ports_are_forbidden_on_cluster_ip_services_and_unique_per_protocol() {
        let svc = json!({"spec": {"ports": [{"port": 80, "nodePort": 30001}]}});
        assert_eq!(
            service_errors(&svc),
            [(
                "spec.ports[0].nodePort".to_string(),
                "Forbidden: may not be used when `type` is 'ClusterIP'".to_string()
            )]
        );
        let svc = json!({"spec": {"type": "NodePort", "ports": [
            {"port": 80, "protocol": "TCP", "nodePort": 30001},
            {"port": 81, "protocol": "UDP", "nodePort": 30001},
            {"port": 82, "protocol": "TCP", "nodePort": 30001},
        ]}});
        assert_eq!(
            service_errors(&svc),
            [(
                "spec.ports[2].nodePort".to_string(),
                "Duplicate value: 30001".to_string()
            )]
        );
    }

    #[test]
    fn a_deployment_selector_must_exist_be_non_empty_and_match_its_template() {
        let dep = |selector: Value| {
            json!({"spec": {"selector": selector,
                "template": {"metadata": {"labels": {"app": "b", "tier": "web"}}}}})
        };
        // A missing selector selects nothing, so it matches no template either.
        assert_eq!(
            deployment_errors(&dep(Value::Null)),
            [
                ("spec.selector".to_string(), "Required value".to_string()),
                (
                    "spec.template.metadata.labels".to_string(),
                    r#"Invalid value: map[string]string{"app":"b", "tier":"web"}: `selector` does not match template `labels`"#.to_string()
                )
            ]
        );
        assert_eq!(
            deployment_errors(&dep(json!({})))[0].1,
            "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
        );
        assert_eq!(
            deployment_errors(&dep(json!({"matchLabels": {"app": "a"}}))),
            [(
                "spec.template.metadata.labels".to_string(),
                r#"Invalid value: map[string]string{"app":"b", "tier":"web"}: `selector` does not match template `labels`"#.to_string()
            )]
        );
        assert!(deployment_errors(&dep(json!({"matchLabels": {"app": "b"}}))).is_empty());
        let expr = |op: &str| json!({"matchExpressions": [{"key": "tier", "operator": op, "values": ["web"]}]});
        assert!(deployment_errors(&dep(expr("In"))).is_empty());
        assert_eq!(deployment_errors(&dep(expr("NotIn"))).len(), 1);
    }

    #[test]
    fn service_selectors_are_checked_as_labels() {
        let svc = json!({"spec": {"selector": {"a b": "x", "ok": "bad value"}}});
        let errs = service_errors(&svc);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].0, "spec.selector");
        assert!(
            errs[0].1.starts_with("Invalid value: \"a b\": "),
            "{errs:?}"
        );
        assert_eq!(errs[1].0, "spec.selector");
        assert!(
            errs[1].1.starts_with("Invalid value: \"bad value\": "),
            "{errs:?}"
        );
    }

    fn info(group: &str, kind: &str) -> ResourceInfo {
        let registry = crate::storage::registry::Registry::new();
        let plural = format!("{}s", kind.to_lowercase());
        registry.lookup(group, "v1", &plural).unwrap()
    }

    fn workload(selector: Value, labels: Value) -> Value {
        json!({"metadata": {"name": "w", "uid": "u1"},
            "spec": {"selector": selector, "template": {"metadata": {"labels": labels}}}})
    }

    const MISMATCH: &str = r#"Invalid value: map[string]string{"app":"b"}: `selector` does not match template `labels`"#;
    const EMPTY_SELECTOR: &str = "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}";

    fn errs(v: Vec<(String, String)>) -> Vec<String> {
        v.into_iter().map(|(f, m)| format!("{f}: {m}")).collect()
    }

    /// What `kind` (of apps/v1) with `selector` and pods labelled
    /// `app: b` is refused for on create.
    fn judged(kind: &str, selector: Value) -> Vec<String> {
        let obj = workload(selector, json!({"app": "b"}));
        errs(validate_prepared(&info("apps", kind), &obj, None))
    }

    #[test]
    fn a_statefulset_and_a_replicaset_need_a_non_empty_selector_matching_their_template() {
        for (kind, word) in [("StatefulSet", "statefulset"), ("ReplicaSet", "deployment")] {
            assert_eq!(
                judged(kind, Value::Null),
                [
                    "spec.selector: Required value".to_string(),
                    format!("spec.template.metadata.labels: {MISMATCH}")
                ]
            );
            assert_eq!(
                judged(kind, json!({})),
                [format!(
                    "spec.selector: {EMPTY_SELECTOR}: empty selector is invalid for {word}"
                )]
            );
            let other = json!({"matchLabels": {"app": "a"}});
            assert_eq!(
                judged(kind, other),
                [format!("spec.template.metadata.labels: {MISMATCH}")]
            );
            assert!(judged(kind, json!({"matchLabels": {"app": "b"}})).is_empty());
        }
    }

    #[test]
    fn a_daemonset_selector_is_not_required_but_must_match_and_not_be_empty() {
        assert_eq!(
            judged("DaemonSet", Value::Null),
            [format!("spec.template.metadata.labels: {MISMATCH}")]
        );
        assert_eq!(
            judged("DaemonSet", json!({})),
            [format!(
                "spec.selector: {EMPTY_SELECTOR}: empty selector is invalid for daemonset"
            )]
        );
    }

    #[test]
    fn apps_selectors_are_immutable_and_a_statefulset_spec_mostly_so() {
        let old = workload(json!({"matchLabels": {"app": "b"}}), json!({"app": "b"}));
        let new = workload(json!({"matchLabels": {"app": "c"}}), json!({"app": "c"}));
        for kind in ["Deployment", "ReplicaSet", "DaemonSet"] {
            assert_eq!(
                errs(validate_prepared(&info("apps", kind), &new, Some(&old))),
                [
                    r#"spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"c"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"#
                ]
            );
            assert!(validate_prepared(&info("apps", kind), &old, Some(&old)).is_empty());
        }
        let sts = info("apps", "StatefulSet");
        assert_eq!(
            errs(validate_prepared(&sts, &new, Some(&old))),
            ["spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]
        );
        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(5);
        assert!(validate_prepared(&sts, &scaled, Some(&old)).is_empty());
    }

    #[test]
    fn a_replication_controller_needs_a_selector_matching_its_template() {
        let i = info("", "ReplicationController");
        let rc = |selector: Value| {
            json!({"spec": {"selector": selector,
            "template": {"metadata": {"labels": {"app": "b"}}}}})
        };
        assert_eq!(
            errs(validate_prepared(&i, &rc(json!({})), None)),
            ["spec.selector: Required value"]
        );
        assert_eq!(
            errs(validate_prepared(&i, &rc(json!({"app": "a"})), None)),
            [format!("spec.template.metadata.labels: {MISMATCH}")]
        );
        assert!(validate_prepared(&i, &rc(json!({"app": "b"})), None).is_empty());
        assert_eq!(
            errs(validate_prepared(
                &i,
                &json!({"spec": {"selector": {"app": "b"}}}),
                None
            )),
            ["spec.template: Required value"]
        );
    }

    #[test]
    fn a_job_selector_is_generated_unless_manual_and_immutable() {
        let i = info("batch", "Job");
        let generated = json!({"metadata": {"name": "j", "uid": "u1"}, "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
            "template": {"metadata": {"labels": {"controller-uid": "u1", "job-name": "j",
                "batch.kubernetes.io/controller-uid": "u1", "batch.kubernetes.io/job-name": "j"}}}}});
        assert!(validate_prepared(&i, &generated, None).is_empty());
        let mut own_selector = generated.clone();
        own_selector["spec"]["selector"]["matchLabels"]["app"] = json!("x");
        assert_eq!(
            errs(validate_prepared(&i, &own_selector, None))[0],
            r#"spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"x", "batch.kubernetes.io/controller-uid":"u1"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: `selector` not auto-generated"#
        );
        let mut wrong_label = generated.clone();
        wrong_label["spec"]["template"]["metadata"]["labels"]["job-name"] = json!("k");
        assert_eq!(
            errs(validate_prepared(&i, &wrong_label, None))[0],
            r#"spec.template.metadata.labels[job-name]: Invalid value: map[string]string{"batch.kubernetes.io/controller-uid":"u1", "batch.kubernetes.io/job-name":"j", "controller-uid":"u1", "job-name":"k"}: must be 'j'"#
        );
        let manual = json!({"metadata": {"name": "j", "uid": "u1"}, "spec": {"manualSelector": true,
            "template": {"metadata": {"labels": {"app": "b"}}}}});
        assert_eq!(
            errs(validate_prepared(&i, &manual, None)),
            [
                "spec.selector: Required value".to_string(),
                format!("spec.template.metadata.labels: {MISMATCH}")
            ]
        );
        let mut moved = generated.clone();
        moved["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"] =
            json!("u2");
        assert!(errs(validate_prepared(&i, &moved, Some(&generated)))
            .last()
            .unwrap()
            .ends_with(": field is immutable"));
    }
}
