//! The cluster-level printers: Namespace (STATUS), Node (STATUS from the
//! Ready condition plus `SchedulingDisabled`, ROLES from the role labels,
//! VERSION; addresses, OS image, kernel and runtime when wide) and Lease
//! (HOLDER).

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::column::{col, wide, Printer, AGE, NAME};
use super::descriptions as d;
use super::format::{age, items, name, or, text};

pub(super) static NAMESPACE: Printer = Printer::new(
    &[
        NAME,
        col("Status", "string", "The status of the namespace"),
        AGE,
    ],
    namespace,
);

fn namespace(obj: &Value) -> Vec<Value> {
    vec![name(obj), json!(text(obj, "/status/phase")), age(obj)]
}

pub(super) static NODE: Printer = Printer::new(
    &[
        NAME,
        col("Status", "string", "The status of the node"),
        col("Roles", "string", "The roles of the node"),
        AGE,
        col("Version", "string", d::NODE_KUBELET_VERSION),
        wide("Internal-IP", "string", d::NODE_ADDRESSES),
        wide("External-IP", "string", d::NODE_ADDRESSES),
        wide("OS-Image", "string", d::NODE_OS_IMAGE),
        wide("Kernel-Version", "string", d::NODE_KERNEL),
        wide("Container-Runtime", "string", d::NODE_RUNTIME),
    ],
    node,
);

/// `findNodeRoles`: `node-role.kubernetes.io/<role>` label keys and the
/// `kubernetes.io/role` label's value, sorted and deduplicated.
fn roles(obj: &Value) -> String {
    let mut roles = BTreeSet::new();
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if k == "kubernetes.io/role" {
                if let Some(v) = v.as_str().filter(|v| !v.is_empty()) {
                    roles.insert(v.to_string());
                }
            }
        }
    }
    or(&roles.into_iter().collect::<Vec<_>>().join(","), "<none>")
}

/// The first address of `type_`, `<none>` if none.
fn address(obj: &Value, type_: &str) -> String {
    items(obj, "/status/addresses")
        .iter()
        .find(|a| a["type"] == type_)
        .map_or("<none>".into(), |a| text(a, "/address").to_string())
}

fn node(obj: &Value) -> Vec<Value> {
    // The last condition of a type wins (`conditionMap`).
    let ready = items(obj, "/status/conditions")
        .iter()
        .rev()
        .find(|c| c["type"] == "Ready");
    let mut status = vec![match ready {
        Some(c) if c["status"] == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push("SchedulingDisabled");
    }
    let info = |f: &str| json!(or(text(obj, &format!("/status/nodeInfo/{f}")), "<unknown>"));
    vec![
        name(obj),
        json!(status.join(",")),
        json!(roles(obj)),
        age(obj),
        json!(text(obj, "/status/nodeInfo/kubeletVersion")),
        json!(address(obj, "InternalIP")),
        json!(address(obj, "ExternalIP")),
        info("osImage"),
        info("kernelVersion"),
        info("containerRuntimeVersion"),
    ]
}

pub(super) static LEASE: Printer = Printer::new(
    &[NAME, col("Holder", "string", d::LEASE_HOLDER), AGE],
    lease,
);

fn lease(obj: &Value) -> Vec<Value> {
    vec![
        name(obj),
        json!(text(obj, "/spec/holderIdentity")),
        age(obj),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cordoned_control_plane_node() {
        let n = json!({"metadata": {"name": "n1", "labels": {
                "node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "infra",
                "node-role.kubernetes.io/": "x"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "False"}],
                "addresses": [{"type": "InternalIP", "address": "192.168.1.2"}],
                "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Debian"}}});
        let c = node(&n);
        assert_eq!(
            c[1..3],
            [
                json!("NotReady,SchedulingDisabled"),
                json!("control-plane,infra")
            ]
        );
        assert_eq!(c[4], "v1.32.0");
        assert_eq!(
            c[5..],
            [
                json!("192.168.1.2"),
                json!("<none>"),
                json!("Debian"),
                json!("<unknown>"),
                json!("<unknown>")
            ]
        );
        let bare = node(&json!({}));
        assert_eq!(bare[1..3], [json!("Unknown"), json!("<none>")]);
    }

    #[test]
    fn namespaces_and_leases() {
        assert_eq!(
            namespace(&json!({"status": {"phase": "Terminating"}}))[1],
            "Terminating"
        );
        assert_eq!(lease(&json!({"spec": {"holderIdentity": "me"}}))[1], "me");
        assert_eq!(lease(&json!({}))[1], "");
    }
}
