//! The namespace provisioner, `examples/guest-namespaces`, end to end on
//! the embedded API server (its garbage collector off, as on a real API
//! server without kube-controller-manager, so a child only goes if the host
//! deletes it or its namespace goes) with the host running the built guest
//! over real HTTPS with the real kube client. The scenarios of issue 41:
//! tiered Namespaces get their three children; a person's edit of a quota
//! is undone without a write war; removing the label deletes the children;
//! an idle host and a restarted one write nothing; ten label flips a second
//! apart end with no write war and all three children; a change to the
//! shared `tier-overrides` ConfigMap reaches every namespace of its tier.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, Namespace, ResourceQuota};
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde_json::json;
use tokio::time::Instant;
use wasmctrl::controller::GuestController;
use wasmctrl::metrics::WriteVerb;
use wasmctrl_apiserver::{ApiServerConfig, RunningApiServer};

use crate::support::*;

/// The guest's declared name (`GUEST_NAME` in its lib.rs).
const GUEST: &str = "namespaces";
/// The label naming a namespace's tier.
const TIER: &str = "platform.example.com/tier";
/// Where the overrides ConfigMap lives, and its name.
const PLATFORM: &str = "platform";
const OVERRIDES: &str = "tier-overrides";
/// The children's names (the binding's is `tier-ROLE`, `edit` by default).
const QUOTA: &str = "tier-quota";
const LIMITS: &str = "tier-limits";
const BINDING: &str = "tier-edit";
/// How many times the flapping test removes and restores the label.
const FLIPS: u64 = 10;
/// How soon a person's edit of a child must be undone.
const REPAIR: Duration = Duration::from_secs(2);

/// The `spec.hard` of each tier's quota, with no override, as the server
/// stores it.
fn hard(tier: &str) -> BTreeMap<String, String> {
    let (cpu, memory, pods) = match tier {
        "small" => ("2", "4Gi", "10"),
        _ => ("16", "64Gi", "100"),
    };
    [
        ("pods", pods),
        ("requests.cpu", cpu),
        ("requests.memory", memory),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// `tier`'s `spec.hard` with the entries `changed` (as the server stores
/// them).
fn overridden(tier: &str, changed: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut hard = hard(tier);
    for (key, value) in changed {
        hard.insert(key.to_string(), value.to_string());
    }
    hard
}

/// An embedded API server without a garbage collector, with the `platform`
/// namespace.
async fn namespaces_server() -> (RunningApiServer, Client) {
    let (server, client) = server_with(ApiServerConfig::default().garbage_collector(false)).await;
    create_namespace(&client, PLATFORM).await;
    (server, client)
}

/// The host running only the provisioner, resyncing every `resync`.
async fn start_provisioner(client: &Client, resync: Duration) -> RunningHost {
    run_built_guest(client, "guest_namespaces", resync).await
}

/// A server, the provisioner (resyncing every 10 minutes: never within a
/// test) and the namespaces `small` and `large`, each holding its
/// children.
async fn provisioned_world(
    small: &[&str],
    large: &[&str],
) -> (RunningApiServer, Client, RunningHost) {
    let (server, client) = namespaces_server().await;
    let host = start_provisioner(&client, Duration::from_secs(600)).await;
    provisioned(&client, &host, "small", small).await;
    provisioned(&client, &host, "large", large).await;
    (server, client, host)
}

/// Checks the provisioner had no reconcile error, and stops it.
async fn stop_without_errors(host: RunningHost) {
    let errors = provisioner(&host).metrics().errors();
    assert_eq!(errors, 0, "reconcile errors; {}", write_report(&host));
    host.stop().await.unwrap();
}

fn provisioner(host: &RunningHost) -> std::sync::Arc<GuestController> {
    host.host
        .controller(GUEST)
        .expect("the host runs the namespaces guest")
}

fn namespaces(client: &Client) -> Api<Namespace> {
    Api::all(client.clone())
}

/// Creates the Namespace `name`, labelled with `tier`.
async fn create_tiered(client: &Client, name: &str, tier: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(TIER.to_string(), tier.to_string())])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces(client)
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
}

/// What `kubectl label namespace NAME platform.example.com/tier=TIER
/// --overwrite` (or `...tier-` for `None`) sends.
async fn label(client: &Client, name: &str, tier: Option<&str>) {
    namespaces(client)
        .patch(
            name,
            &PatchParams {
                field_manager: Some("kubectl-label".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"metadata": {"labels": {TIER: tier}}})),
        )
        .await
        .unwrap();
}

