//! Unit tests of recovery after an API-server outage (`add_unavailable`,
//! the probe, and `forget` re-adding the waiting keys), with paused time.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::super::{run_workers, Config, Outcome, Workqueue, DEFAULT_PROBE_INTERVAL};

type Log = Arc<Mutex<HashMap<&'static str, (u32, Option<Instant>)>>>;

/// Workers whose handler fails every key with `failure()` while `down` is
/// set, and succeeds otherwise; the log counts attempts and records each
/// key's first success.
fn workers(
    q: &Workqueue<&'static str>,
    down: &Arc<AtomicBool>,
    failure: fn() -> Outcome,
) -> (Log, tokio::task::JoinHandle<()>) {
    let log: Log = Arc::default();
    let (l, d) = (log.clone(), down.clone());
    let task = tokio::spawn(run_workers(q.clone(), 2, move |k: &'static str| {
        let (l, d) = (l.clone(), d.clone());
        async move {
            let mut log = l.lock().unwrap();
            let entry = log.entry(k).or_default();
            entry.0 += 1;
            if d.load(Ordering::SeqCst) {
                return failure();
            }
            entry.1.get_or_insert_with(Instant::now);
            Outcome::Success
        }
    }));
    (log, task)
}

#[tokio::test(start_paused = true)]
async fn after_an_outage_every_waiting_key_is_retried_within_a_probe_interval_not_at_its_backoff() {
    let q = Workqueue::new(&Config::default());
    let down = Arc::new(AtomicBool::new(true));
    let (log, task) = workers(&q, &down, || Outcome::unavailable("503"));
    for k in ["a", "b", "c"] {
        q.add(k);
    }
    // Two minutes of outage: the keys' backoff (5 ms doubling) passes 30 s.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let backoff = q.longest_backoff();
    assert!(backoff >= Duration::from_secs(30), "{backoff:?}");
    let attempts: Vec<u32> = log.lock().unwrap().values().map(|e| e.0).collect();
    assert!(
        attempts.iter().filter(|n| **n > 30).count() == 1,
        "exactly one key (the probe) is retried every probe interval: {attempts:?}"
    );

    let recovered_at = Instant::now();
    down.store(false, Ordering::SeqCst);
    tokio::time::sleep(DEFAULT_PROBE_INTERVAL + Duration::from_millis(10)).await;
    for (k, (_, first_success)) in log.lock().unwrap().iter() {
        let at = first_success.unwrap_or_else(|| panic!("{k} has not succeeded"));
        assert!(
            at - recovered_at <= DEFAULT_PROBE_INTERVAL,
            "{k} converged {:?} after recovery (its backoff was up to {backoff:?})",
            at - recovered_at
        );
    }
    assert_eq!(
        q.longest_backoff(),
        Duration::ZERO,
        "every backoff was reset"
    );
    q.shutdown();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_key_failing_for_its_own_reasons_keeps_its_backoff_when_the_server_recovers() {
    let q = Workqueue::new(&Config::default());
    // "own" fails with a conflict, "write" with a server error; both for a minute.
    let down = Arc::new(AtomicBool::new(true));
    let log: Log = Arc::default();
    let (l, d) = (log.clone(), down.clone());
    let task = tokio::spawn(run_workers(q.clone(), 2, move |k: &'static str| {
        let (l, d) = (l.clone(), d.clone());
        async move {
            l.lock().unwrap().entry(k).or_default().0 += 1;
            match (k, d.load(Ordering::SeqCst)) {
                ("own", _) => Outcome::retry("409"),
                (_, true) => Outcome::unavailable("503"),
                (_, false) => Outcome::Success,
            }
        }
    }));
    q.add("own");
    q.add("write");
    tokio::time::sleep(Duration::from_secs(60)).await;
    let own_before = q.num_requeues(&"own");
    assert!(own_before >= 10, "{own_before}");
    down.store(false, Ordering::SeqCst);
    tokio::time::sleep(DEFAULT_PROBE_INTERVAL + Duration::from_millis(10)).await;
    assert_eq!(
        q.num_requeues(&"write"),
        0,
        "the server's failure was forgotten"
    );
    assert!(
        q.num_requeues(&"own") >= own_before,
        "a conflict keeps its backoff: {} < {own_before}",
        q.num_requeues(&"own")
    );
    q.shutdown();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn when_the_probe_fails_for_its_own_reasons_another_waiting_key_becomes_the_probe() {
    let q = Workqueue::new(&Config::default());
    // "b" fails on the server's side fourteen times (its backoff is 41 s
    // by now), then once for its own reasons: it waits 82 s.
    for _ in 0..14 {
        q.add_unavailable("b");
        let k = q.get().await.unwrap();
        q.done(&k);
    }
    q.add_rate_limited("b");
    // "a" fails on the server's side and becomes the probe; "b" fails so
    // again and waits behind it.
    q.add_unavailable("a");
    q.add_unavailable("b");
    assert_eq!(q.get().await, Some("a"));
    // The probe fails for its own reasons: "b" must take over as the
    // probe, due within the interval instead of in 82 s.
    let handed_over = Instant::now();
    q.add_rate_limited("a");
    q.done(&"a");
    assert_eq!(q.get().await, Some("a"), "its own short backoff");
    q.forget(&"a");
    q.done(&"a");
    assert_eq!(q.get().await, Some("b"));
    assert!(
        handed_over.elapsed() <= DEFAULT_PROBE_INTERVAL,
        "{:?}",
        handed_over.elapsed()
    );
}
