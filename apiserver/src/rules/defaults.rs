//! The defaults the real server's decoding gives built-in kinds
//! (`SetDefaults_*`: workloads, Services, PVCs, limit ranges, HPAs, …),
//! what their strategies set on create (initial status, a Job's generated
//! selector), and the pod template defaults, checked against the recorded
//! `data/k8s-1.32/defaults`. Pure functions over JSON; it only fills what
//! is missing, never validates, and never allocates (see `services`).

use serde_json::{json, Map, Value};

use super::meta::meta_str;
use crate::storage::registry::ResourceInfo;

/// Sets `obj[key] = value` where `obj` is an object and `key` is absent.
fn or_insert(obj: &mut Value, key: &str, value: Value) {
    if let Some(m) = obj.as_object_mut() {
        m.entry(key).or_insert(value);
    }
}

/// `obj[key]` as an object, created (or replaced, if not an object) first.
fn object_at<'a>(obj: &'a mut Value, key: &str) -> &'a mut Value {
    if !obj.get(key).is_some_and(Value::is_object) {
        obj[key] = Value::Object(Map::new());
    }
    &mut obj[key]
}

/// The fields `SetDefaults_PodSpec` fills in a pod's and a pod template's
/// spec alike, in the order the real server's encoding has them.
pub(crate) fn pod_spec_defaults() -> [(&'static str, Value); 5] {
    [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("securityContext", json!({})),
    ]
}

/// A container's defaults (pods and pod templates alike).
pub(crate) fn default_container(c: &mut Value) {
    if c.get("terminationMessagePath").is_none() {
        c["terminationMessagePath"] = json!("/dev/termination-log");
    }
    if c.get("terminationMessagePolicy").is_none() {
        c["terminationMessagePolicy"] = json!("File");
    }
    if c.get("imagePullPolicy").is_none() {
        let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
        let tag = image.rsplit('/').next().unwrap_or_default();
        let latest = !tag.contains(':') || tag.ends_with(":latest");
        let policy = if latest && !image.contains('@') {
            "Always"
        } else {
            "IfNotPresent"
        };
        c["imagePullPolicy"] = json!(policy);
    }
    // requests default to limits for every resource missing from requests
    let limits = c
        .pointer("/resources/limits")
        .and_then(Value::as_object)
        .cloned();
    if let Some(limits) = limits {
        if !c.get("resources").is_some_and(Value::is_object) {
            c["resources"] = json!({});
        }
        if !c["resources"].get("requests").is_some_and(Value::is_object) {
            c["resources"]["requests"] = json!({});
        }
        if let Some(req) = c["resources"]["requests"].as_object_mut() {
            for (k, v) in limits {
                req.entry(k).or_insert(v);
            }
        }
    }
}

/// The defaults of a pod template's spec (`SetDefaults_PodSpec` and its
/// containers'), which a pod gets too (see `objects::default_pod_spec`).
pub(crate) fn pod_template_spec(spec: &mut Value) {
    for (k, v) in pod_spec_defaults() {
        or_insert(spec, k, v);
    }
    for list in ["initContainers", "containers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                default_container(c);
                or_insert(c, "resources", json!({}));
            }
        }
    }
}

/// The pod template at `path` (from the root), if the object has one.
fn template(obj: &mut Value, path: &[&str]) {
    let mut cur = obj;
    for k in path {
        match cur.get_mut(*k) {
            Some(next) if next.is_object() => cur = next,
            _ => return,
        }
    }
    pod_template_spec(object_at(cur, "spec"));
}

