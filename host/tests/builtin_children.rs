//! A guest owning children of built-in kinds other than ConfigMaps — a
//! Deployment, a Service and a Job — on the embedded API server: created
//! with the real server's defaults (a cluster IP, a Job's generated
//! selector), controlled by their primary, never written again when
//! nothing changed (the server's defaults are not a difference to undo),
//! restored after a person's edit, and collected with their owner.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota, Secret, Service};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};

use crate::support::wat::{guest, Behaviour, WatKeys, WatManifest, WatRule, WatWatch, WatWrite};
use crate::support::*;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::supervisor::SupervisorConfig;
use wasmctrl_test_support::wait::{eventually, stays_for};

const OWNER: &str = r#""ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"{name}","uid":"{uid}","controller":true,"blockOwnerDeletion":true}]"#;

fn rule(group: &str, version: &str, kind: &str) -> WatRule {
    WatRule {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        namespace: Some(PODS_NS.into()),
        names: Vec::new(),
        status: false,
    }
}

/// For each pod: a Deployment `NAME-web`, a Service `NAME-web` and a Job
/// `NAME-once`, each as small as a guest author writes it.
fn children_guest() -> Vec<u8> {
    let labels = r#"{"app":"{name}-web"}"#;
    let deployment = format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{{name}}-web","namespace":"{{namespace}}",{OWNER}}},"spec":{{"replicas":1,"selector":{{"matchLabels":{labels}}},"template":{{"metadata":{{"labels":{labels}}},"spec":{{"containers":[{{"name":"web","image":"nginx:1.27","ports":[{{"containerPort":80}}]}}]}}}}}}}}"#
    );
    let service = format!(
        r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"{{name}}-web","namespace":"{{namespace}}",{OWNER}}},"spec":{{"selector":{labels},"ports":[{{"port":80}}]}}}}"#
    );
    let job = format!(
        r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"{{name}}-once","namespace":"{{namespace}}",{OWNER}}},"spec":{{"template":{{"spec":{{"restartPolicy":"Never","containers":[{{"name":"once","image":"busybox:1.36","command":["true"]}}]}}}}}}}}"#
    );
    per_pod_guest(
        "children",
        vec![
            (rule("apps", "v1", "Deployment"), deployment),
            (rule("", "v1", "Service"), service),
            (rule("batch", "v1", "Job"), job),
        ],
    )
}

/// A guest named `name` that, for each pod, applies each of `children`
/// (the rule allowing it, the document with `{name}`, `{namespace}` and
/// `{uid}` of the pod filled in).
fn per_pod_guest(name: &str, children: Vec<(WatRule, String)>) -> Vec<u8> {
    let (writes, live) = children
        .into_iter()
        .map(|(rule, doc)| (rule, WatWrite::Apply(doc)))
        .unzip();
    let m = WatManifest {
        name: name.into(),
        watches: vec![WatWatch::pods("pods", WatKeys::PerObject)],
        writes,
    };
    guest(
        &m,
        Behaviour::ByLifecycle {
            live,
            deleting: Vec::new(),
        },
    )
}

/// The host's configuration for the one guest in `file`.
fn host_config(file: &std::path::Path) -> SupervisorConfig {
    SupervisorConfig {
        guests: vec![file.to_path_buf()],
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    }
}

/// Waits until the host, counting with `m`, neither reconciles nor writes
/// for half a second.
async fn idles(m: &wasmctrl::metrics::GuestMetrics) {
    eventually("the host idles", || async {
        let before = (m.reconciles(), m.writes());
        tokio::time::sleep(Duration::from_millis(500)).await;
        (m.reconciles(), m.writes()) == before
    })
    .await;
}

async fn children_exist(client: &Client, pod: &str) -> bool {
    let (d, s, j) = (
        Api::<Deployment>::namespaced(client.clone(), PODS_NS),
        Api::<Service>::namespaced(client.clone(), PODS_NS),
        Api::<Job>::namespaced(client.clone(), PODS_NS),
    );
    d.get_opt(&format!("{pod}-web")).await.unwrap().is_some()
        && s.get_opt(&format!("{pod}-web")).await.unwrap().is_some()
        && j.get_opt(&format!("{pod}-once")).await.unwrap().is_some()
}

