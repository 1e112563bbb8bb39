//! The operator's caps and grants as the runtime enforces them, with tiny
//! `.wat` guests: requeue minimum, plan size, the `log` budget, the WASI
//! the host governs and the imports it never provides, policy admission at
//! load, ConfigMap data keys.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use wasmctrl_test_support::component::{component_from_wat, component_from_wat_in};

use super::tests::{
    empty_snapshot, env, gpu_guest_path, gpu_manifest, request, returns_apply, runtime, wat_guest,
    wat_guest_importing, Captured, PRINTER_WIT,
};
use super::*;
use crate::guest::policy::Policy;

fn reconcile_with(policy: Policy, body: &str) -> (Result<ValidatedPlan>, CallStats) {
    let rt = runtime(RuntimeConfig::default().policy(policy));
    let module = rt
        .load_bytes("g.wasm", &component_from_wat(&wat_guest(body)))
        .unwrap();
    module.reconcile(&gpu_manifest(), &env(), &request(), empty_snapshot())
}

fn limits(yaml: &str) -> Policy {
    Policy::parse(&format!("default:\n  limits:\n{yaml}")).unwrap()
}

#[test]
fn a_zero_requeue_delay_is_raised_to_the_minimum_not_refused() {
    let body = returns_apply(&[]).replace(
        "(i32.store8 (i32.const 1048) (i32.const 0))",
        "(i32.store8 (i32.const 1048) (i32.const 1)) (i64.store (i32.const 1056) (i64.const 0))",
    );
    let (plan, stats) = reconcile_with(Policy::default(), &body);
    assert_eq!(plan.unwrap().requeue_after, Some(Duration::from_secs(1)));
    assert!(stats.requeue_clamped);
    let (plan, _) = reconcile_with(limits("    minRequeueMs: 250\n"), &body);
    assert_eq!(
        plan.unwrap().requeue_after,
        Some(Duration::from_millis(250))
    );
}

const SUMMARY: &str =
    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"summary","namespace":"ops"}}"#;

#[test]
fn a_plan_over_the_write_cap_is_refused_whole() {
    let other = SUMMARY.replace("\"ops\"", "\"ops2\"");
    let body = returns_apply(&[SUMMARY, &other, SUMMARY]);
    let (plan, _) = reconcile_with(limits("    maxPlanWrites: 2\n"), &body);
    let e = plan.unwrap_err();
    assert_eq!(e.reason(), "plan_too_large", "{e}");
    assert!(
        e.to_string()
            .contains("plan too large: 3 writes, over the limit of 2 (maxPlanWrites)"),
        "{e}"
    );
}

#[test]
fn a_plan_over_the_byte_cap_is_refused_before_parsing() {
    // Not JSON at all: the cap is checked before any document is parsed.
    let big = "x".repeat(300);
    let (plan, _) = reconcile_with(limits("    maxPlanBytes: 200\n"), &returns_apply(&[&big]));
    let e = plan.unwrap_err();
    assert!(
        e.to_string()
            .contains("300 bytes, over the limit of 200 (maxPlanBytes)"),
        "{e}"
    );
}

#[test]
fn a_configmap_key_the_api_server_would_refuse_is_refused_naming_it() {
    let bad = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"summary","namespace":"ops"},"data":{"../../etc":"1"}}"#;
    let (plan, _) = reconcile_with(Policy::default(), &returns_apply(&[bad]));
    let e = plan.unwrap_err();
    assert_eq!(e.reason(), "malformed_plan", "{e}");
    assert!(
        e.to_string()
            .contains(r#"data key "../../etc" is not a valid ConfigMap key"#),
        "{e}"
    );
    let good = bad.replace("../../etc", "node-1.example");
    assert!(reconcile_with(Policy::default(), &returns_apply(&[&good]))
        .0
        .is_ok());
}

#[test]
fn log_messages_over_budget_are_truncated_and_dropped_not_relayed() {
    // Five 10 MB messages through the `log` import.
    let wat = format!(
        r#"(module
  (import "wasmctrl:controller/log@0.3.0" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 170)
  (global $heap (mut i32) (i32.const 11000000))
  {}
  (func (export "wasmctrl:controller/reconciler@0.3.0#describe") (param i32 i32 i32 i32 i64) (result i32)
    unreachable)
  (func (export "wasmctrl:controller/reconciler@0.3.0#reconcile") (param i32) (result i32)
    (local $i i32)
    (loop $again
      (call $log (i32.const 2) (i32.const 4096) (i32.const 10000000))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 5))))
    (i32.store8 (i32.const 1024) (i32.const 0))
    (i32.store (i32.const 1032) (i32.const 0)) (i32.store (i32.const 1036) (i32.const 0))
    (i32.store (i32.const 1040) (i32.const 0)) (i32.store (i32.const 1044) (i32.const 0))
    (i32.store8 (i32.const 1048) (i32.const 0))
    (i32.const 1024)))"#,
        wasmctrl_test_support::component::BUMP_REALLOC
    );
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let stats = tracing::subscriber::with_default(subscriber, || {
        let rt = runtime(RuntimeConfig::default());
        let module = rt
            .load_bytes("chatty.wasm", &component_from_wat(&wat))
            .unwrap();
        let (plan, stats) = module.reconcile(&gpu_manifest(), &env(), &request(), empty_snapshot());
        plan.unwrap();
        stats
    });
    let logs = captured.0.lock().unwrap().len();
    assert!(
        logs < 128 << 10,
        "{logs} bytes of logs for 50 MB of messages"
    );
    assert_eq!(stats.log_limited, 5);
    let text = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    assert!(text.contains("[truncated]"), "{text:.2000}");
    assert!(text.contains("over its budget"), "{text:.2000}");
}

