//! `pods/binding`: what `BindingREST` (kube-apiserver
//! `pkg/registry/core/pod/storage/storage.go`) does to a pod when a
//! scheduler POSTs a `Binding`: set `spec.nodeName` and mark the pod
//! `PodScheduled`, unless the pod is being deleted, already bound or still
//! gated. This module decides and edits JSON; the handler reads and writes
//! the store.

use serde_json::{json, Value};

use crate::rules::objects::meta_str;

/// The node a `Binding` names, or the `(field, message)` errors of
/// `ValidatePodBinding`.
pub(crate) fn target(binding: &Value) -> Result<String, Vec<(String, String)>> {
    let mut errs = Vec::new();
    let kind = binding
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !kind.is_empty() && kind != "Node" {
        errs.push((
            "target.kind".to_string(),
            format!(
                "Unsupported value: {}: supported values: \"Node\", \"<empty>\"",
                json!(kind)
            ),
        ));
    }
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if node.is_empty() {
        errs.push(("target.name".to_string(), "Required value".to_string()));
    }
    if errs.is_empty() {
        Ok(node.to_string())
    } else {
        Err(errs)
    }
}

/// Binds `pod` to `node` at `now`; the error is the reason the real server
/// puts in its `Conflict` on `pods/binding`.
pub(crate) fn bind(pod: &mut Value, node: &str, now: &str) -> Result<(), String> {
    let name = meta_str(pod, "name").unwrap_or_default().to_string();
    if meta_str(pod, "deletionTimestamp").is_some() {
        return Err(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    if let Some(bound) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        return Err(format!(
            "pod {name} is already assigned to node {}",
            json!(bound)
        ));
    }
    if pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty())
    {
        return Err(format!("pod {name} has non-empty .spec.schedulingGates"));
    }
    pod["spec"]["nodeName"] = json!(node);
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let scheduled = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    match pod["status"]
        .get_mut("conditions")
        .and_then(Value::as_array_mut)
    {
        Some(conds) => {
            conds.retain(|c| c["type"] != "PodScheduled");
            conds.push(scheduled);
        }
        None => pod["status"]["conditions"] = json!([scheduled]),
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn binding_sets_the_node_once() {
        let mut pod =
            json!({"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}});
        bind(&mut pod, "n1", "2026-01-01T00:00:00Z").unwrap();
        assert_eq!(pod["spec"]["nodeName"], "n1");
        assert_eq!(pod["status"]["conditions"][0]["type"], "PodScheduled");
        assert_eq!(
            bind(&mut pod, "n2", "now").unwrap_err(),
            "pod p is already assigned to node \"n1\""
        );
        assert!(target(&json!({"target": {}})).is_err());
    }
}