async fn replicas(client: &Client, pod: &str) -> Option<i32> {
    Api::<Deployment>::namespaced(client.clone(), PODS_NS)
        .get_opt(&format!("{pod}-web"))
        .await
        .unwrap()
        .and_then(|d| d.spec.replicas)
}

#[tokio::test]
async fn a_guests_deployment_service_and_job_are_written_once_kept_and_collected() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("children.wasm");
    std::fs::write(&file, children_guest()).unwrap();
    let host = run_host(&client, host_config(&file), None).await;
    pod("p0").create(&client).await;
    eventually("the Deployment, the Service and the Job exist", || {
        children_exist(&client, "p0")
    })
    .await;
    let owner = Api::<Pod>::namespaced(client.clone(), PODS_NS)
        .get("p0")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    // Stored as a real server stores them: defaults a guest never wrote.
    let service = Api::<Service>::namespaced(client.clone(), PODS_NS)
        .get("p0-web")
        .await
        .unwrap();
    let spec = service.spec.unwrap();
    assert!(spec.cluster_ip.as_deref().is_some_and(|ip| ip != "None"));
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    let job = Api::<Job>::namespaced(client.clone(), PODS_NS)
        .get("p0-once")
        .await
        .unwrap();
    assert!(
        job.spec.as_ref().unwrap().selector.is_some(),
        "generated selector"
    );
    assert_eq!(job.spec.as_ref().unwrap().backoff_limit, Some(6));
    let controller = job.metadata.owner_references.unwrap_or_default();
    assert!(controller
        .iter()
        .any(|r| r.uid == owner && r.controller == Some(true)));

    // Nothing changed: every reconcile from now on writes nothing.
    let m = host.controller().metrics().clone();
    idles(&m).await;
    let writes = m.writes();
    let reconciles = m.reconciles();
    for _ in 0..3 {
        host.controller().enqueue_all();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    eventually("the resyncs reconciled", || async {
        m.reconciles() >= reconciles + 3
    })
    .await;
    assert_eq!(
        m.writes(),
        writes,
        "a reconcile with nothing to change wrote (the server's defaults taken for a difference)"
    );

    // A person scales the Deployment: the guest's replicas come back.
    Api::<Deployment>::namespaced(client.clone(), PODS_NS)
        .patch(
            "p0-web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    eventually("the guest's replicas restored", || async {
        replicas(&client, "p0").await == Some(1)
    })
    .await;
    stays_for(Duration::from_secs(1), "and kept", || async {
        replicas(&client, "p0").await == Some(1)
    })
    .await;

    // The owner goes: its children are collected with it.
    Api::<Pod>::namespaced(client.clone(), PODS_NS)
        .delete("p0", &DeleteParams::default())
        .await
        .unwrap();
    eventually("every child collected with its owner", || async {
        let (d, s, j) = (
            Api::<Deployment>::namespaced(client.clone(), PODS_NS),
            Api::<Service>::namespaced(client.clone(), PODS_NS),
            Api::<Job>::namespaced(client.clone(), PODS_NS),
        );
        d.get_opt("p0-web").await.unwrap().is_none()
            && s.get_opt("p0-web").await.unwrap().is_none()
            && j.get_opt("p0-once").await.unwrap().is_none()
    })
    .await;
    assert_eq!(m.errors(), 0);
    host.stop().await.unwrap();
}

/// For each pod: a Deployment `NAME-sized` and a ResourceQuota
/// `NAME-quota` written as people write them, not as a server stores
/// them: quantities `0.5`, `1024Mi`, `1000m`, the number 2, and fields Go
/// leaves out at their zero value (`paused: false`, `minReadySeconds: 0`,
/// `hostNetwork: false`, `tty: false`).
fn sized_guest() -> Vec<u8> {
    let labels = r#"{"app":"{name}-sized"}"#;
    let resources = r#"{"requests":{"cpu":"0.5","memory":"1024Mi"},"limits":{"cpu":"1000m","memory":2147483648}}"#;
    let deployment = format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{{name}}-sized","namespace":"{{namespace}}",{OWNER}}},"spec":{{"replicas":1,"paused":false,"minReadySeconds":0,"selector":{{"matchLabels":{labels}}},"template":{{"metadata":{{"labels":{labels}}},"spec":{{"hostNetwork":false,"containers":[{{"name":"web","image":"nginx:1.27","tty":false,"resources":{resources}}}]}}}}}}}}"#
    );
    let quota = format!(
        r#"{{"apiVersion":"v1","kind":"ResourceQuota","metadata":{{"name":"{{name}}-quota","namespace":"{{namespace}}",{OWNER}}},"spec":{{"hard":{{"cpu":"1000m","requests.memory":"2048Mi","pods":2}}}}}}"#
    );
    per_pod_guest(
        "sized",
        vec![
            (rule("apps", "v1", "Deployment"), deployment),
            (rule("", "v1", "ResourceQuota"), quota),
        ],
    )
}

