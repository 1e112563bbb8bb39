//! The TypeScript build of the App guest (`examples/guest-app-ts`, built by
//! `make guests-js`) under the host's tools, unchanged: `wasmctrl
//! reconcile` prints the Rust build's plan for the same objects; beside the
//! Rust build as its shadow it agrees on every key and never acts; and the
//! cases the Rust build recorded replay the same through it. (The
//! controller-pattern steps on a live server are `matrix::app`.)

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::recording::{case_files, RecordConfig};
use wasmctrl::supervisor::SupervisorConfig;

use crate::app::{app_server, create_app, seen, set_banner};
use crate::support::*;

fn ts_guest() -> std::path::PathBuf {
    built_js_guest("guest_app_ts")
}

/// The precompiled-guest cache the TypeScript tests share: one compile per run.
fn cache() -> std::path::PathBuf {
    target_dir().join("guest-cache")
}

/// `wasmctrl reconcile` of `guest` over `objects` (YAML) for `team-a/web`:
/// its JSON output, which must be a success.
fn offline_plan(guest: &Path, objects: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.yaml");
    std::fs::write(&file, objects).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args([
            "reconcile",
            "--key",
            "team-a/web",
            "--now",
            "2026-12-01T03:44:00Z",
        ])
        .arg("--guest")
        .arg(guest)
        .arg("--objects")
        .arg(&file)
        .arg("--guest-cache-dir")
        .arg(cache())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        guest.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn wasmctrl_reconcile_prints_the_rust_build_s_plan_for_the_typescript_build() {
    let sample = std::fs::read_to_string(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/guest-app/sample.yaml"),
    )
    .unwrap();
    let deleting = sample.replace(
        "  generation: 2\n",
        "  generation: 2\n  deletionTimestamp: \"2026-12-01T03:40:00Z\"\n",
    );
    let child_gone = deleting
        .split("---\n")
        .filter(|doc| !doc.contains("uid: 7d1c2a9e-cm-web"))
        .collect::<Vec<_>>()
        .join("---\n");
    let rust = built_guest("guest_app");
    for (what, objects, first_write) in [
        ("live", &sample, "apply"),
        ("deleting", &deleting, "delete"),
        ("deleting, child gone", &child_gone, "remove-finalizer"),
    ] {
        let want = offline_plan(&rust, objects);
        let got = offline_plan(&ts_guest(), objects);
        assert_eq!(got, want, "{what}");
        assert!(
            want["plan"]["writes"][0].get(first_write).is_some(),
            "{what}: {want:#}"
        );
    }
}

#[tokio::test]
async fn the_typescript_build_shadowing_the_rust_one_agrees_and_replays_its_recorded_cases() {
    let (_server, client) = app_server().await;
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases");
    let config = SupervisorConfig {
        guests: vec![built_guest("guest_app")],
        namespace: HOST_NS.into(),
        controller: ControllerConfig::default(),
        runtime: RuntimeConfig::default().cache_dir(Some(cache())),
        shadows: vec![("app".into(), ts_guest())],
        record: Some(RecordConfig {
            dir: cases.clone(),
            max_cases: 100,
            max_bytes: 1 << 20,
            secrets: false,
        }),
        ..SupervisorConfig::default()
    };
    let host = run_host(&client, config, None).await;
    set_banner(&client, PODS_NS, "welcome").await;
    for name in ["web", "api"] {
        create_app(&client, PODS_NS, name, "hello", 2).await;
    }
    for name in ["web", "api"] {
        eventually("the App is ready with its child", || async {
            seen(&client, PODS_NS, name)
                .await
                .is_some_and(|s| s.owned && s.ready.as_ref().is_some_and(|r| r.0 == "True"))
        })
        .await;
    }
    let shadow = host
        .controller()
        .shadow()
        .expect("the TypeScript build shadows");
    eventually("the shadow compared both Apps", || async {
        shadow.counts().0 >= 2
    })
    .await;
    let (same, differs, errors, _) = shadow.counts();
    assert_eq!((differs, errors), (0, 0), "{same} the same");
    eventually("cases recorded", || async {
        case_files(&cases.join("app")).map_or(0, |f| f.len()) >= 2
    })
    .await;
    host.stop().await.unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .arg("replay")
        .arg("--guest")
        .arg(ts_guest())
        .arg(&cases)
        .arg("--guest-cache-dir")
        .arg(cache())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let n = case_files(&cases.join("app")).unwrap().len();
    assert!(
        out.status.success() && stdout.contains(&format!("{n} cases: {n} same, 0 differ")),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The TypeScript probe (`wit/typescript/probe/println.ts`) loaded in the
/// host's runtime with `config`, and its manifest.
fn probe(config: &[(&str, &str)]) -> (wasmctrl::guest::GuestModule, wasmctrl::guest::Environment) {
    let runtime =
        wasmctrl::guest::GuestRuntime::new(RuntimeConfig::default().cache_dir(Some(cache())))
            .unwrap();
    let module = runtime
        .load_file(&built_js_guest("probe_println_ts"))
        .unwrap_or_else(|e| panic!("the TypeScript probe loads: {e}"));
    let config = config
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (module, wasmctrl::guest::environment("ops", &config))
}

fn probe_request(key: &str) -> wasmctrl::guest::Request {
    wasmctrl::guest::Request {
        key: key.into(),
        watch: Some("maps".into()),
        presence: Some(wasmctrl::guest::Presence::Present),
    }
}

#[test]
fn console_log_and_console_error_of_a_typescript_guest_reach_the_guest_log() {
    use wasmctrl::guest::snapshot::{self, WatchView};
    let lines = logs::on_this_thread(tracing::Level::INFO);
    let (module, env) = probe(&[("name", "printer-ts")]);
    let manifest = module.manifest(&env).unwrap();
    let snap = snapshot::build(&manifest, &[WatchView::identity(vec![], 0)]);
    let (plan, _) = module.reconcile(&manifest, &env, &probe_request("ml/k1"), snap);
    assert!(plan.unwrap().writes.is_empty());
    let out = lines.containing(&["reconcile ml/k1: 0 objects"]);
    assert!(
        out.iter()
            .any(|l| l.contains("INFO") && l.contains("printer-ts")),
        "console.log: {out:#?}"
    );
    let err = lines.containing(&["reconcile ml/k1: to stderr"]);
    assert!(
        err.iter()
            .any(|l| l.contains("WARN") && l.contains("printer-ts")),
        "console.error: {err:#?}"
    );
    assert!(
        !lines.containing(&["describe: namespace ops"]).is_empty(),
        "console.log in describe"
    );
}

#[test]
fn an_uncaught_typescript_exception_is_the_reconcile_error_with_its_message() {
    use wasmctrl::guest::snapshot::{self, WatchView};
    let (module, env) = probe(&[("throw", "reconcile")]);
    let manifest = module.manifest(&env).unwrap();
    let snap = snapshot::build(&manifest, &[WatchView::identity(vec![], 0)]);
    let (plan, _) = module.reconcile(&manifest, &env, &probe_request("ml/k1"), snap);
    let e = plan.unwrap_err().to_string();
    // QuickJS prints an uncaught exception's message and stack (not its
    // class): both reach the error.
    assert!(
        e.contains("raised exception: told to throw in reconcile of ml/k1")
            && e.contains("at reconcile ("),
        "{e}"
    );
    let (module, env) = probe(&[("throw", "describe")]);
    let e = module.manifest(&env).unwrap_err().to_string();
    assert!(e.contains("told to throw in describe"), "{e}");
}
