//! Object lifecycle rules the real server applies before storage: name
//! validation, `generateName`, system metadata on create, pod defaulting and
//! the status/spec separation of writes. Pure functions over JSON; nothing
//! here touches the store or the network.

use serde_json::{json, Map, Value};

use crate::storage::registry::ResourceInfo;
use wasmctrl_kube_rules::builtin;

use super::defaults::{default_container, pod_spec_defaults};
pub use super::meta::{meta_str, now_rfc3339};

use wasmctrl_kube_rules::names::{
    is_dns1123_label as is_label, is_dns1123_subdomain as is_subdomain, DNS1123_LABEL_MSG,
    DNS1123_SUBDOMAIN_MSG,
};

/// Validates an object name for `info`; returns `(field, message)` errors as the real server words them.
pub fn validate_name(info: &ResourceInfo, name: &str) -> Vec<(String, String)> {
    let label_only = matches!(info.plural.as_str(), "namespaces");
    let ok = if label_only {
        is_label(name)
    } else {
        is_subdomain(name)
    };
    if ok {
        return Vec::new();
    }
    let msg = if label_only {
        DNS1123_LABEL_MSG
    } else {
        DNS1123_SUBDOMAIN_MSG
    };
    vec![(
        "metadata.name".into(),
        format!("Invalid value: \"{name}\": {msg}"),
    )]
}

/// Appends the 5 random characters the real server uses for `generateName`.
pub fn generated_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let suffix: String = bytes[..5]
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// True if objects of this resource carry `metadata.generation`.
pub fn tracks_generation(info: &ResourceInfo) -> bool {
    // As the real 1.32 server's strategies set it (checked against the
    // recorded `data/k8s-1.32/defaults`: apps, batch, policy, networking,
    // discovery and scheduling objects carry one; HPAs, RBAC and storage
    // objects do not). Core kinds have none but replication controllers
    // (and pods, as since 1.33); custom resources and CRDs always do.
    if crate::storage::builtin::is_custom(info) {
        return true;
    }
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods" | "replicationcontrollers") => true,
        ("apps", "controllerrevisions") => false,
        (
            "apps"
            | "batch"
            | "policy"
            | "networking.k8s.io"
            | "discovery.k8s.io"
            | "scheduling.k8s.io"
            | "admissionregistration.k8s.io"
            | "flowcontrol.apiserver.k8s.io"
            | "apiextensions.k8s.io",
            _,
        ) => true,
        _ => false,
    }
}

/// Mutable access to `obj.metadata`, turning `obj` into an object and creating metadata if absent.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just set to an object"),
    }
}

/// Sets the system fields of a new object and applies per-kind defaults
/// (what the real server's decoding defaults, so the request's field
/// manager owns them). [`strategy_create`] follows once the managed fields
/// are recorded.
pub fn prepare_create(info: &ResourceInfo, obj: &mut Value, now: &str) {
    let generation = tracks_generation(info);
    let meta = meta_mut(obj);
    meta.insert(
        "uid".into(),
        Value::String(uuid::Uuid::new_v4().to_string()),
    );
    meta.insert("creationTimestamp".into(), Value::String(now.into()));
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("generation");
    meta.remove("resourceVersion");
    if generation {
        meta.insert("generation".into(), json!(1));
    }
    canonical_values(info, obj);
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => default_pod(obj),
        ("", "secrets") if secret_type_missing(obj) => obj["type"] = json!("Opaque"),
        ("", "namespaces") => {
            let name = meta_str(obj, "name").unwrap_or_default().to_string();
            let labels = meta_mut(obj).entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
            }
            if !obj.get("spec").is_some_and(Value::is_object) {
                obj["spec"] = json!({});
            }
        }
        (g, _) if info.has_status && !g.is_empty() && g != "apiextensions.k8s.io" => {
            // custom resources: status is only written through /status
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        _ => {}
    }
    super::defaults::decode(info, obj);
    canonical_values(info, obj);
}

/// What the real server's typed round trip rewrites in every write of a
/// built-in kind, status writes included: a resource quantity comes back in
/// its canonical form (`1000m` → `1`), and a field Go's `omitempty` leaves
/// out at its zero value (`paused: false`) is not stored. Done before the
/// kind's rules read the object (QoS compares quantities) and again after
/// its defaults.
fn canonical_values(info: &ResourceInfo, obj: &mut Value) {
    builtin::store_form(&info.group, &info.version, &info.kind, obj);
}

