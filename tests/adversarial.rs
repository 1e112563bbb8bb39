//! The adversarial suite (issue 22): one hostile guest, a mode per attack,
//! run in one host beside the GPU summary against the embedded server.
//! Every attack must be refused or bounded, named in a log line and a
//! metric; no request may reach anything outside the hostile guest's grant
//! (so no data outside it can reach the guest: the host never fetched it);
//! and the GPU summary stays correct and on time throughout.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::supervisor::SupervisorConfig;

use crate::support::wat::{
    configmap_doc, guest, Behaviour, WatEvent, WatManifest, WatRef, WatWrite,
};
use crate::support::*;

/// The hostile guest's name in every mode (its log lines and metrics carry it).
const HOSTILE: &str = "hostile";

/// How long the GPU summary may take to follow a pod change while an
/// attack runs: generous for a loaded CI machine, far under any attack's
/// own bound (a 5 s deadline, 30 s hold-backs, doubling back-offs).
const ON_TIME: Duration = Duration::from_secs(15);

/// What the host must show for an attack.
struct Expect {
    /// A metric family and labels whose value must reach at least 1.
    metric: (&'static str, Vec<String>),
    /// Text a WARN or ERROR line must hold, besides the guest's name.
    log: &'static str,
    /// Substrings no request path the host sends may contain.
    never_sent: Vec<String>,
}

/// Where the hostile guest's writes may go (its grant): every request
/// carrying its field manager, and every DELETE (the GPU summary deletes
/// nothing), must be under it.
const GRANT: &str = "/api/v1/namespaces/ops/configmaps/";

/// One attack: the hostile guest's manifest and behaviour, and what the
/// host must show.
struct Attack {
    manifest: WatManifest,
    behaviour: Behaviour,
    expect: Expect,
}

/// The hostile guest's usual manifest: every pod under one key, allowed to
/// write only the ConfigMap `ops/hostile`.
fn hostile() -> WatManifest {
    WatManifest::writing_its_own_configmap(HOSTILE, HOST_NS)
}

fn failures(reason: &str) -> (&'static str, Vec<String>) {
    (
        "wasmctrl_guest_failures_total",
        vec![
            format!("guest=\"{HOSTILE}\""),
            format!("reason=\"{reason}\""),
        ],
    )
}

fn configmap_ref(namespace: &str, name: &str) -> WatRef {
    WatRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    }
}

