//! A real Rust std guest (`tests/guests/guest-println`, built for
//! `wasm32-wasip2`) in the host's runtime: its `println!`/`eprintln!` reach
//! the host's logs with its name, and a panic's message reaches the error
//! the host reports.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use wasmctrl::guest::snapshot::{self, WatchView};
use wasmctrl::guest::{self, GuestErrorKind, GuestModule, GuestRuntime, RuntimeConfig};

/// The built test guest (`make guest` builds it).
pub fn println_guest_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let p = target.join("wasm32-wasip2/guest/guest_println.wasm");
    assert!(
        p.exists(),
        "build the test guest first: cargo build -p guest-println --target wasm32-wasip2 --profile guest (make guest)"
    );
    p
}

fn load() -> GuestModule {
    GuestRuntime::new(RuntimeConfig::default().cache_dir(None))
        .unwrap()
        .load_file(&println_guest_path())
        .unwrap()
}

pub fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Formatted tracing output, captured.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with every log line at info and above captured; returns them.
pub fn logs_of(f: impl FnOnce()) -> Vec<String> {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    text.lines().map(str::to_string).collect()
}

pub fn find<'a>(lines: &'a [String], needle: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no log line contains {needle:?}: {lines:#?}"))
}

#[test]
fn std_println_and_eprintln_reach_the_logs_with_the_guest_name() {
    let module = load();
    let env = guest::environment("ops", &config(&[("name", "printer")]));
    let lines = logs_of(|| {
        let manifest = module.manifest(&env).unwrap();
        let snap = snapshot::build(&manifest, &[WatchView::identity(vec![], 0)]);
        let (plan, _) = module.reconcile(&manifest, &env, &request("println"), snap);
        assert!(plan.unwrap().writes.is_empty());
    });
    // describe runs before the manifest names the guest: the file labels it.
    let described = find(&lines, "describe: namespace ops");
    assert!(
        described.contains("INFO")
            && described.contains("wasmctrl::guest::stdout")
            && described.contains("guest_println.wasm"),
        "{described}"
    );
    let out = find(&lines, "reconcile println: 0 objects");
    assert!(
        out.contains("INFO") && out.contains("wasmctrl::guest::stdout"),
        "{out}"
    );
    assert!(out.contains("guest=\"printer\""), "{out}");
    let err = find(&lines, "reconcile println: to stderr");
    assert!(
        err.contains("WARN")
            && err.contains("wasmctrl::guest::stderr")
            && err.contains("guest=\"printer\""),
        "{err}"
    );
}

#[test]
fn a_guest_panic_is_reported_with_its_message() {
    let module = load();
    let env = guest::environment("ops", &config(&[("panic", "reconcile")]));
    let manifest = module.manifest(&env).unwrap();
    let snap = snapshot::build(&manifest, &[WatchView::identity(vec![], 0)]);
    let lines = logs_of(|| {
        let (plan, _) = module.reconcile(&manifest, &env, &request("k1"), snap);
        let e = plan.unwrap_err();
        assert_eq!(e.reason(), "guest_panic", "{e}");
        let text = e.to_string();
        assert!(
            text.starts_with("guest println: panicked: told to panic in reconcile of k1 (at tests/guests/guest-println/src/lib.rs:"),
            "{text}"
        );
        assert!(!text.contains("unknown import"), "{text}");
        assert!(!e.is_retryable());
    });
    // The panic report is logged as stderr too.
    find(&lines, "told to panic in reconcile of k1");

    let env = guest::environment("ops", &config(&[("panic", "describe")]));
    let e = module.manifest(&env).unwrap_err();
    assert!(
        matches!(&e.kind, GuestErrorKind::Panicked(m) if m.starts_with("told to panic in describe")),
        "{e}"
    );
}

#[test]
fn output_past_the_per_call_cap_is_dropped_but_a_panic_still_names_its_message() {
    let module = load();
    // 1,000 lines of 100 bytes: past the 64 KiB a call may log.
    let env = guest::environment("ops", &config(&[("lines", "1000"), ("panic", "reconcile")]));
    let manifest = module.manifest(&env).unwrap();
    let snap = snapshot::build(&manifest, &[WatchView::identity(vec![], 0)]);
    let lines = logs_of(|| {
        let (plan, _) = module.reconcile(&manifest, &env, &request("k"), snap.clone());
        let e = plan.unwrap_err();
        assert!(
            e.to_string()
                .contains("panicked: told to panic in reconcile of k"),
            "{e}"
        );
    });
    find(&lines, "line 000000");
    find(&lines, "guest log output over its budget");
    assert!(!lines.iter().any(|l| l.contains("line 000999")));
    assert!(!lines.iter().any(|l| l.contains("to stderr")));
    // The cap is per call: the next call logs afresh.
    let env = guest::environment("ops", &BTreeMap::new());
    let lines = logs_of(|| {
        let (plan, _) = module.reconcile(&manifest, &env, &request("again"), snap);
        plan.unwrap();
    });
    find(&lines, "reconcile again: 0 objects");
}

pub fn request(key: &str) -> wasmctrl::guest::Request {
    wasmctrl::guest::Request {
        key: key.to_string(),
        watch: None,
        presence: None,
    }
}

/// Printing is logging: stdout and stderr lines take the same budgets as
/// the `log` import (message size, bytes per call, bytes per second per
/// guest), and what is cut is counted like `log`'s.
#[test]
fn printed_lines_take_the_log_budgets_of_the_policy() {
    let policy = wasmctrl::guest::policy::Policy::parse(
        "default:\n  limits:\n    maxLogMessageBytes: 40\n    maxLogBytesPerSecond: 1000\n",
    )
    .unwrap();
    let module = GuestRuntime::new(RuntimeConfig::default().cache_dir(None).policy(policy))
        .unwrap()
        .load_file(&println_guest_path())
        .unwrap();
    // 30 lines of ~100 bytes: each is cut to 40 bytes (plus the marker),
    // and the second's budget of 1,000 bytes admits about 20 of them.
    let env = guest::environment("ops", &config(&[("lines", "30")]));
    let manifest = module.manifest(&env).unwrap();
    let snap = snapshot::build(&manifest, &[WatchView::identity(vec![], 0)]);
    let mut limited = 0;
    let lines = logs_of(|| {
        let (plan, stats) = module.reconcile(&manifest, &env, &request("k"), snap.clone());
        plan.unwrap();
        limited = stats.log_limited;
    });
    let first = find(&lines, "line 000000");
    assert!(first.contains("…[truncated]"), "{first}");
    assert!(!first.contains(&"x".repeat(41)), "{first}");
    let printed = lines.iter().filter(|l| l.contains(" line 0000")).count();
    assert!(
        (10..30).contains(&printed),
        "{printed} lines logged: {lines:#?}"
    );
    find(&lines, "guest log output over its budget");
    // Every line was cut or dropped, and counted.
    assert!(limited >= 30, "{limited} counted");
}
