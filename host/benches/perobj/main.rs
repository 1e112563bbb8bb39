//! Per-object controllers at scale (issue 26): `examples/guest-app` in the
//! wasmctrl host against the same App controller written with kube-runtime's
//! `Controller` (`native_app`), and both against the floor (`floor_app`: the
//! least any App controller does on this client stack, the watch events
//! decoded and the writes sent), all as subprocesses, each on a fresh
//! embedded API server (garbage collector on: every owner exists) holding N
//! Apps in one namespace and its `shared-settings`.
//!
//! Each system runs the phases of `system`: (2) cold start with every child
//! missing; (1) the process restarted with everything correct, until every
//! key was reconciled once; (3) spec edits at a fixed rate, each timed until
//! its child and its `Ready` status at the new generation show it; (4) one
//! change of `shared-settings`, which maps to every App, timed until every
//! child holds it; (5) idle across a resync. CPU is utime + stime from
//! `/proc`, memory VmHWM; writes are the requests each system counts and the
//! new versions the bench's watches see.
//!
//! Run: `make guest && cargo bench -p wasmctrl --features
//! wasmctrl/dev-server --bench perobj -- --apps 1000,10000,20000` (also
//! `--edits`, `--rate`, `--qps`, `--workers` (wasmctrl's workers per guest;
//! default the host's, 2; the native peer runs 16 reconciles at once),
//! `--systems native,wasmctrl,floor` and
//! `wasmctrl-py`, `wasmctrl-ts`: guest-app in Python and TypeScript, built
//! by `make guest-py` and `make guests-js`; a fresh guest cache per world,
//! so (2) includes compiling the guest and (1) loads it compiled;
//! `PEROBJ_LOGS=DIR` keeps the subprocesses' logs there,
//! `PEROBJ_WASMCTRL=PATH` runs another build of the host; each
//! subprocess's pid is printed, for `perf record -p`). A system that does
//! not complete a full run (a phase that never converges, or a process that
//! exits: found at the next look, not at the end of the phase) is stopped, named
//! under the table with the reason, and the run goes on with the next one
//! (and exits with status 1 at the end).
//! Under `cargo test
//! --all-targets` it runs a smoke world (30 Apps, 5 edits, resync 10 s) and
//! asserts: every system converges, sees every edit and the shared change;
//! the restart reconciles every key (wasmctrl: exactly once) with no new
//! version (wasmctrl: no write request); idle across a resync writes
//! nothing (wasmctrl: no write request; the floor has no resync).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "../shared/args.rs"]
mod args;
mod floor_app;
mod native_app;
#[path = "../shared/process.rs"]
mod process;
mod system;
mod world;

use std::path::PathBuf;
use std::time::Duration;

use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

use system::{Lang, Outcome, Phase, Setup, System};

/// Sizes of the measured run when none are given.
const DEFAULT_APPS: usize = 1_000;
/// Spec edits in the measured churn, and their rate per second.
const DEFAULT_EDITS: usize = 500;
const DEFAULT_RATE: f64 = 50.0;
/// wasmctrl's client-side limit in the measured run (burst: the same).
const DEFAULT_QPS: f64 = 1000.0;
/// Resync period of the measured run, and how much longer idle writes are
/// counted.
const RESYNC: Duration = Duration::from_secs(30);
const IDLE_MARGIN: Duration = Duration::from_secs(5);
/// The smoke run (`cargo test --all-targets`).
const SMOKE_APPS: usize = 30;
const SMOKE_EDITS: usize = 5;
const SMOKE_RATE: f64 = 10.0;
const SMOKE_RESYNC: Duration = Duration::from_secs(10);
const SMOKE_IDLE_MARGIN: Duration = Duration::from_secs(3);