/// Runs `attack` beside the GPU summary, then checks everything the suite
/// promises.
async fn run(attack: Attack) {
    logs::capture();
    let (_server, admin) = server().await;
    pod("a").on("n1").requesting("1").create(&admin).await;
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("hostile.wasm");
    std::fs::write(&path, guest(&attack.manifest, attack.behaviour)).unwrap();
    let (client, requests) = recording(&admin);
    let config = SupervisorConfig {
        guests: vec![guest_path(), path],
        ..host_config(ControllerConfig::default())
    };
    let host = run_host(&client, config, None).await;
    let metrics = host.metrics.clone().unwrap();
    summary_becomes(&admin, &[("n1", "1")]).await;

    // The attack is named in a metric and a log line.
    let (family, labels) = &attack.expect.metric;
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    eventually(&format!("{family}{labels:?} counts the attack"), || async {
        prom::metric(&metrics.encode(), family, &labels) >= 1.0
    })
    .await;
    eventually(
        &format!(
            "a WARN/ERROR line naming {HOSTILE} and {:?}",
            attack.expect.log
        ),
        || async { !logs::containing(&[HOSTILE, attack.expect.log]).is_empty() },
    )
    .await;

    // The neighbour stays correct and on time while the attack goes on.
    pod("b").on("n2").requesting("2").create(&admin).await;
    bounded("the GPU summary follows a new pod", ON_TIME, async {
        summary_becomes(&admin, &[("n1", "1"), ("n2", "2")]).await
    })
    .await;
    delete_now(&admin, "a").await;
    bounded("the GPU summary follows a deleted pod", ON_TIME, async {
        summary_becomes(&admin, &[("n2", "2")]).await
    })
    .await;

    // Nothing outside the grant was ever asked for.
    let sent = requests.lock().unwrap().clone();
    let path = |r: &str| r.split('?').next().unwrap_or_default().to_string();
    for bad in &attack.expect.never_sent {
        let hits: Vec<&String> = sent
            .iter()
            .filter(|r| path(r).contains(bad.as_str()))
            .collect();
        assert!(hits.is_empty(), "{bad:?} was sent: {hits:?}");
    }
    let hostile_manager = format!("fieldManager=wasmctrl%2F{HOSTILE}");
    let outside: Vec<&String> = sent
        .iter()
        .filter(|r| r.contains(&hostile_manager) || r.starts_with("DELETE "))
        .filter(|r| {
            let p = path(r);
            let p = p.split_once(' ').map_or("", |(_, p)| p);
            !p.starts_with(GRANT) || p.contains("gpu-summary")
        })
        .collect();
    assert!(
        outside.is_empty(),
        "writes outside the grant were sent: {outside:?}"
    );
    let secrets: Vec<&String> = sent
        .iter()
        .filter(|r| path(r).contains("/secrets"))
        .collect();
    assert!(
        secrets.is_empty(),
        "the host asked for Secrets: {secrets:?}"
    );
    host.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_leave_their_path_segment() {
    let long = "a".repeat(254);
    let names = [
        "../x",
        "a/status",
        "%2F",
        "Upper",
        long.as_str(),
        "x%2Fstatus",
    ];
    let mut writes: Vec<WatWrite> = names
        .iter()
        .map(|n| WatWrite::Apply(configmap_doc(HOST_NS, n, &[("k", "v")])))
        .collect();
    writes.push(WatWrite::Delete(configmap_ref(
        HOST_NS,
        "../secrets/db-password",
    )));
    let mut manifest = hostile();
    // Any name in ops: only the name rules stand in the way.
    manifest.writes[0].names.clear();
    run(Attack {
        manifest,
        behaviour: Behaviour::Plan {
            writes,
            events: Vec::new(),
        },
        expect: Expect {
            metric: failures("malformed_plan"),
            log: "is not a valid",
            never_sent: vec!["..".into(), "%2F".into(), "Upper".into(), long.clone()],
        },
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_about_objects_outside_the_grant() {
    let spoof = |regarding: WatRef| WatEvent {
        regarding,
        related: None,
        warning: true,
        reason: "Spoofed".into(),
        message: "nothing happened".into(),
    };
    run(Attack {
        manifest: hostile(),
        behaviour: Behaviour::Plan {
            writes: Vec::new(),
            events: vec![
                spoof(configmap_ref("kube-system", "coredns")),
                spoof(configmap_ref(HOST_NS, "gpu-summary")),
            ],
        },
        expect: Expect {
            metric: (
                "wasmctrl_guest_events_refused_total",
                vec![format!("guest=\"{HOSTILE}\"")],
            ),
            log: "Spoofed",
            never_sent: vec!["/namespaces/kube-system/events".into()],
        },
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_outside_the_write_rules() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "stolen", "namespace": HOST_NS}, "stringData": {"k": "v"}});
    run(Attack {
        manifest: hostile(),
        behaviour: Behaviour::Plan {
            writes: vec![
                // The neighbour's output, another namespace, another kind.
                WatWrite::Apply(configmap_doc(HOST_NS, "gpu-summary", &[("n1", "999")])),
                WatWrite::Apply(configmap_doc("kube-system", "hostile", &[("k", "v")])),
                WatWrite::Apply(secret.to_string()),
                WatWrite::Delete(configmap_ref(HOST_NS, "gpu-summary")),
            ],
            events: Vec::new(),
        },
        expect: Expect {
            metric: failures("forbidden_write"),
            log: "gpu-summary",
            never_sent: vec!["/namespaces/kube-system/".into()],
        },
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_traps_on_every_call() {
    run(Attack {
        manifest: hostile(),
        behaviour: Behaviour::Trap,
        expect: Expect {
            metric: failures("trap"),
            log: "trap",
            never_sent: Vec::new(),
        },
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_loops_until_its_deadline() {
    run(Attack {
        manifest: hostile(),
        behaviour: Behaviour::Spin,
        expect: Expect {
            metric: failures("deadline"),
            log: "deadline",
            never_sent: Vec::new(),
        },
    })
    .await;
}
