//! Every built-in resource of a real 1.32 kube-apiserver, as kubectl and the
//! kube client see it: `kubectl api-resources` equals the real server's
//! (recorded in `data/k8s-1.32/api-resources.txt`, less its CRDs), and
//! each kind with list/watch goes through a create/get/list/watch/merge
//! patch/apply/delete round trip.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, ResourceExt, WatchEvent,
    WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::Client;
use serde_json::json;
use wasmctrl_apiserver::registry::{Registry, ResourceInfo};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};
use wasmctrl_test_support::Kubectl;

const API_RESOURCES: &str = include_str!("../data/k8s-1.32/api-resources.txt");

/// The rows of `kubectl api-resources -o wide` output, each cell cut at the
/// header's column offsets (short names may be blank), CRD groups dropped.
fn rows(table: &str) -> Vec<Vec<String>> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    let starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    let mut out: Vec<Vec<String>> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            starts
                .iter()
                .enumerate()
                .map(|(n, &s)| {
                    let e = starts.get(n + 1).copied().unwrap_or(l.len()).min(l.len());
                    l.get(s.min(l.len())..e)
                        .unwrap_or_default()
                        .trim()
                        .to_string()
                })
                .collect()
        })
        .filter(|r: &Vec<String>| !r[2].contains("example.com"))
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn kubectl_api_resources_equals_the_real_servers() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };
    let (ok, out, log) = k.run(&["api-resources", "-o", "wide", "-v=6"]).await;
    assert!(ok, "{log}");
    // aggregated discovery: /api and /apis, no request per group/version
    assert!(log.contains("/apis"), "{log}");
    assert!(!log.contains("/apis/apps/v1"), "{log}");
    let got = rows(&out);
    let want = rows(API_RESOURCES);
    assert_eq!(want.len(), 58);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    assert_eq!(got.len(), want.len(), "{got:?}");
}

/// A minimal object of `r`'s kind the server accepts (a pod needs a
/// container; the rest is free-form for a server without their validation).
fn minimal(r: &ResourceInfo, name: &str) -> serde_json::Value {
    let mut obj =
        json!({"apiVersion": r.api_version(), "kind": r.kind, "metadata": {"name": name}});
    if r.kind == "Pod" {
        obj["spec"] = json!({"containers": [{"name": "c", "image": "busybox"}]});
    }
    // A workload without a selector matching its template is refused (a
    // ReplicationController's selector comes from its template's labels).
    let template = json!({"metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    match (r.group.as_str(), r.kind.as_str()) {
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") => {
            obj["spec"] = json!({"selector": {"matchLabels": {"app": name}},
                "template": template});
        }
        ("", "ReplicationController") => obj["spec"] = json!({"template": template}),
        _ => {}
    }
    obj
}

/// create, get, list, watch, merge patch, server-side apply and delete of
/// one object of `r`'s kind through the kube client.
async fn round_trip(client: Client, r: ResourceInfo) {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&r.group, &r.version, &r.kind),
        &r.plural,
    );
    let api: Api<DynamicObject> = if r.namespaced {
        Api::namespaced_with(client, "default", &ar)
    } else {
        Api::all_with(client, &ar)
    };
    // events and HPAs of two groups or versions share one store
    let group = if r.group.is_empty() { "core" } else { &r.group };
    let name = format!("rt-{}-{}", group.replace('.', "-"), r.version);
    let what = format!("{}/{}", r.api_version(), r.plural);
    let obj: DynamicObject = serde_json::from_value(minimal(&r, &name)).unwrap();
    let made = api.create(&PostParams::default(), &obj).await.expect(&what);
    assert_eq!(made.metadata.name.as_deref(), Some(name.as_str()), "{what}");
    api.get(&name).await.expect(&what);
    let list = api.list(&ListParams::default()).await.expect(&what);
    assert!(
        list.items
            .iter()
            .any(|o| o.metadata.name.as_deref() == Some(&name)),
        "{what}"
    );
    let rv = list.metadata.resource_version.unwrap();
    let mut events = api
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={name}")),
            &rv,
        )
        .await
        .expect(&what)
        .boxed();
    let patched = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"merged": "yes"}}})),
        )
        .await
        .expect(&what);
    assert_eq!(
        patched.labels().get("merged").map(String::as_str),
        Some("yes"),
        "{what}"
    );
    loop {
        match tokio::time::timeout(Duration::from_secs(5), events.try_next()).await {
            Ok(Ok(Some(WatchEvent::Modified(o)))) if o.labels().contains_key("merged") => break,
            Ok(Ok(Some(_))) => continue,
            other => panic!("{what}: no MODIFIED event: {other:?}"),
        }
    }
    let mut applied = minimal(&r, &name);
    applied["metadata"]["labels"] = json!({"applied": "yes"});
    let applied = api
        .patch(
            &name,
            &PatchParams::apply("round-trip").force(),
            &Patch::Apply(applied),
        )
        .await
        .expect(&what);
    assert_eq!(
        applied.labels().get("applied").map(String::as_str),
        Some("yes"),
        "{what}"
    );
    assert!(
        applied
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|m| m.manager.as_deref() == Some("round-trip")),
        "{what}"
    );
    api.delete(&name, &DeleteParams::default())
        .await
        .expect(&what);
    // pods and namespaces finish their deletion in the background
    if !matches!(r.plural.as_str(), "pods" | "namespaces") {
        assert!(api.get_opt(&name).await.expect(&what).is_none(), "{what}");
    }
}

