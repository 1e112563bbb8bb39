//! The second guest, `guest-gpu-quota`, end to end: its `crd.yaml` loaded
//! into the embedded API server, the host running the built guest over real
//! HTTPS with the real kube client. A `GpuQuota`'s status follows the pods
//! of its namespace and its `spec.limit` (used, `Ready`/`OverLimit`,
//! observedGeneration), the host holds the finalizer, a converged quota
//! costs no writes while nothing changes, and rapid create/delete cycles
//! leave no quota behind.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::Client;
use serde_json::{json, Value};
use wasmctrl::controller::{ControllerConfig, GuestController};
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::WriteVerb;
use wasmctrl::supervisor::SupervisorConfig;

use crate::support::*;

/// The guest's declared name (`GUEST_NAME` in its lib.rs).
const GUEST: &str = "gpu-quota";
/// The finalizer the host keeps on every quota (`FINALIZER` in its lib.rs).
const FINALIZER: &str = "example.com/gpu-quota";
const NAME: &str = "gpus";
/// How long a converged quota is watched for writes.
const IDLE_WINDOW: Duration = Duration::from_secs(3);

fn quota_guest_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let p = target.join("wasm32-wasip2/guest/guest_gpu_quota.wasm");
    assert!(
        p.exists(),
        "build the guest first: cargo build -p guest-gpu-quota --target wasm32-wasip2 --profile guest"
    );
    p
}

fn gpu_quotas() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "GpuQuota".into(),
        plural: "gpuquotas".into(),
    }
}

fn quotas(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), PODS_NS, &gpu_quotas())
}

/// Loads the example's own `crd.yaml` into the server.
async fn install_crd(client: &Client) {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/guest-gpu-quota/crd.yaml");
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let api = quotas(client);
    eventually("the GpuQuota resource is served", || async {
        api.list(&ListParams::default()).await.is_ok()
    })
    .await;
}

/// The host running only the quota guest (it takes no configuration keys:
/// its `describe` accepts none).
async fn start_quota_host(client: &Client) -> RunningHost {
    let config = SupervisorConfig {
        guests: vec![quota_guest_path()],
        namespace: HOST_NS.into(),
        controller: ControllerConfig::default(),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    };
    run_host(client, config, None).await
}

fn quota_controller(host: &RunningHost) -> Arc<GuestController> {
    host.host
        .controller(GUEST)
        .expect("the host runs the gpu-quota guest")
}

/// Every write the guest's controller made: `writes()` (applies, deletes,
/// events) plus the pinned 0.2 verbs, which `writes()` does not count.
fn all_writes(controller: &GuestController) -> u64 {
    let m = controller.metrics();
    m.writes()
        + [
            WriteVerb::Update,
            WriteVerb::ApplyStatus,
            WriteVerb::AddFinalizer,
            WriteVerb::RemoveFinalizer,
        ]
        .into_iter()
        .map(|v| m.written(v))
        .sum::<u64>()
}

fn quota(limit: i64) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "GpuQuota",
        "metadata": {"name": NAME, "namespace": PODS_NS}, "spec": {"limit": limit}}))
    .unwrap()
}

/// What a quota shows, as read from the server.
#[derive(Debug, PartialEq)]
struct Seen {
    used: Option<i64>,
    /// `Ready`'s (status, reason, observedGeneration).
    ready: Option<(String, String, Option<i64>)>,
    observed_generation: Option<i64>,
    generation: Option<i64>,
    finalizers: Vec<String>,
}

async fn seen(api: &Api<DynamicObject>) -> Option<Seen> {
    let q = api.get_opt(NAME).await.unwrap()?;
    let status = &q.data["status"];
    let ready = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c: &Value| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
                c["observedGeneration"].as_i64(),
            )
        });
    Some(Seen {
        used: status["used"].as_i64(),
        ready,
        observed_generation: status["observedGeneration"].as_i64(),
        generation: q.metadata.generation,
        finalizers: q.metadata.finalizers.unwrap_or_default(),
    })
}

