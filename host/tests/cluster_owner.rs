//! A cluster-scoped primary controlling namespaced children — a tenant
//! controller's shape (here the primary is the Namespace itself, owning a
//! `tenant-settings` ConfigMap inside it): a change to a child wakes its
//! owner's key, which has no namespace, so a person's delete or edit of the
//! child is undone at once, not at the next resync. And a Namespace as a
//! primary: its `same-namespace` objects are those in the namespace it is.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};

use crate::support::wat::{
    guest, Behaviour, WatKeys, WatManifest, WatRef, WatRule, WatWatch, WatWrite,
};
use crate::support::*;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::recording::{case_files, RecordConfig};
use wasmctrl::supervisor::SupervisorConfig;
use wasmctrl_test_support::wait::eventually;

const TENANT: &str = "tenant-a";
const CHILD: &str = "tenant-settings";

/// For each Namespace, the ConfigMap `tenant-settings` in it, controlled by
/// the Namespace.
fn watch(name: &str, kind: &str, keys: WatKeys) -> WatWatch {
    WatWatch {
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
        label_selector: None,
    }
}

/// A host running `guest` (named `name`), recording every reconcile.
async fn run(client: &Client, dir: &Path, name: &str, guest: Vec<u8>) -> RunningHost {
    let file = dir.join(format!("{name}.wasm"));
    std::fs::write(&file, guest).unwrap();
    let config = SupervisorConfig {
        guests: vec![file],
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        // Every reconcile's request and snapshot, to see which keys were
        // woken and what they held.
        record: Some(RecordConfig {
            dir: dir.join("cases"),
            max_cases: 10_000,
            max_bytes: 64 << 20,
            secrets: false,
        }),
        ..SupervisorConfig::default()
    };
    // The resync (600 s by default) never comes within a test: only an
    // object's own change can wake a key in time.
    run_host(client, config, None).await
}

/// The recorded cases of guest `name`, oldest first.
fn cases(dir: &Path, name: &str) -> Vec<serde_json::Value> {
    case_files(&dir.join("cases").join(name))
        .unwrap_or_default()
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect()
}

async fn create_namespace(client: &Client, name: &str) {
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
}

fn tenant_guest() -> Vec<u8> {
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
    let host = run(&client, dir.path(), "tenants", tenant_guest()).await;
    create_namespace(&client, TENANT).await;
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
    let keys: Vec<String> = cases(dir.path(), "tenants")
        .iter()
        .map(|case| case["request"]["key"].as_str().unwrap().to_string())
        .collect();
    assert!(keys.iter().any(|k| k == TENANT), "{keys:?}");
    assert!(keys.iter().all(|k| !k.contains('/')), "{keys:?}");
}

#[tokio::test]
async fn a_namespace_primary_is_woken_by_and_sees_the_objects_in_it() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let m = WatManifest {
        name: "spaces".into(),
        watches: vec![
            watch("spaces", "Namespace", WatKeys::PerObject),
            watch("maps", "ConfigMap", WatKeys::SameNamespace("spaces".into())),
        ],
        writes: Vec::new(),
    };
    let host = run(
        &client,
        dir.path(),
        "spaces",
        guest(
            &m,
            Behaviour::Plan {
                writes: Vec::new(),
                events: Vec::new(),
            },
        ),
    )
    .await;
    create_namespace(&client, "space-b").await;
    let map: ConfigMap = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "resident", "namespace": "space-b"}}),
    )
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "space-b")
        .create(&PostParams::default(), &map)
        .await
        .unwrap();
    // The ConfigMap's creation woke Namespace space-b, whose snapshot
    // held it.
    eventually("space-b reconciled with its ConfigMap", || async {
        cases(dir.path(), "spaces").iter().any(|case| {
            case["request"]["key"] == "space-b"
                && case["snapshot"]["objects"]
                    .as_array()
                    .is_some_and(|o| o.iter().any(|o| o["name"] == "resident"))
        })
    })
    .await;
    host.stop().await.unwrap();
}

