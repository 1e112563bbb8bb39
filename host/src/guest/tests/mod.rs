//! Runtime tests: the real GPU-summary component, and tiny hand-written
//! `.wat` guests for every way a guest can fail. The `.wat` core modules are
//! turned into components at test time with our WIT (the same step
//! `cargo build --target wasm32-wasip2` performs for Rust guests), so no
//! binaries are committed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;

use wasmctrl_test_support::component::{component_from_wat, component_from_wat_in, BUMP_REALLOC};

use super::*;
use crate::projection::Interner;

/// The built GPU-summary guest (`make guest` builds it; CI builds it first).
pub(crate) fn gpu_guest_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("wasm32-wasip2/guest/guest_gpu_summary.wasm");
    assert!(
        path.exists(),
        "{} is missing: build it first with `cargo build -p guest-gpu-summary --target wasm32-wasip2 --profile guest` (make guest)",
        path.display()
    );
    path
}

pub(super) fn runtime(config: RuntimeConfig) -> GuestRuntime {
    GuestRuntime::new(config.cache_dir(None)).unwrap()
}

/// A core module exporting the reconciler with `body` as `reconcile`
/// (signature `(param i32) (result i32)`: arguments and result both travel
/// through memory because they flatten to more than 16 values).
pub(super) fn wat_guest(body: &str) -> String {
    wat_guest_describing("unreachable", body)
}

/// [`wat_guest`] with `imports` (and any other module fields) declared
/// first, so `body` can call them.
pub(super) fn wat_guest_importing(imports: &str, body: &str) -> String {
    wat_guest(body).replacen("(module\n", &format!("(module\n  {imports}\n"), 1)
}

/// [`wat_guest`] with `describe` as its `describe` (signature
/// `(param i32 i32 i32 i32 i64) (result i32)`: the environment flattened,
/// the result through memory).
pub(super) fn wat_guest_describing(describe: &str, body: &str) -> String {
    format!(
        r#"(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  {BUMP_REALLOC}
  (func (export "wasmctrl:controller/reconciler@0.3.0#describe") (param i32 i32 i32 i32 i64) (result i32)
    {describe})
  (func (export "wasmctrl:controller/reconciler@0.3.0#reconcile") (param i32) (result i32)
    {body}))"#
    )
}

/// A reconcile body that returns `ok(plan { writes: [apply(doc), ...] })`.
pub(super) fn returns_apply(docs: &[&str]) -> String {
    // Layout of result<plan, reconcile-error> at 1024: tag at +0, plan at
    // +8 (writes list at +8/+12, events +16/+20, option tag +24). The
    // writes (48 bytes each: tag, then the string at +4) at 1536, string
    // bytes from 4096.
    let mut body = String::new();
    let mut at = 4096;
    for (i, doc) in docs.iter().enumerate() {
        for (j, b) in doc.bytes().enumerate() {
            body.push_str(&format!(
                "(i32.store8 (i32.const {}) (i32.const {b}))\n",
                at + j
            ));
        }
        let write = 1536 + 48 * i;
        body.push_str(&format!(
            "(i32.store8 (i32.const {write}) (i32.const 0)) (i32.store (i32.const {}) (i32.const {at})) (i32.store (i32.const {}) (i32.const {}))\n",
            write + 4,
            write + 8,
            doc.len()
        ));
        at += doc.len();
    }
    body.push_str(&format!(
        "(i32.store8 (i32.const 1024) (i32.const 0))
         (i32.store (i32.const 1032) (i32.const 1536)) (i32.store (i32.const 1036) (i32.const {}))
         (i32.store (i32.const 1040) (i32.const 0)) (i32.store (i32.const 1044) (i32.const 0))
         (i32.store8 (i32.const 1048) (i32.const 0))
         (i32.const 1024)",
        docs.len()
    ));
    body
}

