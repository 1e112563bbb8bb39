//! What the scale bench (`apiserver_scale`) and the Service-list example
//! (`list_services`) share: how many writes are in flight, the page size,
//! concurrent creates, paged lists timed raw and typed, and the markdown
//! table they print. It owns the measuring; it never starts a server and
//! never decides what a run measures.

use std::ops::Range;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, PostParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Requests in flight while creating and patching.
pub const CONCURRENCY: usize = 64;

/// Page size of the paged lists (kubectl's and client-go's default chunk).
pub const PAGE: u32 = 500;

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Creates `make(i)` for every `i` of `range`, `CONCURRENCY` in flight;
/// returns the time it took.
pub async fn create_all<K>(api: &Api<K>, range: Range<usize>, make: impl Fn(usize) -> K) -> Duration
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let started = Instant::now();
    futures::stream::iter(range)
        .map(|i| {
            let (api, obj) = (api.clone(), make(i));
            async move { api.create(&PostParams::default(), &obj).await.map(drop) }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
    started.elapsed()
}

/// Lists every object of `api` in typed pages of `PAGE`; returns (items,
/// pages, elapsed).
pub async fn paged_list<K>(api: &Api<K>) -> (usize, usize, Duration)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let started = Instant::now();
    let mut lp = ListParams::default().limit(PAGE);
    let (mut items, mut pages) = (0, 0);
    loop {
        let l = api.list(&lp).await.unwrap();
        items += l.items.len();
        pages += 1;
        match l.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return (items, pages, started.elapsed()),
        }
    }
}

/// Lists `path` in pages of `PAGE` as raw JSON text (server, TLS and HTTP
/// cost without the client's typed decode); returns (bytes, pages, elapsed).
pub async fn raw_paged_list(client: &kube::Client, path: &str) -> (usize, usize, Duration) {
    let started = Instant::now();
    let (mut bytes, mut pages) = (0, 0);
    let mut cont: Option<String> = None;
    loop {
        let uri = match &cont {
            Some(c) => format!("{path}?limit={PAGE}&continue={c}"),
            None => format!("{path}?limit={PAGE}"),
        };
        let req = http::Request::get(uri).body(Vec::new()).unwrap();
        let text = client.request_text(req).await.unwrap();
        bytes += text.len();
        pages += 1;
        // The list metadata precedes the items, so the token is near the start.
        let head = &text[..text.len().min(2048)];
        cont = head
            .split_once("\"continue\":\"")
            .and_then(|(_, rest)| rest.split_once('"').map(|(token, _)| token.to_owned()));
        if cont.is_none() {
            return (bytes, pages, started.elapsed());
        }
    }
}

/// Runs `run` on two worker threads (the machines these numbers come
/// from have two cores) and prints its rows as a markdown table.
pub fn print_table_of(run: impl std::future::Future<Output = Vec<(String, String)>>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rows = rt.block_on(run);
    println!("| measurement | result |");
    println!("|---|---|");
    for (k, v) in rows {
        println!("| {k} | {v} |");
    }
}
