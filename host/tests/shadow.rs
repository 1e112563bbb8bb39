//! Shadow guests against the embedded API server: a new version run beside
//! the active guest on the same snapshots is compared key by key and never
//! acts — no write, event or finalizer of its own — and a shadow that
//! traps never delays or breaks the active guest. Recorded cases replayed
//! through `wasmctrl replay`: the same guest agrees, another one is named
//! key by key.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use crate::support::wat::{guest, Behaviour, WatKeys, WatManifest, WatRule, WatWatch, WatWrite};
use crate::support::*;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::recording::{case_files, RecordConfig};
use wasmctrl::supervisor::guest_dir::write_like_kubelet;
use wasmctrl::supervisor::SupervisorConfig;
use wasmctrl_test_support::http::http_get;
use wasmctrl_test_support::wait::{eventually, stays_for};

const PODS: [&str; 4] = ["s0", "s1", "s2", "s3"];
/// The host's own Pod, which the shadow's Event regards.
const POD: &str = "wasmctrl-0";

/// Guest `mirror`: for each pod, a ConfigMap `NAME-out` in the pod's
/// namespace whose `v` is `value`.
fn mirror(behaviour: impl FnOnce(Vec<WatWrite>) -> Behaviour, value: &str) -> Vec<u8> {
    mirror_into(behaviour, value, "{namespace}")
}

/// [`mirror`] writing into `namespace` (the pod's: `{namespace}`), with a
/// write rule for any namespace when it is another.
fn mirror_into(
    behaviour: impl FnOnce(Vec<WatWrite>) -> Behaviour,
    value: &str,
    namespace: &str,
) -> Vec<u8> {
    let m = WatManifest {
        name: "mirror".into(),
        watches: vec![WatWatch::pods("pods", WatKeys::PerObject)],
        writes: vec![WatRule {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: (namespace == "{namespace}").then(|| PODS_NS.into()),
            names: Vec::new(),
            status: false,
        }],
    };
    let doc = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{{name}}-out","namespace":"{namespace}"}},"data":{{"v":"{value}"}}}}"#
    );
    guest(&m, behaviour(vec![WatWrite::Apply(doc)]))
}

fn by_lifecycle(live: Vec<WatWrite>) -> Behaviour {
    Behaviour::ByLifecycle {
        live,
        deleting: Vec::new(),
    }
}

fn config(dir: &Path, active: &[u8], shadow: &[u8]) -> SupervisorConfig {
    let (a, s) = (dir.join("mirror.wasm"), dir.join("mirror-next.wasm"));
    std::fs::write(&a, active).unwrap();
    std::fs::write(&s, shadow).unwrap();
    SupervisorConfig {
        guests: vec![a],
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        shadows: vec![("mirror".into(), s)],
        pod: Some((HOST_NS.into(), POD.into())),
        ..SupervisorConfig::default()
    }
}

/// Every pod's output holds `v=1` (the active guest's), and nothing else
/// named like an output exists.
async fn outputs_are_the_active_guests(client: &Client) -> bool {
    outputs_hold(client, "1").await
}

/// A host running `mirror` writing `v=1` with `shadow` beside it, its
/// configuration changed by `tweak` first, and the pods created.
async fn start(
    shadow: Vec<u8>,
    tweak: impl FnOnce(&mut SupervisorConfig),
) -> (RunningHost, Client, wasmctrl_apiserver::RunningApiServer) {
    let (server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), &mirror(by_lifecycle, "1"), &shadow);
    tweak(&mut config);
    let host = run_host(&client, config, None).await;
    for p in PODS {
        pod(p).create(&client).await;
    }
    (host, client, server)
}

/// `--shadow-dry-run`.
fn dry_runs(config: &mut SupervisorConfig) {
    config.shadow_dry_run = true;
}

fn counts(host: &RunningHost) -> (u64, u64, u64, u64) {
    host.controller().shadow().expect("a shadow runs").counts()
}

