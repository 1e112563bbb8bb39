//! Self-triggered write loops and delete wars: a guest whose every
//! reconcile is woken by the echo of its own previous write and writes
//! again (a `lastSyncTime = now()` status) must be held back with a backoff
//! and reported, never run at the client's whole budget; a guest that
//! converges, or reacts to someone else's change, must never be flagged;
//! and a guest deleting what another writer keeps re-creating is a write
//! war like any apply war.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wasmctrl::controller::{ControllerConfig, GuestController};
use wasmctrl::guard::HotLoopConfig;
use wasmctrl::supervisor::SupervisorConfig;

use crate::support::wat::{
    configmap_doc, guest, Behaviour, WatKeys, WatManifest, WatRef, WatRule, WatWatch, WatWrite,
    STAMP,
};
use crate::support::*;

/// Guest `name`: one key per ConfigMap of `namespace` (projecting `data`),
/// allowed to write the ConfigMap `name` there. It watches what it writes,
/// so the echo of its own write wakes it, as controller-runtime's `For`
/// does.
fn watching_its_own_configmap(name: &str, namespace: &str) -> WatManifest {
    WatManifest {
        name: name.into(),
        watches: vec![WatWatch {
            name: "maps".into(),
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: None,
            namespace: Some(namespace.into()),
            fields: vec!["data".into()],
            indexes: Vec::new(),
            keys: WatKeys::PerObject,
            finalizer: None,
            label_selector: None,
        }],
        writes: vec![WatRule {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(namespace.into()),
            names: vec![name.into()],
            status: false,
        }],
    }
}

async fn start(
    client: &Client,
    dir: &std::path::Path,
    guests: Vec<(WatManifest, Behaviour)>,
    controller: ControllerConfig,
) -> RunningHost {
    let mut paths = Vec::new();
    for (manifest, behaviour) in guests {
        let path = dir.join(format!("{}.wasm", manifest.name));
        std::fs::write(&path, guest(&manifest, behaviour)).unwrap();
        paths.push(path);
    }
    let config = SupervisorConfig {
        guests: paths,
        ..host_config(controller)
    };
    run_host(client, config, None).await
}

fn by_name(host: &RunningHost, name: &str) -> std::sync::Arc<GuestController> {
    host.host.controller(name).expect("the guest runs")
}

async fn create_configmap(client: &Client, namespace: &str, name: &str, data: serde_json::Value) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap(),
    )
    .await
    .unwrap();
}

const LOOPER: &str = "looper";

/// The `lastSyncTime = now()` guest: stamps its own ConfigMap (alone in
/// its namespace: its only key) with the call's clock, so every write
/// differs from the last and its echo wakes it again.
fn looper() -> (WatManifest, Behaviour) {
    let doc = configmap_doc(PODS_NS, LOOPER, &[("lastSync", STAMP)]);
    (
        watching_its_own_configmap(LOOPER, PODS_NS),
        Behaviour::Stamped(vec![WatWrite::Apply(doc)]),
    )
}

#[tokio::test]
async fn a_guest_rewriting_its_object_on_every_echo_of_its_own_write_is_held_back_and_reported() {
    let (_server, client) = server().await;
    create_configmap(&client, PODS_NS, LOOPER, json!({"lastSync": "0"})).await;
    let dir = tempfile::tempdir().unwrap();
    // A second guest in the same host, converging on its own ConfigMap.
    let steady = WatManifest::writing_its_own_configmap("steady", HOST_NS);
    let steady_doc = configmap_doc(HOST_NS, "steady", &[("v", "1")]);
    let host = start(
        &client,
        dir.path(),
        vec![looper(), (steady, Behaviour::Apply(vec![steady_doc]))],
        ControllerConfig::default(),
    )
    .await;
    let looping = by_name(&host, LOOPER).metrics().clone();
    eventually("the hot loop is declared", || async {
        looping.hot_loops() == 1
    })
    .await;
    let config = HotLoopConfig::default();
    let applies = looping.applies();
    // Declared after `writes` echo-woken writes (and the few writes other
    // keys' reconciles made), not at 20 writes/s for as long as it runs.
    assert!(
        applies <= u64::from(config.writes) + 5,
        "{applies} applies before the hot loop was declared"
    );
    // Held back for 30 s: the echo of its last write wakes it, and nothing
    // is written.
    stays_for(
        Duration::from_secs(5),
        "no write while the key is held back",
        || async { looping.applies() == applies },
    )
    .await;
    assert_eq!(looping.hot_loops(), 1);

    let events = events_with_reason(&client, Some(PODS_NS), "HotLoop").await;
    assert_eq!(events.len(), 1, "one HotLoop event: {events:?}");
    let e = &events[0];
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(
        e.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some(LOOPER)
    );
    let note = e.note.clone().unwrap_or_default();
    assert!(
        note.contains("looper") && note.contains(&format!("{PODS_NS}/{LOOPER}")),
        "the event names the guest and the key: {note}"
    );
    let scraped = host.metrics.as_ref().unwrap().encode();
    assert_eq!(
        prom::metric(
            &scraped,
            "wasmctrl_guest_hot_loops_total",
            &["guest=\"looper\""]
        ),
        1.0,
        "{scraped}"
    );

    // The other guest is not held back: it restores its deleted ConfigMap.
    let steady = by_name(&host, "steady").metrics().clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    eventually("the steady guest wrote its ConfigMap", || async {
        cms.get_opt("steady").await.unwrap().is_some()
    })
    .await;
    cms.delete("steady", &Default::default()).await.unwrap();
    eventually("the steady guest restores its ConfigMap", || async {
        cms.get_opt("steady").await.unwrap().is_some()
    })
    .await;
    assert_eq!(steady.hot_loops(), 0);
}