/// One system on a fresh server holding `apps` Apps.
async fn run_one(apps: usize, setup: &Setup, system: System) -> Outcome {
    let server = ApiServer::start(ApiServerConfig::default())
        .await
        .expect("embedded API server starts");
    let kubeconfig = setup
        .dir
        .join(format!("kubeconfig-{}-{apps}", system.name()));
    server
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    let client = server.client().await.expect("a client");
    world::install_crd(&client).await;
    let t = std::time::Instant::now();
    let mut world = world::populate(&client, apps).await;
    eprintln!(
        "perobj: created {apps} Apps for {} in {:.1} s",
        system.name(),
        t.elapsed().as_secs_f64()
    );
    let outcome = system::run(&client, &kubeconfig, &mut world, setup, system).await;
    drop(server);
    outcome
}

/// What a panic said (its first line: the rest is the system's log).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message");
    let first = text.lines().next().unwrap_or_default();
    first.trim_end_matches("; its log ends:").to_string()
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn writes(p: &Phase) -> String {
    format!("{} / {}", p.counts.writes, p.versions)
}

fn print_table(outcomes: &[Outcome], setup: &Setup) {
    println!(
        "perobj: {} edits at {}/s, resync {} s, idle window {} s, wasmctrl --kube-api-qps {} --kube-api-burst {} --workers {}",
        setup.edits,
        setup.rate,
        setup.resync.as_secs(),
        setup.idle.as_secs(),
        setup.qps,
        setup.burst,
        setup
            .workers
            .map_or_else(|| "(the host's default)".to_string(), |w| w.to_string())
    );
    println!();
    println!("Writes are `requests sent / new versions`.");
    println!();
    println!("| system | Apps | (2) all children missing: time | CPU | writes | VmHWM | (1) restart, all correct: every key reconciled | CPU | writes (+{} s) | VmHWM | (3) churn p50 | p90 | p99 | max | missed | CPU | reconciles per edit | writes per edit | VmHWM after churn | (4) shared change: all children | writes | writes/s | (5) idle writes | VmHWM at end | RSS at end |", system::SETTLE.as_secs());
    println!(
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for o in outcomes {
        let per_edit = |p: &Phase| {
            format!(
                "{:.2} / {:.2}",
                p.counts.writes / setup.edits as f64,
                p.versions as f64 / setup.edits as f64
            )
        };
        println!(
            "| {} | {} | {:.2} s | {:.2} s | {} | {:.0} MiB | {:.2} s | {:.2} s | {} | {:.0} MiB | {} | {} | {} | {} | {} | {:.2} s | {:.2} | {} | {:.0} MiB | {:.2} s | {} | {:.0} | {} | {:.0} MiB | {:.0} MiB |",
            o.system.name(),
            o.apps,
            o.create.took.as_secs_f64(),
            o.create.cpu.as_secs_f64(),
            writes(&o.create),
            mib(o.create_hwm),
            o.restart.took.as_secs_f64(),
            o.restart.cpu.as_secs_f64(),
            writes(&o.restart),
            mib(o.restart_hwm),
            ms(o.latency.p50),
            ms(o.latency.p90),
            ms(o.latency.p99),
            ms(o.latency.max),
            o.missed,
            o.churn.cpu.as_secs_f64(),
            o.churn.counts.reconciles / setup.edits as f64,
            per_edit(&o.churn),
            mib(o.churn_hwm),
            o.fanout.took.as_secs_f64(),
            writes(&o.fanout),
            o.fanout.counts.writes / o.fanout.took.as_secs_f64(),
            writes(&o.idle),
            mib(o.final_hwm),
            mib(o.final_rss),
        );
    }
    println!();
    println!("API server and bench CPU (this process) per phase: | system | Apps | (2) | (1) | (3) | (4) |");
    for o in outcomes {
        println!(
            "| {} | {} | {:.2} s | {:.2} s | {:.2} s | {:.2} s |",
            o.system.name(),
            o.apps,
            o.create.server_cpu.as_secs_f64(),
            o.restart.server_cpu.as_secs_f64(),
            o.churn.server_cpu.as_secs_f64(),
            o.fanout.server_cpu.as_secs_f64(),
        );
    }
    println!();
    println!("Guest calls (wasmctrl's histograms, per phase: calls, mean time inside the guest's reconcile; instances created, mean time to create one; and the restart's first reconcile, from the process's start): | system | Apps | (2) | (1) | (3) | (3) instances | (1) first reconcile |");
    let mean = |seconds: f64, n: f64| {
        if n > 0.0 {
            format!("{n:.0}, {:.3} ms", seconds / n * 1e3)
        } else {
            "0".to_string()
        }
    };
    for o in outcomes
        .iter()
        .filter(|o| matches!(o.system, System::Wasmctrl(_)))
    {
        let calls = |p: &Phase| mean(p.counts.guest_seconds, p.counts.guest_calls);
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.2} s |",
            o.system.name(),
            o.apps,
            calls(&o.create),
            calls(&o.restart),
            calls(&o.churn),
            mean(
                o.churn.counts.instantiate_seconds,
                o.churn.counts.instantiations
            ),
            o.restart_first.as_secs_f64(),
        );
    }
    println!();
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    for (top, bottom) in [
        (System::Wasmctrl(Lang::Rust), System::Native),
        (System::Floor, System::Native),
        (System::Wasmctrl(Lang::Rust), System::Floor),
        (System::Wasmctrl(Lang::Python), System::Wasmctrl(Lang::Rust)),
        (
            System::Wasmctrl(Lang::TypeScript),
            System::Wasmctrl(Lang::Rust),
        ),
        (System::Wasmctrl(Lang::Python), System::Native),
        (System::Wasmctrl(Lang::TypeScript), System::Native),
    ] {
        for b in outcomes.iter().filter(|o| o.system == bottom) {
            let Some(t) = outcomes
                .iter()
                .find(|o| o.system == top && o.apps == b.apps)
            else {
                continue;
            };
            let secs = Duration::as_secs_f64;
            println!(
                "{}/{} at {} Apps: create {:.2}x, restart {:.2}x (CPU {:.2}x), churn p50 {:.2}x p99 {:.2}x CPU {:.2}x, fan-out {:.2}x, VmHWM {:.2}x",
                top.name(),
                bottom.name(),
                b.apps,
                ratio(secs(&t.create.took), secs(&b.create.took)),
                ratio(secs(&t.restart.took), secs(&b.restart.took)),
                ratio(secs(&t.restart.cpu), secs(&b.restart.cpu)),
                ratio(secs(&t.latency.p50), secs(&b.latency.p50)),
                ratio(secs(&t.latency.p99), secs(&b.latency.p99)),
                ratio(secs(&t.churn.cpu), secs(&b.churn.cpu)),
                ratio(secs(&t.fanout.took), secs(&b.fanout.took)),
                ratio(t.final_hwm as f64, b.final_hwm as f64),
            );
        }
    }
}