/// Installs the cluster-scoped `tenants.example.com` (status subresource).
async fn install_tenant_crd(client: &Client) -> ApiResource {
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "tenants.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
            "names": {"plural": "tenants", "singular": "tenant", "kind": "Tenant", "listKind": "TenantList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(crd).unwrap(),
        )
        .await
        .unwrap();
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Tenant"));
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    eventually("the Tenant resource is served", || async {
        api.list(&Default::default()).await.is_ok()
    })
    .await;
    resource
}

#[tokio::test]
async fn a_cluster_scoped_primary_gets_its_finalizer_and_status_and_cleans_up_its_children_in_a_namespace(
) {
    const FINALIZER: &str = "example.com/cleanup";
    let (_server, client) = server().await;
    let resource = install_tenant_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let m = WatManifest {
        name: "tenant-crd".into(),
        watches: vec![
            WatWatch {
                group: "example.com".into(),
                plural: Some("tenants".into()),
                finalizer: Some(FINALIZER.into()),
                ..watch("tenants", "Tenant", WatKeys::PerObject)
            },
            watch("grants", "ConfigMap", WatKeys::Owner("tenants".into())),
        ],
        writes: vec![
            WatRule {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some(PODS_NS.into()),
                names: Vec::new(),
                status: false,
            },
            WatRule {
                group: "example.com".into(),
                version: "v1".into(),
                kind: "Tenant".into(),
                namespace: None,
                names: Vec::new(),
                status: true,
            },
        ],
    };
    let grant = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{{name}}-grant","namespace":"{PODS_NS}","ownerReferences":[{{"apiVersion":"example.com/v1","kind":"Tenant","name":"{{name}}","uid":"{{uid}}","controller":true}}]}},"data":{{"granted":"yes"}}}}"#
    );
    let status = |phase: &str| {
        format!(
            r#"{{"apiVersion":"example.com/v1","kind":"Tenant","metadata":{{"name":"{{name}}"}},"status":{{"phase":"{phase}"}}}}"#
        )
    };
    let me = |name: &str| WatRef {
        api_version: "example.com/v1".into(),
        kind: "Tenant".into(),
        namespace: None,
        name: name.into(),
    };
    let behaviour = Behaviour::ByLifecycle {
        live: vec![
            WatWrite::Apply(grant),
            WatWrite::ApplyStatus(status("Ready")),
        ],
        deleting: vec![
            WatWrite::Delete(WatRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some(PODS_NS.into()),
                name: "{name}-grant".into(),
            }),
            WatWrite::RemoveFinalizer(me("{name}"), FINALIZER.into()),
        ],
    };
    let host = run(&client, dir.path(), "tenant-crd", guest(&m, behaviour)).await;
    let tenants: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let tenant: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "example.com/v1", "kind": "Tenant", "metadata": {"name": "acme"}}))
    .unwrap();
    tenants
        .create(&PostParams::default(), &tenant)
        .await
        .unwrap();
    let grants = Api::<ConfigMap>::namespaced(client.clone(), PODS_NS);
    eventually(
        "finalizer, status and the grant in its namespace",
        || async {
            let Some(t) = tenants.get_opt("acme").await.unwrap() else {
                return false;
            };
            t.metadata.finalizers.unwrap_or_default() == [FINALIZER]
                && t.data["status"]["phase"] == "Ready"
                && grants.get_opt("acme-grant").await.unwrap().is_some()
        },
    )
    .await;
    tenants
        .delete("acme", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the grant cleaned up, then the tenant gone", || async {
        tenants.get_opt("acme").await.unwrap().is_none()
            && grants.get_opt("acme-grant").await.unwrap().is_none()
    })
    .await;
    assert_eq!(host.controller().metrics().errors(), 0);
    host.stop().await.unwrap();
}
