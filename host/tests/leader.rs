//! Lease leader election against the embedded API server: real HTTPS, the
//! real kube client, two or three candidates. Durations are short and real
//! (paused time would fire timeouts while requests are on the wire); every
//! wait is bounded, and timing assertions only use the margins the protocol
//! guarantees (renew deadline < lease duration).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;
use wasmctrl::leader::{
    LeaderElectionConfig, LeaderElector, LeaderHandle, LeaderState, LostReason, Termination,
};
use wasmctrl_apiserver::{Rule, User};

use crate::support::server;

const NS: &str = crate::support::HOST_NS;
const LEASE: &str = "wasmctrl";
/// The longest any single wait in these tests may take.
const BOUND: Duration = Duration::from_secs(20);

/// Lease 2 s, renew deadline 1 s, retry 0.2 s.
fn fast(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::default()
        .lease_name(LEASE)
        .namespace(NS)
        .identity(identity)
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_secs(1))
        .retry_period(Duration::from_millis(200))
}

fn candidate(client: &Client, config: LeaderElectionConfig) -> LeaderHandle {
    LeaderElector::new(client.clone(), config).unwrap().spawn()
}

async fn lease(client: &Client) -> Lease {
    Api::<Lease>::namespaced(client.clone(), NS)
        .get(LEASE)
        .await
        .unwrap()
}

async fn holder(client: &Client) -> Option<String> {
    lease(client).await.spec.and_then(|s| s.holder_identity)
}

async fn transitions(client: &Client) -> i32 {
    lease(client)
        .await
        .spec
        .and_then(|s| s.lease_transitions)
        .unwrap()
}

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    crate::support::bounded(what, BOUND, f).await
}

async fn leads(h: &LeaderHandle) {
    bounded("becomes leader", h.status().until_leading())
        .await
        .unwrap();
}

/// Records when `h` stops leading and when `other` starts, so a test can
/// order the two.
async fn loss_then_takeover(
    old: &LeaderHandle,
    new: &LeaderHandle,
) -> (Instant, LeaderState, Instant) {
    let mut old = old.status();
    let lost = tokio::spawn(async move {
        let state = old.until_not_leading().await;
        (Instant::now(), state)
    });
    leads(new).await;
    let took_over = Instant::now();
    let (lost_at, state) = bounded("old leader reports", lost).await.unwrap();
    (lost_at, state, took_over)
}

