//! Write wars: another field manager force-applying the field a guest
//! writes. The host must notice, report it (a Warning event and a metric
//! naming the other manager), stop fighting for a hold-back, and take the
//! object back once the other writer has gone — never loop forever.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::wat::{configmap_doc, guest, Behaviour, WatManifest};
use crate::support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::guard::ContestConfig;
use wasmctrl::supervisor::SupervisorConfig;

const NAME: &str = "contested";
const RIVAL: &str = "rival";

/// A guest that keeps `data.owner = guest` in its ConfigMap.
async fn start_guest(
    client: &Client,
    dir: &std::path::Path,
    contests: ContestConfig,
) -> RunningHost {
    let path = dir.join("contested.wasm");
    let wasm = guest(
        &WatManifest::writing_its_own_configmap(NAME, HOST_NS),
        Behaviour::Apply(vec![configmap_doc(HOST_NS, NAME, &[("owner", "guest")])]),
    );
    std::fs::write(&path, wasm).unwrap();
    let config = SupervisorConfig {
        guests: vec![path],
        controller: ControllerConfig::default().contests(contests),
        ..host_config(ControllerConfig::default())
    };
    run_host(client, config, None).await
}

async fn owner(client: &Client) -> Option<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    cms.get_opt(NAME)
        .await
        .unwrap()
        .and_then(|cm| cm.data)
        .and_then(|d| d.get("owner").cloned())
}

/// Another writer force-applying `owner = rival` every 100 ms, as a script
/// running `kubectl apply --server-side --force-conflicts` in a loop would.
fn rival(client: &Client) -> tokio::task::JoinHandle<()> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    tokio::spawn(async move {
        let doc = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": HOST_NS}, "data": {"owner": RIVAL}});
        loop {
            let _ = cms
                .patch(
                    NAME,
                    &PatchParams::apply(RIVAL).force(),
                    &Patch::Apply(&doc),
                )
                .await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

async fn war_events(client: &Client) -> Vec<Event> {
    events_with_reason(client, Some(HOST_NS), "WriteWar").await
}

#[tokio::test]
async fn a_rival_force_applier_is_reported_and_no_longer_fought() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let host = start_guest(&client, dir.path(), ContestConfig::default()).await;
    eventually("the guest's value is written", || async {
        owner(&client).await.as_deref() == Some("guest")
    })
    .await;
    let controller = host.controller();
    let metrics = controller.metrics().clone();

    let rival = rival(&client);
    eventually("a write war with the rival is declared", || async {
        metrics.write_wars(RIVAL) == 1
    })
    .await;
    // Declared after three take-backs: the guest wrote at most a handful of
    // times, not ~10/s as the rival does.
    let applies = metrics.applies();
    assert!(
        applies <= 5,
        "{applies} applies before the war was declared"
    );

    // While held back (30 s by default) the host neither writes nor
    // reconciles on the rival's changes.
    let reconciles = metrics.reconciles();
    stays_for(
        Duration::from_secs(5),
        "no write and no reconcile while held back",
        || async { metrics.applies() == applies && metrics.reconciles() == reconciles },
    )
    .await;
    assert_eq!(owner(&client).await.as_deref(), Some(RIVAL));

    let events = war_events(&client).await;
    assert_eq!(events.len(), 1, "one WriteWar event: {events:?}");
    let e = &events[0];
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(
        e.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some(NAME)
    );
    let note = e.note.clone().unwrap_or_default();
    assert!(
        note.contains("\"rival\"") && note.contains("wasmctrl/contested"),
        "the event names both managers: {note}"
    );
    let scraped = host.metrics.as_ref().unwrap().encode();
    assert_eq!(
        prom::metric(
            &scraped,
            "wasmctrl_write_wars_total",
            &["guest=\"contested\"", "manager=\"rival\""]
        ),
        1.0,
        "{scraped}"
    );
    rival.abort();
}

#[tokio::test]
async fn after_the_hold_back_the_host_takes_the_object_back_and_a_resumed_war_backs_off_longer() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let contests = ContestConfig {
        flips: 3,
        window: Duration::from_secs(60),
        backoff: Duration::from_secs(2),
        max_backoff: Duration::from_secs(8),
        ..ContestConfig::default()
    };
    let host = start_guest(&client, dir.path(), contests).await;
    eventually("the guest's value is written", || async {
        owner(&client).await.as_deref() == Some("guest")
    })
    .await;
    let metrics = host.controller().metrics().clone();

    // The war goes on across hold-backs: each one ends with a single forced
    // write, taken back at once, which declares the next war.
    let fight = rival(&client);
    eventually(
        "a second war is declared after the first hold-back",
        || async { metrics.write_wars(RIVAL) >= 2 },
    )
    .await;
    let wars = metrics.write_wars(RIVAL);
    let applies = metrics.applies();
    // The second hold-back is 4 s: within 3 s, at most the one write that
    // ended a hold-back.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        metrics.applies() <= applies + 1 && metrics.write_wars(RIVAL) <= wars + 1,
        "{} applies and {} wars after {applies} and {wars}",
        metrics.applies(),
        metrics.write_wars(RIVAL)
    );

    // The rival goes away: the host takes the object back once the
    // hold-back ends, without any change to wake it.
    fight.abort();
    eventually("the guest's value is back", || async {
        owner(&client).await.as_deref() == Some("guest")
    })
    .await;
}

