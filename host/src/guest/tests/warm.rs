//! [`WarmInstances`]: a controller's reconciles reuse one instance, each
//! call under a fresh store's limits; what one call leaves behind never
//! fails the next.

use super::*;

fn warm(config: RuntimeConfig, body: &str) -> WarmInstances {
    let module = runtime(config)
        .load_bytes("warm.wasm", &component_from_wat(&wat_guest(body)))
        .unwrap();
    WarmInstances::new(module, "gpu-summary")
}

fn call(instances: &WarmInstances) -> (Result<ValidatedPlan>, CallStats) {
    instances.reconcile(&gpu_manifest(), &env(), &request(), empty_snapshot())
}

/// Grows the instance's memory by `pages` 64 KiB pages (kept: linear
/// memory never shrinks), then returns an empty plan.
fn growing(pages: u32) -> String {
    format!(
        "(drop (memory.grow (i32.const {pages}))) {}",
        returns_apply(&[])
    )
}

#[test]
fn the_second_call_reuses_the_first_calls_instance() {
    let instances = warm(RuntimeConfig::default(), &returns_apply(&[]));
    assert_eq!(instances.idle(), 0);
    let (first, stats) = call(&instances);
    first.unwrap();
    assert!(stats.instantiate > Duration::ZERO);
    assert_eq!(instances.idle(), 1);
    let (second, stats) = call(&instances);
    second.unwrap();
    assert_eq!(stats.instantiate, Duration::ZERO, "no new instance");
    assert_eq!(instances.idle(), 1);
}

#[test]
fn a_reused_instance_gets_its_whole_fuel_again() {
    // About 400,000 units a call against 1,000,000 of fuel: a second call
    // on what the first left would run out.
    let spin = format!(
        "(local.set 0 (i32.const 100000))
         (loop (local.set 0 (i32.sub (local.get 0) (i32.const 1))) (br_if 0 (local.get 0)))
         {}",
        returns_apply(&[])
    );
    let instances = warm(RuntimeConfig::default().fuel(Some(1_000_000)), &spin);
    for i in 0..5 {
        let (result, stats) = call(&instances);
        result.unwrap_or_else(|e| panic!("call {i}: {e}"));
        if i > 0 {
            assert_eq!(stats.instantiate, Duration::ZERO, "call {i} reused");
        }
    }
}

#[test]
fn a_reused_instance_gets_its_whole_deadline_again() {
    let spin = format!(
        "(local.set 0 (i32.const 0))
         (loop (local.set 0 (i32.add (local.get 0) (i32.const 1)))
               (br_if 0 (i32.lt_u (local.get 0) (i32.const 40000000))))
         {}",
        returns_apply(&[])
    );
    // How long one call takes here, then a deadline of 2.5 calls (at least
    // 100 ms, ten epoch ticks): calls on one instance for two deadlines
    // run past any deadline not re-armed per call.
    let calibrate = warm(RuntimeConfig::default(), &spin);
    call(&calibrate).0.unwrap();
    let started = Instant::now();
    call(&calibrate).0.unwrap();
    let deadline = (started.elapsed() * 5 / 2).max(Duration::from_millis(100));
    let one = started.elapsed();
    let instances = warm(RuntimeConfig::default().deadline(deadline), &spin);
    let started = Instant::now();
    let mut calls = 0;
    while started.elapsed() < deadline * 2 {
        call(&instances)
            .0
            .unwrap_or_else(|e| panic!("call {calls} ({one:?} each, deadline {deadline:?}): {e}"));
        calls += 1;
    }
    assert!(calls > 2, "{calls} calls");
    assert_eq!(instances.idle(), 1);
}

#[test]
fn an_instance_that_trapped_is_not_kept() {
    let instances = warm(RuntimeConfig::default(), "unreachable");
    let e = call(&instances).0.unwrap_err();
    assert_eq!(e.reason(), "trap", "{e}");
    assert_eq!(instances.idle(), 0);
}

#[test]
fn a_guest_error_keeps_the_instance() {
    // result<plan, reconcile-error>: tag 1 (err) at +0, the payload at +8:
    // reconcile-error tag 0 (retryable), its empty message at +12/+16.
    let body = "(i32.store8 (i32.const 1024) (i32.const 1))
                (i32.store8 (i32.const 1032) (i32.const 0))
                (i32.store (i32.const 1036) (i32.const 0)) (i32.store (i32.const 1040) (i32.const 0))
                (i32.const 1024)";
    let instances = warm(RuntimeConfig::default(), body);
    let e = call(&instances).0.unwrap_err();
    assert_eq!(e.reason(), "retryable", "{e}");
    assert_eq!(
        instances.idle(),
        1,
        "the guest returned: its instance is sound"
    );
}

#[test]
fn memory_an_earlier_call_left_never_fails_a_later_one() {
    // 1 page at the start, 4 more each call, under a 1 MiB cap: the fourth
    // call on one instance would need 13 pages (832 KiB), the fifth 17.
    let instances = warm(RuntimeConfig::default().memory_limit(1 << 20), &growing(4));
    for i in 0..12 {
        call(&instances)
            .0
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
    }
}

#[test]
fn a_call_out_of_memory_on_a_fresh_instance_fails_once() {
    let instances = warm(RuntimeConfig::default().memory_limit(1 << 20), &growing(32));
    let (result, _) = call(&instances);
    let e = result.unwrap_err();
    assert_eq!(e.reason(), "memory", "{e}");
    assert_eq!(instances.idle(), 0);
}