pub(super) fn gpu_manifest() -> GuestManifest {
    let m = bindings::wasmctrl::controller::types::Manifest {
        name: "gpu-summary".into(),
        watches: vec![bindings::wasmctrl::controller::types::Watch {
            name: "pods".into(),
            gvk: wit::GroupVersionKind {
                group: String::new(),
                version: "v1".into(),
                kind: "Pod".into(),
            },
            plural: None,
            namespace: None,
            label_selector: None,
            field_selector: None,
            fields: vec!["spec.nodeName".into()],
            indexes: vec![],
            keys: wit::KeyMapping::Aggregate("k".into()),
            finalizer: None,
        }],
        writes: vec![wit::WriteRule {
            gvk: wit::GroupVersionKind {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            namespace: Some("ops".into()),
            names: vec!["summary".into()],
            status: false,
        }],
        resync_seconds: None,
    };
    manifest::validate(&m).unwrap()
}

pub(super) fn env() -> Environment {
    environment("ops", &BTreeMap::new())
}

pub(super) fn empty_snapshot() -> SnapshotData {
    snapshot::build(&gpu_manifest(), &[snapshot::WatchView::identity(vec![], 1)])
}

pub(super) fn request() -> Request {
    Request {
        key: "k".into(),
        watch: None,
        presence: None,
    }
}

fn run_wat(config: RuntimeConfig, body: &str, snapshot: SnapshotData) -> GuestError {
    let rt = runtime(config);
    let module = rt
        .load_bytes("hostile.wasm", &component_from_wat(&wat_guest(body)))
        .unwrap();
    let (result, _) = module.reconcile(&gpu_manifest(), &env(), &request(), snapshot);
    result.expect_err("the hostile guest must fail")
}

#[test]
fn trap_in_guest_is_a_typed_error_naming_the_guest() {
    let e = run_wat(RuntimeConfig::default(), "unreachable", empty_snapshot());
    assert_eq!(e.reason(), "trap", "{e}");
    assert_eq!(e.guest, "gpu-summary");
    assert!(e.to_string().contains("unreachable"), "{e}");
}

#[test]
fn endless_loop_hits_the_deadline() {
    let deadline = Duration::from_millis(100);
    let started = Instant::now();
    let e = run_wat(
        RuntimeConfig::default().deadline(deadline),
        "(loop (br 0)) unreachable",
        empty_snapshot(),
    );
    assert_eq!(e.reason(), "deadline", "{e}");
    assert!(matches!(e.kind, GuestErrorKind::Deadline(d) if d == deadline));
    // Generous bound: the point is that it stops, not how fast.
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn fuel_exhaustion_is_reported_as_fuel() {
    let e = run_wat(
        RuntimeConfig::default().fuel(Some(10_000)),
        "(loop (br 0)) unreachable",
        empty_snapshot(),
    );
    assert_eq!(e.reason(), "fuel", "{e}");
}

#[test]
fn growing_memory_past_the_cap_is_reported_as_out_of_memory() {
    let e = run_wat(
        RuntimeConfig::default().memory_limit(4 << 20),
        "(loop (drop (memory.grow (i32.const 16))) (br 0)) unreachable",
        empty_snapshot(),
    );
    assert_eq!(e.reason(), "memory", "{e}");
    assert!(e.to_string().contains(&(4usize << 20).to_string()), "{e}");
}

#[test]
fn snapshot_larger_than_the_cap_is_out_of_memory_not_a_crash() {
    let m = gpu_manifest();
    let mut interner = Interner::default();
    let objs: Vec<_> = (0..50_000)
        .map(|i| {
            m.watches[0].projection.project(
                &json!({"metadata": {"name": format!("pod-{i:06}"), "namespace": "default"}, "spec": {"nodeName": format!("node-{i}")}}),
                &mut interner,
            )
        })
        .collect();
    let snap = snapshot::build(
        &m,
        &[snapshot::WatchView::identity(
            objs.iter().collect(),
            m.watches[0].projection.paths().len(),
        )],
    );
    let e = run_wat(
        RuntimeConfig::default().memory_limit(1 << 20),
        "unreachable",
        snap,
    );
    assert_eq!(e.reason(), "memory", "{e}");
}

#[test]
fn plan_that_is_not_json_is_malformed() {
    let e = run_wat(
        RuntimeConfig::default(),
        &returns_apply(&["not json"]),
        empty_snapshot(),
    );
    assert_eq!(e.reason(), "malformed_plan", "{e}");
    assert!(
        e.to_string()
            .contains("writes[0] (apply) is not a JSON object"),
        "{e}"
    );
}

#[test]
fn plan_without_a_name_is_malformed() {
    let e = run_wat(
        RuntimeConfig::default(),
        &returns_apply(&[r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#]),
        empty_snapshot(),
    );
    assert!(
        e.to_string()
            .contains("writes[0] (apply) has no metadata.name"),
        "{e}"
    );
}

#[test]
fn write_outside_the_allowlist_is_rejected_before_any_request() {
    let secret =
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"summary","namespace":"ops"}}"#;
    let other_ns = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"summary","namespace":"kube-system"}}"#;
    let other_name =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ops"}}"#;
    for doc in [secret, other_ns, other_name] {
        let e = run_wat(
            RuntimeConfig::default(),
            &returns_apply(&[doc]),
            empty_snapshot(),
        );
        assert_eq!(e.reason(), "forbidden_write", "{e}");
        assert!(
            e.to_string()
                .contains("outside the guest's write allowlist"),
            "{e}"
        );
    }
}