/// Decoding defaults of `info`'s kind (create and update alike): fills
/// only what `obj` lacks.
pub fn decode(info: &ResourceInfo, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    match (info.group.as_str(), info.kind.as_str()) {
        ("apps", "Deployment") => {
            let spec = object_at(obj, "spec");
            or_insert(spec, "replicas", json!(1));
            or_insert(spec, "revisionHistoryLimit", json!(10));
            or_insert(spec, "progressDeadlineSeconds", json!(600));
            let strategy = object_at(spec, "strategy");
            or_insert(strategy, "type", json!("RollingUpdate"));
            if strategy["type"] == "RollingUpdate" {
                let ru = object_at(strategy, "rollingUpdate");
                or_insert(ru, "maxSurge", json!("25%"));
                or_insert(ru, "maxUnavailable", json!("25%"));
            }
            template(obj, &["spec", "template"]);
        }
        ("apps", "StatefulSet") => {
            let spec = object_at(obj, "spec");
            or_insert(spec, "replicas", json!(1));
            or_insert(spec, "revisionHistoryLimit", json!(10));
            or_insert(spec, "podManagementPolicy", json!("OrderedReady"));
            let strategy = object_at(spec, "updateStrategy");
            or_insert(strategy, "type", json!("RollingUpdate"));
            if strategy["type"] == "RollingUpdate" {
                or_insert(object_at(strategy, "rollingUpdate"), "partition", json!(0));
            }
            let retention = object_at(spec, "persistentVolumeClaimRetentionPolicy");
            or_insert(retention, "whenDeleted", json!("Retain"));
            or_insert(retention, "whenScaled", json!("Retain"));
            template(obj, &["spec", "template"]);
        }
        ("apps", "DaemonSet") => {
            let spec = object_at(obj, "spec");
            or_insert(spec, "revisionHistoryLimit", json!(10));
            let strategy = object_at(spec, "updateStrategy");
            or_insert(strategy, "type", json!("RollingUpdate"));
            if strategy["type"] == "RollingUpdate" {
                let ru = object_at(strategy, "rollingUpdate");
                or_insert(ru, "maxSurge", json!(0));
                or_insert(ru, "maxUnavailable", json!(1));
            }
            template(obj, &["spec", "template"]);
        }
        ("apps", "ReplicaSet") => {
            or_insert(object_at(obj, "spec"), "replicas", json!(1));
            template(obj, &["spec", "template"]);
        }
        ("", "ReplicationController") => {
            let spec = object_at(obj, "spec");
            or_insert(spec, "replicas", json!(1));
            if let Some(labels) = spec.pointer("/template/metadata/labels").cloned() {
                or_insert(spec, "selector", labels);
            }
            template(obj, &["spec", "template"]);
        }
        ("", "PodTemplate") => template(obj, &["template"]),
        ("batch", "Job") => {
            let spec = object_at(obj, "spec");
            if spec.get("completions").is_none() && spec.get("parallelism").is_none() {
                spec["completions"] = json!(1);
                spec["parallelism"] = json!(1);
            }
            or_insert(spec, "parallelism", json!(1));
            or_insert(spec, "backoffLimit", json!(6));
            or_insert(spec, "completionMode", json!("NonIndexed"));
            or_insert(spec, "suspend", json!(false));
            or_insert(spec, "manualSelector", json!(false));
            or_insert(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
            template(obj, &["spec", "template"]);
        }
        ("batch", "CronJob") => {
            let spec = object_at(obj, "spec");
            or_insert(spec, "concurrencyPolicy", json!("Allow"));
            or_insert(spec, "suspend", json!(false));
            or_insert(spec, "successfulJobsHistoryLimit", json!(3));
            or_insert(spec, "failedJobsHistoryLimit", json!(1));
            template(obj, &["spec", "jobTemplate", "spec", "template"]);
        }
        ("", "Service") => service(object_at(obj, "spec")),
        ("", "PersistentVolumeClaim") => {
            or_insert(object_at(obj, "spec"), "volumeMode", json!("Filesystem"));
        }
        ("", "LimitRange") => {
            let limits = obj
                .pointer_mut("/spec/limits")
                .and_then(Value::as_array_mut);
            for l in limits.into_iter().flatten() {
                if l.get("type").and_then(Value::as_str) != Some("Container") {
                    continue;
                }
                // defaultRequest from default (and default from max)
                if let Some(max) = l.get("max").cloned() {
                    merge_missing(object_at(l, "default"), &max);
                }
                if let Some(default) = l.get("default").cloned() {
                    merge_missing(object_at(l, "defaultRequest"), &default);
                }
            }
        }
        ("storage.k8s.io", "StorageClass") => {
            or_insert(obj, "reclaimPolicy", json!("Delete"));
            or_insert(obj, "volumeBindingMode", json!("Immediate"));
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            or_insert(obj, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
        ("networking.k8s.io", "NetworkPolicy") => {
            let spec = object_at(obj, "spec");
            if spec.get("policyTypes").is_none() {
                let mut types = vec![json!("Ingress")];
                if spec.get("egress").is_some() {
                    types.push(json!("Egress"));
                }
                spec["policyTypes"] = Value::Array(types);
            }
        }
        // in its v2 storage form whatever version was written
        ("autoscaling", "HorizontalPodAutoscaler") => {
            let spec = object_at(obj, "spec");
            or_insert(spec, "minReplicas", json!(1));
            or_insert(
                spec,
                "metrics",
                json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}]),
            );
        }
        ("discovery.k8s.io", "EndpointSlice") => {
            for e in obj
                .get_mut("endpoints")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                or_insert(e, "conditions", json!({}));
            }
            for p in obj
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                or_insert(p, "name", json!(""));
                or_insert(p, "protocol", json!("TCP"));
            }
        }
        _ => {}
    }
}