#[test]
fn an_instance_grown_past_what_is_kept_is_retired() {
    let pages = u32::try_from(crate::guest::warm::KEEP_MEMORY / 65536).unwrap() + 1;
    let instances = warm(RuntimeConfig::default(), &growing(pages));
    call(&instances).0.unwrap();
    assert_eq!(instances.idle(), 0);
}

use crate::guest::warm::{Placement, HERE_LONG, HERE_MEAN};

fn here(instances: &WarmInstances) -> Here {
    let snapshot = crate::guest::snapshot::to_wit(empty_snapshot());
    instances.reconcile_here(&gpu_manifest(), &env(), &request(), snapshot)
}

/// A guest whose first `fast` calls return at once and whose later calls
/// each spin `spin` times (forever when `None`), counted in a global.
fn turning_slow(config: RuntimeConfig, fast: u32, spin: Option<u32>) -> WarmInstances {
    let spin = match spin {
        Some(n) => format!(
            "(local.set 0 (i32.const 0))
             (loop (local.set 0 (i32.add (local.get 0) (i32.const 1)))
                   (br_if 0 (i32.lt_u (local.get 0) (i32.const {n}))))"
        ),
        None => "(loop (br 0))".into(),
    };
    let body = format!(
        "(global.set $calls (i32.add (global.get $calls) (i32.const 1)))
         (if (i32.gt_u (global.get $calls) (i32.const {fast})) (then {spin}))
         {}",
        returns_apply(&[])
    );
    let wat = wat_guest_importing("(global $calls (mut i32) (i32.const 0))", &body);
    let module = runtime(config)
        .load_bytes("slow.wasm", &component_from_wat(&wat))
        .unwrap();
    WarmInstances::new(module, "gpu-summary")
}

#[test]
fn with_no_kept_instance_a_call_is_sent_off_the_callers_thread() {
    let instances = warm(RuntimeConfig::default(), &returns_apply(&[]));
    assert!(
        matches!(here(&instances), Here::Off(_)),
        "never instantiates here"
    );
    call(&instances).0.unwrap();
    match here(&instances) {
        Here::Ran(result, stats) => {
            result.unwrap();
            assert_eq!(stats.instantiate, Duration::ZERO, "the kept instance");
        }
        Here::Off(_) => panic!("a short call with a kept instance runs here"),
    }
    assert!(instances.runs_here());
    assert_eq!(instances.idle(), 1, "given back after running here");
}

#[test]
fn a_call_that_turns_slow_is_stopped_early_and_run_again_off_the_callers_thread() {
    // Ticks of 10 ms, a 300 ms deadline: a call here is stopped after 10-20
    // ms, one on the pool after 300 ms.
    let config = RuntimeConfig {
        epoch_tick: Some(Duration::from_millis(10)),
        ..RuntimeConfig::default().deadline(Duration::from_millis(300))
    };
    let instances = turning_slow(config, 1, None);
    call(&instances).0.unwrap();
    let Here::Off(snapshot) = here(&instances) else {
        panic!("a call spinning forever cannot have run here")
    };
    assert!(!instances.runs_here(), "a stopped call sends the guest off");
    assert_eq!(instances.idle(), 0, "the stopped instance is not kept");
    // Run again from the start off the caller's thread, on a fresh
    // instance (this guest's first call there returns at once).
    let (result, stats) = instances.reconcile_wit(&gpu_manifest(), &env(), &request(), snapshot);
    result.unwrap();
    assert!(stats.instantiated);
    // There a slow call gets its whole deadline, and that is its error.
    let (slow, _) = instances.reconcile(&gpu_manifest(), &env(), &request(), empty_snapshot());
    assert_eq!(slow.unwrap_err().reason(), "deadline");
}

#[test]
fn a_call_longer_than_here_long_runs_to_its_end_and_sends_later_calls_off() {
    // Ticks of five seconds: a call here is stopped only after 5-10 s, far
    // beyond the 400 million steps (tens to hundreds of ms) of the second
    // call.
    let config = RuntimeConfig {
        epoch_tick: Some(Duration::from_secs(5)),
        ..RuntimeConfig::default().deadline(Duration::from_secs(60))
    };
    let instances = turning_slow(config, 1, Some(400_000_000));
    call(&instances).0.unwrap();
    match here(&instances) {
        Here::Ran(result, stats) => {
            result.unwrap();
            assert!(stats.call > HERE_LONG, "{:?}", stats.call);
        }
        Here::Off(_) => panic!("stopped only after a whole tick"),
    }
    assert!(
        !instances.runs_here(),
        "over {HERE_LONG:?}: later calls go to the pool"
    );
    assert_eq!(instances.idle(), 1, "its instance is sound and kept");
    assert!(matches!(here(&instances), Here::Off(_)));
}

#[test]
fn calls_run_here_while_their_mean_is_short_and_never_after_one_ran_long() {
    let placement = Placement::default();
    assert!(placement.here(), "no call yet");
    let short = HERE_MEAN / 10;
    let long = HERE_MEAN * 4;
    placement.record(short);
    assert!(placement.here());
    // A guest whose calls grow long goes to the pool within a few calls,
    // and comes back once they are short again.
    let mut calls = 0;
    while placement.here() {
        placement.record(long);
        calls += 1;
        assert!(calls < 10, "still here after {calls} long calls");
    }
    assert!(calls > 1, "one long call among short ones moves nothing");
    let mut calls = 0;
    while !placement.here() {
        placement.record(short);
        calls += 1;
        assert!(calls < 40, "still off after {calls} short calls");
    }
    // Off for good: short calls never bring it back.
    assert!(placement.off_for_good());
    assert!(!placement.off_for_good(), "said once");
    for _ in 0..100 {
        placement.record(short);
    }
    assert!(!placement.here());
}
