//! A cluster-scoped primary controlling namespaced children — a tenant
//! controller's shape (here the primary is the Namespace itself, owning a
//! `tenant-settings` ConfigMap inside it): a change to a child wakes its
//! owner's key, which has no namespace, so a person's delete or edit of the
//! child is undone at once, not at the next resync.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::support::wat::{guest, Behaviour, WatKeys, WatManifest, WatRule, WatWatch, WatWrite};
use crate::support::*;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::recording::{case_files, RecordConfig};
use wasmctrl::supervisor::SupervisorConfig;
use wasmctrl_test_support::wait::eventually;

const TENANT: &str = "tenant-a";
const CHILD: &str = "tenant-settings";

/// For each Namespace, the ConfigMap `tenant-settings` in it, controlled by
/// the Namespace.
fn tenant_guest() -> Vec<u8> {
    let watch = |name: &str, kind: &str, keys: WatKeys| WatWatch {
        name: name.into(),
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        plural: None,
        namespace: None,
        fields: Vec::new(),
        indexes: Vec::new(),
        keys,
        finalizer: None,
    };
    let m = WatManifest {
        name: "tenants".into(),
        watches: vec![
            watch("tenants", "Namespace", WatKeys::PerObject),
            watch("settings", "ConfigMap", WatKeys::Owner("tenants".into())),
        ],
        writes: vec![WatRule {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: None,
            names: vec![CHILD.into()],
            status: false,
        }],
    };
    let child = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{CHILD}","namespace":"{{name}}","ownerReferences":[{{"apiVersion":"v1","kind":"Namespace","name":"{{name}}","uid":"{{uid}}","controller":true}}]}},"data":{{"quota":"10"}}}}"#
    );
    guest(
        &m,
        Behaviour::ByLifecycle {
            live: vec![WatWrite::Apply(child)],
            deleting: Vec::new(),
        },
    )
}

async fn quota(client: &Client) -> Option<String> {
    Api::<ConfigMap>::namespaced(client.clone(), TENANT)
        .get_opt(CHILD)
        .await
        .unwrap()
        .and_then(|c| c.data)
        .and_then(|d| d.get("quota").cloned())
}

#[tokio::test]
async fn a_change_to_a_namespaced_child_wakes_its_cluster_scoped_owner() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tenants.wasm");
    std::fs::write(&file, tenant_guest()).unwrap();
    let config = SupervisorConfig {
        guests: vec![file],
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        // Every reconcile's request, to see which keys were woken.
        record: Some(RecordConfig {
            dir: dir.path().join("cases"),
            max_cases: 10_000,
            max_bytes: 64 << 20,
            secrets: false,
        }),
        ..SupervisorConfig::default()
    };
    // The resync (600 s by default) never comes within the test: only the
    // child's own change can wake its owner in time.
    let host = run_host(&client, config, None).await;
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": TENANT}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    eventually("the tenant's settings written", || async {
        quota(&client).await.as_deref() == Some("10")
    })
    .await;

    let settings = Api::<ConfigMap>::namespaced(client.clone(), TENANT);
    // A person edits the child: its owner is woken and restores it.
    settings
        .patch(
            CHILD,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"quota": "999"}})),
        )
        .await
        .unwrap();
    eventually("the edit undone", || async {
        quota(&client).await.as_deref() == Some("10")
    })
    .await;
    // A person deletes the child: it comes back.
    settings
        .delete(CHILD, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted child restored", || async {
        quota(&client).await.as_deref() == Some("10")
    })
    .await;
    assert_eq!(host.controller().metrics().errors(), 0);
    host.stop().await.unwrap();
    // Every key reconciled was a Namespace's: the child's changes woke
    // `tenant-a`, never a namespaced `tenant-a/tenant-a` nobody has.
    let keys: Vec<String> = case_files(&dir.path().join("cases").join("tenants"))
        .unwrap()
        .iter()
        .map(|f| {
            let case: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            case["request"]["key"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(keys.iter().any(|k| k == TENANT), "{keys:?}");
    assert!(keys.iter().all(|k| !k.contains('/')), "{keys:?}");
}
