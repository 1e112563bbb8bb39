//! `wasmctrl demo` end to end, with the server's simulated nodes on: the
//! pods the simulator leaves unbound name a scheduler nothing runs, so the
//! simulated scheduler leaves them alone and the GPU summary equals the
//! simulator's own count exactly.

use std::time::Duration;

use wasmctrl::demo::{run, DemoConfig};

use crate::support::guest_path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_summary_equals_its_ground_truth_with_simulated_nodes_on() {
    let verdict = run(DemoConfig {
        nodes: 3,
        pods: 200,
        duration: Some(Duration::from_secs(3)),
        guest: guest_path(),
        rate: 40.0,
        seed: 7,
    })
    .await
    .unwrap();
    assert!(
        verdict.unbound > 0,
        "no pod stayed unbound: the test proves nothing"
    );
    assert_eq!(verdict.summary, verdict.truth);
    assert!(verdict.converged);
}