#[tokio::test]
async fn a_person_editing_our_fields_now_and_then_is_repaired_every_time_and_no_war() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let host = start_guest(&client, dir.path(), ContestConfig::default()).await;
    eventually("the guest's value is written", || async {
        owner(&client).await.as_deref() == Some("guest")
    })
    .await;
    let metrics = host.controller().metrics().clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    // Four hand edits of the field the guest sets, at a person's pace
    // (well past ContestConfig::react after each repair).
    for i in 0..4 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        cms.patch(
            NAME,
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"data": {"owner": format!("hand-{i}")}})),
        )
        .await
        .unwrap();
        eventually("the hand edit is repaired", || async {
            owner(&client).await.as_deref() == Some("guest")
        })
        .await;
    }
    assert_eq!(metrics.write_wars("kubectl-edit"), 0);
    assert_eq!(metrics.held_back_writes(), 0);
    assert!(war_events(&client).await.is_empty());
}

/// What wars were declared against, by manager label.
fn war_managers(host: &RunningHost) -> Vec<String> {
    let scraped = host.metrics.as_ref().unwrap().encode();
    prom::samples(&scraped)
        .into_iter()
        .filter(|(series, v)| series.starts_with("wasmctrl_write_wars_total{") && *v > 0.0)
        .map(|(series, _)| series)
        .collect()
}

/// A rival that JSON-patches our field every 100 ms, as `kubectl patch
/// --type json` in a loop (recorded as manager `kubectl-patch`, operation
/// Update, by the real API server).
#[tokio::test]
async fn a_rival_json_patching_our_field_is_named_in_the_war() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let host = start_guest(&client, dir.path(), ContestConfig::default()).await;
    eventually("the guest's value is written", || async {
        owner(&client).await.as_deref() == Some("guest")
    })
    .await;
    let metrics = host.controller().metrics().clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    let fight = tokio::spawn(async move {
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/data/owner", "value": "patched"}
        ]))
        .unwrap();
        loop {
            let _ = cms
                .patch(
                    NAME,
                    &PatchParams {
                        field_manager: Some("kubectl-patch".into()),
                        ..PatchParams::default()
                    },
                    &Patch::<()>::Json(patch.clone()),
                )
                .await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    eventually("a write war is declared", || async {
        !war_managers(&host).is_empty()
    })
    .await;
    fight.abort();
    assert_eq!(
        metrics.write_wars("kubectl-patch"),
        1,
        "the war names the JSON patch's manager: {:?}",
        war_managers(&host)
    );
    let note = war_events(&client).await[0]
        .note
        .clone()
        .unwrap_or_default();
    assert!(note.contains("\"kubectl-patch\""), "{note}");
}

/// How the host names a writer that deletes our output: a deletion leaves
/// no managedFields entry.
const DELETER: &str = "unknown (deleted)";

/// A cleanup script deleting the guest's ConfigMap as soon as it appears
/// (polling every 20 ms, well within `ContestConfig::react` of each create).
fn deleter(client: &Client) -> tokio::task::JoinHandle<()> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    tokio::spawn(async move {
        loop {
            if let Ok(Some(_)) = cms.get_opt(NAME).await {
                let _ = cms.delete(NAME, &Default::default()).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

#[tokio::test]
async fn a_writer_deleting_our_output_as_soon_as_it_appears_is_a_write_war_and_bounded() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let host = start_guest(&client, dir.path(), ContestConfig::default()).await;
    eventually("the guest's value is written", || async {
        owner(&client).await.as_deref() == Some("guest")
    })
    .await;
    let metrics = host.controller().metrics().clone();
    let before = metrics.applies();
    let started = std::time::Instant::now();
    let fight = deleter(&client);
    eventually("a write war with the deleter is declared", || async {
        metrics.write_wars(DELETER) == 1
    })
    .await;
    let creates = metrics.applies() - before;
    let elapsed = started.elapsed();
    eprintln!(
        "deleter: {creates} creates in {elapsed:?} ({:.1}/s) before the war",
        creates as f64 / elapsed.as_secs_f64()
    );
    assert!(
        creates <= 5,
        "{creates} creates before the war was declared"
    );
    let at_war = metrics.applies();
    stays_for(
        Duration::from_secs(5),
        "no create while held back",
        || async { metrics.applies() == at_war },
    )
    .await;
    eprintln!("deleter: 0 creates in 5 s after the war");
    let events = war_events(&client).await;
    assert_eq!(events.len(), 1, "one WriteWar event: {events:?}");
    let note = events[0].note.clone().unwrap_or_default();
    assert!(
        note.contains(DELETER) && note.contains("wasmctrl/contested") && note.contains("deleted"),
        "the event names the deletion and our manager: {note}"
    );
    let scraped = host.metrics.as_ref().unwrap().encode();
    assert_eq!(
        prom::metric(
            &scraped,
            "wasmctrl_write_wars_total",
            &["guest=\"contested\"", &format!("manager=\"{DELETER}\"")]
        ),
        1.0,
        "{scraped}"
    );
    fight.abort();
}

#[tokio::test]
async fn a_person_deleting_our_output_now_and_then_is_repaired_every_time_and_no_war() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let host = start_guest(&client, dir.path(), ContestConfig::default()).await;
    eventually("the guest's value is written", || async {
        owner(&client).await.as_deref() == Some("guest")
    })
    .await;
    let metrics = host.controller().metrics().clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    // Four deletes at a person's pace (well past ContestConfig::react
    // after each re-creation).
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        cms.delete(NAME, &Default::default()).await.unwrap();
        eventually("the deleted output is re-created", || async {
            owner(&client).await.as_deref() == Some("guest")
        })
        .await;
    }
    assert_eq!(metrics.write_wars(DELETER), 0);
    assert_eq!(metrics.held_back_writes(), 0);
    assert!(war_events(&client).await.is_empty());
}
