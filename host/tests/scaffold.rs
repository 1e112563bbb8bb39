//! `wasmctrl new` from outside the repository: scaffold a guest crate into
//! a temporary directory, then do what its README tells its author — the
//! native tests, the `wasm32-wasip2` build with the guest profile, and
//! `wasmctrl reconcile` of the built component over `sample.yaml` — with
//! nothing copied from this repository but `Cargo.lock` (the versions the
//! workspace already built, so the shared target directory stays warm);
//! then every command of its README as written, but those that need a
//! cluster, the network or a running host (`rustup`, `kubectl`,
//! `wasmctrl run`, `wasmctrl replay`), so a README command nothing runs
//! fails the test. The same for `wasmctrl new --for` of a cluster-scoped
//! built-in kind (Namespaces) and a namespaced one (Deployments), whose
//! guests then run on the embedded API server: they converge, follow an
//! edit, undo a person's edit of what they own, write nothing idle, and
//! delete what they own when its owner loses its label or is deleted. And
//! a guest reading three of the SDK's built-in views
//! (`scaffold/three_views.rs`) is built to check its size.
//!
//! Its own test binary: its cargo builds must not run beside the
//! integration tests, whose timings they would disturb.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::Metrics;
use wasmctrl::supervisor::{Supervisor, SupervisorConfig};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};
use wasmctrl_test_support::{create_namespace, eventually, stays_for};

#[path = "scaffold/python.rs"]
mod python;
/// `wasmctrl new --lang typescript`.
#[path = "scaffold/typescript.rs"]
mod typescript;

/// The repository's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// Where scaffolded crates build: `scaffold/` in the workspace's target
/// directory (`CARGO_TARGET_DIR`, relative to the workspace root when
/// relative, as `make` passes it), shared between runs.
fn target_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    workspace().join(target).join("scaffold")
}

fn wasmctrl(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// The shell commands of `readme`'s ```sh blocks, one per command: `\`
/// continuations joined, `# …` comments dropped.
fn readme_commands(readme: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            _ if in_sh => {
                let line = line.split(" #").next().unwrap_or("").trim();
                match line.strip_suffix('\\') {
                    Some(head) => pending.push_str(head),
                    None => {
                        pending.push_str(line);
                        let command = pending.split_whitespace().collect::<Vec<_>>().join(" ");
                        if !command.is_empty() {
                            commands.push(command);
                        }
                        pending.clear();
                    }
                }
            }
            _ => {}
        }
    }
    commands
}

fn cargo(args: &[&str], cwd: &Path) -> Output {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(cargo)
        .args(args)
        .current_dir(cwd)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap()
}