/// Waits until the quota shows `used` GPUs, `Ready` = `ready` with `reason`,
/// observedGeneration (status and condition) = `metadata.generation`, and
/// the finalizer; returns the generation.
async fn quota_shows(api: &Api<DynamicObject>, used: i64, ready: bool, reason: &str) -> i64 {
    let want_status = if ready { "True" } else { "False" };
    let what = format!("quota shows used={used}, Ready={want_status} ({reason}), current observedGeneration, finalizer");
    let mut last = None;
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let now = seen(api).await;
        if let Some(
            s @ Seen {
                generation: Some(generation),
                ..
            },
        ) = &now
        {
            if s.used == Some(used)
                && s.observed_generation == Some(*generation)
                && s.ready == Some((want_status.into(), reason.into(), Some(*generation)))
                && s.finalizers == [FINALIZER]
            {
                return *generation;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}; last seen {now:?} (before: {last:?})"
        );
        last = now;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn set_limit(api: &Api<DynamicObject>, limit: i64) {
    api.patch(
        NAME,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"limit": limit}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn status_follows_pods_and_the_limit_and_ready_flips_on_over_limit() {
    let (_server, client) = server().await;
    install_crd(&client).await;
    let host = start_quota_host(&client).await;
    let api = quotas(&client);

    // Scheduled pods count; an unscheduled one holds nothing.
    pod("train").on("n1").requesting("1").create(&client).await;
    pod("waiting").requesting("4").create(&client).await;
    api.create(&PostParams::default(), &quota(2)).await.unwrap();
    let first = quota_shows(&api, 1, true, "WithinLimit").await;
    assert_eq!(first, 1, "a new quota is at generation 1");

    // Pod creation: 1 + 2 = 3 > 2.
    pod("eval").on("n2").requesting("2").create(&client).await;
    quota_shows(&api, 3, false, "OverLimit").await;
    let events: Api<Event> = Api::namespaced(client.clone(), PODS_NS);
    eventually("a Warning event OverLimit about the quota", || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("OverLimit")
                    && e.type_.as_deref() == Some("Warning")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NAME)
            })
    })
    .await;

    // A spec change: generation bumps, observedGeneration follows, back under.
    set_limit(&api, 4).await;
    let second = quota_shows(&api, 3, true, "WithinLimit").await;
    assert_eq!(second, first + 1, "the limit change bumped the generation");

    // Back over by lowering the limit, then under by deleting a pod.
    set_limit(&api, 1).await;
    quota_shows(&api, 3, false, "OverLimit").await;
    delete_now(&client, "eval").await;
    quota_shows(&api, 1, true, "WithinLimit").await;

    // A pod that ends holds nothing.
    set_phase(&client, "train", "Succeeded").await;
    quota_shows(&api, 0, true, "WithinLimit").await;

    // Deleting the quota: the guest releases the host's finalizer.
    api.delete(NAME, &DeleteParams::default()).await.unwrap();
    eventually("the deleted quota goes", || async {
        api.get_opt(NAME).await.unwrap().is_none()
    })
    .await;
    let m = quota_controller(&host).metrics().clone();
    assert!(m.written(WriteVerb::AddFinalizer) >= 1, "the host added it");
    // The object is gone once the server applied the patch, which can be
    // before the host has read the answer and counted the write.
    eventually("the plan's finalizer removal is counted", || async {
        m.written(WriteVerb::RemoveFinalizer) >= 1
    })
    .await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_converged_quota_makes_zero_writes_while_idle() {
    let (_server, client) = server().await;
    install_crd(&client).await;
    let host = start_quota_host(&client).await;
    let controller = quota_controller(&host);
    let api = quotas(&client);
    pod("train").on("n1").requesting("2").create(&client).await;
    api.create(&PostParams::default(), &quota(2)).await.unwrap();

    // Within the limit, then over it (a plan with a Warning event).
    for (limit, ready, reason) in [(2, true, "WithinLimit"), (1, false, "OverLimit")] {
        if limit != 2 {
            set_limit(&api, limit).await;
        }
        quota_shows(&api, 2, ready, reason).await;
        eventually("the gpu-quota queue is idle", || async { host.idle() }).await;
        let before = all_writes(&controller);
        assert!(
            before > 0,
            "the guest wrote status and the host the finalizer"
        );
        let reconciles = controller.metrics().reconciles();
        stays_for(
            IDLE_WINDOW,
            &format!("no write while idle at limit {limit} (writes were {before})"),
            || async { all_writes(&controller) == before },
        )
        .await;
        eprintln!(
            "limit {limit}: {before} writes, reconciles {reconciles} -> {}",
            controller.metrics().reconciles()
        );
    }
    host.stop().await.unwrap();
}

#[tokio::test]
async fn fifty_rapid_create_delete_cycles_leave_zero_zombies() {
    let (_server, client) = server().await;
    install_crd(&client).await;
    let host = start_quota_host(&client).await;
    let controller = quota_controller(&host);
    let api = quotas(&client);
    pod("train").on("n1").requesting("1").create(&client).await;
    const CYCLES: i64 = 50;
    for cycle in 0..CYCLES {
        eventually(&format!("quota created in cycle {cycle}"), || async {
            match api.create(&PostParams::default(), &quota(cycle)).await {
                Ok(_) => true,
                // The previous incarnation is still finalizing.
                Err(kube::Error::Api(s)) if s.code == 409 => false,
                Err(e) => panic!("create {cycle}: {e}"),
            }
        })
        .await;
        api.delete(NAME, &DeleteParams::default()).await.unwrap();
    }
    eventually(
        "the queue is idle and no GpuQuota is left in the namespace",
        || async {
            host.idle()
                && api
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .is_empty()
        },
    )
    .await;
    stays_for(Duration::from_secs(1), "no GpuQuota comes back", || async {
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    let m = controller.metrics();
    eprintln!(
        "errors {}; written: add-finalizer {}, remove-finalizer {}; dropped: status {}, remove-finalizer {}, add-finalizer {}",
        m.errors(),
        m.written(WriteVerb::AddFinalizer),
        m.written(WriteVerb::RemoveFinalizer),
        m.dropped(WriteVerb::ApplyStatus),
        m.dropped(WriteVerb::RemoveFinalizer),
        m.dropped(WriteVerb::AddFinalizer)
    );
    host.stop().await.unwrap();
}