#[tokio::test]
async fn every_listable_built_in_kind_round_trips_through_the_kube_client() {
    let (_s, client) = crate::common::start().await;
    let kinds: Vec<ResourceInfo> = Registry::new()
        .all()
        .into_iter()
        .filter(|r| {
            ["list", "watch", "create"]
                .iter()
                .all(|v| r.verbs.iter().any(|x| x == v))
        })
        // CRDs need a valid spec and name; custom_resources covers them
        .filter(|r| r.plural != "customresourcedefinitions")
        .collect();
    assert_eq!(kinds.len(), 50);
    let runs = kinds.into_iter().map(|r| round_trip(client.clone(), r));
    futures::future::join_all(runs).await;
}

/// `v` without what differs per run: uids (in a Job's labels and
/// selector), allocated cluster IPs and node ports, creation timestamps.
fn comparable(mut v: serde_json::Value) -> serde_json::Value {
    fn walk(v: &mut serde_json::Value, uid: &str) {
        match v {
            serde_json::Value::Object(m) => {
                // Go writes a template's zero timestamp as null
                m.remove("creationTimestamp");
                for k in ["clusterIP", "nodePort"] {
                    if m.contains_key(k) {
                        m.insert(k.into(), json!("<varies>"));
                    }
                }
                if let Some(ips) = m.get_mut("clusterIPs") {
                    *ips = json!(["<varies>"]);
                }
                m.values_mut().for_each(|x| walk(x, uid));
                // ... so a template's metadata may be nothing else
                if m.get("metadata") == Some(&json!({})) {
                    m.remove("metadata");
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| walk(x, uid)),
            serde_json::Value::String(s) if !uid.is_empty() && s == uid => *s = "<uid>".into(),
            _ => {}
        }
    }
    let uid = v["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    walk(&mut v, &uid);
    json!({"spec": v["spec"], "status": v["status"]})
}

#[tokio::test]
async fn objects_are_stored_with_the_real_servers_defaults() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };
    k.ok(&["create", "namespace", "defaults-probe"]).await;
    let input = k.write("minimal.yaml", MINIMAL_INPUT);
    // as recorded; kinds not in RECORDED may differ (pods, RBAC)
    k.run(&[
        "apply",
        "--server-side",
        "--field-manager=probe",
        "-f",
        &input,
    ])
    .await;
    for (resource, recorded) in RECORDED {
        let recorded: serde_json::Value = serde_json::from_str(recorded).unwrap();
        let want: Vec<serde_json::Value> = match recorded.get("items") {
            Some(items) => items.as_array().unwrap().clone(),
            None => vec![recorded],
        };
        for w in want {
            let name = w["metadata"]["name"].as_str().unwrap().to_string();
            let got: serde_json::Value = serde_json::from_str(
                &k.ok(&["get", resource, &name, "-n", "defaults-probe", "-o", "json"])
                    .await,
            )
            .unwrap();
            assert_eq!(comparable(got), comparable(w), "{resource}/{name}");
        }
    }
}

