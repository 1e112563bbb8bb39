//! What one write of a large summary ConfigMap costs through the embedded
//! API server over real HTTP with the kube client: a server-side apply of
//! the whole `data` map (what the actuator sends by default) against a JSON
//! merge patch of the one key that changed, at 50, 500 and 5,000 keys (the
//! GPU summary of 1k, 10k and 100k pods at 20 pods per node). Each write
//! changes one key's value; the time is from sending the request to having
//! decoded the answer (the client's side; the server runs in this process).
//! Run with `cargo bench -p wasmctrl --bench configmap_write`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Map, Value as Json};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[(v.len() - 1) * p / 100]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn data(keys: usize, round: usize) -> Map<String, Json> {
    (0..keys)
        .map(|k| {
            let v = if k == round % keys { round + 10 } else { k % 8 };
            (format!("node-{k:05}"), Json::String(v.to_string()))
        })
        .collect()
}

async fn run(keys: usize, writes: usize) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "ops"}})).unwrap(),
    )
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "ops");
    let params = PatchParams::apply("wasmctrl/gpu-summary").force();
    let doc = |round| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "summary", "namespace": "ops"},
               "data": data(keys, round)})
    };
    api.patch("summary", &params, &Patch::Apply(doc(0)))
        .await
        .unwrap();
    let mut apply = Vec::new();
    for round in 1..=writes {
        let d = doc(round);
        let t = Instant::now();
        api.patch("summary", &params, &Patch::Apply(d))
            .await
            .unwrap();
        apply.push(t.elapsed());
    }
    let merge_params = PatchParams {
        field_manager: Some("wasmctrl/gpu-summary".into()),
        ..PatchParams::default()
    };
    let mut merge = Vec::new();
    for round in writes + 1..=2 * writes {
        let k = round % keys;
        let body = json!({"data": {format!("node-{k:05}"): (round + 10).to_string()}});
        let t = Instant::now();
        api.patch("summary", &merge_params, &Patch::Merge(body))
            .await
            .unwrap();
        merge.push(t.elapsed());
    }
    println!(
        "| {keys} | {} | {} | {} | {} |",
        ms(pct(&mut apply, 50)),
        ms(pct(&mut apply, 99)),
        ms(pct(&mut merge, 50)),
        ms(pct(&mut merge, 99)),
    );
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (sizes, writes): (&[usize], usize) = if full {
        (&[50, 500, 5_000], 100)
    } else {
        (&[50], 3)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("| keys | apply whole p50 | p99 | merge one key p50 | p99 |");
    println!("|---|---|---|---|---|");
    for &keys in sizes {
        rt.block_on(run(keys, writes));
    }
}