const FS_WIT: [(&str, &str); 2] = [
    (
        "wasi-filesystem.wit",
        r#"package wasi:filesystem@0.2.6;
interface types {
  use wasi:io/streams@0.2.6.{output-stream};
  resource descriptor { write-via-stream: func(offset: u64) -> result<output-stream, u8>; }
}
interface preopens { use types.{descriptor}; get-directories: func() -> list<tuple<descriptor, string>>; }"#,
    ),
    (
        "fs.wit",
        r#"package test:fs;
world fs {
  include wasmctrl:controller/controller@0.3.0;
  import wasi:filesystem/preopens@0.2.6;
}"#,
    ),
];

#[test]
fn a_guest_importing_the_filesystem_loads_and_sees_no_directory() {
    // get-directories returns its list at 2000 (pointer, length): a
    // non-empty list traps.
    let body = "(call $dirs (i32.const 2000))
        (if (i32.ne (i32.load (i32.const 2004)) (i32.const 0)) (then unreachable))
        (i32.const 3200)";
    let wat = wat_guest_importing(
        "(import \"wasi:filesystem/preopens@0.2.6\" \"get-directories\" (func $dirs (param i32)))",
        body,
    );
    let extra = [PRINTER_WIT[0], FS_WIT[0], FS_WIT[1]];
    let bytes = component_from_wat_in(&wat, &extra, "fs");
    let module = runtime(RuntimeConfig::default())
        .load_bytes("fs.wasm", &bytes)
        .unwrap();
    let (plan, _) = module.reconcile(&gpu_manifest(), &env(), &request(), empty_snapshot());
    assert!(plan.unwrap().writes.is_empty());
}

const HTTP_WIT: [(&str, &str); 2] = [
    (
        "wasi-http.wit",
        "package wasi:http@0.2.3;\ninterface outgoing-handler { handle: func() -> u32; }",
    ),
    (
        "http.wit",
        r#"package test:http;
world http {
  include wasmctrl:controller/controller@0.3.0;
  import wasi:http/outgoing-handler@0.2.3;
}"#,
    ),
];

#[test]
fn a_guest_importing_http_is_refused_naming_the_import_and_the_flag_that_drops_it() {
    let wat = wat_guest_importing(
        "(import \"wasi:http/outgoing-handler@0.2.3\" \"handle\" (func (result i32)))",
        "unreachable",
    );
    let bytes = component_from_wat_in(&wat, &HTTP_WIT, "http");
    let e = runtime(RuntimeConfig::default())
        .load_bytes("http.wasm", &bytes)
        .unwrap_err();
    assert_eq!(e.reason(), "unsupported_import", "{e}");
    let msg = e.to_string();
    assert!(
        msg.starts_with(
            "guest http.wasm: imports wasi:http/outgoing-handler@0.2.3, which the host does not provide: guests have no network access"
        ),
        "{msg}"
    );
    assert!(msg.contains("`--disable http` (`-d http`)"), "{msg}");
}

#[test]
fn a_manifest_over_the_policy_is_refused_at_load_naming_the_guest() {
    let policy = Policy::parse(
        "default:\n  watch: [{group: \"\", kinds: [Node]}]\n  write: [{group: \"\", kinds: [ConfigMap], namespaces: [elsewhere]}]\n",
    )
    .unwrap();
    let rt = runtime(RuntimeConfig::default().policy(policy));
    let module = rt.load_file(&gpu_guest_path()).unwrap();
    let e = module.manifest(&env()).unwrap_err();
    assert_eq!(e.reason(), "policy", "{e}");
    let msg = e.to_string();
    assert!(
        msg.starts_with("guest gpu-summary: refused by the operator policy"),
        "{msg}"
    );
    assert!(msg.contains("2 denied"), "{msg}");
    // Without a policy file it loads as before.
    assert!(runtime(RuntimeConfig::default())
        .load_file(&gpu_guest_path())
        .unwrap()
        .manifest(&env())
        .is_ok());
}

#[test]
fn the_event_cap_counts_events() {
    let event = wit::Event {
        regarding: wit::ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: None,
            name: "p".into(),
        },
        related: None,
        event_type: wit::EventType::Normal,
        reason: "R".into(),
        action: String::new(),
        message: String::new(),
    };
    let plan = wit::Plan {
        writes: vec![],
        events: vec![event; 11],
        requeue_after_ms: None,
    };
    let caps = crate::guest::policy::Limits {
        max_plan_events: 10,
        ..Default::default()
    };
    let e = limits::check_plan(&plan, &caps).unwrap_err();
    assert!(
        e.to_string()
            .contains("11 events, over the limit of 10 (maxPlanEvents)"),
        "{e}"
    );
}