const MINIMAL_INPUT: &str = include_str!("../data/k8s-1.32/defaults/minimal-input.yaml");
/// The recorded kinds whose defaults this server gives (all but pods,
/// whose tolerations come from an admission plugin, and RBAC, which has none).
const RECORDED: [(&str, &str); 17] = [
    (
        "deployments",
        include_str!("../data/k8s-1.32/defaults/deployment.stored.json"),
    ),
    (
        "statefulsets",
        include_str!("../data/k8s-1.32/defaults/statefulset.stored.json"),
    ),
    (
        "daemonsets",
        include_str!("../data/k8s-1.32/defaults/daemonset.stored.json"),
    ),
    (
        "replicasets",
        include_str!("../data/k8s-1.32/defaults/replicaset.stored.json"),
    ),
    (
        "jobs",
        include_str!("../data/k8s-1.32/defaults/job.stored.json"),
    ),
    (
        "cronjobs",
        include_str!("../data/k8s-1.32/defaults/cronjob.stored.json"),
    ),
    (
        "services",
        include_str!("../data/k8s-1.32/defaults/service.stored.json"),
    ),
    (
        "persistentvolumeclaims",
        include_str!("../data/k8s-1.32/defaults/persistentvolumeclaim.stored.json"),
    ),
    (
        "limitranges",
        include_str!("../data/k8s-1.32/defaults/limitrange.stored.json"),
    ),
    (
        "resourcequotas",
        include_str!("../data/k8s-1.32/defaults/resourcequota.stored.json"),
    ),
    (
        "storageclasses",
        include_str!("../data/k8s-1.32/defaults/storageclass.stored.json"),
    ),
    (
        "priorityclasses",
        include_str!("../data/k8s-1.32/defaults/priorityclass.stored.json"),
    ),
    (
        "networkpolicies",
        include_str!("../data/k8s-1.32/defaults/networkpolicy.stored.json"),
    ),
    (
        "ingresses",
        include_str!("../data/k8s-1.32/defaults/ingress.stored.json"),
    ),
    (
        "poddisruptionbudgets",
        include_str!("../data/k8s-1.32/defaults/poddisruptionbudget.stored.json"),
    ),
    (
        "horizontalpodautoscalers",
        include_str!("../data/k8s-1.32/defaults/horizontalpodautoscaler.stored.json"),
    ),
    (
        "endpointslices",
        include_str!("../data/k8s-1.32/defaults/endpointslice.stored.json"),
    ),
];

#[tokio::test]
async fn generation_moves_with_the_spec_and_status_and_scale_are_separate() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    let (_s, client) = crate::common::start().await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
        "status": {"replicas": 7}}))
    .unwrap();
    let d = crate::common::create(&deploys, &d).await;
    assert_eq!(d.metadata.generation, Some(1));
    assert_eq!(
        d.status.unwrap_or_default().replicas,
        None,
        "create ignores status"
    );
    let gen = |d: &Deployment| d.metadata.generation;
    // labels and status leave it; a status write ignores the spec
    let d =
        crate::common::merge_patch(&deploys, "web", json!({"metadata": {"labels": {"a": "b"}}}))
            .await;
    assert_eq!(gen(&d), Some(1));
    let d = deploys
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}, "status": {"replicas": 1}})),
        )
        .await
        .unwrap();
    assert_eq!((gen(&d), d.spec.replicas), (Some(1), Some(1)));
    // a main write ignores status and moves the generation with the spec
    let d = crate::common::merge_patch(
        &deploys,
        "web",
        json!({"spec": {"replicas": 3}, "status": {"replicas": 9}}),
    )
    .await;
    assert_eq!((gen(&d), d.status.unwrap().replicas), (Some(2), Some(1)));
    // the scale subresource reads and writes spec.replicas
    let scale = deploys.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    let d = deploys.get("web").await.unwrap();
    assert_eq!((gen(&d), d.spec.replicas), (Some(3), Some(4)));
    // kinds the real server gives none have none
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client, "default");
    let h: HorizontalPodAutoscaler = serde_json::from_value(json!({"metadata": {"name": "h"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5}}))
    .unwrap();
    assert_eq!(
        crate::common::create(&hpas, &h).await.metadata.generation,
        None
    );
    // and one stored object reads in both autoscaling versions
    let v1: Api<k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler> =
        Api::namespaced(hpas.into_client(), "default");
    let h1 = v1.get("h").await.unwrap();
    assert_eq!(h1.spec.target_cpu_utilization_percentage, Some(80));
}

