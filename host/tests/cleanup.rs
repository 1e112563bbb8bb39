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
use wasmctrl_apiserver::{ApiServerConfig, FailRequests, RunningApiServer};

use crate::support::*;

const FINALIZER: &str = "example.com/cleanup";
const SHARED_NS: &str = "platform";

/// The embedded server without a garbage collector, the shared namespace,
/// and the host running guest-related's `cleanup` shape over primaries of
/// `kind` (with the host-managed finalizer when `finalizer`).
async fn start(kind: &str, finalizer: bool) -> (RunningApiServer, Client, RunningHost) {
    let (server, client) = server_with(ApiServerConfig::default().garbage_collector(false)).await;
    create_namespace(&client, SHARED_NS).await;
    let host = run_host(&client, host_of(kind, finalizer), None).await;
    (server, client, host)
}

/// The host running guest-related's `cleanup` shape over primaries of
/// `kind` (with the host-managed finalizer when `finalizer`).
fn host_of(kind: &str, finalizer: bool) -> SupervisorConfig {
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
    SupervisorConfig {
        guests: vec![built_guest("guest_related")],
        guest_config: [("guest_related".to_string(), config)].into(),
        ..host_config(ControllerConfig::default())
    }
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

/// The finalizers of Namespace `name`.
async fn finalizers_of(client: &Client, name: &str) -> Vec<String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = namespaces.get(name).await.unwrap();
    ns.metadata.finalizers.unwrap_or_default()
}

/// Namespace team-a, out of the selector, reconciled `unselected` with its
/// child (and `shared`) in its snapshot: its child deleted, the host's
/// finalizer released; team-b's child untouched.
async fn team_a_cleaned_up(client: &Client, shared: &str) {
    sees(
        client,
        "team-a",
        "unselected",
        "team-a/team-a-child",
        shared,
    )
    .await;
    eventually("team-a's child deleted", || async {
        !child_exists(client, "team-a", "team-a-child").await
    })
    .await;
    eventually("the host's finalizer released from team-a", || async {
        finalizers_of(client, "team-a").await.is_empty()
    })
    .await;
    assert!(
        child_exists(client, "team-b", "team-b-child").await,
        "team-b untouched"
    );
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
        gold(&namespaces, name).await;
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
    let finalizers = |name: &'static str| finalizers_of(&client, name);
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
    team_a_cleaned_up(&client, "platform/more,platform/tiers").await;
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

/// The shared ConfigMap `tiers` and the ServiceAccount `builder` labelled
/// `tier=gold`; its API.
async fn builder(client: &Client) -> Api<ServiceAccount> {
    shared(client, "tiers").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), PODS_NS);
    gold(&accounts, "builder").await;
    accounts
}

