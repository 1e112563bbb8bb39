//! Scale behaviour of the embedded API server at a size the normal test
//! command runs: a paged list returns every pod exactly once, and every
//! change reaches every one of many watchers. The 100k-pod measurement is
//! the `apiserver_scale` bench (`cargo bench -p wasmctrl-apiserver --bench
//! apiserver_scale`), recorded in BENCHMARKS.md. These tests never assert
//! timings, only that nothing is lost.
#![allow(clippy::unwrap_used, missing_docs)]

#[path = "../benches/support/pods.rs"]
mod pods;

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::ResourceExt;
use pods::pod;
use wasmctrl_apiserver::{ApiServer, ApiServerConfig, RunningApiServer};

const PODS: usize = 1_000;
const WATCHERS: usize = 10;
const CONCURRENCY: usize = 64;

async fn create_pods(api: &Api<Pod>, n: usize) {
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &pod(i)).await.map(drop) }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
}

/// Every pod name a paged list returns, in order, and the list's resourceVersion.
async fn paged_names(api: &Api<Pod>, page: u32) -> (Vec<String>, String) {
    let mut lp = ListParams::default().limit(page);
    let mut names = Vec::new();
    loop {
        let l = api.list(&lp).await.unwrap();
        assert!(l.items.len() <= page as usize);
        names.extend(l.items.iter().map(ResourceExt::name_any));
        match l.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return (names, l.metadata.resource_version.unwrap()),
        }
    }
}

/// Starts `WATCHERS` watches from `rv`, patches the first `changes` pods and
/// asserts every watcher sees exactly those changes.
async fn assert_fan_out(server: &RunningApiServer, api: &Api<Pod>, rv: &str, changes: usize) {
    let mut tasks = Vec::new();
    for _ in 0..WATCHERS {
        let w: Api<Pod> = Api::default_namespaced(server.client().await.unwrap());
        let mut stream = w
            .watch(&WatchParams::default().timeout(120), rv)
            .await
            .unwrap()
            .boxed();
        tasks.push(tokio::spawn(async move {
            let mut seen = BTreeSet::new();
            while seen.len() < changes {
                match stream.try_next().await.unwrap().unwrap() {
                    WatchEvent::Modified(p) => {
                        assert_eq!(p.labels().get("touched").map(String::as_str), Some("yes"));
                        assert!(seen.insert(p.name_any()), "{} seen twice", p.name_any());
                    }
                    WatchEvent::Bookmark(_) => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
            seen
        }));
    }
    pods::touch(api, changes).await;
    let want: BTreeSet<String> = (0..changes).map(|i| format!("pod-{i:06}")).collect();
    for t in tasks {
        let seen = tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(seen, want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_list_and_watch_fan_out_deliver_every_pod_and_change() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let api: Api<Pod> = Api::default_namespaced(server.client().await.unwrap());
    create_pods(&api, PODS).await;
    assert_eq!(server.object_count("pods"), PODS);
    let (names, rv) = paged_names(&api, 128).await;
    let want: Vec<String> = (0..PODS).map(|i| format!("pod-{i:06}")).collect();
    assert_eq!(names, want, "every pod exactly once, in key order");
    assert_fan_out(&server, &api, &rv, 100).await;
}