/// Many kinds in one manifest, as a guest's deploy manifest has them.
const MANY_KINDS: &str = "apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx, ports: [{containerPort: 80}]}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: shop}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: busybox}]}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop}
spec: {rules: [{http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: shop}
spec: {podSelector: {}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: quota, namespace: shop}
spec: {hard: {pods: \"10\"}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, maxReplicas: 5}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
";

#[tokio::test]
async fn kubectl_creates_applies_and_gets_all_of_the_workload_kinds() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };
    let manifest = k.write("many.yaml", MANY_KINDS);
    let out = k.ok(&["apply", "-f", &manifest]).await;
    for made in [
        "namespace/shop created",
        "deployment.apps/web created",
        "service/web created",
        "job.batch/migrate created",
        "ingress.networking.k8s.io/web created",
        "poddisruptionbudget.policy/web created",
        "networkpolicy.networking.k8s.io/deny created",
        "resourcequota/quota created",
        "horizontalpodautoscaler.autoscaling/web created",
        "priorityclass.scheduling.k8s.io/high created",
    ] {
        assert!(out.contains(made), "{made}: {out}");
    }
    // again: nothing changes, so kubectl says so (defaults do not make a diff)
    let out = k.ok(&["apply", "-f", &manifest]).await;
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");
    assert!(out.contains("service/web unchanged"), "{out}");

    assert_eq!(
        k.ok(&[
            "create",
            "deployment",
            "api",
            "--image=nginx",
            "--replicas=2"
        ])
        .await
        .trim(),
        "deployment.apps/api created"
    );
    assert_eq!(
        k.ok(&["create", "service", "clusterip", "api", "--tcp=80:8080"])
            .await
            .trim(),
        "service/api created"
    );
    assert_eq!(
        k.ok(&["create", "job", "once", "--image=busybox"])
            .await
            .trim(),
        "job.batch/once created"
    );
    // what kubectl sent as protobuf arrived whole
    for (what, path, want) in [
        ("deployment/api", "{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.selector.matchLabels.app}", "2 nginx api"),
        ("service/api", "{.spec.ports[0].port} {.spec.ports[0].targetPort} {.spec.selector.app} {.spec.type}", "80 8080 api ClusterIP"),
        ("job/once", "{.spec.template.spec.restartPolicy} {.spec.template.spec.containers[0].image} {.spec.backoffLimit}", "Never busybox 6"),
    ] {
        let got = k.ok(&["get", what, "-o", &format!("jsonpath={path}")]).await;
        assert_eq!(got, want, "{what}");
    }
    let ip = k
        .ok(&["get", "service", "api", "-o", "jsonpath={.spec.clusterIP}"])
        .await;
    assert!(ip.starts_with("10.0.0."), "{ip}");
    let all = k.ok(&["get", "all", "-A"]).await;
    for shown in [
        "deployment.apps/api",
        "deployment.apps/web",
        "service/api",
        "service/web",
        "job.batch/once",
        "job.batch/migrate",
        "horizontalpodautoscaler.autoscaling/web",
    ] {
        assert!(all.contains(shown), "{shown}: {all}");
    }
    let out = k.ok(&["scale", "deployment", "api", "--replicas=3"]).await;
    assert_eq!(out.trim(), "deployment.apps/api scaled");
}

#[tokio::test]
async fn server_side_apply_merges_lists_by_their_openapi_keys() {
    let (_s, client) = crate::common::start().await;
    let apply = |manager: &'static str,
                 api: Api<DynamicObject>,
                 name: &'static str,
                 obj: serde_json::Value| async move {
        api.patch(name, &PatchParams::apply(manager), &Patch::Apply(obj))
            .await
            .unwrap()
    };
    let api = |group: &str, version: &str, kind: &str, plural: &str, namespaced: bool| {
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        if namespaced {
            Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar)
        } else {
            Api::<DynamicObject>::all_with(client.clone(), &ar)
        }
    };
    // containers by name, their ports by containerPort+protocol
    let deploys = api("apps", "v1", "Deployment", "deployments", true);
    let deploy = |c: serde_json::Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [c]}}}})
    };
    apply(
        "a",
        deploys.clone(),
        "web",
        deploy(json!({"name": "app", "image": "app:1", "ports": [{"containerPort": 80}]})),
    )
    .await;
    let d = apply(
        "b",
        deploys,
        "web",
        deploy(json!({"name": "sidecar", "image": "proxy:1"})),
    )
    .await;
    let names: Vec<&str> = d.data["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app", "sidecar"]);
    // a Service's ports by port+protocol
    let services = api("", "v1", "Service", "services", true);
    let svc = |p: i64| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"name": format!("p{p}"), "port": p}]}});
    apply("a", services.clone(), "web", svc(80)).await;
    let s = apply("b", services, "web", svc(443)).await;
    assert_eq!(
        s.data["spec"]["ports"].as_array().unwrap().len(),
        2,
        "{:?}",
        s.data
    );
    // a kind the hand-written table never had: webhooks by name
    let hooks = api(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    );
    let hook = |n: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "hooks"},
        "webhooks": [{"name": n, "clientConfig": {"url": "https://x"}, "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
    };
    apply("a", hooks.clone(), "hooks", hook("a.example.com")).await;
    let h = apply("b", hooks, "hooks", hook("b.example.com")).await;
    assert_eq!(
        h.data["webhooks"].as_array().unwrap().len(),
        2,
        "{:?}",
        h.data
    );
}