/// A real API server stores a quantity in canonical form and leaves out a
/// field Go omits at its zero value, so the live object never holds what
/// the guest planned as planned: that is no difference to write again,
/// neither when someone else (kube-controller-manager writing status)
/// changed the object, nor after a restart, and no write war with whoever
/// wrote last. A person's `paused: true` is still a difference, undone.
#[tokio::test]
async fn a_child_as_the_server_stores_it_is_no_difference() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sized.wasm");
    std::fs::write(&file, sized_guest()).unwrap();
    let deployments = Api::<Deployment>::namespaced(client.clone(), PODS_NS);
    let quotas = Api::<ResourceQuota>::namespaced(client.clone(), PODS_NS);
    let host = run_host(&client, host_config(&file), None).await;
    pod("p0").create(&client).await;
    eventually("the Deployment and the ResourceQuota exist", || async {
        deployments.get_opt("p0-sized").await.unwrap().is_some()
            && quotas.get_opt("p0-quota").await.unwrap().is_some()
    })
    .await;

    // Stored as a real server stores them.
    let raw = |v: &serde_json::Value, p: &str| v.pointer(p).cloned().unwrap_or_default();
    let d = serde_json::to_value(deployments.get("p0-sized").await.unwrap()).unwrap();
    for omitted in [
        "/spec/paused",
        "/spec/minReadySeconds",
        "/spec/template/spec/hostNetwork",
        "/spec/template/spec/containers/0/tty",
    ] {
        assert_eq!(
            d.pointer(omitted),
            None,
            "{omitted} stored at its zero value"
        );
    }
    let r = "/spec/template/spec/containers/0/resources";
    assert_eq!(
        raw(&d, r),
        serde_json::json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2147483648"}})
    );
    let q = serde_json::to_value(quotas.get("p0-quota").await.unwrap()).unwrap();
    assert_eq!(
        raw(&q, "/spec/hard"),
        serde_json::json!({"cpu": "1", "requests.memory": "2Gi", "pods": "2"})
    );

    let m = host.controller().metrics().clone();
    idles(&m).await;
    let (writes, reconciles) = (m.writes(), m.reconciles());
    // kube-controller-manager writes the children's status, three times:
    // each wakes the pod's key, and nothing the guest plans differs.
    let manager = PatchParams::apply("kube-controller-manager").force();
    for round in 1..=3 {
        deployments
            .patch_status(
                "p0-sized",
                &manager,
                &Patch::Apply(serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "status": {"observedGeneration": 1, "replicas": round, "unavailableReplicas": round}})),
            )
            .await
            .unwrap();
        quotas
            .patch_status(
                "p0-quota",
                &manager,
                &Patch::Apply(serde_json::json!({"apiVersion": "v1", "kind": "ResourceQuota",
                    "status": {"hard": {"cpu": "1", "requests.memory": "2Gi", "pods": "2"},
                               "used": {"cpu": "0", "requests.memory": "0", "pods": round.to_string()}}})),
            )
            .await
            .unwrap();
        eventually("the status change reconciled", || async {
            m.reconciles() >= reconciles + round
        })
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        m.writes(),
        writes,
        "a child as the server stores it taken for a difference"
    );
    assert_eq!(
        m.held_back_writes(),
        0,
        "no write war with the status writer"
    );
    assert_eq!(m.errors(), 0);
    host.stop().await.unwrap();

    // A restart over children that are right: every key reconciled, no write.
    let host = run_host(&client, host_config(&file), None).await;
    let m = host.controller().metrics().clone();
    eventually("the restarted host reconciled the pod", || async {
        m.reconciles() >= 1
    })
    .await;
    host.controller().enqueue_all();
    eventually("and again", || async { m.reconciles() >= 2 }).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        m.writes(),
        0,
        "the restarted host wrote children that were right"
    );

    // A person pauses the Deployment: the guest's `paused: false` is a
    // difference, applied (and stored, like any false, as no field).
    deployments
        .patch(
            "p0-sized",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    let paused = || async { deployments.get("p0-sized").await.unwrap().spec.paused };
    eventually("the guest's paused: false restored", || async {
        paused().await.is_none()
    })
    .await;
    assert_eq!(m.writes(), 1, "one write restores it");
    assert_eq!(m.errors(), 0);
    host.stop().await.unwrap();
}

