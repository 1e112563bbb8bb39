//! Validation of the spec fields a controller's children are most often
//! refused for: a Service's node ports and selector, and a Deployment's
//! selector against its pod template, as `field.ErrorList` entries of a
//! 422 worded as the real server words them.
//!
//! Sources (Kubernetes 1.32): `pkg/apis/core/validation/validation.go`
//! (`ValidateService`: `nodePort` forbidden on a `ClusterIP` Service,
//! duplicate node ports per protocol, the selector checked as labels),
//! `pkg/apis/apps/validation/validation.go`
//! (`ValidateDeploymentSpec`, `ValidatePodTemplateSpecForReplicaSet`) and
//! `field.Invalid`'s value formatting (`%#v` for maps and structs).
//!
//! This module owns those rules and their wording; it never allocates and
//! never checks a value against other Services (`services` does), never
//! reads the store and never decides the HTTP error.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;
use wasmctrl_kube_rules::names::{label_value_errors, qualified_name_errors};

use crate::rules::validation::go_quote;
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

fn deployment_errors(dep: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    let Some(selector) = dep.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        errs.push(("spec.selector".into(), "Required value".into()));
        return errs;
    };
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    let count = match_labels.map_or(0, |m| m.len()) + expressions.map_or(0, Vec::len);
    if count == 0 {
        errs.push((
            "spec.selector".into(),
            format!(
                "Invalid value: {}: empty selector is invalid for deployment",
                go_label_selector(selector)
            ),
        ));
        return errs;
    }
    let labels = dep.pointer("/spec/template/metadata/labels");
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let labels_match = match_labels
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
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
    if !(labels_match && expressions_match) {
        errs.push((
            "spec.template.metadata.labels".into(),
            format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                go_string_map(labels)
            ),
        ));
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
        assert_eq!(
            deployment_errors(&dep(Value::Null)),
            [("spec.selector".to_string(), "Required value".to_string())]
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
}
