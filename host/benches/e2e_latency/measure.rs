//! What the bench reads about a system under test, from outside it: the
//! subprocess's memory and CPU time from `/proc`, and every version of the
//! summary ConfigMap as a watch opened before the subprocess starts sees it
//! (the time it arrived, its `data`, its resourceVersion). It never talks to
//! the subprocess.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::core::NamespaceResourceScope;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};

/// Clock ticks per second in `/proc/PID/stat` (`USER_HZ`, 100 on every
/// Linux architecture's user ABI).
const USER_HZ: f64 = 100.0;

/// A `/proc/PID/status` field in bytes (`VmHWM`, `VmRSS`).
pub fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// User + system CPU time the process `pid` used so far.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: fields count from after its ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13
    // after the pid and (comm) — 11 and 12 zero-based.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_secs_f64((utime + stime) / USER_HZ))
}

/// The Prometheus text at `http://127.0.0.1:{port}/metrics`, if it answers.
pub async fn scrape(port: u16) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .ok()?;
    let mut body = String::new();
    conn.read_to_string(&mut body).await.ok()?;
    Some(body)
}

/// Sum of the samples of metric `name` whose labels contain every one of
/// `labels` (`key="value"` strings).
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name && labels.iter().all(|want| rest.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// A ConfigMap as the recorder decodes it: its name, namespace,
/// resourceVersion and `data`. The rest (managedFields, with one entry per
/// summary key, is most of the object) is skipped by the parser rather
/// than built, so the measuring watch takes little of the CPU both systems
/// share with it.
#[derive(Clone, Debug, serde::Deserialize)]
struct Summary {
    #[serde(deserialize_with = "identity")]
    metadata: ObjectMeta,
    #[serde(default)]
    data: Option<BTreeMap<String, String>>,
}

fn identity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Identity {
        name: Option<String>,
        namespace: Option<String>,
        resource_version: Option<String>,
    }
    let id = <Identity as serde::Deserialize>::deserialize(d)?;
    Ok(ObjectMeta {
        name: id.name,
        namespace: id.namespace,
        resource_version: id.resource_version,
        ..ObjectMeta::default()
    })
}

impl Resource for Summary {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind((): &()) -> std::borrow::Cow<'_, str> {
        "ConfigMap".into()
    }
    fn group((): &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version((): &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural((): &()) -> std::borrow::Cow<'_, str> {
        "configmaps".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// One version of the ConfigMap as the watch delivered it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When the bench received it.
    pub at: Instant,
    /// Its `data` (absent data is empty).
    pub data: BTreeMap<String, String>,
    /// Its resourceVersion.
    pub rv: String,
}

/// Every distinct version of one ConfigMap, in arrival order.
#[derive(Clone, Default)]
pub struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Recorder {
    /// Watches ConfigMap `namespace/name` until the returned task is
    /// aborted; resolves once the watch's initial list is in, so later
    /// writes are never missed.
    pub async fn start(
        client: &Client,
        namespace: &str,
        name: &str,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let api: Api<Summary> = Api::namespaced(client.clone(), namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let recorder = Recorder::default();
        let seen = recorder.seen.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let mut ready_tx = Some(ready_tx);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(api, config).default_backoff());
            while let Some(event) = events.next().await {
                let cm = match event {
                    Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => cm,
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready_tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(_) => continue,
                    Err(e) => {
                        eprintln!("e2e_latency: ConfigMap watch: {e}");
                        continue;
                    }
                };
                let rv = cm.metadata.resource_version.clone().unwrap_or_default();
                let mut seen = seen.lock().expect("recorder lock");
                if seen.iter().any(|s| s.rv == rv) {
                    continue; // a relist repeats versions already seen
                }
                seen.push(Seen {
                    at: Instant::now(),
                    data: cm.data.unwrap_or_default(),
                    rv,
                });
            }
        });
        let _ = ready_rx.await;
        (recorder, task)
    }

    /// All versions seen so far.
    pub fn snapshot(&self) -> Vec<Seen> {
        self.seen.lock().expect("recorder lock").clone()
    }

    /// The first version that arrived at or after `since` and satisfies
    /// `want`.
    pub fn first_after(
        &self,
        since: Instant,
        want: impl Fn(&BTreeMap<String, String>) -> bool,
    ) -> Option<Instant> {
        self.seen
            .lock()
            .expect("recorder lock")
            .iter()
            .find(|s| s.at >= since && want(&s.data))
            .map(|s| s.at)
    }

    /// Versions that arrived in `[from, to)`: the writes that changed the
    /// object in that window (the API server gives a no-op apply no new
    /// resourceVersion, so those are not counted).
    pub fn writes_between(&self, from: Instant, to: Instant) -> usize {
        self.seen
            .lock()
            .expect("recorder lock")
            .iter()
            .filter(|s| s.at >= from && s.at < to)
            .count()
    }

    /// The latest `data`.
    pub fn latest(&self) -> Option<BTreeMap<String, String>> {
        self.seen
            .lock()
            .expect("recorder lock")
            .last()
            .map(|s| s.data.clone())
    }
}

/// Latency percentiles over a sample.
#[derive(Clone, Copy, Debug, Default)]
pub struct Percentiles {
    /// Median.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest.
    pub max: Duration,
}

/// Nearest-rank percentiles of `sample` (all zero when empty).
pub fn percentiles(sample: &[Duration]) -> Percentiles {
    let mut s = sample.to_vec();
    s.sort();
    let rank = |p: f64| -> Duration {
        if s.is_empty() {
            return Duration::ZERO;
        }
        let i = ((p / 100.0) * s.len() as f64).ceil() as usize;
        s[i.clamp(1, s.len()) - 1]
    };
    Percentiles {
        p50: rank(50.0),
        p90: rank(90.0),
        p99: rank(99.0),
        max: s.last().copied().unwrap_or_default(),
    }
}