#[tokio::test]
async fn a_failed_question_to_the_server_retries_the_key_and_never_guesses() {
    let (server, client, host) = start("ServiceAccount", false).await;
    let accounts = builder(&client).await;
    let key = format!("{PODS_NS}/builder");
    let child = format!("{PODS_NS}/builder-child");
    sees(&client, &key, "present", &child, "platform/tiers").await;
    // Where the unselected builder stands is asked with lists by name:
    // the server fails the first three.
    server.faults().fail(
        FailRequests::new(500, 3)
            .verb("list")
            .resource("serviceaccounts")
            .retry_after(0),
    );
    label(&accounts, "builder", "none").await;
    // Retried until answered, then `unselected`: a guess (`gone`) would
    // have reported `gone` and left no child for the answered reconcile.
    sees(&client, &key, "unselected", &child, "platform/tiers").await;
    eventually("the child deleted", || async {
        !child_exists(&client, PODS_NS, "builder-child").await
    })
    .await;
    assert_eq!(
        server.faults().injected_failures(),
        3,
        "every failure served"
    );
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_namespaced_primary_unselected_then_deleted_cleans_up_its_children_each_time() {
    let (_server, client, host) = start("ServiceAccount", false).await;
    let accounts = builder(&client).await;
    let key = format!("{PODS_NS}/builder");
    let child = || child_exists(&client, PODS_NS, "builder-child");
    // Its reconcile as `presence` held its child, which the guest deleted.
    let cleaned_up = |presence: &'static str| {
        let key = key.clone();
        let client = client.clone();
        async move {
            let child = format!("{PODS_NS}/builder-child");
            sees(&client, &key, presence, &child, "platform/tiers").await;
            eventually("the child deleted", || async {
                !child_exists(&client, PODS_NS, "builder-child").await
            })
            .await;
        }
    };
    eventually("the child made", || async { child().await }).await;

    label(&accounts, "builder", "none").await;
    cleaned_up("unselected").await;

    label(&accounts, "builder", "gold").await;
    eventually("the child made again", || async { child().await }).await;

    // Deleted (no garbage collector, no finalizer): gone, with its child
    // still in the snapshot, which the guest deletes.
    accounts
        .delete("builder", &DeleteParams::default())
        .await
        .unwrap();
    cleaned_up("gone").await;
    eventually("no departed primary kept once settled", || async {
        host.controller().departed() == 0
    })
    .await;
    assert_eq!(host.controller().metrics().errors(), 0);
    host.stop().await.unwrap();
}

/// Creates `name` in `api`, labelled `tier=gold`.
async fn gold<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"tier": "gold"}}}))
            .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

#[tokio::test]
async fn a_namespace_unselected_while_the_host_was_down_is_cleaned_up_after_its_restart() {
    let (_server, client, host) = start("Namespace", true).await;
    shared(&client, "tiers").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in ["team-a", "team-b"] {
        gold(&namespaces, name).await;
    }
    let finalizers = |name: &'static str| finalizers_of(&client, name);
    eventually("each namespace's child and finalizer made", || async {
        child_exists(&client, "team-a", "team-a-child").await
            && child_exists(&client, "team-b", "team-b-child").await
            && finalizers("team-a").await == [FINALIZER]
    })
    .await;
    host.stop().await.unwrap();

    // While no host runs, team-a leaves the selector: the next host never
    // saw it leave, yet its clean-up snapshot holds its child (related
    // through the server's copy of team-a).
    label(&namespaces, "team-a", "none").await;
    let host = run_host(&client, host_of("Namespace", true), None).await;
    team_a_cleaned_up(&client, "platform/tiers").await;
    assert_eq!(finalizers("team-b").await, [FINALIZER]);
    assert_eq!(host.controller().metrics().errors(), 0);
    host.stop().await.unwrap();
}

#[tokio::test]
async fn namespaced_primaries_unselected_or_deleted_while_the_host_was_down_are_cleaned_up_after_its_restart(
) {
    let (_server, client, host) = start("ServiceAccount", false).await;
    let accounts = builder(&client).await;
    gold(&accounts, "runner").await;
    eventually("each account's child made", || async {
        child_exists(&client, PODS_NS, "builder-child").await
            && child_exists(&client, PODS_NS, "runner-child").await
    })
    .await;
    host.stop().await.unwrap();

    // While no host runs, builder is deleted (no garbage collector: its
    // child stays) and runner leaves the selector.
    accounts
        .delete("builder", &DeleteParams::default())
        .await
        .unwrap();
    label(&accounts, "runner", "none").await;
    let host = run_host(&client, host_of("ServiceAccount", false), None).await;
    for (name, presence) in [("builder", "gone"), ("runner", "unselected")] {
        let child = format!("{name}-child");
        sees(
            &client,
            &format!("{PODS_NS}/{name}"),
            presence,
            &format!("{PODS_NS}/{child}"),
            "platform/tiers",
        )
        .await;
        eventually(&format!("{child} deleted"), || async {
            !child_exists(&client, PODS_NS, &child).await
        })
        .await;
    }
    assert_eq!(host.controller().metrics().errors(), 0);
    host.stop().await.unwrap();
}