fn ok(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failure(what: &str, out: &Output) -> String {
    assert!(!out.status.success(), "{what} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `wasmctrl reconcile` of the component over `objects` for `key`: the
/// plan's writes.
fn writes(wasm: &Path, objects: &[&Path], key: &str, cwd: &Path) -> Vec<Value> {
    let mut args = vec!["reconcile", "--guest", wasm.to_str().unwrap()];
    for o in objects {
        args.extend(["--objects", o.to_str().unwrap()]);
    }
    args.extend([
        "--key",
        key,
        "--now",
        "2026-01-01T00:00:00Z",
        "--no-guest-cache",
    ]);
    let out = ok("wasmctrl reconcile", &wasmctrl(&args, cwd));
    let doc: Value = serde_json::from_str(&out).unwrap();
    doc["plan"]["writes"].as_array().unwrap().clone()
}

/// `wasmctrl new NAME ARGS` into `outside/NAME`, a directory outside the
/// repository, with the workspace's `Cargo.lock` beside it: its directory.
fn scaffold(outside: &Path, name: &str, args: &[&str]) -> PathBuf {
    assert!(!outside.starts_with(workspace()), "{}", outside.display());
    let dir = outside.join(name);
    let args = [&["new", name], args, &["--dir", dir.to_str().unwrap()]].concat();
    let printed = ok("wasmctrl new", &wasmctrl(&args, outside));
    assert!(
        printed.contains("cargo build --target wasm32-wasip2 --profile guest"),
        "{printed}"
    );
    std::fs::copy(workspace().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    dir
}

/// What its README tells its author first: rustfmt-clean as generated,
/// `cargo test` (`tests` of them, all passing), the component built with
/// the guest profile and within the ConfigMap budget. The component.
fn test_and_build(dir: &Path, crate_name: &str, tests: usize) -> PathBuf {
    ok("cargo fmt --check", &cargo(&["fmt", "--check"], dir));
    let report = ok("cargo test", &cargo(&["test"], dir));
    assert!(
        report.contains(&format!("test result: ok. {tests} passed")),
        "{report}"
    );
    ok(
        "the guest build",
        &cargo(
            &["build", "--target", "wasm32-wasip2", "--profile", "guest"],
            dir,
        ),
    );
    let wasm = target_dir().join(format!("wasm32-wasip2/guest/{crate_name}.wasm"));
    let size = std::fs::metadata(&wasm).unwrap().len();
    eprintln!("{}: {size} bytes", wasm.display());
    assert!(size <= 262_144, "{} is {size} bytes", wasm.display());
    wasm
}

/// Every command of the crate's README, as written (from the crate's
/// directory, `target/` being where the builds went): run, or one that
/// needs a cluster, the network or a running host's recordings. Each
/// command run and what it printed.
fn readme_commands_run(dir: &Path, cache: &Path) -> Vec<(String, String)> {
    std::os::unix::fs::symlink(target_dir(), dir.join("target")).unwrap();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let commands = readme_commands(&readme);
    let mut ran = Vec::new();
    for command in &commands {
        // What a pipe feeds (`| kubectl apply -f -`) needs a cluster.
        let head = command.split(" | ").next().unwrap_or_default();
        let words: Vec<&str> = head.split_whitespace().collect();
        let out = match words.as_slice() {
            ["cargo", args @ ..] => cargo(args, dir),
            ["wasmctrl", args @ ("reconcile" | "guest"), ..] => {
                Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
                    .args(&words[1..])
                    .current_dir(dir)
                    .env("XDG_CACHE_HOME", cache)
                    .output()
                    .unwrap_or_else(|e| panic!("{args}: {e}"))
            }
            ["rustup", ..] | ["kubectl", ..] | ["wasmctrl", "run" | "replay", ..] => continue,
            _ => {
                panic!("README command {command:?} is neither run here nor known to need a cluster")
            }
        };
        ran.push((command.clone(), ok(command, &out)));
    }
    for prefix in [
        "cargo test",
        "cargo build --target wasm32-wasip2 --profile guest",
        "wasmctrl reconcile",
        "wasmctrl guest configmap",
    ] {
        assert!(
            ran.iter().any(|(c, _)| c.starts_with(prefix)),
            "no README command {prefix}…: {commands:#?}"
        );
    }
    ran
}

/// What the README command starting with `prefix` printed.
fn printed_by(ran: &[(String, String)], prefix: &str) -> String {
    ran.iter()
        .find(|(c, _)| c.starts_with(prefix))
        .map(|(_, out)| out.clone())
        .unwrap_or_else(|| panic!("no README command {prefix}…"))
}

#[test]
fn a_scaffolded_guest_tests_builds_and_runs_offline_outside_the_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().canonicalize().unwrap();
    let dir = scaffold(
        &outside,
        "widget-op",
        &["--group", "ops.example.org", "--kind", "Widget"],
    );
    let wasm = test_and_build(&dir, "widget_op", 6);

    // The sample alone: the child is planned, controlled by the Widget, and
    // Ready is False until it exists.
    let sample = dir.join("sample.yaml");
    let plan = writes(&wasm, &[&sample], "default/sample", &dir);
    assert_eq!(plan.len(), 2, "{plan:#?}");
    let child = &plan[0]["apply"];
    assert_eq!(child["kind"], "ConfigMap");
    assert_eq!(child["metadata"]["name"], "sample");
    assert_eq!(child["data"]["message"], "hello from widget-op");
    let owner = &child["metadata"]["ownerReferences"][0];
    assert_eq!(owner["apiVersion"], "ops.example.org/v1");
    assert_eq!(owner["kind"], "Widget");
    assert_eq!(owner["uid"], "3f6c1d2a-sample");
    assert_eq!(owner["controller"], true);
    let status = &plan[1]["apply-status"];
    assert_eq!(status["kind"], "Widget");
    assert_eq!(status["status"]["observedGeneration"], 1);
    assert_eq!(status["status"]["conditions"][0]["status"], "False");

    // With the child the plan applied (as the README says): Ready is True.
    let applied = dir.join("child.json");
    let mut cm = child.clone();
    cm["metadata"]["uid"] = "7d1c2a9e-child".into();
    std::fs::write(&applied, cm.to_string()).unwrap();
    let plan = writes(&wasm, &[&sample, &applied], "default/sample", &dir);
    assert_eq!(
        plan[1]["apply-status"]["status"]["conditions"][0]["status"],
        "True"
    );

    let ran = readme_commands_run(&dir, &tmp.path().join("cache"));
    let plan: Value = serde_json::from_str(&printed_by(&ran, "wasmctrl reconcile")).unwrap();
    assert_eq!(
        plan["plan"]["writes"].as_array().map(Vec::len),
        Some(2),
        "{plan:#}"
    );
    let configmap = printed_by(&ran, "wasmctrl guest configmap");
    assert!(configmap.contains("widget-op.wasm"), "{configmap}");
}

/// A built-in kind's scaffolded guest, tested and built as its README
/// says; the one write its README's offline run plans (the ConfigMap's
/// apply), checked against `child` (namespace, name) and the sample's
/// `kind`.
fn builtin_guest(outside: &Path, name: &str, kind: &str, child: (&str, &str)) -> PathBuf {
    let dir = scaffold(outside, name, &["--for", kind]);
    assert!(!dir.join("crd.yaml").exists(), "a built-in kind has no CRD");
    let wasm = test_and_build(&dir, &name.replace('-', "_"), 6);
    let ran = readme_commands_run(&dir, &outside.join("cache"));
    let plan: Value = serde_json::from_str(&printed_by(&ran, "wasmctrl reconcile")).unwrap();
    let writes = plan["plan"]["writes"].as_array().unwrap();
    assert_eq!(writes.len(), 1, "{plan:#}");
    let cm = &writes[0]["apply"];
    assert_eq!(
        (&cm["metadata"]["namespace"], &cm["metadata"]["name"]),
        (&json!(child.0), &json!(child.1)),
        "{cm:#}"
    );
    assert_eq!(
        cm["metadata"]["ownerReferences"][0]["uid"],
        "3f6c1d2a-sample"
    );
    let labels: Value = serde_json::from_str(cm["data"]["labels"].as_str().unwrap()).unwrap();
    assert_eq!(labels["team"], "ml", "{cm:#}");
    wasm
}

/// The embedded API server with the namespace `ops` (the host's), and a
/// host running `wasm` in the background; its metrics.
async fn host_running(
    wasm: PathBuf,
) -> (
    wasmctrl_apiserver::RunningApiServer,
    Client,
    Arc<Supervisor>,
    tokio::sync::oneshot::Sender<()>,
    Arc<Metrics>,
) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = server.client().await.unwrap();
    create_namespace(&client, "ops").await;
    let config = SupervisorConfig {
        guests: vec![wasm],
        namespace: "ops".into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    };
    let metrics = Arc::new(Metrics::new());
    let host = Arc::new(
        Supervisor::start(client.clone(), config, Some(metrics.clone()))
            .await
            .unwrap(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn({
        let host = host.clone();
        async move {
            let stopped = async {
                let _ = stopped.await;
            };
            host.run(stopped, Duration::from_secs(5)).await
        }
    });
    (server, client, host, stop, metrics)
}

/// The labels of `object` (a Kubernetes object as JSON).
fn labels_of(object: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(object["metadata"]["labels"].clone()).unwrap_or_default()
}

/// Waits until the ConfigMap `namespace/name` exists, controlled by the
/// object of `uid`, and its `data.labels` holds `labels`.
async fn configmap_follows(
    client: &Client,
    (namespace, name): (&str, &str),
    uid: &str,
    labels: &BTreeMap<String, String>,
) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let what = format!("ConfigMap {namespace}/{name} holds {labels:?}, controlled by {uid}");
    eventually(&what, || async {
        let Some(cm) = cms.get_opt(name).await.unwrap() else {
            return false;
        };
        let controlled = cm
            .metadata
            .owner_references
            .unwrap_or_default()
            .iter()
            .any(|r| r.uid == uid && r.controller == Some(true));
        let held = cm
            .data
            .unwrap_or_default()
            .get("labels")
            .and_then(|l| serde_json::from_str::<BTreeMap<String, String>>(l).ok());
        controlled && held.as_ref() == Some(labels)
    })
    .await;
}

/// Merges `labels` into the labels of the object `name` of `api`: the
/// object, as JSON.
async fn relabel<K>(api: &Api<K>, name: &str, labels: Value) -> Value
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let patch = Patch::Merge(json!({"metadata": {"labels": labels}}));
    let edited = api
        .patch(name, &PatchParams::default(), &patch)
        .await
        .unwrap();
    serde_json::to_value(edited).unwrap()
}

/// Waits until the ConfigMap `namespace/name` is gone.
async fn configmap_gone(client: &Client, (namespace, name): (&str, &str)) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    eventually(
        &format!("ConfigMap {namespace}/{name} is deleted"),
        || async { cms.get_opt(name).await.unwrap().is_none() },
    )
    .await;
}

/// The host's one guest: idle (nothing queued or running), and then no
/// write for a while.
async fn writes_nothing_idle(host: &Supervisor, metrics: &Metrics) {
    let controller = host.controllers()[0].clone();
    // Idle: no key queued and none in flight (a reconcile whose write the
    // server already shows counts that write when its answer arrives).
    let in_flight = format!("name=\"{}\"", controller.name());
    eventually(
        "the guest's queue is empty and no key in flight",
        || async {
            let longest = wasmctrl_test_support::prom::metric(
                &metrics.encode(),
                "workqueue_longest_running_processor_seconds",
                &[&in_flight],
            );
            controller.queue().is_empty() && longest == 0.0
        },
    )
    .await;
    let writes = controller.metrics().writes();
    stays_for(Duration::from_secs(2), "no write while idle", || async {
        controller.metrics().writes() == writes
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_scaffolded_for_namespaces_controls_a_configmap_in_each_labelled_namespace() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().canonicalize().unwrap();
    let wasm = builtin_guest(&outside, "ns-op", "namespaces", ("sample", "ns-op"));
    let (_server, client, host, stop, metrics) = host_running(wasm).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let create = |name: &str, labelled: bool| {
        let mut ns = json!({"metadata": {"name": name, "labels": {"team": "ml"}}});
        if labelled {
            ns["metadata"]["labels"]["example.com/ns-op"] = json!("enabled");
        }
        serde_json::from_value::<Namespace>(ns).unwrap()
    };
    let a = namespaces
        .create(&PostParams::default(), &create("team-a", true))
        .await
        .unwrap();
    namespaces
        .create(&PostParams::default(), &create("team-b", false))
        .await
        .unwrap();
    let a = serde_json::to_value(a).unwrap();
    let uid = a["metadata"]["uid"].as_str().unwrap().to_string();
    configmap_follows(&client, ("team-a", "ns-op"), &uid, &labels_of(&a)).await;

    // A label edit: the ConfigMap follows.
    let edited = relabel(&namespaces, "team-a", json!({"team": "web"})).await;
    configmap_follows(&client, ("team-a", "ns-op"), &uid, &labels_of(&edited)).await;
    // A person's edit of the ConfigMap: undone.
    Api::<ConfigMap>::namespaced(client.clone(), "team-a")
        .patch(
            "ns-op",
            &PatchParams::apply("a-person").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "ns-op"}, "data": {"labels": "{}"}})),
        )
        .await
        .unwrap();
    configmap_follows(&client, ("team-a", "ns-op"), &uid, &labels_of(&edited)).await;
    writes_nothing_idle(&host, &metrics).await;
    // The unlabelled namespace has none.
    let b: Api<ConfigMap> = Api::namespaced(client.clone(), "team-b");
    assert!(b.get_opt("ns-op").await.unwrap().is_none());
    // The label removed: the namespace left the watch, its ConfigMap goes.
    relabel(&namespaces, "team-a", json!({"example.com/ns-op": null})).await;
    configmap_gone(&client, ("team-a", "ns-op")).await;
    writes_nothing_idle(&host, &metrics).await;
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_scaffolded_for_deployments_controls_a_configmap_beside_each_labelled_one() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().canonicalize().unwrap();
    let wasm = builtin_guest(
        &outside,
        "deploy-op",
        "deployments",
        ("default", "sample-deploy-op"),
    );
    let (_server, client, host, stop, metrics) = host_running(wasm).await;
    create_namespace(&client, "shop").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "shop");
    let deployment = |name: &str, labels: Value| {
        serde_json::from_value::<Deployment>(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}))
        .unwrap()
    };
    let web = deployments
        .create(
            &PostParams::default(),
            &deployment(
                "web",
                json!({"example.com/deploy-op": "enabled", "tier": "front"}),
            ),
        )
        .await
        .unwrap();
    deployments
        .create(
            &PostParams::default(),
            &deployment("db", json!({"tier": "back"})),
        )
        .await
        .unwrap();
    let web = serde_json::to_value(web).unwrap();
    let uid = web["metadata"]["uid"].as_str().unwrap().to_string();
    configmap_follows(&client, ("shop", "web-deploy-op"), &uid, &labels_of(&web)).await;
    let edited = relabel(&deployments, "web", json!({"tier": "edge"})).await;
    configmap_follows(
        &client,
        ("shop", "web-deploy-op"),
        &uid,
        &labels_of(&edited),
    )
    .await;
    writes_nothing_idle(&host, &metrics).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "shop");
    assert!(cms.get_opt("db-deploy-op").await.unwrap().is_none());
    // Deleted: its ConfigMap goes with it.
    deployments
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    configmap_gone(&client, ("shop", "web-deploy-op")).await;
    writes_nothing_idle(&host, &metrics).await;
    let _ = stop.send(());
}