/// Waits until one of `candidates` leads and removes it.
async fn take_leader(
    candidates: &mut Vec<(&'static str, LeaderHandle)>,
) -> (&'static str, LeaderHandle) {
    bounded("someone leads", async {
        loop {
            if let Some(i) = candidates.iter().position(|(_, h)| h.is_leader()) {
                return candidates.remove(i);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_of_three_candidates_leads_at_any_time() {
    let (_server, client) = server().await;
    let mut rest: Vec<(&'static str, LeaderHandle)> = ["a", "b", "c"]
        .into_iter()
        .map(|id| (id, candidate(&client, fast(id))))
        .collect();
    let statuses: Vec<_> = rest.iter().map(|(_, h)| h.status()).collect();
    let (done_tx, done_rx) = watch::channel(false);
    let monitor = tokio::spawn(async move {
        let (mut samples, mut most) = (0u64, 0usize);
        while !*done_rx.borrow() {
            let leading = statuses.iter().filter(|s| s.is_leader()).count();
            most = most.max(leading);
            samples += 1;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        (samples, most)
    });

    // Whoever wins, the lease names it and the others follow it.
    let (first_id, first) = take_leader(&mut rest).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(first.is_leader());
    assert_eq!(holder(&client).await.as_deref(), Some(first_id));
    for (_, f) in &rest {
        assert_eq!(
            f.status().state(),
            LeaderState::Follower {
                holder: Some(first_id.into())
            }
        );
    }

    // A graceful handover, then an abrupt crash of the next leader.
    assert_eq!(
        first.stop().await.unwrap(),
        Termination::Stopped { released: true }
    );
    let (second_id, second) = take_leader(&mut rest).await;
    assert_ne!(second_id, first_id);
    tokio::time::sleep(Duration::from_millis(500)).await;
    second.abort();
    let (third_id, third) = take_leader(&mut rest).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(holder(&client).await.as_deref(), Some(third_id));

    done_tx.send_replace(true);
    let (samples, most) = monitor.await.unwrap();
    assert!(samples > 100, "monitor sampled only {samples} times");
    assert_eq!(most, 1, "two candidates led at once");
    assert_eq!(transitions(&client).await, 2);
    third.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abruptly_stopped_leader_is_replaced_only_after_its_lease_expires() {
    let (_server, client) = server().await;
    let a = candidate(&client, fast("a"));
    leads(&a).await;
    let b = candidate(&client, fast("b"));
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(
        b.status().state(),
        LeaderState::Follower {
            holder: Some("a".into())
        }
    );
    let before = lease(&client).await.spec.unwrap();
    assert_eq!(before.lease_duration_seconds, Some(2));

    let killed = Instant::now();
    a.abort();
    leads(&b).await;
    let waited = killed.elapsed();
    // a's last renewal was at most one retry period (0.2 s) before the kill,
    // and b counts the 2 s lease from when it saw that renewal.
    assert!(
        waited >= Duration::from_millis(1_700),
        "took over after {waited:?}, before the lease expired"
    );
    assert!(waited < Duration::from_secs(5), "took {waited:?}");

    let after = lease(&client).await.spec.unwrap();
    assert_eq!(after.holder_identity.as_deref(), Some("b"));
    assert_eq!(
        after.lease_transitions,
        before.lease_transitions.map(|t| t + 1)
    );
    assert_ne!(after.acquire_time, before.acquire_time);
    assert_eq!(after.acquire_time, after.renew_time);
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gracefully_stopped_leader_hands_over_without_waiting_for_expiry() {
    let (_server, client) = server().await;
    // A 6 s lease: a handover that waited for expiry could not pass.
    let slow = |id: &str| {
        fast(id)
            .lease_duration(Duration::from_secs(6))
            .renew_deadline(Duration::from_secs(4))
    };
    let a = candidate(&client, slow("a"));
    leads(&a).await;
    let b = candidate(&client, slow("b"));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let transitions_before = transitions(&client).await;

    let stopped = Instant::now();
    assert_eq!(
        a.stop().await.unwrap(),
        Termination::Stopped { released: true }
    );
    leads(&b).await;
    let waited = stopped.elapsed();
    assert!(waited < Duration::from_secs(2), "handover took {waited:?}");
    let spec = lease(&client).await.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_duration_seconds, Some(6));
    assert_eq!(spec.lease_transitions, Some(transitions_before + 1));

    // And the released record itself is client-go's: no holder, 1 s.
    assert_eq!(
        b.stop().await.unwrap(),
        Termination::Stopped { released: true }
    );
    let spec = lease(&client).await.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(""));
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.lease_transitions, Some(transitions_before + 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_api_server_declares_lost_before_a_standby_leads() {
    let (server, client) = server().await;
    let link = crate::support::Partitionable::start(server.addr()).await;
    let a = candidate(&link.client(&server).await, fast("a"));
    leads(&a).await;
    let b = candidate(&client, fast("b"));
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(a.is_leader());

    let cut = Instant::now();
    link.cut();
    let (lost_at, state, b_leads_at) = loss_then_takeover(&a, &b).await;
    assert!(
        matches!(
            state,
            LeaderState::Lost(LostReason::RenewDeadlineExceeded { .. })
        ),
        "{state:?}"
    );
    // a gives up at most a renew deadline (1 s) after its last renewal,
    // which was sent before the cut...
    assert!(
        lost_at - cut <= Duration::from_millis(1_300),
        "lost {:?} after the cut",
        lost_at - cut
    );
    // ...while b waits a full lease (2 s) after it last saw one.
    assert!(
        b_leads_at - cut >= Duration::from_millis(1_700),
        "{:?}",
        b_leads_at - cut
    );
    assert!(lost_at < b_leads_at, "a still led when b took over");
    assert!(matches!(
        bounded("a ends", a.join()).await.unwrap(),
        Termination::Lost(LostReason::RenewDeadlineExceeded { .. })
    ));
    assert_eq!(holder(&client).await.as_deref(), Some("b"));
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_denied_its_lease_declares_lost_before_a_standby_leads() {
    let (server, client) = server().await;
    server.add_token("token-a", User::admin("a"));
    let a = candidate(
        &server.client_for_token("token-a").await.unwrap(),
        fast("a"),
    );
    leads(&a).await;
    let b = candidate(&client, fast("b"));
    tokio::time::sleep(Duration::from_millis(1_000)).await;

    // Injected fault for a alone: its token loses every lease verb.
    let denied = Instant::now();
    server.add_token(
        "token-a",
        User::with_rules("a", vec![Rule::new(&["*"], &["pods"])]),
    );
    let (lost_at, state, b_leads_at) = loss_then_takeover(&a, &b).await;
    assert!(lost_at < b_leads_at, "a still led when b took over");
    assert!(lost_at - denied <= Duration::from_millis(1_300));
    assert!(matches!(
        state,
        LeaderState::Lost(LostReason::RenewDeadlineExceeded { .. })
    ));
    let ended = bounded("a ends", a.join()).await.unwrap();
    let Termination::Lost(LostReason::RenewDeadlineExceeded {
        last_error: Some(error),
    }) = ended
    else {
        panic!("{ended:?}")
    };
    assert!(
        error.contains("403") || error.contains("orbidden"),
        "{error}"
    );
    // a never wrote again: b's acquisition is the only change since.
    assert_eq!(holder(&client).await.as_deref(), Some("b"));
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_candidates_for_an_expired_lease_produce_exactly_one_winner() {
    let (server, client) = server().await;
    Api::<Lease>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": LEASE, "namespace": NS},
                "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 1, "leaseTransitions": 7,
                         "acquireTime": "2020-01-01T00:00:00.000000Z", "renewTime": "2020-01-01T00:00:00.000000Z"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    // Every request takes 1 s, longer than the jitter between the racers'
    // attempts, so both read the expired lease before either writes it.
    server.faults().set_latency(Duration::from_secs(1));
    let patient = |id: &str| {
        fast(id)
            .lease_duration(Duration::from_secs(8))
            .renew_deadline(Duration::from_secs(5))
            .retry_period(Duration::from_millis(100))
    };
    let a = candidate(&server.client().await.unwrap(), patient("a"));
    let b = candidate(&server.client().await.unwrap(), patient("b"));
    bounded("a winner", async {
        while !a.is_leader() && !b.is_leader() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    server.faults().set_latency(Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (winner, loser) = if a.is_leader() { (a, b) } else { (b, a) };
    assert!(!loser.is_leader());
    assert_eq!(
        winner.status().conflicts() + loser.status().conflicts(),
        1,
        "the loser's write was refused with 409 Conflict"
    );
    assert_eq!(loser.status().conflicts(), 1);
    let spec = lease(&client).await.spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(8), "exactly one transition");
    let LeaderState::Follower { holder: seen } = loser.status().state() else {
        panic!("loser not following")
    };
    assert_eq!(seen, spec.holder_identity);
    winner.stop().await.unwrap();
    loser.stop().await.unwrap();
}
