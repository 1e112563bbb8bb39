//! Memory per cached pod: wasmctrl's projected informer against a plain
//! kube-runtime reflector of full `Pod`s, over the same realistic pods, in
//! one process.
//!
//! Starts the embedded API server in-process and creates realistic pods
//! (~10 KB of JSON as served: labels, a `last-applied-configuration`
//! annotation, an ownerReference, a GPU trainer container and a sidecar with
//! env, ports, mounts, resources and probes, volumes, tolerations, a
//! kubelet-style status; the server adds managedFields). Then it measures,
//! each as a delta from a baseline taken just before it so the server's own
//! copy of the pods never counts:
//! 1. a `wasmctrl::informer::Informer` with the GPU-summary guest's projection
//!    and field selector, as `wasmctrl run` would start it;
//! 2. the same informer keeping identities only (`Retention::Identity`),
//!    as it does for an aggregate guest such as the GPU summary;
//! 3. a `kube::runtime::reflector` of full `k8s_openapi` Pods with the same
//!    field selector (not with `--no-reflector`).
//!
//! RSS is read from `/proc/self/status` as it stands and after
//! `malloc_trim(0)` (glibc keeps freed transient memory, such as decoded
//! list pages, resident until trimmed); a counting global allocator reports
//! the live heap next to it, so the gap (allocator rounding and
//! fragmentation) is visible. Run with
//! `make guest && cargo bench -p wasmctrl --bench informer_memory`
//! (`-- --pods N` for another size than 100,000; `-- --no-reflector`)
//! (100,000 pods, ~8 min, peaks near 9 GB RSS; exits non-zero when the
//! informer is over budget); under `cargo test --all-targets` it runs on 500
//! pods as a smoke test that checks only that both caches fill.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::Client;
use serde_json::{json, Value};
use wasmctrl::guest::{self, GuestRuntime, RuntimeConfig};
use wasmctrl::informer::{Change, Informer, InformerKey, Retention};
use wasmctrl::projection::{ProjectedObject, Projection};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

#[path = "shared/pods.rs"]
mod pods;
#[path = "shared/process.rs"]
#[allow(dead_code)]
mod process;

use pods::{CREATE_CONCURRENCY, NAMESPACE};

/// Pods in the real run (`cargo bench`).
const FULL_PODS: usize = 100_000;
/// Pods in the smoke run (`cargo test --all-targets`).
const SMOKE_PODS: usize = 500;
/// The budget per cached pod.
const BUDGET_BYTES: f64 = 1024.0;
/// GPU nodes the pods are spread over.
const NODES: usize = 2_000;
/// How long a cache may take to sync before the bench gives up.
const SYNC_TIMEOUT: Duration = Duration::from_secs(900);

// ---------------------------------------------------------------- memory

fn rss_bytes() -> u64 {
    process::status_bytes(std::process::id(), "VmRSS").unwrap_or(0)
}

/// Hands free heap pages back to the kernel, so RSS counts live memory and
/// not what the allocator keeps from transient decoding.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn malloc_trim() {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: glibc's malloc_trim only releases free memory; it takes no
    // pointers and is safe to call from any thread at any time.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn malloc_trim() {}

/// The system allocator, counting live allocations and bytes so a phase can
/// report what its cache asked for next to what it costs in RSS (the
/// difference is allocator rounding, headers and fragmentation).
struct Counting;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
static LIVE_CHUNK_BYTES: AtomicI64 = AtomicI64::new(0);
static LIVE_ALLOCS: AtomicI64 = AtomicI64::new(0);

/// What glibc malloc really takes for a request of `size` bytes: an 8-byte
/// header, rounded up to 16, at least 32.
fn chunk(size: usize) -> i64 {
    ((size + 8 + 15) & !15).max(32) as i64
}

