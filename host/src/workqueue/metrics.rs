//! The client-go `workqueue_*` metrics: families shared by every queue of a
//! process, labelled by queue (guest) name.
//!
//! Owns the metric families, each queue's handles into them, and the
//! scrape-time collector that computes the in-flight gauges from the live
//! queues. It never changes a queue: queues update their own handles, and
//! the collector only reads.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use crate::sync::lock;

/// The label every workqueue metric carries: the queue's (guest's) name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

/// Metric name of the in-flight age sum (a gauge computed on scrape).
const UNFINISHED_WORK: &str = "workqueue_unfinished_work_seconds";
/// Metric name of the oldest in-flight age (a gauge computed on scrape).
const LONGEST_RUNNING: &str = "workqueue_longest_running_processor_seconds";

/// What the scrape-time collector asks of each live queue.
pub(super) trait InFlight: Send + Sync {
    /// Sum and maximum of the ages of the keys being processed, in seconds.
    fn in_flight(&self, now: Instant) -> (f64, f64);
}

type QueueList = Mutex<Vec<(String, Weak<dyn InFlight>)>>;

/// The client-go workqueue metric families, shared by every queue of a
/// process and labelled by queue name (`name="<guest>"`).
///
/// Exposes `workqueue_depth`, `workqueue_adds_total`,
/// `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`,
/// `workqueue_retries_total`, `workqueue_unfinished_work_seconds` and
/// `workqueue_longest_running_processor_seconds`; the last two are computed
/// from the live queues at scrape time. Create it once per registry: two
/// instances registered in one registry would expose every name twice.
/// Series of dropped queues keep their last values, as in client-go.
#[derive(Debug, Clone)]
pub struct WorkqueueMetrics {
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    work_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    retries: Family<QueueLabels, Counter>,
    queues: Arc<QueueList>,
}

fn duration_histogram() -> Histogram {
    // client-go: prometheus.ExponentialBuckets(10e-9, 10, 10), 10 ns .. 10 s.
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

impl WorkqueueMetrics {
    /// Creates the families and registers them (and the scrape-time
    /// collector of the in-flight gauges) in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            work_duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            retries: Family::default(),
            queues: Arc::new(Mutex::new(Vec::new())),
        };
        registry.register(
            "workqueue_depth",
            "Current depth of the workqueue: keys waiting to be processed",
            metrics.depth.clone(),
        );
        // prometheus-client appends `_total` to counter names.
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by the workqueue",
            metrics.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds a key stays in the workqueue before being requested",
            metrics.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing a key from the workqueue takes",
            metrics.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of rate-limited retries handled by the workqueue",
            metrics.retries.clone(),
        );
        registry.register_collector(Box::new(InFlightCollector {
            queues: Arc::clone(&metrics.queues),
        }));
        metrics
    }

    pub(super) fn for_queue(&self, name: String) -> QueueMetrics {
        let labels = QueueLabels { name };
        QueueMetrics {
            depth: Gauge::clone(&self.depth.get_or_create(&labels)),
            adds: Counter::clone(&self.adds.get_or_create(&labels)),
            queue_duration: Histogram::clone(&self.queue_duration.get_or_create(&labels)),
            work_duration: Histogram::clone(&self.work_duration.get_or_create(&labels)),
            retries: Counter::clone(&self.retries.get_or_create(&labels)),
            name: labels.name,
        }
    }

    pub(super) fn track(&self, name: String, queue: Weak<dyn InFlight>) {
        lock(&self.queues).push((name, queue));
    }
}

/// One queue's handles into the shared families.
#[derive(Debug)]
pub(super) struct QueueMetrics {
    pub(super) name: String,
    pub(super) depth: Gauge,
    pub(super) adds: Counter,
    pub(super) queue_duration: Histogram,
    pub(super) work_duration: Histogram,
    pub(super) retries: Counter,
}

/// Computes the in-flight gauges from the live queues on every scrape, so
/// they are exact without a ticker task.
#[derive(Debug)]
struct InFlightCollector {
    queues: Arc<QueueList>,
}

impl Collector for InFlightCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let live: Vec<(String, Arc<dyn InFlight>)> = {
            let mut queues = lock(&self.queues);
            queues.retain(|(_, queue)| queue.strong_count() > 0);
            queues
                .iter()
                .filter_map(|(name, queue)| Some((name.clone(), queue.upgrade()?)))
                .collect()
        };
        let now = Instant::now();
        // Several queues may share a name; report them as one.
        let mut per_name: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for (name, queue) in live {
            let (sum, longest) = queue.in_flight(now);
            let entry = per_name.entry(name).or_insert((0.0, 0.0));
            entry.0 += sum;
            entry.1 = entry.1.max(longest);
        }
        {
            let mut metric = encoder.encode_descriptor(
                UNFINISHED_WORK,
                "How many seconds of work has been done that is in progress and not yet \
                 observed by work_duration; large values indicate stuck workers.",
                None,
                MetricType::Gauge,
            )?;
            for (name, (sum, _)) in &per_name {
                let labels = QueueLabels { name: name.clone() };
                metric.encode_family(&labels)?.encode_gauge(sum)?;
            }
        }
        let mut metric = encoder.encode_descriptor(
            LONGEST_RUNNING,
            "How many seconds the longest running processor for the workqueue has been running.",
            None,
            MetricType::Gauge,
        )?;
        for (name, (_, longest)) in &per_name {
            let labels = QueueLabels { name: name.clone() };
            metric.encode_family(&labels)?.encode_gauge(longest)?;
        }
        Ok(())
    }
}