/// What `kubectl apply --server-side -f overrides.yaml` sends for a
/// `tier-overrides` ConfigMap with `data`.
async fn set_overrides(client: &Client, data: &[(&str, &str)]) {
    let data: BTreeMap<&str, &str> = data.iter().copied().collect();
    let doc = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": OVERRIDES, "namespace": PLATFORM}, "data": data});
    Api::<ConfigMap>::namespaced(client.clone(), PLATFORM)
        .patch(
            OVERRIDES,
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(&doc),
        )
        .await
        .unwrap();
}

/// Whether `meta`'s one owner reference is the controller reference to the
/// Namespace with `uid`.
fn controlled_by(meta: &ObjectMeta, namespace: &str, uid: &str) -> bool {
    match meta.owner_references.as_deref().unwrap_or_default() {
        [r] => {
            r.api_version == "v1"
                && r.kind == "Namespace"
                && r.name == namespace
                && r.uid == uid
                && r.controller == Some(true)
                && r.block_owner_deletion == Some(true)
        }
        _ => false,
    }
}

/// What a namespace holds of the provisioner's children, as read from the
/// server.
#[derive(Debug, PartialEq)]
struct Children {
    /// The quota's `spec.hard`, if the quota exists.
    quota: Option<BTreeMap<String, String>>,
    /// Whether the LimitRange exists.
    limits: bool,
    /// The binding's (role, group), if it exists.
    binding: Option<(String, String)>,
    /// How many of the existing children the Namespace controls.
    controlled: usize,
}

impl Children {
    /// The three children, the quota holding `hard`, the binding granting
    /// `edit` to the namespace's group, all controlled by the Namespace.
    fn converged(&self, namespace: &str, hard: &BTreeMap<String, String>) -> bool {
        self.quota.as_ref() == Some(hard)
            && self.limits
            && self.binding == Some(("edit".into(), format!("{namespace}:members")))
            && self.controlled == 3
    }

    fn none(&self) -> bool {
        self.quota.is_none() && !self.limits && self.binding.is_none()
    }
}

async fn children(client: &Client, namespace: &str) -> Children {
    let uid = namespaces(client)
        .get_opt(namespace)
        .await
        .unwrap()
        .and_then(|n| n.metadata.uid)
        .unwrap_or_default();
    let quota = Api::<ResourceQuota>::namespaced(client.clone(), namespace)
        .get_opt(QUOTA)
        .await
        .unwrap();
    let limits = Api::<LimitRange>::namespaced(client.clone(), namespace)
        .get_opt(LIMITS)
        .await
        .unwrap();
    let binding = Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .get_opt(BINDING)
        .await
        .unwrap();
    let controlled = [
        quota.as_ref().map(|q| q.meta()),
        limits.as_ref().map(|l| l.meta()),
        binding.as_ref().map(|b| b.meta()),
    ]
    .into_iter()
    .flatten()
    .filter(|m| controlled_by(m, namespace, &uid))
    .count();
    Children {
        quota: quota.map(|q| {
            q.spec
                .and_then(|s| s.hard)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect()
        }),
        limits: limits.is_some(),
        binding: binding.map(|b| {
            let group = b.subjects.unwrap_or_default();
            let group = group.first().map(|s| s.name.clone()).unwrap_or_default();
            (b.role_ref.name, group)
        }),
        controlled,
    }
}

