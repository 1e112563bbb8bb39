//! Guest governance end to end: the operator's policy refuses a guest that
//! asks for too much (at start and on hot swap), a watch that lies about
//! its plural is refused before anything is listed, names that could leave
//! their URL path segment are refused before any request, Events about
//! objects a guest neither watches nor writes are refused and counted, a
//! zero requeue delay is clamped in a running host, and the binary refuses
//! bad flags and bad offline input with clear errors instead of panicking.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::wat::{
    configmap_doc, guest, Behaviour, WatEvent, WatKeys, WatManifest, WatRef, WatRule, WatWatch,
    WatWrite,
};
use crate::support::*;
use wasmctrl::guest::policy::Policy;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::Metrics;
use wasmctrl::supervisor::guest_dir::write_like_kubelet;
use wasmctrl::supervisor::{Supervisor, SupervisorConfig};

/// A guest that watches every Secret and writes the ConfigMap `ops/leak`:
/// the exfiltration the policy exists to stop.
fn leaky_manifest() -> WatManifest {
    let mut m = WatManifest::writing_its_own_configmap("leaky", HOST_NS);
    m.writes[0].names = vec!["leak".into()];
    m.watches.push(WatWatch {
        name: "secrets".into(),
        kind: "Secret".into(),
        plural: Some("secrets".into()),
        fields: vec!["data".into()],
        keys: WatKeys::Aggregate("all".into()),
        ..WatWatch::pods("secrets", WatKeys::Aggregate("all".into()))
    });
    m
}

fn leaky() -> Vec<u8> {
    guest(
        &leaky_manifest(),
        Behaviour::Apply(vec![configmap_doc(HOST_NS, "leak", &[("password", "x")])]),
    )
}

