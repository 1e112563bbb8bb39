//! Guests in Python and JavaScript built with the public toolchains'
//! default settings (`tests/guests/py-probe`, `tests/guests/js-probe`,
//! built once by `make probes` into `target/guests-py`, `target/guests-js`)
//! in the host's runtime: they load on the governed WASI surface, print to
//! the guest log, read the reconcile's `env.now-ms` from their clocks, draw
//! deterministic randomness, and fail with a readable error.
//!
//! Each probe compiles once per test run (shared below) and is cached on
//! disk under the target directory across runs.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;
use wasmctrl::guest::snapshot::{self, WatchView};
use wasmctrl::guest::{
    self, GuestManifest, GuestModule, GuestRuntime, PlannedWrite, RuntimeConfig,
};

use crate::guest_runtime::{config, find, logs_of, request};

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// A probe `make probes` built (`guests-py/py-probe.wasm`, ...), or None
/// after reporting it missing (a failure under CI).
pub fn probe_path(file: &str) -> Option<PathBuf> {
    let p = target_dir().join(file);
    if p.exists() {
        return Some(p);
    }
    wasmctrl_test_support::tools::missing(
        file,
        &format!("is not built ({} is missing)", p.display()),
        "make probes, with the pinned toolchains of make toolchains",
    );
    None
}

/// One runtime for every probe, caching compiled probes under the target
/// directory.
pub fn probe_runtime() -> &'static GuestRuntime {
    static RUNTIME: OnceLock<GuestRuntime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        GuestRuntime::new(
            RuntimeConfig::default().cache_dir(Some(target_dir().join("probe-cache"))),
        )
        .unwrap()
    })
}

/// The probe in `file`, compiled once per test run.
fn probe(file: &'static str, slot: &'static OnceLock<Option<GuestModule>>) -> Option<GuestModule> {
    slot.get_or_init(|| {
        let path = probe_path(file)?;
        Some(
            probe_runtime()
                .load_file(&path)
                .unwrap_or_else(|e| panic!("{e}")),
        )
    })
    .clone()
}

pub fn py_probe() -> Option<GuestModule> {
    static SLOT: OnceLock<Option<GuestModule>> = OnceLock::new();
    probe("guests-py/py-probe.wasm", &SLOT)
}

pub fn js_probe() -> Option<GuestModule> {
    static SLOT: OnceLock<Option<GuestModule>> = OnceLock::new();
    probe("guests-js/js-probe.wasm", &SLOT)
}

const NOW_MS: u64 = 1_700_000_000_123;

/// One reconcile of `key` at `now_ms` with `pairs` as configuration: the
/// ConfigMap data the probe wrote, and the log lines.
fn reconcile(
    module: &GuestModule,
    pairs: &[(&str, &str)],
    key: &str,
    now_ms: u64,
) -> (
    Result<serde_json::Map<String, Value>, guest::GuestError>,
    Vec<String>,
) {
    let env = guest::environment("ops", &config(pairs)).at(now_ms);
    let manifest: GuestManifest = module.manifest(&env).unwrap();
    let snap = snapshot::build(&manifest, &[WatchView::identity(vec![], 0)]);
    let mut result = None;
    let lines = logs_of(|| {
        let (plan, _) = module.reconcile(&manifest, &env, &request(key), snap);
        result = Some(plan.map(|plan| {
            let Some(PlannedWrite::Apply { doc, .. }) = plan.writes.first() else {
                panic!("the probe applies its ConfigMap: {:?}", plan.writes);
            };
            doc["data"].as_object().unwrap().clone()
        }));
    });
    (result.unwrap(), lines)
}