/// Copies into `to` the keys of `from` it lacks.
fn merge_missing(to: &mut Value, from: &Value) {
    if let (Some(to), Some(from)) = (to.as_object_mut(), from.as_object()) {
        for (k, v) in from {
            to.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// `SetDefaults_Service` (the IP families and cluster IPs come with the
/// allocation, see `services`).
fn service(spec: &mut Value) {
    or_insert(spec, "type", json!("ClusterIP"));
    or_insert(spec, "sessionAffinity", json!("None"));
    let ty = spec["type"].as_str().unwrap_or_default().to_string();
    if ty != "ExternalName" {
        or_insert(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        or_insert(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            or_insert(p, "protocol", json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                or_insert(p, "targetPort", port);
            }
        }
    }
}

/// What the kind's strategy sets on create (`PrepareForCreate`): the
/// initial status, and a Job's selector and pod labels from its uid.
pub fn strategy_create(info: &ResourceInfo, obj: &mut Value) {
    let status = match (info.group.as_str(), info.kind.as_str()) {
        ("apps", "StatefulSet") => json!({"replicas": 0, "availableReplicas": 0}),
        ("apps", "DaemonSet") => json!({"currentNumberScheduled": 0,
            "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0}),
        ("apps", "ReplicaSet") | ("", "ReplicationController") => json!({"replicas": 0}),
        ("apps", "Deployment") | ("batch", "Job" | "CronJob") => json!({}),
        ("", "Service") | ("networking.k8s.io", "Ingress") => json!({"loadBalancer": {}}),
        ("", "PersistentVolumeClaim") => json!({"phase": "Pending"}),
        ("", "ResourceQuota") => json!({}),
        ("policy", "PodDisruptionBudget") => json!({"currentHealthy": 0, "desiredHealthy": 0,
            "disruptionsAllowed": 0, "expectedPods": 0}),
        ("autoscaling", "HorizontalPodAutoscaler") => {
            json!({"currentMetrics": null, "desiredReplicas": 0})
        }
        _ => return,
    };
    obj["status"] = status;
    if (info.group.as_str(), info.kind.as_str()) == ("batch", "Job") {
        job_selector(obj);
    }
}

/// `generateSelector`: unless `manualSelector`, the pod template gets the
/// labels naming the Job's uid and name that it lacks (one it has is kept,
/// and validation refuses it if it is wrong), and the selector gets the
/// `batch.kubernetes.io/controller-uid` term (the user's terms are kept,
/// and validation refuses a selector that is not the generated one).
fn job_selector(job: &mut Value) {
    if job.pointer("/spec/manualSelector") == Some(&json!(true)) {
        return;
    }
    let uid = meta_str(job, "uid").unwrap_or_default().to_string();
    let name = meta_str(job, "name").unwrap_or_default().to_string();
    let spec = object_at(job, "spec");
    {
        let meta = object_at(object_at(spec, "template"), "metadata");
        let labels = object_at(meta, "labels");
        for (k, v) in [
            ("job-name", &name),
            ("batch.kubernetes.io/job-name", &name),
            ("controller-uid", &uid),
            ("batch.kubernetes.io/controller-uid", &uid),
        ] {
            or_insert(labels, k, json!(v));
        }
    }
    let selector = object_at(spec, "selector");
    or_insert(
        object_at(selector, "matchLabels"),
        "batch.kubernetes.io/controller-uid",
        json!(uid),
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::storage::registry::Registry;

    fn info(group: &str, plural: &str) -> ResourceInfo {
        Registry::new().lookup(group, "v1", plural).unwrap()
    }

    #[test]
    fn deployments_get_replicas_strategy_and_template_defaults() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        decode(&info("apps", "deployments"), &mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["resources"], json!({}));
        // Recreate has no rollingUpdate, and what is set stays.
        let mut d = json!({"spec": {"replicas": 3, "strategy": {"type": "Recreate"}}});
        decode(&info("apps", "deployments"), &mut d);
        assert_eq!(d["spec"]["replicas"], 3);
        assert!(d["spec"]["strategy"].get("rollingUpdate").is_none());
    }

    #[test]
    fn jobs_select_their_own_uid_and_services_target_their_port() {
        let mut j = json!({"metadata": {"name": "j", "uid": "u"}, "spec": {"template": {}}});
        decode(&info("batch", "jobs"), &mut j);
        strategy_create(&info("batch", "jobs"), &mut j);
        assert_eq!(j["spec"]["completions"], 1);
        assert_eq!(
            j["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
            "u"
        );
        assert_eq!(j["spec"]["template"]["metadata"]["labels"]["job-name"], "j");
        let mut s = json!({"spec": {"ports": [{"port": 80}]}});
        decode(&info("", "services"), &mut s);
        assert_eq!(
            s["spec"]["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert_eq!(s["spec"]["type"], "ClusterIP");
    }
}