fn scraped(host: &RunningHost, outcome: &str) -> bool {
    let text = host.metrics.as_ref().unwrap().encode();
    text.lines().any(|l| {
        l.starts_with(&format!(
            "wasmctrl_shadow_reconciles_total{{guest=\"mirror\",outcome=\"{outcome}\"}} "
        )) && !l.ends_with(" 0")
    })
}

/// Serves the host's shadow reports on a health address, as `run` does.
async fn serve_reports(host: &RunningHost) -> wasmctrl::metrics::Endpoint {
    let (ready, reports) = (host.host.clone(), host.host.clone());
    wasmctrl::metrics::serve_health_with_reports(
        "127.0.0.1:0".parse().unwrap(),
        std::sync::Arc::new(move || ready.readiness()),
        std::sync::Arc::new(Vec::new),
        std::sync::Arc::new(move |guest: &str| reports.shadow_report(guest)),
    )
    .await
    .unwrap()
}

/// `wasmctrl shadow report GUEST --address ADDR`: its exit status and
/// what it printed (stdout, stderr).
async fn shadow_report(addr: std::net::SocketAddr, guest: &str) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(["shadow", "report", guest, "--address", &addr.to_string()])
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[tokio::test]
async fn a_shadow_identical_to_the_active_guest_reports_no_difference() {
    let (host, client, _server) = start(mirror(by_lifecycle, "1"), |_| {}).await;
    eventually("every output written", || {
        outputs_are_the_active_guests(&client)
    })
    .await;
    eventually("every key compared", || async {
        counts(&host).0 >= PODS.len() as u64
    })
    .await;
    let (_, differs, errors, _) = counts(&host);
    assert_eq!((differs, errors), (0, 0));
    assert!(scraped(&host, "same"), "counted in the metric");
    assert!(events_with_reason(&client, None, "ShadowDiffers")
        .await
        .is_empty());
    // The promotion gate passes.
    let endpoint = serve_reports(&host).await;
    let (code, text) = shadow_report(endpoint.addr, "mirror").await;
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("0 differ") && text.contains("agreed on every key compared"),
        "{text}"
    );
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_changed_shadow_reports_every_key_it_would_write_differently_and_writes_nothing() {
    let (host, client, _server) = start(mirror(by_lifecycle, "2"), |_| {}).await;
    eventually("every output written", || {
        outputs_are_the_active_guests(&client)
    })
    .await;
    eventually("every key seen differing", || async {
        let report = host.controller().shadow().unwrap().report();
        report["differing_keys"].as_u64() == Some(PODS.len() as u64)
    })
    .await;
    let report = host.controller().shadow().unwrap().report();
    let mut keys: Vec<String> = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["key"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    let want: Vec<String> = PODS.iter().map(|p| format!("{PODS_NS}/{p}")).collect();
    assert_eq!(keys, want, "{report:#}");
    let first = &report["differences"][0];
    assert!(
        first["active_only"][0]
            .as_str()
            .unwrap()
            .contains(r#""v":"1""#)
            && first["shadow_only"][0]
                .as_str()
                .unwrap()
                .contains(r#""v":"2""#),
        "{report:#}"
    );
    assert!(scraped(&host, "differs"), "counted in the metric");
    eventually("one ShadowDiffers Event on the host's Pod", || async {
        let events = events_with_reason(&client, Some(HOST_NS), "ShadowDiffers").await;
        events.len() == 1
            && events[0].regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(POD)
    })
    .await;
    // No Event about a watched object, from either version.
    assert!(events_with_reason(&client, Some(PODS_NS), "ShadowDiffers")
        .await
        .is_empty());
    // The report as an operator reads it, on the health address.
    let endpoint = serve_reports(&host).await;
    let (code, body) = http_get(endpoint.addr, "/shadow/mirror").await.unwrap();
    assert_eq!(code, 200, "{body}");
    let served: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(served["differing_keys"], PODS.len(), "{body}");
    let (code, _) = http_get(endpoint.addr, "/shadow/nobody").await.unwrap();
    assert_eq!(code, 404);
    // The promotion gate fails, naming the differing keys; and says so
    // for a guest without a shadow.
    let (code, text) = shadow_report(endpoint.addr, "mirror").await;
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("not agreed") && text.contains(&format!("{PODS_NS}/s0")),
        "{text}"
    );
    let (code, text) = shadow_report(endpoint.addr, "nobody").await;
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("no shadow runs beside a guest named \"nobody\""),
        "{text}"
    );
    // The shadow never acts: the outputs stay the active guest's.
    stays_for(
        Duration::from_secs(1),
        "outputs stay the active guest's",
        || outputs_are_the_active_guests(&client),
    )
    .await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_trapping_shadow_is_counted_and_the_active_guest_is_unaffected() {
    let (host, client, _server) = start(mirror(|_| Behaviour::Trap, "1"), |_| {}).await;
    eventually("every output written", || {
        outputs_are_the_active_guests(&client)
    })
    .await;
    eventually("the shadow's traps counted", || async {
        counts(&host).2 >= PODS.len() as u64
    })
    .await;
    let m = host.controller().metrics().clone();
    assert_eq!(m.errors(), 0, "the active guest never failed");
    let report = host.controller().shadow().unwrap().report();
    assert!(
        report["recent_errors"][0]["error"]
            .as_str()
            .unwrap()
            .contains("trap"),
        "{report:#}"
    );
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_shadow_running_out_of_time_never_delays_the_active_guest() {
    // Each shadow call takes its whole deadline: 4 keys keep it busy 8 s.
    let (host, client, server) = start(mirror(|_| Behaviour::Spin, "1"), |config| {
        config.runtime.deadline = Duration::from_secs(2);
    })
    .await;
    eventually("every output written", || {
        outputs_are_the_active_guests(&client)
    })
    .await;
    let (_, _, errors, _) = counts(&host);
    assert!(
        errors < PODS.len() as u64,
        "the active guest waited for the shadow: {errors} shadow calls had already timed out"
    );
    eventually("every shadow call timed out and was counted", || async {
        counts(&host).2 >= PODS.len() as u64
    })
    .await;
    let report = host.controller().shadow().unwrap().report();
    assert!(
        report["recent_errors"][0]["error"]
            .as_str()
            .unwrap()
            .contains("deadline"),
        "{report:#}"
    );
    assert_eq!(
        host.controller().metrics().errors(),
        0,
        "the active guest never failed"
    );
    host.stop().await.unwrap();
    drop(server);
}

#[tokio::test]
async fn a_shadow_watching_other_objects_is_refused_and_the_guest_runs() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let mut other = WatManifest::writing_its_own_configmap("mirror", HOST_NS);
    other.watches[0].fields = vec!["spec.nodeName".into()];
    let shadow = guest(&other, Behaviour::Apply(Vec::new()));
    let host = run_host(
        &client,
        config(dir.path(), &mirror(by_lifecycle, "1"), &shadow),
        None,
    )
    .await;
    assert!(host.controller().shadow().is_none());
    let refused = host.host.refused().join("\n");
    assert!(
        refused.contains("watches differ from its target's"),
        "{refused}"
    );
    for p in PODS {
        pod(p).create(&client).await;
    }
    eventually("every output written", || {
        outputs_are_the_active_guests(&client)
    })
    .await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn the_gpu_summary_as_its_own_shadow_agrees_on_its_aggregate_key() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let gpu = std::fs::read(guest_path()).unwrap();
    let (a, s) = (
        dir.path().join("gpu.wasm"),
        dir.path().join("gpu-next.wasm"),
    );
    std::fs::write(&a, &gpu).unwrap();
    std::fs::write(&s, &gpu).unwrap();
    let config = SupervisorConfig {
        guests: vec![a],
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        shadows: vec![("gpu-summary".into(), s)],
        ..SupervisorConfig::default()
    };
    let host = run_host(&client, config, None).await;
    for (i, name) in ["g0", "g1", "g2"].iter().enumerate() {
        pod(name)
            .on(if i % 2 == 0 { "n1" } else { "n2" })
            .requesting("1")
            .create(&client)
            .await;
    }
    summary_becomes(&client, &[("n1", "2"), ("n2", "1")]).await;
    eventually("the aggregate key compared", || async {
        counts(&host).0 >= 1
    })
    .await;
    let (_, differs, errors, _) = counts(&host);
    assert_eq!((differs, errors), (0, 0));
    host.stop().await.unwrap();
}

/// Issue 46: the GPU summary alone keeps identities in its pod cache; a
/// shadow attached at run time gets the fields back (the cache relists)
/// and agrees with it on the aggregate key, and the summary follows
/// changes as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_attached_to_an_aggregate_keeping_identities_gets_every_field_back() {
    let (_server, client) = server().await;
    for (i, name) in ["g0", "g1", "g2"].iter().enumerate() {
        pod(name)
            .on(if i % 2 == 0 { "n1" } else { "n2" })
            .requesting("1")
            .create(&client)
            .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let gpu = std::fs::read(guest_path()).unwrap();
    write_like_kubelet(dir.path(), 1, &[("gpu.wasm", &gpu)]).unwrap();
    let config = SupervisorConfig {
        guest_dir: Some(dir.path().to_path_buf()),
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        rescan: Some(Duration::from_secs(3600)),
        ..SupervisorConfig::default()
    };
    let host = run_host(&client, config, None).await;
    summary_becomes(&client, &[("n1", "2"), ("n2", "1")]).await;
    assert!(
        !host.controller().caches_hold_projections(),
        "the aggregate is the pod cache's one reader"
    );
    write_like_kubelet(
        dir.path(),
        2,
        &[("gpu.wasm", &gpu), ("gpu.shadow.wasm", &gpu)],
    )
    .unwrap();
    host.host.sync_dir().await.unwrap();
    assert!(host.controller().shadow().is_some(), "attached");
    eventually("the fields back", || async {
        host.controller().caches_hold_projections()
    })
    .await;
    host.controller().enqueue_all();
    eventually("the aggregate key compared", || async {
        counts(&host).0 >= 1
    })
    .await;
    let (_, differs, errors, _) = counts(&host);
    assert_eq!((differs, errors), (0, 0));
    pod("g3").on("n2").requesting("2").create(&client).await;
    summary_becomes(&client, &[("n1", "2"), ("n2", "3")]).await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_shadow_file_in_the_guest_directory_is_attached_swapped_and_removed_at_run_time() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let active = mirror(by_lifecycle, "1");
    write_like_kubelet(dir.path(), 1, &[("mirror.wasm", &active)]).unwrap();
    let host = run_from_dir(&client, dir.path()).await;
    eventually("every output written", || {
        outputs_are_the_active_guests(&client)
    })
    .await;
    assert!(host.controller().shadow().is_none());
    // An operator adds the new version as a shadow: the running host
    // attaches it at its next look at the directory.
    let changed = mirror(by_lifecycle, "2");
    write_like_kubelet(
        dir.path(),
        2,
        &[("mirror.wasm", &active), ("mirror.shadow.wasm", &changed)],
    )
    .unwrap();
    host.host.sync_dir().await.unwrap();
    assert!(host.controller().shadow().is_some(), "attached");
    // Keys reconciled from now on are compared (a resync brings them all).
    host.controller().enqueue_all();
    eventually("every key seen differing", || async {
        let report = host.controller().shadow().unwrap().report();
        report["differing_keys"].as_u64() == Some(PODS.len() as u64)
    })
    .await;
    // Swapped for a version that agrees with the guest: its report starts
    // afresh and shows no difference.
    let same = mirror(by_lifecycle, "1");
    write_like_kubelet(
        dir.path(),
        3,
        &[("mirror.wasm", &active), ("mirror.shadow.wasm", &same)],
    )
    .unwrap();
    host.host.sync_dir().await.unwrap();
    let before = counts(&host);
    host.controller().enqueue_all();
    eventually("every key compared again, the same", || async {
        counts(&host).0 >= before.0 + PODS.len() as u64
    })
    .await;
    assert_eq!((before.1, counts(&host).1), (0, 0), "no difference");
    // Removed: the guest runs on without a shadow.
    write_like_kubelet(dir.path(), 4, &[("mirror.wasm", &active)]).unwrap();
    host.host.sync_dir().await.unwrap();
    assert!(host.controller().shadow().is_none(), "detached");
    assert!(outputs_are_the_active_guests(&client).await);
    host.stop().await.unwrap();
}

/// A host running the guests of `dir` (looked at again only when a test
/// says so), and the pods created.
async fn run_from_dir(client: &Client, dir: &Path) -> RunningHost {
    let config = SupervisorConfig {
        guest_dir: Some(dir.to_path_buf()),
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        rescan: Some(Duration::from_secs(3600)),
        ..SupervisorConfig::default()
    };
    let host = run_host(client, config, None).await;
    for p in PODS {
        pod(p).create(client).await;
    }
    host
}

/// Every pod's output holds `v=value`.
async fn outputs_hold(client: &Client, value: &str) -> bool {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), PODS_NS);
    for p in PODS {
        let cm = cms.get_opt(&format!("{p}-out")).await.unwrap();
        if cm
            .and_then(|c| c.data)
            .and_then(|d| d.get("v").cloned())
            .as_deref()
            != Some(value)
        {
            return false;
        }
    }
    true
}