#[test]
fn a_guest_reading_three_built_in_views_stays_far_under_the_size_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().canonicalize().unwrap();
    let dir = scaffold(&outside, "three-views", &["--for", "namespaces"]);
    std::fs::write(
        dir.join("src/lib.rs"),
        include_str!("scaffold/three_views.rs"),
    )
    .unwrap();
    std::fs::remove_file(dir.join("src/tests.rs")).unwrap();
    let wasm = test_and_build(&dir, "three_views", 1);
    let size = std::fs::metadata(&wasm).unwrap().len();
    assert!(
        size <= 262_144 / 8 * 7,
        "a guest reading Namespace, ResourceQuota and RoleBinding is {size} bytes: more than seven eighths of the guests' budget"
    );
}

/// Each resource `kubectl api-resources` of a real 1.32 server lists, but
/// the custom resources of its recording: qualified name, and whether it
/// can be listed and watched.
fn kubectl_api_resources() -> Vec<(String, bool)> {
    let table =
        std::fs::read_to_string(workspace().join("apiserver/data/k8s-1.32/api-resources.txt"))
            .unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|row| {
            let words: Vec<&str> = row.split_whitespace().collect();
            // NAME [SHORTNAMES] APIVERSION NAMESPACED KIND VERBS [CATEGORIES]
            let scope = words.iter().position(|w| *w == "true" || *w == "false")?;
            let group = words[scope - 1].rsplit_once('/').map_or("", |(g, _)| g);
            if group.ends_with("example.com") {
                return None;
            }
            let verbs: Vec<&str> = words[scope + 2].split(',').collect();
            let name = match group {
                "" => words[0].to_string(),
                _ => format!("{}.{group}", words[0]),
            };
            Some((name, verbs.contains(&"list") && verbs.contains(&"watch")))
        })
        .collect()
}

