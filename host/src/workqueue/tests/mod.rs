//! Unit tests of the workqueue: semantics, rate limits and metrics, with
//! paused time (one test uses real threads).

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::time::Instant;

use super::rate_limit::TokenBucket;
use super::{
    run_workers, Config, Outcome, RateLimiter, Workqueue, WorkqueueMetrics, DEFAULT_BURST,
    DEFAULT_QPS,
};

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn queue() -> Workqueue<String> {
    Workqueue::new(&Config::default())
}

fn key(name: &str) -> String {
    name.to_owned()
}

/// `get` that must not block: the key is already there.
async fn get_now(queue: &Workqueue<String>) -> String {
    tokio::time::timeout(Duration::ZERO, queue.get())
        .await
        .expect("a key is ready")
        .expect("the queue is running")
}

async fn assert_blocks(queue: &Workqueue<String>, within: Duration) {
    assert!(
        tokio::time::timeout(within, queue.get()).await.is_err(),
        "get returned a key within {within:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn queued_keys_are_deduplicated() {
    let q = queue();
    q.add(key("a"));
    q.add(key("b"));
    q.add(key("a"));
    assert_eq!(q.len(), 2);
    assert_eq!(get_now(&q).await, "a");
    assert_eq!(get_now(&q).await, "b");
    assert_blocks(&q, ms(10)).await;
}

#[tokio::test(start_paused = true)]
async fn key_in_processing_is_not_handed_out_and_reruns_once_after_done() {
    let q = queue();
    q.add(key("a"));
    let a = get_now(&q).await;
    for _ in 0..5 {
        q.add(key("a"));
    }
    assert_eq!(q.len(), 0, "re-added key waits for its own processing");
    assert_blocks(&q, ms(100)).await;

    q.done(&a);
    assert_eq!(q.len(), 1);
    let again = get_now(&q).await;
    assert_eq!(again, "a");
    q.done(&again);
    assert_blocks(&q, ms(100)).await;
}

/// A controller whose keys come due faster than it can serve them (every
/// key re-added while it is processed: a resync or an event storm) still
/// serves every key once per pass, in order. kube-runtime's scheduler
/// serves the keys held while it is at its concurrency limit in the order
/// of a hash set, and at 50,000 Apps with a 30 s requeue left some keys
/// unreconciled for many minutes (BENCHMARKS.md, "50,000 Apps").
#[tokio::test(start_paused = true)]
async fn under_overload_every_key_is_served_once_per_pass_and_none_starves() {
    let q = queue();
    let n = 300;
    for i in 0..n {
        q.add(format!("k{i}"));
    }
    let mut served = Vec::new();
    for _ in 0..3 * n {
        let k = get_now(&q).await;
        // Due again while it is processed, and a storm on one key.
        q.add(k.clone());
        q.add(key("k7"));
        q.done(&k);
        served.push(k);
    }
    for (pass, window) in served.chunks(n).enumerate() {
        let distinct: std::collections::BTreeSet<&String> = window.iter().collect();
        assert_eq!(distinct.len(), n, "pass {pass} left keys out: {window:?}");
        assert_eq!(
            window,
            &served[..n],
            "pass {pass} is not in the first pass's order"
        );
    }
    assert_eq!(q.len(), n, "every key is due again");
}

#[tokio::test(start_paused = true)]
async fn done_without_readd_does_not_requeue() {
    let q = queue();
    q.add(key("a"));
    let a = get_now(&q).await;
    q.done(&a);
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn per_key_backoff_doubles_from_5ms_caps_at_1000s_and_forget_resets_it() {
    let limiter = RateLimiter::new(&Config::default().qps(f64::INFINITY));
    let a = key("a");
    let mut expected = ms(5);
    for failures in 0..18 {
        assert_eq!(limiter.num_requeues(&a), failures);
        assert_eq!(limiter.when(&a), expected, "after {failures} failures");
        expected *= 2;
    }
    // 5 ms * 2^18 = 1310.72 s > 1000 s.
    for _ in 0..50 {
        assert_eq!(limiter.when(&a), Duration::from_secs(1000));
    }
    assert_eq!(limiter.when(&key("b")), ms(5), "backoff is per key");

    limiter.forget(&a);
    assert_eq!(limiter.num_requeues(&a), 0);
    assert_eq!(limiter.when(&a), ms(5));
}

#[tokio::test(start_paused = true)]
async fn token_bucket_passes_a_burst_of_100_then_one_per_100ms() {
    let mut bucket = TokenBucket::new(DEFAULT_QPS, DEFAULT_BURST);
    let now = Instant::now();
    for _ in 0..100 {
        assert_eq!(bucket.reserve(now), Duration::ZERO);
    }
    assert_eq!(bucket.reserve(now), ms(100));
    assert_eq!(bucket.reserve(now), ms(200));
    // One token refills every 100 ms; the two reservations above owe them.
    assert_eq!(bucket.reserve(now + ms(300)), ms(0));
    assert_eq!(bucket.reserve(now + ms(300)), ms(100));
}

#[tokio::test(start_paused = true)]
async fn an_idle_bucket_refills_at_qps_up_to_its_burst() {
    let mut bucket = TokenBucket::new(DEFAULT_QPS, DEFAULT_BURST);
    let now = Instant::now();
    for _ in 0..100 {
        assert_eq!(bucket.reserve(now), Duration::ZERO);
    }
    // 5 s refill 50 tokens...
    let later = now + Duration::from_secs(5);
    for _ in 0..50 {
        assert_eq!(bucket.reserve(later), Duration::ZERO);
    }
    assert_eq!(bucket.reserve(later), ms(100));
    // ...and a long idle never more than the burst.
    let much_later = now + Duration::from_secs(3600);
    for _ in 0..100 {
        assert_eq!(bucket.reserve(much_later), Duration::ZERO);
    }
    assert_eq!(bucket.reserve(much_later), ms(100));
}

#[tokio::test(start_paused = true)]
async fn a_zero_burst_makes_every_add_wait_at_least_one_period() {
    let mut bucket = TokenBucket::new(DEFAULT_QPS, 0);
    let now = Instant::now();
    assert_eq!(bucket.reserve(now), ms(100));
    assert_eq!(bucket.reserve(now), ms(200));
    // Idling refills nothing beyond the (empty) burst.
    assert_eq!(bucket.reserve(now + Duration::from_secs(60)), ms(100));
}

#[tokio::test(start_paused = true)]
async fn non_positive_nan_and_infinite_qps_never_throttle() {
    for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let mut bucket = TokenBucket::new(qps, 0);
        let now = Instant::now();
        for _ in 0..1000 {
            assert_eq!(bucket.reserve(now), Duration::ZERO, "qps {qps}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn absurd_rates_and_bursts_wait_at_most_the_horizon_and_never_overflow() {
    let horizon = Duration::from_secs(10 * 365 * 24 * 60 * 60);
    for (qps, burst) in [(1e-300, u32::MAX), (1e-12, 3), (0.1, u32::MAX), (1e12, 0)] {
        let mut bucket = TokenBucket::new(qps, burst);
        let now = Instant::now();
        for _ in 0..1000 {
            assert!(bucket.reserve(now) <= horizon, "qps {qps}, burst {burst}");
        }
    }
    // One token per 10^12 s: the first passes, the next waits the horizon.
    let mut bucket = TokenBucket::new(1e-12, 1);
    assert_eq!(bucket.reserve(Instant::now()), Duration::ZERO);
    assert_eq!(bucket.reserve(Instant::now()), horizon);
}

#[tokio::test(start_paused = true)]
async fn the_global_bucket_follows_paused_tokio_time() {
    let limiter = RateLimiter::new(&Config::default().base_delay(Duration::ZERO).burst(1));
    assert_eq!(limiter.when(&key("a")), Duration::ZERO);
    assert_eq!(limiter.when(&key("b")), ms(100));
    tokio::time::advance(ms(200)).await;
    assert_eq!(limiter.when(&key("c")), Duration::ZERO);
    assert_eq!(limiter.when(&key("d")), ms(100));
}

#[tokio::test(start_paused = true)]
async fn first_100_rate_limited_adds_are_immediate_and_the_101st_waits_100ms() {
    let q = Workqueue::new(&Config::default().base_delay(Duration::ZERO));
    for i in 0..101 {
        q.add_rate_limited(format!("k{i}"));
    }
    assert_eq!(q.len(), 100);
    tokio::time::advance(ms(99)).await;
    assert_eq!(q.len(), 100);
    tokio::time::advance(ms(1)).await;
    assert_eq!(q.len(), 101);
}

#[tokio::test(start_paused = true)]
async fn combined_limiter_takes_the_max_of_backoff_and_bucket() {
    let limiter = RateLimiter::new(&Config::default().burst(1));
    // Bucket has a token, backoff says 5 ms.
    assert_eq!(limiter.when(&key("a")), ms(5));
    // Bucket empty: 100 ms beats a fresh key's 5 ms.
    assert_eq!(limiter.when(&key("b")), ms(100));
    // A key that failed often: backoff beats the bucket.
    let c = key("c");
    for _ in 0..10 {
        limiter.when(&c);
    }
    // After 10 failures the backoff is 5 ms * 2^10 = 5.12 s; the bucket owes 1.2 s.
    assert_eq!(limiter.when(&c), ms(5 << 10));
}

#[tokio::test(start_paused = true)]
async fn add_after_delays_and_keeps_the_earliest_time() {
    let q = queue();
    q.add_after(key("a"), ms(300));
    q.add_after(key("a"), ms(100));
    q.add_after(key("a"), ms(200));
    q.add_after(key("b"), ms(150));
    assert!(q.is_empty());

    let start = Instant::now();
    assert_eq!(q.get().await.unwrap(), "a");
    assert_eq!(start.elapsed(), ms(100));
    assert_eq!(q.get().await.unwrap(), "b");
    assert_eq!(start.elapsed(), ms(150));
    // The later duplicates were dropped, not kept as extra entries.
    assert_blocks(&q, ms(1000)).await;
}

#[tokio::test(start_paused = true)]
async fn add_after_wakes_a_getter_already_waiting_for_a_later_key() {
    let q = queue();
    q.add_after(key("late"), ms(1000));
    let getter = tokio::spawn({
        let q = q.clone();
        async move { (q.get().await, Instant::now()) }
    });
    tokio::task::yield_now().await;
    let start = Instant::now();
    q.add_after(key("early"), ms(10));
    let (got, at) = getter.await.unwrap();
    assert_eq!(got.as_deref(), Some("early"));
    assert_eq!(at - start, ms(10));
}

#[tokio::test(start_paused = true)]
async fn n_workers_process_different_keys_concurrently() {
    let q = queue();
    for i in 0..4 {
        q.add(format!("k{i}"));
    }
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let workers = tokio::spawn(run_workers(q.clone(), 4, {
        let running = Arc::clone(&running);
        let peak = Arc::clone(&peak);
        move |_key: String| {
            let running = Arc::clone(&running);
            let peak = Arc::clone(&peak);
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(1)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Outcome::Success
            }
        }
    }));
    let start = Instant::now();
    tokio::time::sleep(ms(1500)).await;
    assert!(q.shutdown_with_drain(Duration::from_secs(5)).await);
    workers.await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 4);
    assert_eq!(start.elapsed(), ms(1500), "four 1 s keys took 1 s, not 4 s");
}

#[tokio::test(start_paused = true)]
async fn shutdown_wakes_waiting_getters_with_none() {
    let q = queue();
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.get().await })
        })
        .collect();
    tokio::task::yield_now().await;
    q.shutdown();
    for getter in getters {
        assert_eq!(getter.await.unwrap(), None);
    }
    q.add(key("late"));
    assert_eq!(q.get().await, None, "adds after shutdown are ignored");
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_drain_waits_for_in_flight_keys_and_times_out() {
    let q = queue();
    q.add(key("a"));
    let a = get_now(&q).await;
    let finisher = tokio::spawn({
        let q = q.clone();
        async move {
            tokio::time::sleep(ms(300)).await;
            q.done(&a);
        }
    });
    let start = Instant::now();
    assert!(q.shutdown_with_drain(Duration::from_secs(1)).await);
    assert_eq!(start.elapsed(), ms(300));
    finisher.await.unwrap();

    let q = queue();
    q.add(key("stuck"));
    let _stuck = get_now(&q).await;
    let start = Instant::now();
    assert!(!q.shutdown_with_drain(ms(500)).await);
    assert_eq!(start.elapsed(), ms(500));
}

