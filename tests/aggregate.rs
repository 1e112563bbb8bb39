//! The GPU summary through the incremental aggregate path in a running
//! host: real HTTPS, the real kube client. The controller keeps the
//! summary from per-pod contributions (no whole-snapshot reconcile of the
//! key): adds, a pod leaving the field selector (Succeeded) and a deletion
//! each end in the summary a whole snapshot would give.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use wasmctrl::controller::ControllerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_follows_adds_selector_exits_and_deletes_through_contributions() {
    let (_server, client) = server().await;
    let h = start_host(&client, ControllerConfig::default()).await;
    let controller = h.controller();
    let aggregate = controller
        .aggregate()
        .expect("the GPU guest exports the aggregator")
        .clone();
    assert_eq!(aggregate.key(), "gpu-summary");

    pod("a").on("n1").requesting("2").create(&client).await;
    pod("b").on("n1").requesting("1").create(&client).await;
    // No GPU: mapped, but no contribution. (A quantity the guest cannot
    // count never gets here: the API server refuses it, as a real one does.)
    pod("c").on("n2").create(&client).await;
    summary_becomes(&client, &[("n1", "3")]).await;
    // Two pods contribute to one group; the pod without GPUs to none.
    eventually("contributions cached", || async {
        aggregate.pending() == 0 && aggregate.sizes() == (2, 1)
    })
    .await;

    set_phase(&client, "a", "Succeeded").await;
    summary_becomes(&client, &[("n1", "1")]).await;
    delete_now(&client, "b").await;
    summary_becomes(&client, &[]).await;
    eventually("nothing left", || async {
        aggregate.pending() == 0 && aggregate.sizes() == (0, 0)
    })
    .await;
    h.stop().await.unwrap();
}