#[test]
fn allowed_plan_from_a_wat_guest_is_validated() {
    let ok = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"summary","namespace":"ops"},"data":{"n":"1"}}"#;
    let rt = runtime(RuntimeConfig::default());
    let module = rt
        .load_bytes(
            "ok.wasm",
            &component_from_wat(&wat_guest(&returns_apply(&[ok]))),
        )
        .unwrap();
    let (plan, stats) = module.reconcile(&gpu_manifest(), &env(), &request(), empty_snapshot());
    let plan = plan.unwrap();
    match plan.writes.as_slice() {
        [PlannedWrite::Apply { doc, .. }] => assert_eq!(doc["data"]["n"], "1"),
        other => panic!("expected one apply: {other:?}"),
    }
    assert!(stats.call > Duration::ZERO);
}

#[test]
fn a_perf_map_names_each_compiled_guest_function() {
    // The engine appends to the process's one perf map; only this test
    // turns it on.
    let path = PathBuf::from(format!("/tmp/perf-{}.map", std::process::id()));
    let before = std::fs::read_to_string(&path).map_or(0, |s| s.lines().count());
    let wat = format!(
        r#"(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  {BUMP_REALLOC}
  (func $named_by_the_guest (result i32) unreachable)
  (func (export "wasmctrl:controller/reconciler@0.3.0#describe") (param i32 i32 i32 i32 i64) (result i32)
    call $named_by_the_guest)
  (func (export "wasmctrl:controller/reconciler@0.3.0#reconcile") (param i32) (result i32)
    unreachable))"#
    );
    let rt = runtime(RuntimeConfig::default().perf_map(true));
    rt.load_bytes("mapped.wasm", &component_from_wat(&wat))
        .unwrap();
    let map = std::fs::read_to_string(&path).unwrap();
    let added: Vec<&str> = map.lines().skip(before).collect();
    // Each line: start address, size (hex), name.
    let named = added
        .iter()
        .find(|l| l.ends_with("named_by_the_guest"))
        .unwrap_or_else(|| panic!("no line names the guest's function: {added:?}"));
    let mut parts = named.split(' ');
    let (start, size) = (parts.next().unwrap(), parts.next().unwrap());
    assert!(start.starts_with("0x"), "{named}");
    assert!(u64::from_str_radix(size, 16).unwrap() > 0, "{named}");
    if before == 0 {
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn guest_that_does_not_implement_the_world_is_refused_at_load() {
    let rt = runtime(RuntimeConfig::default());
    let empty = wat::parse_str("(component)").unwrap();
    let e = rt
        .load_bytes("empty.wasm", &empty)
        .expect_err("must be refused");
    assert_eq!(e.reason(), "world", "{e}");
    assert!(e.to_string().contains("empty.wasm"), "{e}");
    let e = rt
        .load_bytes("junk.wasm", b"\0asm junk")
        .expect_err("must be refused");
    assert_eq!(e.reason(), "compile", "{e}");
}

#[test]
fn a_guest_built_against_an_older_contract_is_refused_at_load_with_the_rebuild_message() {
    // Each older contract with the signature its `describe` export had.
    let olders = [
        (
            "0.1.0",
            "(param i32 i32 i32 i32)",
            include_str!("../testdata/controller-0.1.0.wit"),
        ),
        (
            "0.2.0",
            "(param i32 i32 i32 i32 i64)",
            include_str!("../testdata/controller-0.2.0.wit"),
        ),
    ];
    for (version, describe_params, wit) in olders {
        let old = format!(
            r#"(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  {BUMP_REALLOC}
  (func (export "wasmctrl:controller/reconciler@{version}#describe") {describe_params} (result i32)
    unreachable)
  (func (export "wasmctrl:controller/reconciler@{version}#reconcile") (param i32) (result i32)
    unreachable))"#
        );
        let file = format!("controller-{version}.wit");
        let bytes = component_from_wat_in(&old, &[(file.as_str(), wit)], "controller");
        let e = runtime(RuntimeConfig::default())
            .load_bytes("old-guest.wasm", &bytes)
            .expect_err("an older guest must be refused");
        assert_eq!(e.reason(), "version", "{e}");
        assert_eq!(
            e.to_string(),
            format!("guest old-guest.wasm was built against wasmctrl:controller@{version}; this host speaks @0.3.0: rebuild it with the wasmctrl guest SDK (see wit/README.md)")
        );
    }
}

