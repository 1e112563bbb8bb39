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
    configmap_doc, guest, Behaviour, WatEvent, WatKeys, WatManifest, WatRef, WatWatch, WatWrite,
};
use crate::support::*;

/// The hostile guest's name as the attacks are written; [`run`] renames it
/// per attack (log lines of every test in the binary land in one place).
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

/// One attack: the hostile guest (built from a manifest and a behaviour,
/// or given as bytes), and what the host must show.
struct Attack {
    manifest: WatManifest,
    behaviour: Behaviour,
    /// The component to load instead of `manifest` + `behaviour`.
    bytes: Option<Vec<u8>>,
    /// The sandbox's deadline (default: the host's 5 s).
    deadline: Option<Duration>,
    expect: Expect,
}

impl Attack {
    fn new(manifest: WatManifest, behaviour: Behaviour, expect: Expect) -> Self {
        Attack {
            manifest,
            behaviour,
            bytes: None,
            deadline: None,
            expect,
        }
    }
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

/// Runs `attack`, its guest named `name` (unique per attack), beside the
/// GPU summary, then checks everything the suite promises.
async fn run(name: &str, mut attack: Attack) {
    logs::capture();
    attack.manifest.name = name.to_string();
    let ours = format!("guest=\"{HOSTILE}\"");
    for label in &mut attack.expect.metric.1 {
        if *label == ours {
            *label = format!("guest=\"{name}\"");
        }
    }
    let (_server, admin) = server().await;
    pod("a").on("n1").requesting("1").create(&admin).await;
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join(format!("{name}.wasm"));
    let bytes = match attack.bytes {
        Some(b) => b,
        None => guest(&attack.manifest, attack.behaviour),
    };
    std::fs::write(&path, bytes).unwrap();
    let (client, requests) = recording(&admin);
    let mut config = SupervisorConfig {
        guests: vec![guest_path(), path],
        ..host_config(ControllerConfig::default())
    };
    if let Some(d) = attack.deadline {
        config.runtime = config.runtime.deadline(d);
    }
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
            "a WARN/ERROR line naming {name} and {:?}",
            attack.expect.log
        ),
        || async { !logs::containing(&[name, attack.expect.log]).is_empty() },
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
    let hostile_manager = format!("fieldManager=wasmctrl%2F{name}");
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
    run(
        "h-names-that-leave-their-path-segment",
        Attack {
            bytes: None,
            deadline: None,
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
        },
    )
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
    run(
        "h-events-about-objects-outside-the-grant",
        Attack {
            bytes: None,
            deadline: None,
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
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_outside_the_write_rules() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "stolen", "namespace": HOST_NS}, "stringData": {"k": "v"}});
    run(
        "h-writes-outside-the-write-rules",
        Attack {
            bytes: None,
            deadline: None,
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
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_traps_on_every_call() {
    run(
        "h-a-guest-that-traps-on-every-call",
        Attack {
            bytes: None,
            deadline: None,
            manifest: hostile(),
            behaviour: Behaviour::Trap,
            expect: Expect {
                metric: failures("trap"),
                log: "trap",
                never_sent: Vec::new(),
            },
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_loops_until_its_deadline() {
    run(
        "h-a-guest-that-loops-until-its-deadline",
        Attack {
            bytes: None,
            deadline: None,
            manifest: hostile(),
            behaviour: Behaviour::Spin,
            expect: Expect {
                metric: failures("deadline"),
                log: "deadline",
                never_sent: Vec::new(),
            },
        },
    )
    .await;
}

fn refused(reason: &str) -> (&'static str, Vec<String>) {
    (
        "wasmctrl_guests_refused_total",
        vec![
            format!("guest=\"{HOSTILE}\""),
            format!("reason=\"{reason}\""),
        ],
    )
}

/// A watch of `kind` in `group`/`version`, declared with `plural`.
fn watch_of(group: &str, version: &str, kind: &str, plural: &str) -> WatWatch {
    WatWatch {
        name: "loot".into(),
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: Some(plural.into()),
        namespace: None,
        fields: vec!["data".into()],
        indexes: Vec::new(),
        keys: WatKeys::Aggregate("all".into()),
        finalizer: None,
        label_selector: None,
    }
}

/// The hostile guest with one more watch, copying what it sees into its
/// ConfigMap.
fn watching(w: WatWatch) -> (WatManifest, Behaviour) {
    let mut m = hostile();
    m.watches.push(w);
    let copy = Behaviour::Apply(vec![configmap_doc(HOST_NS, HOSTILE, &[("copied", "x")])]);
    (m, copy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_lies_about_its_plural() {
    let (m, b) = watching(watch_of("", "v1", "ConfigMap", "secrets"));
    run(
        "h-a-watch-that-lies-about-its-plural",
        Attack::new(
            m,
            b,
            Expect {
                metric: refused("manifest"),
                log: "declares plural \"secrets\"",
                never_sent: vec!["/configmaps/hostile".into()],
            },
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_of_secrets_without_a_grant() {
    let (m, b) = watching(watch_of("", "v1", "Secret", "secrets"));
    run(
        "h-a-watch-of-secrets-without-a-grant",
        Attack::new(
            m,
            b,
            Expect {
                metric: refused("policy"),
                log: "refused by the operator policy",
                never_sent: vec!["/configmaps/hostile".into()],
            },
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_of_every_kind() {
    let (m, b) = watching(watch_of("", "v1", "*", "*"));
    run(
        "h-a-watch-of-every-kind",
        Attack::new(
            m,
            b,
            Expect {
                metric: refused("manifest"),
                log: "\"*\"",
                never_sent: vec!["/configmaps/hostile".into()],
            },
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_that_lie_about_group_or_version_wait_for_a_kind_never_served() {
    // ConfigMap in `apps`, and a v2 ConfigMap: no such kind is served, so
    // the guest waits (as for a CRD not yet installed) and nothing of it
    // is listed or written.
    for (group, version, plural) in [("apps", "v1", "configmaps"), ("", "v2", "configmaps")] {
        let (m, b) = watching(watch_of(group, version, "ConfigMap", plural));
        run(
            &format!(
                "h-lies-{}-{version}",
                if group.is_empty() { "core" } else { group }
            ),
            Attack::new(
                m,
                b,
                Expect {
                    metric: (
                        "wasmctrl_guest_waiting",
                        vec![format!("guest=\"{HOSTILE}\"")],
                    ),
                    log: "guest waits: the API server does not serve",
                    never_sent: vec![
                        "/configmaps/hostile".into(),
                        "/apis/apps/v1/configmaps".into(),
                        "/api/v2/".into(),
                    ],
                },
            ),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_watches() {
    let mut m = hostile();
    for i in 0..40 {
        let mut w = WatWatch::pods(&format!("pods{i}"), WatKeys::Aggregate("all".into()));
        w.namespace = Some(format!("ns{i}"));
        m.watches.push(w);
    }
    run(
        "h-too-many-watches",
        Attack::new(
            m,
            Behaviour::Apply(Vec::new()),
            Expect {
                metric: refused("policy"),
                log: "(maxWatches)",
                never_sent: vec!["/namespaces/ns1/pods".into()],
            },
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_describe_that_traps() {
    run(
        "h-a-describe-that-traps",
        Attack {
            bytes: Some(crate::support::wat::trapping_in_describe()),
            ..Attack::new(
                hostile(),
                Behaviour::Trap,
                Expect {
                    metric: refused("trap"),
                    log: "guest refused",
                    never_sent: vec!["/configmaps/hostile".into()],
                },
            )
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_rules_naming_the_neighbours_output() {
    let mut m = hostile();
    m.writes[0].names = vec!["gpu-summary".into()];
    run(
        "h-write-rules-naming-the-neighbours-output",
        Attack::new(
            m,
            Behaviour::Apply(vec![configmap_doc(
                HOST_NS,
                "gpu-summary",
                &[("n1", "999")],
            )]),
            Expect {
                metric: refused("write_overlap"),
                log: "can name the same object",
                never_sent: Vec::new(),
            },
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_rule_for_any_name_used_on_the_neighbours_output() {
    let mut m = hostile();
    m.writes[0].names.clear();
    run(
        "h-a-write-rule-for-any-name-used-on-the-ne",
        Attack::new(
            m,
            Behaviour::Plan {
                writes: vec![
                    WatWrite::Apply(configmap_doc(HOST_NS, "gpu-summary", &[("n1", "999")])),
                    WatWrite::Delete(configmap_ref(HOST_NS, "gpu-summary")),
                ],
                events: Vec::new(),
            },
            Expect {
                metric: (
                    "wasmctrl_writes_refused_total",
                    vec![
                        format!("guest=\"{HOSTILE}\""),
                        "owner=\"gpu-summary\"".into(),
                    ],
                ),
                log: "plan refused",
                never_sent: Vec::new(),
            },
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_stamped_with_the_clock_on_every_echo() {
    // Watches the ConfigMap it writes and stamps the time into it: each
    // write's echo wakes the next write.
    let mut m = hostile();
    let mut w = watch_of("", "v1", "ConfigMap", "configmaps");
    w.namespace = Some(HOST_NS.into());
    m.watches = vec![w];
    let doc = configmap_doc(
        HOST_NS,
        HOSTILE,
        &[("lastSync", crate::support::wat::STAMP)],
    );
    run(
        "h-a-status-stamped-with-the-clock-on-every",
        Attack::new(
            m,
            Behaviour::Stamped(vec![WatWrite::Apply(doc)]),
            Expect {
                metric: (
                    "wasmctrl_guest_hot_loops_total",
                    vec![format!("guest=\"{HOSTILE}\"")],
                ),
                log: "hot loop",
                never_sent: Vec::new(),
            },
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_loops_on_every_call_is_quarantined() {
    run(
        "h-a-guest-that-loops-on-every-call-is-quar",
        Attack {
            deadline: Some(Duration::from_millis(300)),
            ..Attack::new(
                hostile(),
                Behaviour::Spin,
                Expect {
                    metric: (
                        "wasmctrl_guest_quarantines_total",
                        vec![format!("guest=\"{HOSTILE}\"")],
                    ),
                    log: "quarantined",
                    never_sent: Vec::new(),
                },
            )
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_secret_is_refused_or_never_served() {
    // The declared kind `Secret` is refused by the policy whatever its
    // plural; a spelling of the kind discovery does not resolve (kinds are
    // case-sensitive) waits for a kind no server serves; and what does
    // resolve is admitted by the resource discovery names (`secrets`), not
    // by the spelling. Either way nothing is listed.
    for (i, (kind, plural, outcome)) in [
        ("secret", "secrets", "waits"),
        ("SECRET", "secrets", "waits"),
        ("Secrets", "secrets", "waits"),
        ("Secret", "Secrets", "policy"),
        ("Secret", "secret", "policy"),
    ]
    .into_iter()
    .enumerate()
    {
        let (m, b) = watching(watch_of("", "v1", kind, plural));
        let (metric, log) = match outcome {
            "waits" => (
                (
                    "wasmctrl_guest_waiting",
                    vec![format!("guest=\"{HOSTILE}\"")],
                ),
                "guest waits: the API server does not serve",
            ),
            reason => (refused(reason), "guest refused"),
        };
        run(
            &format!("h-secret-spelling-{i}"),
            Attack::new(
                m,
                b,
                Expect {
                    metric,
                    log,
                    never_sent: vec!["/configmaps/hostile".into()],
                },
            ),
        )
        .await;
    }
}