#[tokio::test]
async fn promoting_a_shadow_in_one_configmap_update_makes_it_the_guest() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let (active, next) = (mirror(by_lifecycle, "1"), mirror(by_lifecycle, "2"));
    write_like_kubelet(
        dir.path(),
        1,
        &[("mirror.wasm", &active), ("mirror.shadow.wasm", &next)],
    )
    .unwrap();
    let host = run_from_dir(&client, dir.path()).await;
    eventually("every key seen differing", || async {
        host.controller()
            .shadow()
            .is_some_and(|s| s.report()["differing_keys"].as_u64() == Some(PODS.len() as u64))
    })
    .await;
    // The shadow compares a key's plan before the active guest's write of
    // it is sent (`offer_shadow` comes before the actuator): every key
    // seen differing does not mean every output written yet.
    eventually("every output the active guest's, none the shadow's", || {
        outputs_hold(&client, "1")
    })
    .await;
    // The operator's promotion: the ConfigMap's key `mirror.shadow.wasm`
    // moved onto `mirror.wasm` (one JSON patch `move`, one kubelet update).
    write_like_kubelet(dir.path(), 2, &[("mirror.wasm", &next)]).unwrap();
    host.host.sync_dir().await.unwrap();
    assert!(
        host.controller().shadow().is_none(),
        "no shadow after promotion"
    );
    eventually("every output is the promoted version's", || {
        outputs_hold(&client, "2")
    })
    .await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn with_dry_runs_the_api_servers_refusal_of_a_shadows_write_is_reported() {
    // The new version writes into a namespace that does not exist: a real
    // apply would be refused (404).
    let (host, client, _server) = start(mirror_into(by_lifecycle, "1", "missing"), dry_runs).await;
    eventually("every output written", || {
        outputs_are_the_active_guests(&client)
    })
    .await;
    eventually("every differing write dry-run and refused", || async {
        let report = host.controller().shadow().unwrap().report();
        report["dry_run_refusals"].as_u64() >= Some(PODS.len() as u64)
    })
    .await;
    let report = host.controller().shadow().unwrap().report();
    let refusal = report["recent_dry_run_refusals"][0]["error"]
        .as_str()
        .unwrap();
    assert!(
        refusal.contains("apply") && refusal.contains("missing"),
        "{report:#}"
    );
    assert!(scraped(&host, "dry_run_refused"), "counted in the metric");
    assert_eq!(
        host.controller().metrics().errors(),
        0,
        "the guest never failed"
    );
    stays_for(
        Duration::from_secs(1),
        "outputs stay the active guest's",
        || outputs_are_the_active_guests(&client),
    )
    .await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn with_dry_runs_a_shadows_acceptable_write_is_sent_and_stores_nothing() {
    let (host, client, _server) = start(mirror(by_lifecycle, "2"), dry_runs).await;
    eventually("every output written", || {
        outputs_are_the_active_guests(&client)
    })
    .await;
    eventually("every differing write dry-run", || async {
        let report = host.controller().shadow().unwrap().report();
        report["dry_runs"].as_u64() >= Some(PODS.len() as u64)
    })
    .await;
    let report = host.controller().shadow().unwrap().report();
    assert_eq!(report["dry_run_refusals"], 0, "{report:#}");
    // Accepted, yet nothing stored: the outputs keep the guest's value.
    stays_for(
        Duration::from_secs(1),
        "outputs stay the active guest's",
        || outputs_are_the_active_guests(&client),
    )
    .await;
    host.stop().await.unwrap();
}

fn record_into(config: &mut SupervisorConfig, dir: &Path) {
    config.record = Some(RecordConfig {
        dir: dir.to_path_buf(),
        max_cases: 100,
        max_bytes: 1 << 20,
        secrets: false,
    });
}

fn replay(guest: &Path, cases: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .arg("replay")
        .arg("--guest")
        .arg(guest)
        .arg(cases)
        .arg("--no-guest-cache")
        .output()
        .unwrap()
}

#[tokio::test]
async fn recorded_cases_replay_the_same_through_the_same_guest_and_every_difference_through_another(
) {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases");
    // The active guest alone, recording.
    let (host, client, _server) = start(Vec::new(), |config| {
        config.shadows.clear();
        record_into(config, &cases);
    })
    .await;
    let guest_file = dir.path().join("mirror.wasm");
    std::fs::write(&guest_file, mirror(by_lifecycle, "1")).unwrap();
    eventually("every output written", || {
        outputs_are_the_active_guests(&client)
    })
    .await;
    let mirror_cases = cases.join("mirror");
    eventually("a case recorded per pod", || async {
        case_files(&mirror_cases).map_or(0, |f| f.len()) >= PODS.len()
    })
    .await;
    host.stop().await.unwrap();
    // A case is readable: its key, its objects' projected fields, its plan.
    let first = &case_files(&mirror_cases).unwrap()[0];
    let case: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(first).unwrap()).unwrap();
    assert!(
        case["request"]["key"].as_str().unwrap().starts_with("ml/s"),
        "{case:#}"
    );
    let fields = &case["snapshot"]["objects"][0]["fields"];
    assert!(fields.get("spec.nodeName").is_some(), "{case:#}");
    let written = &case["plan"]["writes"][0]["apply"];
    assert!(
        written["metadata"]["name"]
            .as_str()
            .unwrap()
            .ends_with("-out"),
        "{case:#}"
    );
    // The same guest: every case the same.
    let out = replay(&guest_file, &cases);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n = case_files(&mirror_cases).unwrap().len();
    assert!(
        stdout.contains(&format!("{n} cases: {n} same, 0 differ, 0 not replayed")),
        "{stdout}"
    );
    // Another version: exit 1, each pod's key named with both sides.
    let changed = dir.path().join("mirror-next.wasm");
    std::fs::write(&changed, mirror(by_lifecycle, "2")).unwrap();
    let out = replay(&changed, &cases);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    for p in PODS {
        assert!(
            stdout.contains(&format!("key {PODS_NS}/{p}: the plan differs")),
            "{stdout}"
        );
    }
    assert!(
        stdout.contains(r#"+ replayed: writes: {"apply":"#) && stdout.contains(r#""v":"2""#),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{n} cases: 0 same, {n} differ")),
        "{stdout}"
    );
}

#[tokio::test]
async fn an_aggregate_guests_recorded_cases_replay_the_same() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases");
    let mut config = host_config(wasmctrl::controller::ControllerConfig::default());
    record_into(&mut config, &cases);
    let host = run_host(&client, config, None).await;
    for (i, name) in ["r0", "r1", "r2"].iter().enumerate() {
        pod(name)
            .on(if i % 2 == 0 { "n1" } else { "n2" })
            .requesting("1")
            .create(&client)
            .await;
    }
    summary_becomes(&client, &[("n1", "2"), ("n2", "1")]).await;
    eventually("an aggregate case recorded", || async {
        case_files(&cases).is_ok_and(|f| !f.is_empty())
    })
    .await;
    host.stop().await.unwrap();
    let out = replay(&guest_path(), &cases);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("0 differ, 0 not replayed"), "{stdout}");
}