#[test]
fn trapping_describe_is_a_typed_error() {
    let rt = runtime(RuntimeConfig::default());
    let module = rt
        .load_bytes(
            "hostile.wasm",
            &component_from_wat(&wat_guest("unreachable")),
        )
        .unwrap();
    let e = module.manifest(&env()).expect_err("describe traps");
    assert_eq!(e.reason(), "trap");
    assert_eq!(e.guest, "hostile.wasm");
}

#[test]
fn gpu_guest_manifest_is_valid_and_follows_configuration() {
    let rt = runtime(RuntimeConfig::default());
    let module = rt.load_file(&gpu_guest_path()).unwrap();
    let m = module.manifest(&env()).unwrap();
    assert_eq!(m.name, "gpu-summary");
    assert_eq!(m.watches[0].gvk.kind, "Pod");
    assert!(m.may_write(
        &Gvk::from_api_version("v1", "ConfigMap"),
        Some("ops"),
        "gpu-summary"
    ));
    assert!(!m.may_write(
        &Gvk::from_api_version("v1", "ConfigMap"),
        Some("ops"),
        "other"
    ));

    let mut config = BTreeMap::new();
    config.insert("bogus".to_string(), "1".to_string());
    let e = module
        .manifest(&environment("ops", &config))
        .expect_err("unknown key");
    assert_eq!(e.reason(), "manifest");
    assert!(e.to_string().contains("bogus"), "{e}");
}

#[test]
fn a_configuration_the_guest_rejects_names_the_declared_guest_and_its_file() {
    let rt = runtime(RuntimeConfig::default());
    let module = rt.load_file(&gpu_guest_path()).unwrap();
    let config = BTreeMap::from([("bogus".to_string(), "1".to_string())]);
    let e = module
        .manifest(&environment("ops", &config))
        .expect_err("unknown key");
    assert_eq!(e.guest, "gpu-summary", "{e}");
    assert_eq!(e.file(), Some("guest_gpu_summary.wasm"), "{e}");
    assert!(
        e.to_string()
            .starts_with("guest gpu-summary (guest_gpu_summary.wasm): invalid manifest"),
        "{e}"
    );
}

#[test]
fn a_guest_rejecting_every_configuration_is_named_by_its_file() {
    let rt = runtime(RuntimeConfig::default());
    // `err("")` at 1024: the tag, then the string (pointer, length) at +4.
    let rejects = "(i32.store8 (i32.const 1024) (i32.const 1))
        (i32.store (i32.const 1028) (i32.const 0)) (i32.store (i32.const 1032) (i32.const 0))
        (i32.const 1024)";
    let module = rt
        .load_bytes(
            "picky.wasm",
            &component_from_wat(&wat_guest_describing(rejects, "unreachable")),
        )
        .unwrap();
    let config = BTreeMap::from([("bogus".to_string(), "1".to_string())]);
    let e = module
        .manifest(&environment("ops", &config))
        .expect_err("rejects");
    assert_eq!((e.guest.as_str(), e.file()), ("picky.wasm", None));
}