#[test]
fn a_million_write_plan_is_refused_before_any_document_is_parsed() {
    // One 2-byte document, referenced by 1,000,000 writes (48 bytes each,
    // from 65536): the plan the issue's probe returned.
    let n = 1_000_000;
    let body = format!(
        "(local $i i32) (local $at i32)
        (i32.store16 (i32.const 4096) (i32.const 0x7d7b))
        (local.set $at (i32.const 65536))
        (loop $again
          (i32.store8 (local.get $at) (i32.const 0))
          (i32.store (i32.add (local.get $at) (i32.const 4)) (i32.const 4096))
          (i32.store (i32.add (local.get $at) (i32.const 8)) (i32.const 2))
          (local.set $at (i32.add (local.get $at) (i32.const 48)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $again (i32.lt_u (local.get $i) (i32.const {n}))))
        (i32.store8 (i32.const 1024) (i32.const 0))
        (i32.store (i32.const 1032) (i32.const 65536)) (i32.store (i32.const 1036) (i32.const {n}))
        (i32.store (i32.const 1040) (i32.const 0)) (i32.store (i32.const 1044) (i32.const 0))
        (i32.store8 (i32.const 1048) (i32.const 0))
        (i32.const 1024)"
    );
    let wat = wat_guest(&body).replace(
        "(memory (export \"memory\") 1)",
        "(memory (export \"memory\") 800)",
    );
    let rt = runtime(RuntimeConfig::default());
    let module = rt
        .load_bytes("huge.wasm", &component_from_wat(&wat))
        .unwrap();
    let (plan, _) = module.reconcile(&gpu_manifest(), &env(), &request(), empty_snapshot());
    let e = plan.unwrap_err();
    // 48 MB of write records: stopped while being copied out, far under
    // wasmtime's own 128 MiB default that let it through before.
    assert_eq!(e.reason(), "plan_too_large", "{e}");
    assert!(
        e.to_string()
            .contains("within maxPlanWrites, maxPlanEvents and maxPlanBytes"),
        "{e}"
    );
}

/// A plan of `n` writes, each `apply(doc)`, built by a loop in the guest
/// (the writes array at 64 KiB, 48 bytes each; the document at 4096).
fn returns_many_applies(n: u32, doc: &str) -> String {
    let mut body = String::new();
    for (j, b) in doc.bytes().enumerate() {
        body.push_str(&format!(
            "(i32.store8 (i32.const {}) (i32.const {b}))\n",
            4096 + j
        ));
    }
    let pages = (65536 + 48 * n as usize).div_ceil(65536) + 1;
    body.push_str(&format!(
        "(drop (memory.grow (i32.const {pages})))
         (local.set 0 (i32.const 0))
         (block $done (loop $next
           (br_if $done (i32.ge_u (local.get 0) (i32.const {n})))
           (i32.store8 (i32.add (i32.const 65536) (i32.mul (local.get 0) (i32.const 48))) (i32.const 0))
           (i32.store (i32.add (i32.const 65540) (i32.mul (local.get 0) (i32.const 48))) (i32.const 4096))
           (i32.store (i32.add (i32.const 65544) (i32.mul (local.get 0) (i32.const 48))) (i32.const {len}))
           (local.set 0 (i32.add (local.get 0) (i32.const 1)))
           (br $next)))
         (i32.store8 (i32.const 1024) (i32.const 0))
         (i32.store (i32.const 1032) (i32.const 65536)) (i32.store (i32.const 1036) (i32.const {n}))
         (i32.store (i32.const 1040) (i32.const 0)) (i32.store (i32.const 1044) (i32.const 0))
         (i32.store8 (i32.const 1048) (i32.const 0))
         (i32.const 1024)",
        len = doc.len()
    ));
    body
}

#[test]
fn the_copy_budget_stops_a_million_small_writes_and_passes_a_plan_at_every_cap() {
    let (plan, _) = reconcile_with(Policy::default(), &returns_many_applies(1_000_000, SUMMARY));
    let e = plan.unwrap_err();
    assert_eq!(e.reason(), "plan_too_large", "{e}");
    // A plan at the caps: 10,000 writes (maxPlanWrites) of documents
    // adding up to just under 16 MiB (maxPlanBytes) is copied out whole and
    // refused, if at all, for what it says, never for its size.
    let pad = "x".repeat(1677 - SUMMARY.len() - r#","data":{"p":""}"#.len());
    let doc = SUMMARY.replace("}}", &format!(r#"}},"data":{{"p":"{pad}"}}}}"#));
    assert_eq!(doc.len(), 1677);
    assert!(10_000 * doc.len() <= crate::guest::policy::defaults::MAX_PLAN_BYTES);
    let (plan, _) = reconcile_with(Policy::default(), &returns_many_applies(10_000, &doc));
    if let Err(e) = plan {
        assert_ne!(e.reason(), "plan_too_large", "{e}");
        assert_ne!(e.reason(), "trap", "{e}");
    }
}