/// A fresh server holds the bootstrap ClusterRoles of a fresh 1.32 server
/// (`data/k8s-1.32/clusterroles.json`), as that server stores them: each
/// labelled as RBAC's bootstrapping, `cluster-admin` granting everything,
/// and the aggregated `admin`, `edit` and `view` carrying their aggregation
/// rule and no rules of their own (nothing aggregates them here).
#[tokio::test]
async fn a_fresh_server_holds_the_bootstrap_cluster_roles_of_a_real_one() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let roles: Api<ClusterRole> = Api::all(client);
    let all = roles.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(all.len(), 64);
    for role in &all {
        assert_eq!(
            role.labels()
                .get("kubernetes.io/bootstrapping")
                .map(String::as_str),
            Some("rbac-defaults"),
            "{}",
            role.name_any()
        );
        assert!(role.metadata.uid.is_some() && role.metadata.creation_timestamp.is_some());
    }
    let admin = roles.get("cluster-admin").await.unwrap();
    let everything = &admin.rules.unwrap()[0];
    assert_eq!(everything.verbs, ["*"]);
    assert_eq!(
        everything.resources.as_deref(),
        Some(&["*".to_string()][..])
    );
    for (name, aggregated_by) in [("admin", "admin"), ("edit", "edit"), ("view", "view")] {
        let role = roles.get(name).await.unwrap();
        assert_eq!(role.rules, None, "{name} holds no rules before aggregation");
        let selector = &role
            .aggregation_rule
            .unwrap()
            .cluster_role_selectors
            .unwrap()[0];
        let label = format!("rbac.authorization.k8s.io/aggregate-to-{aggregated_by}");
        assert_eq!(
            selector
                .match_labels
                .as_ref()
                .unwrap()
                .get(&label)
                .map(String::as_str),
            Some("true"),
            "{name}"
        );
    }
    // The roles `view` and `edit` are aggregated into the next one up.
    let view = roles.get("view").await.unwrap();
    assert_eq!(
        view.labels()
            .get("rbac.authorization.k8s.io/aggregate-to-edit")
            .map(String::as_str),
        Some("true")
    );
    let pod_reader = roles.get("system:aggregate-to-view").await.unwrap();
    assert!(pod_reader.rules.unwrap().iter().any(|r| r
        .resources
        .as_ref()
        .is_some_and(|rs| rs.iter().any(|x| x == "pods"))));
}