#[test]
fn a_default_componentize_py_build_loads_prints_and_reads_env_now() {
    let Some(module) = py_probe() else { return };
    let pairs = [("name", "py-probe"), ("output", "probe-out")];
    let (data, lines) = reconcile(&module, &pairs, "probe", NOW_MS);
    let data = data.unwrap_or_else(|e| panic!("{e}"));
    let out = find(&lines, "reconcile probe: 0 objects");
    assert!(
        out.contains("INFO") && out.contains("wasmctrl::guest::stdout"),
        "{out}"
    );
    assert!(out.contains("guest=\"py-probe\""), "{out}");
    let err = find(&lines, "reconcile probe: to stderr");
    assert!(
        err.contains("WARN") && err.contains("wasmctrl::guest::stderr"),
        "{err}"
    );
    assert_eq!(data["wall-ms"], NOW_MS.to_string(), "{data:?}");
    assert_eq!(
        data["monotonic-ns"],
        (u128::from(NOW_MS) * 1_000_000).to_string()
    );
    assert_eq!(data["key"], "probe");
}

/// QuickJS under jco defines no `console`: the JavaScript probe cannot
/// print, but loads, reconciles and reads `env.now-ms` as `Date.now()`.
#[test]
fn a_default_quickjs_build_loads_and_reads_env_now() {
    let Some(module) = js_probe() else { return };
    let (data, _) = reconcile(&module, &[("output", "o")], "probe", NOW_MS);
    let data = data.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(data["wall-ms"], NOW_MS.to_string(), "{data:?}");
}

#[test]
fn a_python_module_componentize_py_did_not_bundle_is_a_readable_error() {
    let Some(module) = py_probe() else { return };
    let (result, _) = reconcile(&module, &[("fail", "import")], "probe", NOW_MS);
    let e = result.unwrap_err();
    assert_eq!(e.reason(), "guest_exception", "{e}");
    assert!(
        e.to_string()
            .contains("raised ModuleNotFoundError: No module named 'csv'"),
        "{e}"
    );
}

#[test]
fn randomness_is_the_same_for_the_same_request_and_differs_for_another() {
    let Some(module) = py_probe() else { return };
    let random = |key: &str, now: u64| {
        let (data, _) = reconcile(&module, &[("output", "o")], key, now);
        let data = data.unwrap();
        (data["random"].clone(), data["insecure-random"].clone())
    };
    let first = random("probe", NOW_MS);
    assert_eq!(first, random("probe", NOW_MS), "a replay draws the same");
    let later = random("probe", NOW_MS + 1);
    assert_ne!(first.0, later.0);
    assert_ne!(first.0, random("other", NOW_MS).0);
}

#[test]
fn an_async_component_is_refused_before_compiling() {
    let Some(path) = probe_path("guests-js/js-probe-async.wasm") else {
        return;
    };
    // No cache: a refusal must not depend on an earlier compile.
    let runtime = GuestRuntime::new(RuntimeConfig::default().cache_dir(None)).unwrap();
    let e = runtime.load_file(&path).unwrap_err();
    assert_eq!(e.reason(), "async", "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with("guest js-probe-async.wasm: uses the component model's async ABI"),
        "{text}"
    );
    assert!(text.contains("--backend-qjs-disable-async"), "{text}");
}

/// A reconcile told to fail: the error names the exception and its
/// message, never a bare trap, and the guest's log shows it too.
fn an_exception_is_a_readable_error(module: &GuestModule, message: &str, stack: &str) {
    let (result, lines) = reconcile(module, &[("fail", "reconcile")], "probe", NOW_MS);
    let e = result.unwrap_err();
    assert_eq!(e.reason(), "guest_exception", "{e}");
    let text = e.to_string();
    assert!(text.contains(&format!("raised {message}")), "{text}");
    assert!(text.contains(stack), "{text}");
    assert!(!text.contains("unreachable"), "{text}");
    find(&lines, message.trim_start_matches("exception: "));
}

#[test]
fn a_python_exception_becomes_the_reconcile_error_with_its_traceback() {
    let Some(module) = py_probe() else { return };
    an_exception_is_a_readable_error(
        &module,
        "ValueError: told to fail in reconcile of probe",
        "app.py\", line",
    );
}

#[test]
fn a_javascript_exception_becomes_the_reconcile_error_with_its_stack() {
    let Some(module) = js_probe() else { return };
    an_exception_is_a_readable_error(
        &module,
        "exception: told to fail in reconcile of probe",
        "at failIn (/probe.js:",
    );
}
