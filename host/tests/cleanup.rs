//! Label-selected primaries of built-in kinds that clean up, and a shared
//! input, through real informers over HTTPS: a primary whose label goes
//! reconciles `unselected` with the children it controls still in its
//! snapshot, deletes them, and has the host's finalizer released; a
//! deleted one reconciles `gone` with its children; one labelled again is
//! present and gets its children back; a ConfigMap in `platform` mapped
//! `all` wakes every primary and sits in each snapshot. Driven by
//! `tests/guests/guest-related` in its `cleanup` shape (Endpoints as
//! children, a kind no example uses), which reports what each reconcile
//! saw in a ConfigMap `seen-<key>`. The garbage collector is off: only the
//! guest deletes children.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, ServiceAccount};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde_json::json;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::metrics::WriteVerb;
use wasmctrl::supervisor::SupervisorConfig;
use wasmctrl_apiserver::{ApiServerConfig, RunningApiServer};

use crate::support::*;

const FINALIZER: &str = "example.com/cleanup";
const SHARED_NS: &str = "platform";

/// The embedded server without a garbage collector, the shared namespace,
/// and the host running guest-related's `cleanup` shape over primaries of
/// `kind` (with the host-managed finalizer when `finalizer`).
async fn start(kind: &str, finalizer: bool) -> (RunningApiServer, Client, RunningHost) {
    let (server, client) = server_with(ApiServerConfig::default().garbage_collector(false)).await;
    create_namespace(&client, SHARED_NS).await;
    let mut config: BTreeMap<String, String> = [
        ("shape", "cleanup"),
        ("primary-kind", kind),
        ("selector", "tier=gold"),
        ("shared-namespace", SHARED_NS),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    if finalizer {
        config.insert("finalizer".into(), FINALIZER.into());
    }
    let host = SupervisorConfig {
        guests: vec![built_guest("guest_related")],
        guest_config: [("guest_related".to_string(), config)].into(),
        ..host_config(ControllerConfig::default())
    };
    let host = run_host(&client, host, None).await;
    (server, client, host)
}

/// What the last reporting reconcile of `key` saw: presence, children and
/// shared ConfigMaps.
async fn seen(client: &Client, key: &str) -> Option<(String, String, String)> {
    let reports: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    let data = reports
        .get_opt(&format!("seen-{}", key.replace('/', ".")))
        .await
        .unwrap()?
        .data
        .unwrap_or_default();
    let get = |k: &str| data.get(k).cloned().unwrap_or_default();
    Some((get("presence"), get("children"), get("shared")))
}

async fn sees(client: &Client, key: &str, presence: &str, children: &str, shared: &str) {
    let want = Some((presence.into(), children.into(), shared.into()));
    let what = format!("{key}: {presence}, children [{children}], shared [{shared}]");
    eventually(&what, || async { seen(client, key).await == want }).await;
}

async fn child_exists(client: &Client, namespace: &str, name: &str) -> bool {
    let children: Api<Endpoints> = Api::namespaced(client.clone(), namespace);
    children.get_opt(name).await.unwrap().is_some()
}

/// Sets the label `tier` of `object` (merge patch).
async fn label<K>(api: &Api<K>, name: &str, tier: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"metadata": {"labels": {"tier": tier}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn shared(client: &Client, name: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), SHARED_NS);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"gold": "4 cpus"}}))
            .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
}

#[tokio::test]
async fn a_namespace_leaving_its_label_selector_deletes_its_children_and_loses_the_finalizer() {
    let (_server, client, host) = start("Namespace", true).await;
    shared(&client, "tiers").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in ["team-a", "team-b"] {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"tier": "gold"}}}))
                .unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
    }
    sees(
        &client,
        "team-a",
        "present",
        "team-a/team-a-child",
        "platform/tiers",
    )
    .await;
    eventually("each namespace's child made", || async {
        child_exists(&client, "team-a", "team-a-child").await
            && child_exists(&client, "team-b", "team-b-child").await
    })
    .await;
    let finalizers = |name: &'static str| {
        let namespaces = namespaces.clone();
        async move {
            namespaces
                .get(name)
                .await
                .unwrap()
                .metadata
                .finalizers
                .unwrap_or_default()
        }
    };
    assert_eq!(finalizers("team-a").await, [FINALIZER]);

    // One new ConfigMap in `platform` reaches every Namespace's snapshot.
    shared(&client, "more").await;
    for key in ["team-a", "team-b"] {
        sees(
            &client,
            key,
            "present",
            &format!("{key}/{key}-child"),
            "platform/more,platform/tiers",
        )
        .await;
    }

    // The label goes: team-a still exists, out of the selector. Its
    // clean-up snapshot still holds its child; the guest deletes it; the
    // host releases its finalizer.
    label(&namespaces, "team-a", "none").await;
    sees(
        &client,
        "team-a",
        "unselected",
        "team-a/team-a-child",
        "platform/more,platform/tiers",
    )
    .await;
    eventually("team-a's child deleted", || async {
        !child_exists(&client, "team-a", "team-a-child").await
    })
    .await;
    eventually("the host's finalizer released from team-a", || async {
        finalizers("team-a").await.is_empty()
    })
    .await;
    assert!(
        child_exists(&client, "team-b", "team-b-child").await,
        "team-b untouched"
    );
    let metrics = host.controller().metrics().clone();
    assert!(metrics.written(WriteVerb::RemoveFinalizer) >= 1, "counted");
    eventually("no departed primary kept once settled", || async {
        host.controller().departed() == 0
    })
    .await;

    // Labelled again: present, its child and finalizer back.
    label(&namespaces, "team-a", "gold").await;
    eventually("team-a's child made again", || async {
        child_exists(&client, "team-a", "team-a-child").await
    })
    .await;
    eventually("the finalizer added again", || async {
        finalizers("team-a").await == [FINALIZER]
    })
    .await;
    assert_eq!(metrics.errors(), 0);
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_namespaced_primary_unselected_then_deleted_cleans_up_its_children_each_time() {
    let (_server, client, host) = start("ServiceAccount", false).await;
    shared(&client, "tiers").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), PODS_NS);
    let account: ServiceAccount = serde_json::from_value(
        json!({"metadata": {"name": "builder", "labels": {"tier": "gold"}}}),
    )
    .unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let key = format!("{PODS_NS}/builder");
    let child = || child_exists(&client, PODS_NS, "builder-child");
    eventually("the child made", || async { child().await }).await;

    label(&accounts, "builder", "none").await;
    sees(
        &client,
        &key,
        "unselected",
        &format!("{PODS_NS}/builder-child"),
        "platform/tiers",
    )
    .await;
    eventually("the child deleted", || async { !child().await }).await;

    label(&accounts, "builder", "gold").await;
    eventually("the child made again", || async { child().await }).await;

    // Deleted (no garbage collector, no finalizer): gone, with its child
    // still in the snapshot, which the guest deletes.
    accounts
        .delete("builder", &DeleteParams::default())
        .await
        .unwrap();
    sees(
        &client,
        &key,
        "gone",
        &format!("{PODS_NS}/builder-child"),
        "platform/tiers",
    )
    .await;
    eventually("the child deleted", || async { !child().await }).await;
    eventually("no departed primary kept once settled", || async {
        host.controller().departed() == 0
    })
    .await;
    assert_eq!(host.controller().metrics().errors(), 0);
    host.stop().await.unwrap();
}