fn config_for(path: &Path, runtime: RuntimeConfig) -> SupervisorConfig {
    SupervisorConfig {
        guests: vec![path.to_path_buf()],
        namespace: HOST_NS.into(),
        runtime: runtime.cache_dir(None),
        ..SupervisorConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_watches_secrets_is_refused_at_start_without_a_grant() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leaky.wasm");
    std::fs::write(&path, leaky()).unwrap();

    // No policy file: Secrets need an explicit grant.
    let e = Supervisor::start(
        client.clone(),
        config_for(&path, RuntimeConfig::default()),
        None,
    )
    .await
    .err()
    .expect("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("guest leaky: refused by the operator policy"),
        "{msg}"
    );
    assert!(
        msg.contains(r#"watch "secrets" of v1/Secret in all namespaces"#),
        "{msg}"
    );

    // A policy that grants pods and the summary only: both the Secret
    // watch and the write to ops/leak are named.
    let policy = Policy::parse(
        "default:\n  watch: [{group: \"\", kinds: [Pod]}]\n  write: [{group: \"\", kinds: [ConfigMap], namespaces: [ops], names: [gpu-summary]}]\n",
    )
    .unwrap();
    let e = Supervisor::start(
        client.clone(),
        config_for(&path, RuntimeConfig::default().policy(policy)),
        None,
    )
    .await
    .err()
    .expect("refused");
    let msg = e.to_string();
    assert!(msg.contains("2 denied"), "{msg}");
    assert!(
        msg.contains("write v1/ConfigMap in namespace ops, names leak"),
        "{msg}"
    );

    // Nothing was written.
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), HOST_NS);
    assert!(cms.get_opt("leak").await.unwrap().is_none());

    // Granted explicitly, it runs.
    let policy = Policy::parse(
        "guests:\n  leaky:\n    watch: [{group: \"\", kinds: [Pod, Secret]}]\n    write: [{group: \"\", kinds: [ConfigMap], namespaces: [ops]}]\n",
    )
    .unwrap();
    let host = run_host(
        &client,
        config_for(&path, RuntimeConfig::default().policy(policy)),
        None,
    )
    .await;
    eventually("the granted guest writes", || async {
        cms.get_opt("leak").await.unwrap().is_some()
    })
    .await;
    host.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_swap_that_asks_for_more_than_the_policy_grants_is_rejected() {
    let (_server, client) = server().await;
    let v1 = guest(
        &WatManifest::writing_its_own_configmap("leaky", HOST_NS),
        Behaviour::Apply(vec![configmap_doc(HOST_NS, "leaky", &[("version", "v1")])]),
    );
    let dir = tempfile::tempdir().unwrap();
    write_like_kubelet(dir.path(), 1, &[("leaky.wasm", &v1)]).unwrap();
    let metrics = Arc::new(Metrics::new());
    let config = SupervisorConfig {
        guest_dir: Some(dir.path().to_path_buf()),
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        rescan: Some(Duration::from_secs(60)),
        ..SupervisorConfig::default()
    };
    let h = run_host(&client, config, Some(metrics.clone())).await;
    let before = h.host.controller("leaky").unwrap();

    // The new version also watches every Secret.
    write_like_kubelet(dir.path(), 2, &[("leaky.wasm", &leaky())]).unwrap();
    eventually("the swap is rejected", || async {
        prom::metric(
            &metrics.encode(),
            "wasmctrl_guest_swaps_total",
            &["guest=\"leaky\"", "result=\"rejected\""],
        ) == 1.0
    })
    .await;
    assert!(Arc::ptr_eq(&before, &h.host.controller("leaky").unwrap()));
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_requeue_delay_is_clamped_and_counted_in_a_running_host() {
    let (_server, client) = server().await;
    let bytes = guest(
        &WatManifest::writing_its_own_configmap("eager", HOST_NS),
        Behaviour::RequeueNow(vec![configmap_doc(HOST_NS, "eager", &[("k", "v")])]),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eager.wasm");
    std::fs::write(&path, bytes).unwrap();
    let h = run_host(&client, config_for(&path, RuntimeConfig::default()), None).await;
    let metrics = h.metrics.clone().unwrap();
    let clamped = || {
        prom::metric(
            &metrics.encode(),
            "wasmctrl_guest_limited_total",
            &["guest=\"eager\"", "limit=\"min_requeue\""],
        )
    };
    eventually("a clamped requeue is counted", || async {
        clamped() >= 1.0
    })
    .await;
    // At most one reconcile a second now (today's code ran ~5,000 a second):
    // over half a second, no more than the one in flight and one more.
    let start = h.reconciles();
    stays_for(
        Duration::from_millis(500),
        "reconciles stay throttled",
        || async { h.reconciles() <= start + 2 },
    )
    .await;
    h.stop().await.unwrap();
}

/// A guest that declares a watch of ConfigMaps but names the plural
/// `secrets` (issue 22: the host listed `/api/v1/secrets` and the guest
/// copied their data into a ConfigMap).
fn plural_liar() -> Vec<u8> {
    let mut m = WatManifest::writing_its_own_configmap("liar", HOST_NS);
    m.watches.push(WatWatch {
        kind: "ConfigMap".into(),
        plural: Some("secrets".into()),
        fields: vec!["data".into()],
        ..WatWatch::pods("cms", WatKeys::Aggregate("all".into()))
    });
    guest(
        &m,
        Behaviour::Apply(vec![configmap_doc(HOST_NS, "liar", &[("copied", "x")])]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_lies_about_its_plural_is_refused_and_no_secret_is_ever_listed() {
    let (_server, admin) = server().await;
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(admin.clone(), PODS_NS);
    let secret = serde_json::from_value(json!({"metadata": {"name": "db"},
        "stringData": {"password": "hunter2-secret-value"}}))
    .unwrap();
    secrets.create(&Default::default(), &secret).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("liar.wasm");
    std::fs::write(&path, plural_liar()).unwrap();
    let (client, requests) = recording(&admin);

    // Without a policy file, and with one granting only Pods and ConfigMaps:
    // the declared kind passes the policy; the plural does not pass
    // discovery.
    let pods_and_configmaps = Policy::parse(
        "default:\n  watch: [{group: \"\", kinds: [Pod, ConfigMap]}]\n  write: [{group: \"\", kinds: [ConfigMap], namespaces: [ops]}]\n",
    )
    .unwrap();
    for policy in [Policy::default(), pods_and_configmaps] {
        let e = Supervisor::start(
            client.clone(),
            config_for(&path, RuntimeConfig::default().policy(policy)),
            None,
        )
        .await
        .err()
        .expect("refused");
        let msg = e.to_string();
        assert!(
            msg.contains(r#"guest liar: invalid manifest: watches[1] (cms).plural: watch "cms" declares plural "secrets" for v1/ConfigMap, but API discovery serves v1/ConfigMap as "configmaps""#),
            "{msg}"
        );
    }

    // Nothing listed or watched Secrets, nothing was written, and no
    // object anywhere holds the Secret's value.
    let sent = requests.lock().unwrap().clone();
    assert!(!sent.is_empty());
    assert!(sent.iter().all(|r| !r.contains("/secrets")), "{sent:#?}");
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::all(admin.clone());
    let all = cms.list(&Default::default()).await.unwrap();
    assert!(all
        .items
        .iter()
        .all(|cm| cm.metadata.name.as_deref() != Some("liar")));
    let dump = serde_json::to_string(&all).unwrap();
    assert!(
        !dump.contains("hunter2") && !dump.contains("aHVudGVyMi"),
        "{dump}"
    );
}

/// A guest named `name` whose every plan is `writes`, allowed to write any
/// ConfigMap in `ops` and any Pod in `ml` (not their status).
fn writing(name: &str, writes: Vec<WatWrite>) -> Vec<u8> {
    let mut m = WatManifest::writing_its_own_configmap(name, HOST_NS);
    m.writes[0].names.clear();
    m.writes.push(WatRule {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some(PODS_NS.into()),
        names: vec![],
        status: false,
    });
    guest(
        &m,
        Behaviour::Plan {
            writes,
            events: vec![],
        },
    )
}

fn apply(kind: &str, namespace: &str, name: &str) -> WatWrite {
    WatWrite::Apply(
        json!({"apiVersion": "v1", "kind": kind,
               "metadata": {"name": name, "namespace": namespace}, "data": {"k": "v"}})
        .to_string(),
    )
}

/// The names of issue 22's path-injection probes, each with the write
/// that carries it.
fn path_probes() -> Vec<(String, WatWrite)> {
    let long = "a".repeat(254);
    vec![
        ("../x".to_string(), apply("ConfigMap", HOST_NS, "../x")),
        (
            "a/status".to_string(),
            apply("ConfigMap", HOST_NS, "a/status"),
        ),
        ("%2F".to_string(), apply("ConfigMap", HOST_NS, "%2F")),
        ("Upper".to_string(), apply("ConfigMap", HOST_NS, "Upper")),
        (long.clone(), apply("ConfigMap", HOST_NS, &long)),
        (
            "p5/status".to_string(),
            WatWrite::Apply(
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "p5/status", "namespace": PODS_NS},
                       "status": {"phase": "Failed"}})
                .to_string(),
            ),
        ),
        (
            "../secrets/db-password".to_string(),
            WatWrite::Delete(WatRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some(HOST_NS.into()),
                name: "../secrets/db-password".into(),
            }),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_could_leave_their_path_segment_are_refused_and_never_sent() {
    let (_server, admin) = server().await;
    pod("p5").on("n1").create(&admin).await;
    let dir = tempfile::tempdir().unwrap();
    let probes = path_probes();
    let mut guests = Vec::new();
    for (i, (_, write)) in probes.iter().enumerate() {
        let path = dir.path().join(format!("probe{i}.wasm"));
        std::fs::write(&path, writing(&format!("probe{i}"), vec![write.clone()])).unwrap();
        guests.push(path);
    }
    let (client, requests) = recording(&admin);
    let config = SupervisorConfig {
        guests,
        ..config_for(Path::new("unused"), RuntimeConfig::default())
    };
    let h = run_host(&client, config, None).await;
    let metrics = h.metrics.clone().unwrap();
    for i in 0..probes.len() {
        eventually(&format!("probe{i}'s plan is refused"), || async {
            prom::metric(
                &metrics.encode(),
                "controller_runtime_reconcile_errors_total",
                &[
                    &format!("controller=\"probe{i}\""),
                    "reason=\"malformed_plan\"",
                ],
            ) >= 1.0
        })
        .await;
    }
    h.stop().await.unwrap();

    let sent = requests.lock().unwrap().clone();
    for (name, _) in &probes {
        let encoded = name.replace('%', "%25").replace('/', "%2F");
        assert!(
            sent.iter()
                .all(|r| !r.contains(name.as_str()) && !r.contains(&encoded)),
            "a request carried {name:?}: {sent:#?}"
        );
    }
    assert!(sent.iter().all(|r| !r.contains("/status")), "{sent:#?}");
    assert!(
        sent.iter()
            .all(|r| !r.starts_with("PATCH") && !r.starts_with("DELETE")),
        "{sent:#?}"
    );
    // The pod's status was never touched.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(admin.clone(), PODS_NS);
    let p5 = pods.get("p5").await.unwrap();
    assert_ne!(p5.status.and_then(|s| s.phase).as_deref(), Some("Failed"));
}

#[test]
fn a_refused_name_is_reported_naming_the_write_the_field_and_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects.json");
    std::fs::write(&objects, pod("p1").on("n1").json().to_string()).unwrap();
    for (i, (name, write)) in path_probes().into_iter().enumerate() {
        let path = dir.path().join(format!("probe{i}.wasm"));
        std::fs::write(&path, writing("probe", vec![write.clone()])).unwrap();
        let out = wasmctrl(&[
            "reconcile",
            "--no-guest-cache",
            "--guest",
            path.to_str().unwrap(),
            "--objects",
            objects.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name:?} accepted: {stderr}");
        let (verb, field) = match write {
            WatWrite::Delete(_) => ("delete", "name"),
            _ => ("apply", "metadata.name"),
        };
        let shown: String = name.chars().take(64).collect();
        let want = format!("writes[0] ({verb}): {field} {shown:?}");
        assert!(stderr.contains(&want), "{want:?} not in {stderr}");
        assert!(stderr.contains("is not a valid"), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_about_an_object_the_guest_neither_watches_nor_writes_is_refused_and_counted() {
    let (_server, admin) = server().await;
    // kube-system exists, as on a real cluster: a Spoofed Event there
    // would be stored if the host sent it.
    let cm = |namespace: &str, name: &str| WatRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    };
    let event = |regarding, reason: &str| WatEvent {
        regarding,
        related: None,
        warning: true,
        reason: reason.into(),
        message: format!("{reason} happened"),
    };
    let bytes = guest(
        &WatManifest::writing_its_own_configmap("reporter", HOST_NS),
        Behaviour::Plan {
            writes: vec![WatWrite::Apply(configmap_doc(
                HOST_NS,
                "reporter",
                &[("k", "v")],
            ))],
            events: vec![
                event(cm("kube-system", "coredns"), "Spoofed"),
                event(cm(HOST_NS, "reporter"), "Summarized"),
            ],
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reporter.wasm");
    std::fs::write(&path, bytes).unwrap();
    let h = run_host(&admin, config_for(&path, RuntimeConfig::default()), None).await;
    let metrics = h.metrics.clone().unwrap();
    let refused = || {
        prom::metric(
            &metrics.encode(),
            "wasmctrl_guest_events_refused_total",
            &["guest=\"reporter\"", "reason=\"not_watched_or_written\""],
        )
    };
    type Events = kube::Api<k8s_openapi::api::events::v1::Event>;
    let reasons = |namespace: &str| {
        let events: Events = kube::Api::namespaced(admin.clone(), namespace);
        async move {
            events
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|e| e.reason)
                .collect::<Vec<_>>()
        }
    };
    eventually("the legitimate event is recorded", || async {
        reasons(HOST_NS).await.contains(&"Summarized".to_string())
    })
    .await;
    assert_eq!(refused(), 1.0);
    assert_eq!(
        h.controller()
            .metrics()
            .refused_events("not_watched_or_written"),
        1
    );
    // Resyncs and later reconciles of the same plan do not count it again.
    h.controller().enqueue_all();
    stays_for(
        Duration::from_millis(300),
        "counted once per appearance",
        || async { refused() == 1.0 },
    )
    .await;
    assert!(reasons("kube-system").await.is_empty());
    assert!(!reasons(HOST_NS).await.contains(&"Spoofed".to_string()));
    h.stop().await.unwrap();
}

// ---- the binary -----------------------------------------------------------

fn wasmctrl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn out_of_range_numeric_flags_are_usage_errors_not_panics() {
    let run = ["run", "--guest", "x.wasm"];
    let reconcile = ["reconcile", "--guest", "x.wasm", "--objects", "-"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            [&run[..], &["--kube-api-qps", "1e-300"]].concat(),
            "--kube-api-qps",
        ),
        (
            [&run[..], &["--kube-api-qps", "nan"]].concat(),
            "--kube-api-qps",
        ),
        (
            [&run[..], &["--kube-api-burst", "0"]].concat(),
            "--kube-api-burst",
        ),
        (
            [&run[..], &["--lease-duration-seconds=-1"]].concat(),
            "--lease-duration-seconds",
        ),
        (
            [&run[..], &["--lease-duration-seconds", "nan"]].concat(),
            "--lease-duration-seconds",
        ),
        (
            [&run[..], &["--renew-deadline-seconds", "inf"]].concat(),
            "--renew-deadline-seconds",
        ),
        (
            [&run[..], &["--retry-period-seconds", "1e300"]].concat(),
            "--retry-period-seconds",
        ),
        ([&run[..], &["--workers", "0"]].concat(), "--workers"),
        (
            [&run[..], &["--runtime-threads", "0"]].concat(),
            "--runtime-threads",
        ),
        (
            [&run[..], &["--runtime-threads", "100000"]].concat(),
            "--runtime-threads",
        ),
        (
            [&run[..], &["--resync-seconds", "0"]].concat(),
            "--resync-seconds",
        ),
        (
            [&run[..], &["--resync-seconds", "18446744073709551615"]].concat(),
            "--resync-seconds",
        ),
        (
            [&run[..], &["--guest-rescan-seconds", "0"]].concat(),
            "--guest-rescan-seconds",
        ),
        (
            [&run[..], &["--guest-memory-mib", "17592186044416"]].concat(),
            "--guest-memory-mib",
        ),
        (
            [&run[..], &["--guest-memory-mib", "0"]].concat(),
            "--guest-memory-mib",
        ),
        (
            [&run[..], &["--guest-deadline-ms", "0"]].concat(),
            "--guest-deadline-ms",
        ),
        ([&run[..], &["--guest-fuel", "0"]].concat(), "--guest-fuel"),
        (
            [&run[..], &["--unhealthy-watch-seconds", "inf"]].concat(),
            "--unhealthy-watch-seconds",
        ),
        (
            [&run[..], &["--watch-failure-deadline-seconds=-1"]].concat(),
            "--watch-failure-deadline-seconds",
        ),
        (
            [&run[..], &["--streaming-list-wait-seconds", "nan"]].concat(),
            "--streaming-list-wait-seconds",
        ),
        (
            [&run[..], &["--streaming-list-wait-seconds", "1e300"]].concat(),
            "--streaming-list-wait-seconds",
        ),
        (
            [&run[..], &["--guest-quarantine-failures=-1"]].concat(),
            "--guest-quarantine-failures",
        ),
        (
            [&reconcile[..], &["--guest-memory-mib", "17592186044416"]].concat(),
            "--guest-memory-mib",
        ),
        (
            [&reconcile[..], &["--max-input-bytes", "0"]].concat(),
            "--max-input-bytes",
        ),
    ];
    // The dev subcommands exist only in a build with the embedded server.
    let dev: Vec<(Vec<&str>, &str)> = if cfg!(feature = "dev-server") {
        vec![
            (vec!["demo", "--nodes", "0"], "--nodes"),
            (vec!["demo", "--pods", "0"], "--pods"),
            (vec!["demo", "--rate", "0"], "--rate"),
            (vec!["demo", "--rate=-3"], "--rate"),
            (vec!["demo", "--duration", "0"], "--duration"),
            (vec!["apiserver", "--history", "0"], "--history"),
        ]
    } else {
        Vec::new()
    };
    for (args, flag) in cases.into_iter().chain(dev) {
        let out = wasmctrl(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("invalid value") && stderr.contains(flag),
            "{args:?}: {stderr}"
        );
    }
}

fn gpu_pod(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
           "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
           "status": {"phase": "Running"}})
}

/// One compiled-guest cache for these tests: the debug binary compiles the
/// guest once, not once per run.
const CACHE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/governance-guest-cache");

fn offline(dir: &tempfile::TempDir, name: &str, text: &str, extra: &[&str]) -> Output {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let guest = guest_path();
    let args = [
        "reconcile",
        "--guest-cache-dir",
        CACHE,
        "--guest",
        guest.to_str().unwrap(),
        "--objects",
        path.to_str().unwrap(),
        "--namespace",
        "ops",
    ];
    wasmctrl(&[&args[..], extra].concat())
}

fn summary_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let doc = &plan["plan"]["writes"][0]["apply"];
    doc["data"].clone()
}

#[test]
fn a_json_array_and_a_list_in_a_list_read_like_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let pods = vec![gpu_pod("a", "n1"), gpu_pod("b", "n2")];
    let yaml: String = pods
        .iter()
        .map(|p| format!("---\n{}", serde_yaml::to_string(p).unwrap()))
        .collect();
    let want = summary_of(&offline(&dir, "pods.yaml", &yaml, &[]));
    assert_eq!(want, json!({"n1": "1", "n2": "1"}));
    let array = serde_json::to_string(&pods).unwrap();
    assert_eq!(summary_of(&offline(&dir, "pods.json", &array, &[])), want);
    let nested = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "PodList", "items": pods}]});
    assert_eq!(
        summary_of(&offline(&dir, "nested.json", &nested.to_string(), &[])),
        want
    );
}