#[test]
fn every_built_in_kind_is_scaffolded_rustfmt_clean_or_refused_as_unwatchable() {
    let tmp = tempfile::tempdir().unwrap();
    let resources = kubectl_api_resources();
    assert!(resources.len() > 50, "{resources:?}");
    let rustfmt = std::env::var_os("RUSTFMT").unwrap_or_else(|| "rustfmt".into());
    for (i, (name, watchable)) in resources.iter().enumerate() {
        let dir = tmp.path().join(i.to_string());
        let out = wasmctrl(
            &["new", "op", "--for", name, "--dir", dir.to_str().unwrap()],
            tmp.path(),
        );
        if !watchable {
            let e = failure(name, &out);
            assert!(
                e.contains("is not a built-in kind of Kubernetes 1.32 that can be watched"),
                "{e}"
            );
            continue;
        }
        ok(name, &out);
        let check = Command::new(&rustfmt)
            .args(["--check", "--edition", "2021", "src/lib.rs", "src/tests.rs"])
            .current_dir(&dir)
            .output()
            .unwrap();
        ok(&format!("rustfmt --check of the crate for {name}"), &check);
    }
}

#[test]
fn bad_names_and_non_empty_directories_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in ["My_Op", "fn", "9op"] {
        let e = failure(bad, &wasmctrl(&["new", bad], tmp.path()));
        assert!(e.contains("cannot name a guest"), "{e}");
    }
    let e = failure(
        "--group",
        &wasmctrl(&["new", "op", "--group", "nodots"], tmp.path()),
    );
    assert!(e.contains("--group \"nodots\""), "{e}");
    let e = failure(
        "--group \"\"",
        &wasmctrl(&["new", "op", "--group", ""], tmp.path()),
    );
    assert!(e.contains("use --for"), "{e}");
    let e = failure(
        "--for with --kind",
        &wasmctrl(&["new", "op", "--for", "pods", "--kind", "Pod"], tmp.path()),
    );
    assert!(e.contains("cannot be used with"), "{e}");
    let e = failure(
        "--for",
        &wasmctrl(&["new", "op", "--for", "deploymnets"], tmp.path()),
    );
    assert!(
        e.contains("\"deploymnets\" is not a built-in kind") && e.contains("deployments.apps"),
        "{e}"
    );
    std::fs::create_dir(tmp.path().join("op")).unwrap();
    std::fs::write(tmp.path().join("op/keep.txt"), "mine").unwrap();
    let e = failure("non-empty", &wasmctrl(&["new", "op"], tmp.path()));
    assert!(
        e.contains("already exists and is not an empty directory"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(tmp.path().join("op")).unwrap().count(), 1);
    let e = failure(
        "sdk",
        &wasmctrl(&["new", "op2", "--sdk-path", "/nonexistent"], tmp.path()),
    );
    assert!(e.contains("no wasmctrl guest SDK at /nonexistent"), "{e}");
    assert!(!tmp.path().join("op2").exists());
}
