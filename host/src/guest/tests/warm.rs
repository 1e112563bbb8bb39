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