/// What the kind's strategy sets on create after the request's managed
/// fields are recorded (`PrepareForCreate`, which runs inside the storage
/// layer), so no manager owns it: a namespace's `kubernetes` finalizer and
/// its `Active` phase.
pub fn strategy_create(info: &ResourceInfo, obj: &mut Value) {
    if (info.group.as_str(), info.plural.as_str()) == ("", "namespaces") {
        if !obj.get("spec").is_some_and(Value::is_object) {
            obj["spec"] = json!({});
        }
        obj["spec"]["finalizers"] = json!(["kubernetes"]);
        obj["status"] = json!({"phase": "Active"});
    }
    super::defaults::strategy_create(info, obj);
}

fn secret_type_missing(secret: &Value) -> bool {
    secret
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
}

fn default_pod(pod: &mut Value) {
    default_pod_spec(pod);
    let qos = qos_class(&pod["spec"]);
    pod["status"] = json!({"phase": "Pending", "qosClass": qos});
}

/// The defaults the real server gives a pod's spec on every decode (create
/// and update alike), so an update is compared with the stored pod as the
/// real server compares them.
pub(crate) fn default_pod_spec(pod: &mut Value) {
    if !pod.get("spec").is_some_and(Value::is_object) {
        pod["spec"] = json!({});
    }
    let spec = &mut pod["spec"];
    let pod_only = [
        ("enableServiceLinks", json!(true)),
        ("preemptionPolicy", json!("PreemptLowerPriority")),
        ("priority", json!(0)),
    ];
    for (k, v) in pod_spec_defaults().into_iter().chain(pod_only) {
        if spec.get(k).is_none() {
            spec[k] = v;
        }
    }
    for list in ["initContainers", "containers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                default_container(c);
            }
        }
    }
}

fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .filter_map(|l| spec.get(*l).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in &containers {
        let req = c.pointer("/resources/requests").and_then(Value::as_object);
        let lim = c.pointer("/resources/limits").and_then(Value::as_object);
        if req.is_some_and(|r| !r.is_empty()) || lim.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        let full = ["cpu", "memory"].iter().all(|r| {
            let l = lim.and_then(|l| l.get(*r));
            l.is_some() && req.and_then(|q| q.get(*r)) == l
        });
        if !full {
            guaranteed = false;
        }
    }
    if guaranteed {
        "Guaranteed"
    } else if any {
        "Burstable"
    } else {
        "BestEffort"
    }
}