#[test]
fn gpu_guest_reconciles_a_projected_world() {
    let rt = runtime(RuntimeConfig::default());
    let module = rt.load_file(&gpu_guest_path()).unwrap();
    let m = module.manifest(&env()).unwrap();
    let pods = [
        json!({"metadata": {"name": "a", "namespace": "ml"}, "spec": {"nodeName": "n1",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
            "status": {"phase": "Running"}}),
        json!({"metadata": {"name": "b", "namespace": "ml"}, "spec": {"nodeName": "n1",
            "initContainers": [{"name": "i", "resources": {"requests": {"nvidia.com/gpu": "4"}}}],
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": 1}}}]},
            "status": {"phase": "Running"}}),
        json!({"metadata": {"name": "c", "namespace": "ml"}, "spec": {"nodeName": "n2",
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "lots"}}}]}}),
    ];
    let mut interner = Interner::default();
    let objs: Vec<_> = pods
        .iter()
        .map(|p| m.watches[0].projection.project(p, &mut interner))
        .collect();
    let snap = snapshot::build(
        &m,
        &[snapshot::WatchView::identity(
            objs.iter().collect(),
            m.watches[0].projection.paths().len(),
        )],
    );
    let request = Request {
        key: "gpu-summary".into(),
        watch: None,
        presence: None,
    };
    let (plan, _) = module.reconcile(&m, &env(), &request, snap);
    let plan = plan.unwrap();
    let PlannedWrite::Apply { doc, .. } = &plan.writes[0] else {
        panic!("expected an apply: {:?}", plan.writes);
    };
    assert_eq!(
        *doc,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "gpu-summary", "namespace": "ops"},
               "data": {"n1": "6"}})
    );
    assert_eq!(plan.events.len(), 1);
    assert_eq!(plan.events[0].reason, "InvalidQuantity");
    assert_eq!(plan.events[0].regarding.name, "c");
}

#[test]
fn precompiled_cache_is_written_once_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = GuestRuntime::new(RuntimeConfig::default().cache_dir(Some(dir.path().to_path_buf())))
        .unwrap();
    let path = gpu_guest_path();
    let first = rt.load_file(&path).unwrap();
    assert!(!first.from_cache());
    let cached: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(cached.len(), 1, "one artifact per digest");
    let second = rt.load_file(&path).unwrap();
    assert!(second.from_cache());
    assert_eq!(first.digest(), second.digest());
    // The cached artifact behaves like the compiled one.
    assert_eq!(second.manifest(&env()).unwrap().name, "gpu-summary");

    // A corrupt artifact is ignored and recompiled, never trusted.
    let artifact = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(&artifact, b"garbage").unwrap();
    let third = rt.load_file(&path).unwrap();
    assert!(!third.from_cache());
    assert_eq!(third.manifest(&env()).unwrap().name, "gpu-summary");
}

/// A world that also imports WASI stdout/stderr, as Rust's `std` does.
pub(super) const PRINTER_WIT: [(&str, &str); 3] = [
    (
        "wasi-io.wit",
        r#"package wasi:io@0.2.6;
interface error { resource error; }
interface streams {
  use error.{error};
  variant stream-error { last-operation-failed(error), closed }
  resource output-stream {
    check-write: func() -> result<u64, stream-error>;
    write: func(contents: list<u8>) -> result<_, stream-error>;
    blocking-flush: func() -> result<_, stream-error>;
  }
}"#,
    ),
    (
        "wasi-cli.wit",
        r#"package wasi:cli@0.2.6;
interface stdout { use wasi:io/streams@0.2.6.{output-stream}; get-stdout: func() -> output-stream; }
interface stderr { use wasi:io/streams@0.2.6.{output-stream}; get-stderr: func() -> output-stream; }"#,
    ),
    (
        "printer.wit",
        r#"package test:printer;
world printer {
  include wasmctrl:controller/controller@0.3.0;
  import wasi:cli/stdout@0.2.6;
  import wasi:cli/stderr@0.2.6;
}"#,
    ),
];

fn printer_component(reconcile_body: &str, data: &str) -> Vec<u8> {
    printer_component_at("0.2.6", reconcile_body, data)
}

/// [`printer_component`] importing WASI `version` (`0.2.0`, `0.2.12`, ...).
fn printer_component_at(version: &str, reconcile_body: &str, data: &str) -> Vec<u8> {
    let wat = wat_guest_importing(
        &format!(
            "(import \"wasi:cli/stdout@0.2.6\" \"get-stdout\" (func $stdout (result i32)))\n  (import \"wasi:cli/stderr@0.2.6\" \"get-stderr\" (func $stderr (result i32)))\n  (import \"wasi:io/streams@0.2.6\" \"[method]output-stream.write\" (func $write (param i32 i32 i32 i32)))\n  (import \"wasi:io/streams@0.2.6\" \"[method]output-stream.blocking-flush\" (func $flush (param i32 i32)))\n  {data}"
        )
        .replace("@0.2.6", &format!("@{version}")),
        reconcile_body,
    );
    let wit =
        PRINTER_WIT.map(|(name, text)| (name, text.replace("@0.2.6", &format!("@{version}"))));
    let wit: Vec<(&str, &str)> = wit.iter().map(|(n, t)| (*n, t.as_str())).collect();
    component_from_wat_in(&wat, &wit, "printer")
}