#[tokio::test]
async fn a_hot_loop_resumed_after_its_hold_back_is_declared_again_at_once_and_stays_bounded() {
    let (_server, client) = server().await;
    create_configmap(&client, PODS_NS, LOOPER, json!({"lastSync": "0"})).await;
    let dir = tempfile::tempdir().unwrap();
    let loops = HotLoopConfig {
        backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(4),
        ..HotLoopConfig::default()
    };
    let host = start(
        &client,
        dir.path(),
        vec![looper()],
        ControllerConfig::default().hot_loops(loops),
    )
    .await;
    let looping = host.controller().metrics().clone();
    eventually("the hot loop is declared", || async {
        looping.hot_loops() == 1
    })
    .await;
    let applies = looping.applies();
    // Hold-backs of 1, 2, 4, 4 s: each ends with one write (the timer's
    // reconcile) and the echo-woken one that declares the next at once.
    eventually("the loop is declared three more times", || async {
        looping.hot_loops() >= 4
    })
    .await;
    let more = looping.applies() - applies;
    assert!(
        more <= 3 * 2 + 1,
        "{more} applies over three resumed hold-backs"
    );
}

#[tokio::test]
async fn a_converging_guest_woken_by_its_own_echoes_resyncs_and_hand_edits_is_never_a_hot_loop() {
    let (_server, client) = server().await;
    create_configmap(&client, HOST_NS, "calm", json!({"v": "hand"})).await;
    let dir = tempfile::tempdir().unwrap();
    // A hair trigger: two echo-woken writes in a row would be a hot loop.
    let loops = HotLoopConfig {
        writes: 2,
        ..HotLoopConfig::default()
    };
    let doc = configmap_doc(HOST_NS, "calm", &[("v", "guest")]);
    let host = start(
        &client,
        dir.path(),
        vec![(
            watching_its_own_configmap("calm", HOST_NS),
            Behaviour::Apply(vec![doc]),
        )],
        ControllerConfig::default()
            .resync(Duration::from_millis(300))
            .hot_loops(loops),
    )
    .await;
    let metrics = host.controller().metrics().clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    let value = || async {
        cms.get_opt("calm")
            .await
            .unwrap()
            .and_then(|cm| cm.data)
            .and_then(|d| d.get("v").cloned())
    };
    eventually("the guest's value is written", || async {
        value().await.as_deref() == Some("guest")
    })
    .await;
    // A person edits the guest's field now and then: each edit wakes the
    // guest, which writes (reacting, not looping), and the echo of that
    // write wakes it again to find nothing to do.
    for i in 0..4 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        cms.patch(
            "calm",
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"data": {"v": format!("hand-{i}")}})),
        )
        .await
        .unwrap();
        eventually("the hand edit is repaired", || async {
            value().await.as_deref() == Some("guest")
        })
        .await;
    }
    eventually("many resyncs and echo-woken reconciles", || async {
        metrics.resyncs() >= 10 && metrics.reconciles() >= 15
    })
    .await;
    assert_eq!(metrics.hot_loops(), 0);
    assert_eq!(metrics.held_back_writes(), 0);
    assert!(events_with_reason(&client, Some(HOST_NS), "HotLoop")
        .await
        .is_empty());
}

const DOOMED: &str = "doomed";
const RECREATOR: &str = "recreator";

#[tokio::test]
async fn a_guest_deleting_what_another_writer_recreates_is_a_write_war_and_bounded() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let delete = WatWrite::Delete(WatRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some(HOST_NS.into()),
        name: DOOMED.into(),
    });
    // Reconciles on any pod change; may write (delete) only `doomed`.
    let mut reaper = WatManifest::writing_its_own_configmap("reaper", HOST_NS);
    reaper.writes[0].names = vec![DOOMED.into()];
    let host = start(
        &client,
        dir.path(),
        vec![(
            reaper,
            Behaviour::Plan {
                writes: vec![delete],
                events: Vec::new(),
            },
        )],
        ControllerConfig::default(),
    )
    .await;
    let metrics = host.controller().metrics().clone();
    // Another writer re-creates the ConfigMap whenever it is gone.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    let rival = {
        let cms = cms.clone();
        tokio::spawn(async move {
            let cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": DOOMED}, "data": {"k": "v"}}))
                    .unwrap();
            let params = PostParams {
                field_manager: Some(RECREATOR.into()),
                ..PostParams::default()
            };
            loop {
                if matches!(cms.get_opt(DOOMED).await, Ok(None)) {
                    let _ = cms.create(&params, &cm).await;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    eventually("a write war with the re-creator is declared", || async {
        metrics.write_wars(RECREATOR) == 1
    })
    .await;
    let deletes = metrics.deletes();
    assert!(
        deletes <= 5,
        "{deletes} deletes before the war was declared"
    );
    stays_for(
        Duration::from_secs(5),
        "no delete while held back",
        || async { metrics.deletes() == deletes },
    )
    .await;
    assert!(cms.get_opt(DOOMED).await.unwrap().is_some());
    let events = events_with_reason(&client, Some(HOST_NS), "WriteWar").await;
    assert_eq!(events.len(), 1, "one WriteWar event: {events:?}");
    let note = events[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("\"recreator\"") && note.contains("wasmctrl/reaper"),
        "the event names both managers: {note}"
    );
    let scraped = host.metrics.as_ref().unwrap().encode();
    assert_eq!(
        prom::metric(
            &scraped,
            "wasmctrl_write_wars_total",
            &["guest=\"reaper\"", "manager=\"recreator\""]
        ),
        1.0,
        "{scraped}"
    );
    rival.abort();
}