/// Carries over what a write may not change: system metadata always; the
/// status (for main-resource writes) or everything but the status (for
/// `/status` writes) on resources with a status subresource. Bumps
/// `generation` when `spec` (or, for specless custom objects, anything but
/// metadata/status) changed.
///
/// `metadata.managedFields` of a main-resource write stay as the request
/// left them: the field manager ([`crate::patch::record_update_with`])
/// decides whether they replace the live ones, reset them or fall back to
/// them, as apimachinery's `decodeLiveOrNew` does. A `/status` write
/// starts from the old object, so it keeps the live ones.
pub fn prepare_update(info: &ResourceInfo, old: &Value, new: &mut Value, status_write: bool) {
    if status_write {
        let status = new.get("status").cloned();
        let mut merged = old.clone();
        match status {
            Some(s) => merged["status"] = s,
            None => {
                if let Some(m) = merged.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        // metadata.resourceVersion precondition travels with the request
        if let Some(rv) = meta_str(new, "resourceVersion").map(str::to_string) {
            meta_mut(&mut merged).insert("resourceVersion".into(), Value::String(rv));
        }
        *new = merged;
    } else if info.has_status {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    canonical_values(info, new);
    if !status_write {
        super::defaults::decode(info, new);
        if info.group.is_empty() && info.plural == "services" {
            super::services::keep_allocated(old, new);
        }
        canonical_values(info, new);
    }
    let no_meta = json!({});
    let old_meta = old.get("metadata").unwrap_or(&no_meta);
    let meta = meta_mut(new);
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
    ] {
        match old_meta.get(k) {
            // already the same (a patch of the old object): no copy
            Some(v) if meta.get(k) == Some(v) => {}
            Some(v) => {
                meta.insert(k.into(), v.clone());
            }
            None => {
                meta.remove(k);
            }
        }
    }
    // ObjectMeta's `finalizers` is `omitempty`: the real server stores no
    // empty list (a JSON patch removing the last entry leaves none), so a
    // later patch's `test` of the absent list holds.
    if meta
        .get("finalizers")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        meta.remove("finalizers");
    }
    if let Some(g) = old_meta.get("generation").and_then(Value::as_i64) {
        let custom = crate::storage::builtin::is_custom(info);
        if !status_write && spec_of(old, custom) != spec_of(new, custom) {
            meta_mut(new).insert("generation".into(), json!(g.saturating_add(1)));
        }
    }
}

/// The part of an object whose change bumps `generation`: `spec` for built-in kinds; for
/// custom resources everything but metadata (`customResourceStrategy.
/// PrepareForUpdate` compares `copyNonMetadata`), so without a status
/// subresource a status change bumps it too.
fn spec_of(obj: &Value, custom: bool) -> Value {
    match obj.get("spec") {
        Some(s) if !custom => s.clone(),
        _ => {
            let mut rest = obj.as_object().cloned().unwrap_or_default();
            let skip: &[&str] = if custom {
                &["metadata"]
            } else {
                &["metadata", "status", "apiVersion", "kind"]
            };
            for k in skip {
                rest.remove(*k);
            }
            Value::Object(rest)
        }
    }
}

/// True if the object is being deleted and no finalizer remains.
pub fn ready_to_remove(obj: &Value) -> bool {
    meta_str(obj, "deletionTimestamp").is_some()
        && obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::storage::registry::Registry;

    fn pods() -> ResourceInfo {
        Registry::new().lookup("", "v1", "pods").unwrap()
    }

    #[test]
    fn pod_create_defaults_phase_restart_policy_and_requests_from_limits() {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "busybox:1", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "2"}, "requests": {"cpu": "500m"}}}
        ]}});
        prepare_create(&pods(), &mut p, "2026-01-01T00:00:00Z");
        assert_eq!(p["status"]["phase"], "Pending");
        assert_eq!(p["spec"]["restartPolicy"], "Always");
        let req = &p["spec"]["containers"][0]["resources"]["requests"];
        assert_eq!(req["cpu"], "500m", "explicit requests are kept");
        assert_eq!(
            req["nvidia.com/gpu"], "2",
            "missing requests default to limits"
        );
        assert_eq!(p["metadata"]["generation"], 1);
        assert!(p["metadata"]["uid"].is_string());
    }

    #[test]
    fn generation_bumps_only_on_spec_change_and_status_writes_keep_spec() {
        let info = pods();
        let old = json!({"metadata": {"name": "p", "generation": 1}, "spec": {"a": 1}, "status": {"phase": "Pending"}});
        let mut new = json!({"metadata": {"name": "p", "labels": {"x": "y"}}, "spec": {"a": 1}, "status": {"phase": "Running"}});
        prepare_update(&info, &old, &mut new, false);
        assert_eq!(new["metadata"]["generation"], 1);
        assert_eq!(
            new["status"]["phase"], "Pending",
            "main writes ignore status"
        );
        let mut new = json!({"metadata": {"name": "p"}, "spec": {"a": 2}});
        prepare_update(&info, &old, &mut new, false);
        assert_eq!(new["metadata"]["generation"], 2);
        let mut st =
            json!({"metadata": {"name": "p"}, "spec": {"a": 9}, "status": {"phase": "Running"}});
        prepare_update(&info, &old, &mut st, true);
        assert_eq!(st["spec"]["a"], 1, "status writes ignore spec");
        assert_eq!(st["status"]["phase"], "Running");
        assert_eq!(st["metadata"]["generation"], 1);
    }

    #[test]
    fn main_writes_keep_the_managed_fields_they_carry_and_status_writes_the_old_ones() {
        let info = pods();
        let old =
            json!({"metadata": {"name": "p", "managedFields": [{"manager": "old"}]}, "spec": {}});
        let mut sent = json!({"metadata": {"name": "p", "managedFields": [{}]}, "spec": {}});
        prepare_update(&info, &old, &mut sent, false);
        assert_eq!(sent["metadata"]["managedFields"], json!([{}]));
        let mut none = json!({"metadata": {"name": "p"}, "spec": {}});
        prepare_update(&info, &old, &mut none, false);
        assert_eq!(none["metadata"].get("managedFields"), None);
        let mut status = json!({"metadata": {"name": "p", "managedFields": [{}]}, "status": {}});
        prepare_update(&info, &old, &mut status, true);
        assert_eq!(
            status["metadata"]["managedFields"],
            old["metadata"]["managedFields"]
        );
    }

    #[test]
    fn an_update_leaving_no_finalizer_stores_no_finalizers_list() {
        let old = json!({"metadata": {"name": "p", "finalizers": ["a/b"]}, "spec": {}});
        let mut new = json!({"metadata": {"name": "p", "finalizers": []}, "spec": {}});
        prepare_update(&pods(), &old, &mut new, false);
        assert_eq!(new["metadata"].get("finalizers"), None);
    }

    #[test]
    fn names_are_validated_as_dns_subdomains() {
        assert!(validate_name(&pods(), "ok-name.x").is_empty());
        let errs = validate_name(&pods(), "Bad_Name");
        assert_eq!(errs[0].0, "metadata.name");
        assert!(errs[0].1.starts_with("Invalid value: \"Bad_Name\""));
        let g = generated_name("web-");
        assert_eq!(g.len(), 9);
        assert!(g.starts_with("web-"));
    }
}