/// Waits (up to `limit`) until `namespace` holds its three children with
/// the quota `hard`; returns what it last held on failure.
async fn converged_within(
    limit: Duration,
    client: &Client,
    namespace: &str,
    hard: &BTreeMap<String, String>,
) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        let now = children(client, namespace).await;
        if now.converged(namespace, hard) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{namespace} did not get its children with quota {hard:?} within {limit:?}; \
                 it holds {now:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `namespace` holds its three children with the quota
/// `hard`.
async fn converges_to(
    client: &Client,
    host: &RunningHost,
    namespace: &str,
    hard: &BTreeMap<String, String>,
) {
    if let Err(e) = converged_within(CONVERGE, client, namespace, hard).await {
        panic!("{e}; {}", write_report(host));
    }
}

/// Waits until `namespace` holds its three children with `tier`'s quota.
async fn converges(client: &Client, host: &RunningHost, namespace: &str, tier: &str) {
    converges_to(client, host, namespace, &hard(tier)).await;
}

/// What the host's metrics say about the provisioner's writes, for failure
/// messages.
fn write_report(host: &RunningHost) -> String {
    let m = provisioner(host).metrics().clone();
    format!(
        "host: applies {}, deletes {}, skipped {}, dropped applies {} deletes {}, held back {}, \
         write wars {}, reconciles {}, errors {}",
        m.applies(),
        m.written(WriteVerb::Delete),
        m.skipped(),
        m.dropped(WriteVerb::Apply),
        m.dropped(WriteVerb::Delete),
        m.held_back_writes(),
        guest_write_wars(host, GUEST),
        m.reconciles(),
        m.errors()
    )
}

/// Creates `names` with `tier` and waits until each holds its children.
async fn provisioned(client: &Client, host: &RunningHost, tier: &str, names: &[&str]) {
    for name in names {
        create_tiered(client, name, tier).await;
    }
    for name in names {
        converges(client, host, name, tier).await;
    }
}

#[tokio::test]
async fn tiered_namespaces_get_a_quota_a_limit_range_and_a_role_binding_they_control() {
    let (_server, client, host) = provisioned_world(&["team-a", "team-b"], &["team-c"]).await;
    create_namespace(&client, "plain").await;
    eventually("the provisioner is idle", || async { host.idle() }).await;
    for untouched in ["plain", PLATFORM, HOST_NS] {
        let held = children(&client, untouched).await;
        assert!(held.none(), "{untouched} holds {held:?}");
    }
    let m = provisioner(&host).metrics().clone();
    assert_eq!(
        m.applies(),
        9,
        "three children each; {}",
        write_report(&host)
    );
    stop_without_errors(host).await;
}

#[tokio::test]
async fn a_person_s_edit_of_the_quota_is_undone_each_time_without_a_write_war() {
    let (_server, client, host) = provisioned_world(&["team-a"], &[]).await;
    let quotas = Api::<ResourceQuota>::namespaced(client.clone(), "team-a");
    for i in 1..=4 {
        let started = Instant::now();
        // What `kubectl edit resourcequota tier-quota` sends.
        quotas
            .patch(
                QUOTA,
                &PatchParams {
                    field_manager: Some("kubectl-edit".into()),
                    ..PatchParams::default()
                },
                &Patch::Merge(json!({"spec": {"hard": {"pods": format!("{}", 90 + i)}}})),
            )
            .await
            .unwrap();
        if let Err(e) = converged_within(REPAIR, &client, "team-a", &hard("small")).await {
            panic!("edit {i} not undone: {e}; {}", write_report(&host));
        }
        eprintln!("edit {i} undone in {:?}", started.elapsed());
        // A person's pace: well past the contest window after each repair.
        tokio::time::sleep(Duration::from_secs(2).saturating_sub(started.elapsed())).await;
    }
    assert_no_write_war(&client, &host, GUEST).await;
    stop_without_errors(host).await;
}

#[tokio::test]
async fn removing_the_label_deletes_the_three_children_and_leaves_the_namespace() {
    let (_server, client, host) = provisioned_world(&["team-a", "team-b"], &[]).await;
    let m = provisioner(&host).metrics().clone();
    assert_eq!(m.written(WriteVerb::Delete), 0);
    label(&client, "team-a", None).await;
    // No garbage collector, and the owner still exists anyway: only the
    // host's DELETEs remove the children.
    eventually("team-a's children are gone", || async {
        children(&client, "team-a").await.none()
    })
    .await;
    assert_eq!(m.written(WriteVerb::Delete), 3, "{}", write_report(&host));
    stays_for(
        Duration::from_secs(1),
        "nothing comes back, and team-b keeps its children",
        || async {
            children(&client, "team-a").await.none()
                && children(&client, "team-b")
                    .await
                    .converged("team-b", &hard("small"))
        },
    )
    .await;
    assert!(namespaces(&client)
        .get_opt("team-a")
        .await
        .unwrap()
        .is_some());
    // A tier of its own again: the children come back.
    label(&client, "team-a", Some("large")).await;
    converges(&client, &host, "team-a", "large").await;
    assert_eq!(m.dropped(WriteVerb::Delete), 0, "{}", write_report(&host));
    stop_without_errors(host).await;
}

#[tokio::test]
async fn a_label_removed_while_no_host_runs_has_its_children_deleted_by_the_next_host() {
    let (_server, client, host) = provisioned_world(&["team-a", "team-b"], &[]).await;
    stop_without_errors(host).await;
    label(&client, "team-a", None).await;
    // The next host never saw team-a labelled: its children's owner
    // references lead it to the key, and the server's copy of the
    // Namespace (unselected) relates them.
    let host = start_provisioner(&client, Duration::from_secs(600)).await;
    eventually("team-a's children are gone", || async {
        children(&client, "team-a").await.none()
    })
    .await;
    let m = provisioner(&host).metrics().clone();
    assert_eq!(m.written(WriteVerb::Delete), 3, "{}", write_report(&host));
    assert!(children(&client, "team-b")
        .await
        .converged("team-b", &hard("small")));
    stop_without_errors(host).await;
}

#[tokio::test]
async fn a_deleted_namespace_takes_its_children_and_the_host_writes_nothing_for_it() {
    let (_server, client, host) = provisioned_world(&["team-a"], &[]).await;
    eventually("the provisioner is idle", || async { host.idle() }).await;
    let m = provisioner(&host).metrics().clone();
    let (writes, reconciles) = (m.writes(), m.reconciles());
    namespaces(&client)
        .delete("team-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the namespace is gone", || async {
        namespaces(&client)
            .get_opt("team-a")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    eventually("its key was reconciled and the host is idle", || async {
        m.reconciles() > reconciles && host.idle()
    })
    .await;
    assert_eq!(m.writes(), writes, "{}", write_report(&host));
    stop_without_errors(host).await;
}

#[tokio::test]
async fn an_idle_host_and_a_restarted_one_write_nothing() {
    let (_server, client) = namespaces_server().await;
    let host = start_provisioner(&client, Duration::from_secs(2)).await;
    provisioned(&client, &host, "small", &["team-a", "team-b"]).await;
    provisioned(&client, &host, "large", &["team-c"]).await;
    set_overrides(&client, &[("small", "pods=20")]).await;
    for name in ["team-a", "team-b"] {
        converges_to(
            &client,
            &host,
            name,
            &overridden("small", &[("pods", "20")]),
        )
        .await;
    }
    eventually("the provisioner is idle", || async { host.idle() }).await;
    let m = provisioner(&host).metrics().clone();
    let (writes, skipped, resyncs) = (m.writes(), m.skipped(), m.resyncs());
    let before = write_report(&host);
    stays_for(Duration::from_secs(10), "no write while idle", || async {
        m.writes() == writes
    })
    .await;
    let resynced = m.resyncs() - resyncs;
    assert!(resynced >= 3, "{resynced} resyncs in 10 s at 2 s");
    // Each resync reconciles the three namespaces: three applies each,
    // all already true.
    let skips = m.skipped() - skipped;
    assert!(
        skips >= 9 * resynced,
        "{skips} applies skipped over {resynced} resyncs; before: {before}; now: {}",
        write_report(&host)
    );
    stop_without_errors(host).await;

    // A new host: it reconciles every namespace once, and finds each child
    // as it would write it.
    let host = start_provisioner(&client, Duration::from_secs(600)).await;
    let m = provisioner(&host).metrics().clone();
    eventually("the new host reconciled every namespace", || async {
        m.reconciles() >= 3 && host.idle()
    })
    .await;
    assert_eq!(m.writes(), 0, "{}", write_report(&host));
    assert_eq!(m.skipped(), 9, "{}", write_report(&host));
    stop_without_errors(host).await;
}

#[tokio::test]
async fn ten_label_flips_a_second_apart_end_with_no_write_war_and_all_three_children() {
    let (_server, client, host) = provisioned_world(&["team-a"], &[]).await;
    for flip in 1..=FLIPS {
        label(&client, "team-a", None).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        label(&client, "team-a", Some("small")).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        eprintln!("flip {flip}: {:?}", children(&client, "team-a").await);
    }
    converges(&client, &host, "team-a", "small").await;
    eventually("the provisioner is idle", || async { host.idle() }).await;
    eprintln!("10 flips: {}", write_report(&host));
    assert_no_write_war(&client, &host, GUEST).await;
    // At most one create of each child per labelled phase and one delete
    // per unlabelled one: no second apply after a create, no second
    // delete.
    let m = provisioner(&host).metrics().clone();
    assert!(
        m.applies() <= 3 + 3 * FLIPS && m.written(WriteVerb::Delete) <= 3 * FLIPS,
        "{}",
        write_report(&host)
    );
    stop_without_errors(host).await;
}

#[tokio::test]
async fn an_overrides_change_reaches_every_namespace_of_its_tier_and_no_other() {
    let small = ["team-a", "team-b", "team-c"];
    let (_server, client, host) = provisioned_world(&small, &["team-d"]).await;
    for pods in ["20", "30"] {
        set_overrides(&client, &[("small", &format!("pods={pods}, cpu=3"))]).await;
        let want = overridden("small", &[("pods", pods), ("requests.cpu", "3")]);
        for name in small {
            converges_to(&client, &host, name, &want).await;
        }
        assert!(
            children(&client, "team-d")
                .await
                .converged("team-d", &hard("large")),
            "the large tier keeps its defaults"
        );
    }
    set_overrides(&client, &[("large", "pods=200")]).await;
    let large = overridden("large", &[("pods", "200")]);
    converges_to(&client, &host, "team-d", &large).await;
    // The small entry is gone from the ConfigMap: its defaults again.
    for name in small {
        converges(&client, &host, name, "small").await;
    }
    // The ConfigMap gone: every tier back to its defaults.
    Api::<ConfigMap>::namespaced(client.clone(), PLATFORM)
        .delete(OVERRIDES, &DeleteParams::default())
        .await
        .unwrap();
    for name in small {
        converges(&client, &host, name, "small").await;
    }
    converges(&client, &host, "team-d", "large").await;
    stop_without_errors(host).await;
}