/// What the smoke run guarantees.
fn check(outcomes: &[Outcome]) {
    for o in outcomes {
        let name = o.system.name();
        assert_eq!(
            o.missed, 0,
            "{name}: every edit reaches its child and status"
        );
        assert_eq!(
            o.restart_keys, o.apps,
            "{name}: the restart reconciles every key"
        );
        assert_eq!(
            o.restart.versions, 0,
            "{name}: a restart over a correct world changes nothing"
        );
        assert_eq!(
            o.idle.versions, 0,
            "{name}: nothing changes while idle across a resync"
        );
        // The floor has no resync.
        assert!(
            o.system == System::Floor || o.idle.counts.reconciles >= o.apps as f64,
            "{name}: the idle window spans a resync ({} reconciles of {} keys)",
            o.idle.counts.reconciles,
            o.apps
        );
        if let System::Wasmctrl(_) = o.system {
            let twice = system::repeated(&o.restart.counts);
            assert!(
                twice.is_empty(),
                "{name}: the restart reconciles each key once, not {twice:?}"
            );
            assert_eq!(
                o.restart.counts.writes, 0.0,
                "{name}: a restart over a correct world sends no write"
            );
            assert_eq!(
                o.idle.counts.writes, 0.0,
                "{name}: no write request while idle across a resync"
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args::run_as_peer(&args, native_app::PEER_FLAG, "native app", |a| {
        native_app::PeerArgs::parse(a).map(native_app::run)
    }) || args::run_as_peer(&args, floor_app::PEER_FLAG, "floor app", |a| {
        native_app::PeerArgs::parse(a).map(floor_app::run)
    }) {
        return;
    }
    // `cargo bench` passes --bench; `cargo test --all-targets` runs the
    // smoke world.
    let full = args.iter().any(|a| a == "--bench");
    let dir = tempfile::tempdir().expect("temporary directory");
    if let Some(keep) = std::env::var_os("PEROBJ_LOGS") {
        // Keep the subprocesses' logs and outputs for a closer look.
        std::fs::create_dir_all(&keep).expect("PEROBJ_LOGS directory");
        eprintln!("perobj: logs in {}", keep.to_string_lossy());
    }
    let log_dir =
        std::env::var_os("PEROBJ_LOGS").map_or_else(|| dir.path().to_path_buf(), PathBuf::from);
    let qps = args::parse(&args, "--qps", DEFAULT_QPS);
    let (sizes, edits, rate, resync, margin) = if full {
        let sizes = args::option(&args, "--apps").map_or_else(
            || vec![DEFAULT_APPS],
            |l| args::list("--apps", &l, args::number),
        );
        (
            sizes,
            args::parse(&args, "--edits", DEFAULT_EDITS),
            args::parse(&args, "--rate", DEFAULT_RATE),
            RESYNC,
            IDLE_MARGIN,
        )
    } else {
        (
            vec![SMOKE_APPS],
            SMOKE_EDITS,
            SMOKE_RATE,
            SMOKE_RESYNC,
            SMOKE_IDLE_MARGIN,
        )
    };
    let setup = Setup {
        dir: log_dir,
        // PEROBJ_WASMCTRL: another build of the host (a before/after
        // comparison on the same load).
        wasmctrl: std::env::var_os("PEROBJ_WASMCTRL").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_wasmctrl")),
            PathBuf::from,
        ),
        resync,
        qps,
        burst: qps as u32,
        workers: args::option(&args, "--workers").map(|w| args::number("--workers", &w)),
        edits,
        rate,
        idle: resync + margin,
        per_key: !full,
    };
    let systems: Vec<System> = args::option(&args, "--systems").map_or_else(
        || vec![System::Native, System::Wasmctrl(Lang::Rust), System::Floor],
        |l| {
            args::list("--systems", &l, |flag, s| {
                System::parse(s).unwrap_or_else(|| {
                    panic!(
                        "{flag}: {s:?} is not native, wasmctrl, wasmctrl-py, wasmctrl-ts or floor"
                    )
                })
            })
        },
    );
    // Every guest asked for is built before the first world is.
    for system in &systems {
        if let System::Wasmctrl(lang) = system {
            lang.guest();
        }
    }
    let rt = args::bench_runtime();
    let mut outcomes = Vec::new();
    let mut incomplete = Vec::new();
    for apps in sizes {
        for &system in &systems {
            assert!(
                edits <= apps,
                "--edits {edits} must not exceed --apps {apps}"
            );
            let run = std::panic::AssertUnwindSafe(run_one(apps, &setup, system));
            match rt.block_on(futures::FutureExt::catch_unwind(run)) {
                Ok(outcome) => outcomes.push(outcome),
                // The smoke fails; a full run goes on with the next system
                // and says which one did not complete, and where.
                Err(panic) if full => incomplete.push(format!(
                    "{} at {apps} Apps: {}",
                    system.name(),
                    panic_message(panic.as_ref())
                )),
                Err(panic) => std::panic::resume_unwind(panic),
            }
            // The table so far: a long run's early sizes are not lost.
            print_table(&outcomes, &setup);
            for line in &incomplete {
                println!("Did not complete: {line}");
            }
        }
    }
    if !incomplete.is_empty() {
        eprintln!(
            "perobj: {} of the runs did not complete (named under the table)",
            incomplete.len()
        );
        std::process::exit(1);
    }
    if !full {
        check(&outcomes);
        println!("perobj smoke: every system converges, every key reconciled at restart with nothing written, no idle writes");
    }
}