#[tokio::test(start_paused = true)]
async fn ten_rapid_changes_to_one_key_while_a_handler_is_slow_cause_two_reconciles_not_eleven() {
    let q = queue();
    let reconciles = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let overlapped = Arc::new(AtomicUsize::new(0));
    let workers = tokio::spawn(run_workers(q.clone(), 4, {
        let reconciles = Arc::clone(&reconciles);
        let running = Arc::clone(&running);
        let overlapped = Arc::clone(&overlapped);
        move |_key: String| {
            let reconciles = Arc::clone(&reconciles);
            let running = Arc::clone(&running);
            let overlapped = Arc::clone(&overlapped);
            async move {
                reconciles.fetch_add(1, Ordering::SeqCst);
                if running.fetch_add(1, Ordering::SeqCst) > 0 {
                    overlapped.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Outcome::Success
            }
        }
    }));

    q.add(key("default/gpu-pod"));
    tokio::time::sleep(ms(10)).await;
    assert_eq!(
        reconciles.load(Ordering::SeqCst),
        1,
        "first reconcile started"
    );
    for _ in 0..10 {
        q.add(key("default/gpu-pod"));
        tokio::time::sleep(ms(5)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(q.shutdown_with_drain(Duration::from_secs(5)).await);
    workers.await.unwrap();

    assert_eq!(reconciles.load(Ordering::SeqCst), 2);
    assert_eq!(overlapped.load(Ordering::SeqCst), 0, "never concurrently");
}

#[tokio::test(start_paused = true)]
async fn failing_key_is_retried_with_backoff_and_success_forgets_it() {
    let q = queue();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let workers = tokio::spawn(run_workers(q.clone(), 2, {
        let attempts = Arc::clone(&attempts);
        move |_key: String| {
            let attempts = Arc::clone(&attempts);
            async move {
                let n = {
                    let mut attempts = attempts.lock().unwrap();
                    attempts.push(Instant::now());
                    attempts.len()
                };
                if n < 4 {
                    Outcome::retry(format!("attempt {n} failed"))
                } else {
                    Outcome::Success
                }
            }
        }
    }));
    let start = Instant::now();
    q.add(key("a"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(q.num_requeues(&key("a")), 0, "success forgot the failures");
    q.shutdown_with_drain(Duration::from_secs(1)).await;
    workers.await.unwrap();
    let offsets: Vec<_> = attempts
        .lock()
        .unwrap()
        .iter()
        .map(|at| *at - start)
        .collect();
    assert_eq!(offsets, [ms(0), ms(5), ms(15), ms(35)]);
}

#[tokio::test(start_paused = true)]
async fn requeue_after_success_runs_the_key_again_after_the_delay() {
    let q = queue();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let workers = tokio::spawn(run_workers(q.clone(), 1, {
        let runs = Arc::clone(&runs);
        move |_key: String| {
            let runs = Arc::clone(&runs);
            async move {
                runs.lock().unwrap().push(Instant::now());
                Outcome::RequeueAfter(Duration::from_secs(60))
            }
        }
    }));
    let start = Instant::now();
    q.add(key("a"));
    tokio::time::sleep(Duration::from_secs(150)).await;
    q.shutdown();
    workers.await.unwrap();
    let offsets: Vec<_> = runs.lock().unwrap().iter().map(|at| *at - start).collect();
    assert_eq!(
        offsets,
        [
            Duration::ZERO,
            Duration::from_secs(60),
            Duration::from_secs(120)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_postponed_key_runs_after_the_delay_and_keeps_its_backoff() {
    let q = queue();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let workers = tokio::spawn(run_workers(q.clone(), 1, {
        let runs = Arc::clone(&runs);
        move |_key: String| {
            let runs = Arc::clone(&runs);
            async move {
                let mut runs = runs.lock().unwrap();
                runs.push(Instant::now());
                match runs.len() {
                    1 | 2 => Outcome::retry("fails"),
                    3 => Outcome::Postpone(Duration::from_secs(60)),
                    _ => Outcome::Success,
                }
            }
        }
    }));
    let start = Instant::now();
    q.add(key("a"));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(q.num_requeues(&key("a")), 2, "postponing forgets nothing");
    tokio::time::sleep(Duration::from_secs(60)).await;
    q.shutdown();
    workers.await.unwrap();
    let offsets: Vec<_> = runs.lock().unwrap().iter().map(|at| *at - start).collect();
    assert_eq!(
        offsets,
        [ms(0), ms(5), ms(15), ms(15) + Duration::from_secs(60)]
    );
}

#[tokio::test(start_paused = true)]
async fn panicking_handler_does_not_wedge_its_key() {
    let q = queue();
    let calls = Arc::new(AtomicUsize::new(0));
    let workers = tokio::spawn(run_workers(q.clone(), 1, {
        let calls = Arc::clone(&calls);
        move |_key: String| {
            let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                assert!(!first, "handler bug");
                Outcome::Success
            }
        }
    }));
    q.add(key("a"));
    tokio::time::sleep(ms(100)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "retried after the panic");
    assert!(q.shutdown_with_drain(ms(100)).await);
    workers.await.unwrap();
}

/// Real threads, real time: no key overlaps itself and no add is lost
/// (every key's last add is followed by a reconcile that saw it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_many_threads_no_key_overlaps_itself_and_no_add_is_lost() {
    const KEYS: usize = 50;
    const ADDS_PER_KEY: usize = 20;
    let q = queue();
    let added: Arc<Vec<AtomicUsize>> = Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
    let seen: Arc<Vec<AtomicUsize>> = Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
    let running: Arc<Vec<AtomicUsize>> = Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
    let overlaps = Arc::new(AtomicUsize::new(0));
    let workers = tokio::spawn(run_workers(q.clone(), 4, {
        let (added, seen, running, overlaps) = (
            Arc::clone(&added),
            Arc::clone(&seen),
            Arc::clone(&running),
            Arc::clone(&overlaps),
        );
        move |key: String| {
            let (added, seen, running, overlaps) = (
                Arc::clone(&added),
                Arc::clone(&seen),
                Arc::clone(&running),
                Arc::clone(&overlaps),
            );
            async move {
                let i: usize = key.parse().unwrap();
                if running[i].fetch_add(1, Ordering::SeqCst) > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                seen[i].store(added[i].load(Ordering::SeqCst), Ordering::SeqCst);
                tokio::task::yield_now().await;
                running[i].fetch_sub(1, Ordering::SeqCst);
                Outcome::Success
            }
        }
    }));
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let (q, added) = (q.clone(), Arc::clone(&added));
            tokio::spawn(async move {
                for round in 0..ADDS_PER_KEY / 2 {
                    for i in (p..KEYS).step_by(2).chain((1 - p..KEYS).step_by(2)) {
                        added[i].fetch_add(1, Ordering::SeqCst);
                        q.add(i.to_string());
                        if (round + i) % 7 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                }
            })
        })
        .collect();
    for producer in producers {
        producer.await.unwrap();
    }
    let all_seen =
        || (0..KEYS).all(|i| seen[i].load(Ordering::SeqCst) == added[i].load(Ordering::SeqCst));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !all_seen() && std::time::Instant::now() < deadline {
        tokio::time::sleep(ms(5)).await;
    }
    assert!(all_seen(), "some key's last add was never reconciled");
    assert!(q.shutdown_with_drain(Duration::from_secs(5)).await);
    workers.await.unwrap();
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
}

fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

#[tokio::test(start_paused = true)]
async fn metrics_are_exposed_with_client_go_names_labelled_by_guest() {
    let mut registry = Registry::default();
    let metrics = WorkqueueMetrics::new(&mut registry);
    let q = Workqueue::with_metrics("gpu-summary", &Config::default(), &metrics);
    let other = Workqueue::<String>::with_metrics("other", &Config::default(), &metrics);

    q.add(key("a"));
    q.add(key("b"));
    q.add(key("a")); // deduplicated: not an add
    tokio::time::advance(Duration::from_secs(2)).await;
    let a = get_now(&q).await; // waited 2 s
    tokio::time::advance(Duration::from_secs(3)).await;
    q.add_rate_limited(key("c"));

    let text = encode(&registry);
    for line in [
        r#"workqueue_adds_total{name="gpu-summary"} 2"#,
        r#"workqueue_adds_total{name="other"} 0"#,
        r#"workqueue_depth{name="gpu-summary"} 1"#,
        r#"workqueue_retries_total{name="gpu-summary"} 1"#,
        r#"workqueue_queue_duration_seconds_count{name="gpu-summary"} 1"#,
        r#"workqueue_queue_duration_seconds_sum{name="gpu-summary"} 2.0"#,
        r#"workqueue_queue_duration_seconds_bucket{le="10.0",name="gpu-summary"} 1"#,
        r#"workqueue_work_duration_seconds_count{name="gpu-summary"} 0"#,
        r#"workqueue_unfinished_work_seconds{name="gpu-summary"} 3.0"#,
        r#"workqueue_longest_running_processor_seconds{name="gpu-summary"} 3.0"#,
        r#"workqueue_unfinished_work_seconds{name="other"} 0.0"#,
        "# TYPE workqueue_depth gauge",
        "# TYPE workqueue_adds counter",
        "# TYPE workqueue_queue_duration_seconds histogram",
        "# TYPE workqueue_unfinished_work_seconds gauge",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }

    tokio::time::advance(Duration::from_secs(1)).await;
    q.done(&a);
    let text = encode(&registry);
    for line in [
        r#"workqueue_work_duration_seconds_count{name="gpu-summary"} 1"#,
        r#"workqueue_work_duration_seconds_sum{name="gpu-summary"} 4.0"#,
        r#"workqueue_unfinished_work_seconds{name="gpu-summary"} 0.0"#,
        r#"workqueue_longest_running_processor_seconds{name="gpu-summary"} 0.0"#,
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }

    drop((q, other));
    let text = encode(&registry);
    assert!(
        !text.contains(r#"workqueue_unfinished_work_seconds{name="#),
        "dropped queues leave the scrape-time gauges:\n{text}"
    );
}

mod recovery;

/// A handler that never waits (a reconcile with nothing to write, its
/// guest call run in place) must not hold the runtime thread until the
/// queue is empty: the workers yield now and then, so a task woken meanwhile
/// (a health probe, a Lease renewal, an informer) runs before the last key.
#[tokio::test(flavor = "current_thread")]
async fn workers_whose_handler_never_waits_let_other_tasks_run() {
    const KEYS: usize = 2000;
    let q = queue();
    for i in 0..KEYS {
        q.add(key(&format!("k{i}")));
    }
    let other_ran = Arc::new(AtomicBool::new(false));
    let handled = Arc::new(AtomicUsize::new(0));
    let seen_by_last = Arc::new(AtomicBool::new(false));
    let workers = tokio::spawn(run_workers(q.clone(), 2, {
        let (other_ran, handled, seen_by_last, q) = (
            other_ran.clone(),
            handled.clone(),
            seen_by_last.clone(),
            q.clone(),
        );
        move |_key: String| {
            let n = handled.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 1 {
                // Spawned by the first key: it can only run when a worker
                // yields.
                let other_ran = other_ran.clone();
                tokio::spawn(async move { other_ran.store(true, Ordering::SeqCst) });
            }
            if n == KEYS {
                seen_by_last.store(other_ran.load(Ordering::SeqCst), Ordering::SeqCst);
                q.shutdown();
            }
            std::future::ready(Outcome::Success)
        }
    }));
    workers.await.unwrap();
    assert_eq!(handled.load(Ordering::SeqCst), KEYS);
    assert!(
        seen_by_last.load(Ordering::SeqCst),
        "the other task never ran while {KEYS} keys were handled"
    );
}
