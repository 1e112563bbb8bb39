//! A guest owning children of built-in kinds other than ConfigMaps — a
//! Deployment, a Service and a Job — on the embedded API server: created
//! with the real server's defaults (a cluster IP, a Job's generated
//! selector), controlled by their primary, never written again when
//! nothing changed (the server's defaults are not a difference to undo),
//! restored after a person's edit, and collected with their owner.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
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
    let m = WatManifest {
        name: "children".into(),
        watches: vec![WatWatch::pods("pods", WatKeys::PerObject)],
        writes: vec![
            rule("apps", "v1", "Deployment"),
            rule("", "v1", "Service"),
            rule("batch", "v1", "Job"),
        ],
    };
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
    guest(
        &m,
        Behaviour::ByLifecycle {
            live: vec![
                WatWrite::Apply(deployment),
                WatWrite::Apply(service),
                WatWrite::Apply(job),
            ],
            deleting: Vec::new(),
        },
    )
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
    let config = SupervisorConfig {
        guests: vec![file],
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    };
    let host = run_host(&client, config, None).await;
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
    eventually("the host idles", || async {
        let before = (m.reconciles(), m.writes());
        tokio::time::sleep(Duration::from_millis(500)).await;
        (m.reconciles(), m.writes()) == before
    })
    .await;
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