#[allow(unsafe_code)]
// SAFETY: every call is forwarded unchanged to the system allocator; the
// counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as i64, Relaxed);
            LIVE_CHUNK_BYTES.fetch_add(chunk(layout.size()), Relaxed);
            LIVE_ALLOCS.fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size() as i64, Relaxed);
        LIVE_CHUNK_BYTES.fetch_sub(chunk(layout.size()), Relaxed);
        LIVE_ALLOCS.fetch_sub(1, Relaxed);
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as i64, Relaxed);
            LIVE_CHUNK_BYTES.fetch_add(chunk(layout.size()), Relaxed);
            LIVE_ALLOCS.fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Relaxed);
            LIVE_CHUNK_BYTES.fetch_add(chunk(new_size) - chunk(layout.size()), Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Memory at one point: RSS as it stands and after trimming (once
/// background tasks settled), and the live heap the program asked for.

#[derive(Clone, Copy)]
struct Rss {
    raw: u64,
    trimmed: u64,
    heap: i64,
    chunks: i64,
    allocs: i64,
}

async fn measure() -> Rss {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let raw = rss_bytes();
    malloc_trim();
    let trimmed = rss_bytes();
    Rss {
        raw,
        trimmed,
        heap: LIVE_BYTES.load(Relaxed),
        chunks: LIVE_CHUNK_BYTES.load(Relaxed),
        allocs: LIVE_ALLOCS.load(Relaxed),
    }
}

fn per_pod(after: u64, before: u64, pods: usize) -> f64 {
    (after as f64 - before as f64) / pods as f64
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

// ---------------------------------------------------------------- pods

/// Pod `i` on one of the [`NODES`] GPU nodes (the shared fixture), with its
/// node's own IP in the status as a 1.28+ kubelet reports it.
fn realistic_pod(i: usize) -> (String, Value, Value) {
    let node = (i * 7919) % NODES;
    let (name, pod, mut status) = pods::realistic_pod(i, &format!("gpu-node-{node:04}"));
    let node_ip = format!(
        "10.{}.{}.{}",
        20 + (i % NODES) / 65_536,
        node / 256,
        (i * 7919) % 256
    );
    status["hostIPs"] = json!([{"ip": node_ip}]);
    status["hostIP"] = json!(node_ip);
    (name, pod, status)
}

async fn create_pods(client: &Client, n: usize) {
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let (name, pod, status) = realistic_pod(i);
                pods::create(&api, &name, pod, status).await
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .expect("pods are created");
}

/// Mean size of a pod as the API server serves it (managedFields included).
async fn served_json_bytes(client: &Client) -> usize {
    let ar = kube::api::ApiResource::erase::<Pod>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
    let page = api.list(&ListParams::default().limit(200)).await.unwrap();
    let total: usize = page
        .items
        .iter()
        .map(|p| serde_json::to_vec(p).map_or(0, |v| v.len()))
        .sum();
    total / page.items.len().max(1)
}

// ---------------------------------------------------------------- phases

struct Phase {
    name: &'static str,
    pods: usize,
    before: Rss,
    after: Rss,
    sync: Duration,
}

impl Phase {
    fn raw_per_pod(&self) -> f64 {
        per_pod(self.after.raw, self.before.trimmed, self.pods)
    }
    fn trimmed_per_pod(&self) -> f64 {
        per_pod(self.after.trimmed, self.before.trimmed, self.pods)
    }
    fn heap_per_pod(&self) -> f64 {
        (self.after.heap - self.before.heap) as f64 / self.pods as f64
    }
    fn chunks_per_pod(&self) -> f64 {
        (self.after.chunks - self.before.chunks) as f64 / self.pods as f64
    }
    fn allocs_per_pod(&self) -> f64 {
        (self.after.allocs - self.before.allocs) as f64 / self.pods as f64
    }
}

async fn deadline<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(SYNC_TIMEOUT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {SYNC_TIMEOUT:?}: {what}"))
}

fn guest_wasm() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("wasm32-wasip2/guest/guest_gpu_summary.wasm")
}

/// Starts an informer of `key` keeping `retention` of `projection` (an
/// identity-keeping one with a handler that drops each change: it lists
/// once it has one) and measures it from before its start until synced.
async fn measure_informer(
    name: &'static str,
    (client, key, projection): (&Client, &InformerKey, &Projection),
    retention: Retention,
    pods: usize,
) -> (Phase, Informer) {
    let before = measure().await;
    let t = Instant::now();
    let informer = Informer::start_keeping(
        client.clone(),
        key.clone(),
        projection.clone(),
        &[],
        retention,
    );
    if retention == Retention::Identity {
        informer.add_handler(std::sync::Arc::new(|_: &Change| {}));
    }
    deadline(name, informer.wait_synced())
        .await
        .expect("informer syncs");
    let sync = t.elapsed();
    assert_eq!(informer.len(), pods, "the informer caches every pod");
    let after = measure().await;
    let phase = Phase {
        name,
        pods,
        before,
        after,
        sync,
    };
    (phase, informer)
}

async fn run(pods: usize, with_reflector: bool) -> bool {
    // The GPU-summary guest's declared watch: key, selector and projection.
    let rt = GuestRuntime::new(RuntimeConfig::default().cache_dir(None)).unwrap();
    let module = rt
        .load_file(&guest_wasm())
        .unwrap_or_else(|e| panic!("{e} (run `make guest` first)"));
    let manifest = module
        .manifest(&guest::environment("default", &BTreeMap::new()))
        .unwrap();
    let watch = manifest.watches[0].clone();
    let key = InformerKey {
        group: watch.gvk.group.clone(),
        version: watch.gvk.version.clone(),
        kind: watch.gvk.kind.clone(),
        plural: watch.plural.clone().unwrap_or_else(|| "pods".into()),
        namespace: watch.namespace.clone(),
        label_selector: watch.label_selector.clone(),
        field_selector: watch.field_selector.clone(),
    };
    drop((module, rt));

    // The pods name owners (ReplicaSets, Jobs) that are never created: a
    // garbage collector would delete them, as kube-controller-manager's
    // does. The worlds stand for a bare API server.
    let server = ApiServer::start(ApiServerConfig::default().garbage_collector(false))
        .await
        .expect("embedded API server starts");
    let client = server.client().await.unwrap();
    wasmctrl_test_support::create_namespace(&client, NAMESPACE).await;
    let t = Instant::now();
    create_pods(&client, pods).await;
    let created = t.elapsed();
    let json_bytes = served_json_bytes(&client).await;
    eprintln!(
        "informer_memory: created {pods} pods ({json_bytes} B of JSON each as served) in {:.1} s",
        created.as_secs_f64()
    );

    // (1) + (2): the projected informer.
    let projection = &watch.projection;
    let (informer_phase, informer) = measure_informer(
        "wasmctrl informer (GPU-summary projection)",
        (&client, &key, projection),
        Retention::Projections,
        pods,
    )
    .await;
    let cached: Vec<std::sync::Arc<ProjectedObject>> = informer.list();
    let heap_bytes = cached.iter().map(|o| o.heap_bytes()).sum::<usize>() as f64 / pods as f64;
    let values = cached
        .iter()
        .map(|o| {
            (0..o.field_count())
                .map(|f| o.field(f).len())
                .sum::<usize>()
        })
        .sum::<usize>() as f64
        / pods as f64;
    drop(cached);
    drop(informer);

    // (2b): the same informer keeping identities only, as for an
    // aggregate guest (its one handler drops each change).
    let (identity_phase, identities) = measure_informer(
        "wasmctrl informer keeping identities (`Retention::Identity`)",
        (&client, &key, projection),
        Retention::Identity,
        pods,
    )
    .await;
    let strings = identities
        .list()
        .iter()
        .map(|o| o.name.len() + o.uid.len() + o.resource_version.len())
        .sum::<usize>() as f64
        / pods as f64;
    drop(identities);
    let released = measure().await;

    // (3): a plain kube-runtime reflector of full Pods, same selector.
    if !with_reflector {
        let i = &informer_phase;
        print_phases(pods, json_bytes, i, &[i, &identity_phase]);
        println!("identities: name, uid and resourceVersion {strings:.0} B/pod of text; `ProjectedObject` {} B", std::mem::size_of::<ProjectedObject>());
        drop(server);
        return true;
    }
    let before = released;
    let t = Instant::now();
    let api: Api<Pod> = Api::all(client.clone());
    let mut config = watcher::Config::default();
    if let Some(f) = &key.field_selector {
        config = config.fields(f);
    }
    let (reader, writer) = reflector::store::<Pod>();
    let task = tokio::spawn(
        reflector(writer, watcher(api, config))
            .default_backoff()
            .applied_objects()
            .for_each(|_| futures::future::ready(())),
    );
    deadline("reflector sync", async {
        reader.wait_until_ready().await.expect("reflector syncs");
        while reader.len() < pods {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let sync = t.elapsed();
    assert_eq!(reader.len(), pods, "the reflector caches every pod");
    let after = measure().await;
    let reflector_phase = Phase {
        name: "kube-runtime reflector of full `Pod`s",
        pods,
        before,
        after,
        sync,
    };
    task.abort();
    drop(reader);

    let i = &informer_phase;
    let r = &reflector_phase;
    print_phases(pods, json_bytes, i, &[i, &identity_phase, r]);
    println!("identities: name, uid and resourceVersion {strings:.0} B/pod of text; `ProjectedObject` {} B", std::mem::size_of::<ProjectedObject>());
    println!(
        "informer: {values:.1} projected values per pod; `ProjectedObject::heap_bytes` {heap_bytes:.0} B/pod + {} B struct (own estimate, interned strings and map entry not counted)",
        std::mem::size_of::<ProjectedObject>()
    );
    println!(
        "RSS (MiB, trimmed): baseline {:.0}, informer synced {:.0}, informer dropped {:.0}, reflector synced {:.0}",
        mib(i.before.trimmed),
        mib(i.after.trimmed),
        mib(released.trimmed),
        mib(r.after.trimmed)
    );
    let within = i.trimmed_per_pod() <= BUDGET_BYTES;
    let verdict = match (pods >= FULL_PODS, within) {
        (false, _) => "not checked (smoke run: RSS at this size is allocator noise)",
        (true, true) => "within",
        (true, false) => "OVER",
    };
    println!(
        "budget: {:.0} B/pod against {BUDGET_BYTES:.0} B: {verdict}",
        i.trimmed_per_pod()
    );
    drop(server);
    within
}

/// The table of `phases`, each against the informer `i`.
fn print_phases(pods: usize, json_bytes: usize, i: &Phase, phases: &[&Phase]) {
    println!(
        "informer_memory: {pods} pods, {json_bytes} B of JSON each as served; RSS deltas from a baseline taken before each phase"
    );
    println!();
    println!(
        "| cache | pods | sync | RSS/pod | RSS/pod after malloc_trim | vs informer | live heap/pod (malloc chunks) | allocations/pod |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for p in phases {
        println!(
            "| {} | {} | {:.1} s | {:.0} B | **{:.0} B** | {:.0}x | {:.0} B ({:.0} B) | {:.1} |",
            p.name,
            p.pods,
            p.sync.as_secs_f64(),
            p.raw_per_pod(),
            p.trimmed_per_pod(),
            p.trimmed_per_pod() / i.trimmed_per_pod().max(1.0),
            p.heap_per_pod(),
            p.chunks_per_pod(),
            p.allocs_per_pod(),
        );
    }
    println!();
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this as
    // a smoke test on a small world, where RSS deltas are noise.
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    // `--pods N` (default 100,000; 500 as a smoke test); `--no-reflector`
    // measures wasmctrl's informers only.
    let pods = args
        .iter()
        .position(|a| a == "--pods")
        .and_then(|at| args.get(at + 1)?.parse().ok())
        .unwrap_or(if full { FULL_PODS } else { SMOKE_PODS });
    let with_reflector = !args.iter().any(|a| a == "--no-reflector");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let within = rt.block_on(run(pods, with_reflector));
    if full && !within {
        std::process::exit(1);
    }
}