#[test]
fn bad_offline_input_is_an_error_naming_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let a = gpu_pod("a", "n1");
    let cases: Vec<(&str, String, &str)> = vec![
        ("empty.json", String::new(), "empty.json: no objects: the input is empty"),
        ("null.json", "null".into(), "null.json: object 0: not an object (null)"),
        ("numbers.json", "[1,2,3]".into(), "numbers.json: object 0: not an object"),
        (
            "dup.json",
            json!([a, gpu_pod("b", "n1"), a]).to_string(),
            "the same object appears more than once in the input, which a cluster cannot hold: Pod ml/a (2 times)",
        ),
    ];
    for (name, text, want) in cases {
        let out = offline(&dir, name, &text, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(want), "{name}: {stderr}");
    }
    let guest = guest_path();
    let out = wasmctrl(&[
        "reconcile",
        "--guest-cache-dir",
        CACHE,
        "--guest",
        guest.to_str().unwrap(),
        "--objects",
        "/dev/zero",
        "--max-input-bytes",
        "1048576",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "/dev/zero: larger than the input limit of 1048576 bytes (--max-input-bytes)"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_offline_reconcile_applies_the_policy_file() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "default:\n  watch: [{group: \"\", kinds: [Node]}]\n  write: [{group: \"\", kinds: [ConfigMap], namespaces: [ops], names: [gpu-summary]}]\n",
    )
    .unwrap();
    let pods = serde_json::to_string(&[gpu_pod("a", "n1")]).unwrap();
    let out = offline(
        &dir,
        "pods.json",
        &pods,
        &["--policy", policy.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("guest gpu-summary: refused by the operator policy (section \"default\"), 1 denied: watch \"pods\" of v1/Pod in all namespaces"),
        "{stderr}"
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "default:\n  limit: {}\n").unwrap();
    let out = offline(
        &dir,
        "pods.json",
        &pods,
        &["--policy", bad.to_str().unwrap()],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad.yaml"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