/// A guest whose Secret child `NAME-creds` sets `password` through
/// `stringData` and `user` through `data`, as Secrets are often written.
fn secret_guest() -> Vec<u8> {
    let secret = format!(
        r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"{{name}}-creds","namespace":"{{namespace}}",{OWNER}}},"type":"Opaque","data":{{"user":"YWRtaW4="}},"stringData":{{"password":"s3cret"}}}}"#
    );
    per_pod_guest("creds", vec![(rule("", "v1", "Secret"), secret)])
}

/// A Secret's `stringData` is never stored: the server merges it into
/// `data`. The host sends it as `data` (so its apply owns those keys) and
/// finds nothing to write while the Secret holds it, after someone else's
/// change as after a restart; a person's edit of the password is undone.
#[tokio::test]
async fn a_secrets_string_data_is_written_as_data_and_kept() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("creds.wasm");
    std::fs::write(&file, secret_guest()).unwrap();
    let policy = wasmctrl::guest::policy::Policy::parse(
        "default:\n  watch: [{group: \"\", kinds: [Pod]}]\n  write: [{group: \"\", kinds: [Secret]}]\n",
    )
    .unwrap();
    let config = || {
        let mut c = host_config(&file);
        c.runtime = RuntimeConfig::default()
            .cache_dir(None)
            .policy(policy.clone());
        c
    };
    let secrets = Api::<Secret>::namespaced(client.clone(), PODS_NS);
    let data = |s: &Secret| {
        serde_json::to_value(s).unwrap()["data"]
            .as_object()
            .cloned()
            .unwrap_or_default()
    };
    let host = run_host(&client, config(), None).await;
    pod("p0").create(&client).await;
    eventually("the Secret exists", || async {
        secrets.get_opt("p0-creds").await.unwrap().is_some()
    })
    .await;
    let s = secrets.get("p0-creds").await.unwrap();
    assert_eq!(s.string_data, None, "stringData is never stored");
    let expected = serde_json::json!({"user": "YWRtaW4=", "password": "czNjcmV0"});
    assert_eq!(serde_json::Value::Object(data(&s)), expected);

    let m = host.controller().metrics().clone();
    idles(&m).await;
    let (writes, reconciles) = (m.writes(), m.reconciles());
    // Someone labels the Secret: its owner is reconciled, nothing written.
    secrets
        .patch(
            "p0-creds",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .unwrap();
    eventually("the label change reconciled", || async {
        m.reconciles() > reconciles
    })
    .await;
    idles(&m).await;
    assert_eq!(
        m.writes(),
        writes,
        "the stored stringData taken for a difference"
    );

    // A person changes the password: the guest's comes back.
    secrets
        .patch(
            "p0-creds",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"password": "aHVudGVyMg=="}})),
        )
        .await
        .unwrap();
    eventually("the guest's password restored", || async {
        serde_json::Value::Object(data(&secrets.get("p0-creds").await.unwrap())) == expected
    })
    .await;
    assert_eq!(m.errors(), 0);
    host.stop().await.unwrap();

    // A restart over a Secret that is right writes nothing.
    let host = run_host(&client, config(), None).await;
    let m = host.controller().metrics().clone();
    eventually("the restarted host reconciled the pod", || async {
        m.reconciles() >= 1
    })
    .await;
    idles(&m).await;
    assert_eq!(
        m.writes(),
        0,
        "the restarted host wrote a Secret that was right"
    );
    assert_eq!(m.errors(), 0);
    host.stop().await.unwrap();
}