#[test]
fn guests_importing_any_wasi_0_2_version_link_and_print() {
    let data = r#"(data (i32.const 3000) "linked\n")"#;
    let body = "(local $o i32)
        (local.set $o (call $stdout))
        (call $write (local.get $o) (i32.const 3000) (i32.const 7) (i32.const 3100))
        (i32.const 3200)";
    for version in ["0.2.0", "0.2.6", "0.2.12"] {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let module = runtime(RuntimeConfig::default())
                .load_bytes("printer.wasm", &printer_component_at(version, body, data))
                .unwrap_or_else(|e| panic!("WASI {version}: {e}"));
            let (plan, _) = module.reconcile(&gpu_manifest(), &env(), &request(), empty_snapshot());
            plan.unwrap_or_else(|e| panic!("WASI {version}: {e}"));
        });
        let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(logs.contains("linked"), "WASI {version}: {logs}");
    }
}

/// Captures formatted tracing output on this thread.
#[derive(Clone, Default)]
pub(super) struct Captured(pub(super) std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn guest_stdout_and_stderr_go_to_tracing_with_the_guest_name() {
    // Writes "hello\nwor" then "ld\n" to stdout, "oops" to stderr (no
    // newline: flushed when the call ends), then returns an empty plan.
    let data = r#"(data (i32.const 3000) "hello\nworld\noops")"#;
    let body = "(local $o i32) (local $e i32)
        (local.set $o (call $stdout))
        (local.set $e (call $stderr))
        (call $write (local.get $o) (i32.const 3000) (i32.const 9) (i32.const 3100))
        (call $write (local.get $o) (i32.const 3009) (i32.const 3) (i32.const 3100))
        (call $flush (local.get $o) (i32.const 3100))
        (call $write (local.get $e) (i32.const 3012) (i32.const 4) (i32.const 3100))
        (i32.const 3200)";
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let rt = runtime(RuntimeConfig::default());
        let module = rt
            .load_bytes("printer.wasm", &printer_component(body, data))
            .unwrap();
        let (plan, _) = module.reconcile(&gpu_manifest(), &env(), &request(), empty_snapshot());
        assert!(plan.unwrap().writes.is_empty());
    });
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = logs.lines().collect();
    let find = |needle: &str| lines.iter().find(|l| l.contains(needle)).copied();
    let hello = find("hello").expect("stdout line logged");
    assert!(
        hello.contains("INFO")
            && hello.contains("wasmctrl::guest::stdout")
            && hello.contains("gpu-summary"),
        "{hello}"
    );
    assert!(
        find("world").is_some(),
        "a line split across writes is logged whole: {logs}"
    );
    let oops = find("oops").expect("stderr flushed at the end of the call");
    assert!(
        oops.contains("WARN") && oops.contains("wasmctrl::guest::stderr"),
        "{oops}"
    );
}

#[test]
fn a_guest_asking_for_stdio_handles_in_a_loop_traps_instead_of_growing_the_host() {
    let body = "(local $i i32)
        (loop $again
          (drop (call $stdout))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $again (i32.lt_u (local.get $i) (i32.const 100000))))
        (i32.const 3200)";
    let rt = runtime(RuntimeConfig::default());
    let module = rt
        .load_bytes("grabber.wasm", &printer_component(body, ""))
        .unwrap();
    let (plan, _) = module.reconcile(&gpu_manifest(), &env(), &request(), empty_snapshot());
    let e = plan.unwrap_err();
    assert_eq!(e.reason(), "trap", "{e}");
    assert!(e.to_string().contains("stdio handles"), "{e}");
}

mod governance;
mod warm;

/// The SDK crates carry their own copy of the contract (a package holds only
/// files under its own directory): each must be the file the host is built
/// from.
#[test]
fn the_sdk_crates_carry_the_contract_the_host_is_built_from() {
    let host = include_str!("../../../../wit/controller.wit");
    for (copy, text) in [
        (
            "wit/rust/sdk/wit/controller.wit",
            include_str!("../../../../wit/rust/sdk/wit/controller.wit"),
        ),
        (
            "wit/rust/sdk-aggregate/wit/controller.wit",
            include_str!("../../../../wit/rust/sdk-aggregate/wit/controller.wit"),
        ),
    ] {
        assert!(
            text == host,
            "{copy} differs from wit/controller.wit: copy the contract there (cp wit/controller.wit {copy})"
        );
    }
}
