//! The GPU arithmetic of the summary: which pods count, how many devices each
//! requests (as kube-scheduler computes it), and the per-node totals that
//! become the ConfigMap's `data`. Pure functions over borrowed pod fields: no
//! I/O, no clock, and no panic on any snapshot content.
//!
//! A pod's request follows `k8s.io/component-helpers/resource.PodRequests`,
//! which kube-scheduler's NodeResourcesFit plugin uses
//! (`computePodResourceRequest`), for one extended resource:
//!
//! ```text
//! request(c) = c.requests[r], else c.limits[r], else 0
//! pod        = max( sum(containers) + sum(sidecars),
//!                   max over init containers i of
//!                     sidecar i:  sum(sidecars declared up to and including i)
//!                     regular i:  request(i) + sum(sidecars declared before i) )
//!              + overhead[r]
//! ```
//!
//! `PodRequests` adds and compares exact `resource.Quantity` values; the
//! scheduler converts the pod's total with `Quantity.Value()` (rounding up)
//! only afterwards, in `Resource.SetMaxResource`/`Resource.Add`. So does this
//! module: two containers asking `500m` make one device, not two. (The API
//! server only admits whole numbers for extended resources, so the order only
//! matters for hand-written manifests and dumps.)

use std::collections::BTreeMap;
use std::fmt;

use crate::quantity::{parse_quantity, truncate_chars, Quantity};

/// The extended resource counted by default.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// Phases in which a pod no longer holds its devices.
const TERMINAL_PHASES: [&str; 2] = ["Succeeded", "Failed"];

/// Longest prefix of an offending value kept in an [`InvalidPod`], so that a
/// Warning event quoting it stays well under the API's 1 KiB message limit.
pub const INVALID_VALUE_MAX_CHARS: usize = 128;

/// The message for a negative quantity, as API validation words it.
const NEGATIVE_MESSAGE: &str = "must be greater than or equal to 0";

/// The counted resource's fields of one container, as written in the pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContainerGpu<'a> {
    /// `resources.requests[<resource>]`.
    pub request: Option<&'a str>,
    /// `resources.limits[<resource>]`.
    pub limit: Option<&'a str>,
    /// `restartPolicy` (init containers only; `Always` marks a sidecar).
    pub restart_policy: Option<&'a str>,
}

/// The fields of one pod the summary needs, borrowed from the snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodGpu<'a> {
    /// `metadata.namespace`.
    pub namespace: &'a str,
    /// `metadata.name`.
    pub name: &'a str,
    /// `spec.nodeName`.
    pub node_name: Option<&'a str>,
    /// `status.phase`.
    pub phase: Option<&'a str>,
    /// `spec.containers`, in order.
    pub containers: Vec<ContainerGpu<'a>>,
    /// `spec.initContainers`, in order (the order matters for sidecars).
    pub init_containers: Vec<ContainerGpu<'a>>,
    /// `spec.overhead[<resource>]`.
    pub overhead: Option<&'a str>,
}

/// Why a pod holds no devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// `spec.nodeName` is absent or empty.
    Unscheduled,
    /// `status.phase` is `Succeeded` or `Failed`.
    Terminated,
}

/// What one pod contributes to the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodOutcome<'a> {
    /// Not counted: it holds no devices.
    Skipped(SkipReason),
    /// Counted: `gpus` devices (possibly 0) on `node`.
    Counted {
        /// `spec.nodeName`, non-empty.
        node: &'a str,
        /// The pod's request, as kube-scheduler computes it.
        gpus: i64,
    },
    /// Not counted because a quantity it uses is invalid.
    Invalid(InvalidQuantity),
}

/// A quantity field of a pod that is not a valid, non-negative quantity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidQuantity {
    /// The field's path, e.g.
    /// `spec.containers[1].resources.requests[nvidia.com/gpu]`.
    pub field: String,
    /// The offending value, verbatim.
    pub value: String,
    /// Why it is invalid (apimachinery's parse error, or the API validation
    /// message for a negative value).
    pub error: String,
}

impl fmt::Display for InvalidQuantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: invalid quantity {:?}: {}",
            self.field,
            truncate_chars(&self.value, INVALID_VALUE_MAX_CHARS),
            self.error
        )
    }
}

impl std::error::Error for InvalidQuantity {}

/// A pod left out of the summary because of an invalid quantity; enough for a
/// Warning event regarding it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidPod {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The first invalid field, e.g.
    /// `spec.initContainers[0].resources.limits[nvidia.com/gpu]`.
    pub field: String,
    /// Its value, cut to [`INVALID_VALUE_MAX_CHARS`] characters (`…` marks a
    /// cut).
    pub value: String,
    /// Why it is invalid, without the value (e.g. `unable to parse
    /// quantity's suffix`).
    pub message: String,
}

/// Per-node totals over a set of pods, plus the pods that could not be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Node name → devices requested by the counted pods on it. Nodes whose
    /// total is 0 are absent. Totals saturate at `i64::MAX`.
    pub per_node: BTreeMap<String, i64>,
    /// Pods skipped because of an invalid quantity, in input order.
    pub invalid: Vec<InvalidPod>,
}

/// Whether `pod` holds devices, and how many: [`pod_request`] for pods that
/// are scheduled and not terminated. Quantities of skipped pods are not
/// looked at (the scheduler does not account for those pods either).
pub fn pod_outcome<'a>(pod: &PodGpu<'a>, resource: &str) -> PodOutcome<'a> {
    let node = match pod.node_name {
        Some(node) if !node.is_empty() => node,
        _ => return PodOutcome::Skipped(SkipReason::Unscheduled),
    };
    if pod.phase.is_some_and(|p| TERMINAL_PHASES.contains(&p)) {
        return PodOutcome::Skipped(SkipReason::Terminated);
    }
    match pod_request(pod, resource) {
        Ok(gpus) => PodOutcome::Counted { node, gpus },
        Err(invalid) => PodOutcome::Invalid(invalid),
    }
}

/// [`pod_request`] for [`GPU_RESOURCE`].
pub fn pod_gpu_request(pod: &PodGpu) -> Result<i64, InvalidQuantity> {
    pod_request(pod, GPU_RESOURCE)
}

/// The pod's request of `resource` as kube-scheduler computes it (see the
/// module docs), rounded up to a whole number once, on the pod's exact total.
/// `resource` only names fields in the error. Errors on the first quantity
/// (containers, then init containers, then overhead) that does not parse or
/// is negative; quantities the formula does not use (a limit next to a
/// request) are not parsed.
pub fn pod_request(pod: &PodGpu, resource: &str) -> Result<i64, InvalidQuantity> {
    let mut total = Quantity::ZERO;
    for (i, c) in pod.containers.iter().enumerate() {
        total = total.saturating_add(container_request(c, "containers", i, resource)?);
    }
    let mut sidecars = Quantity::ZERO;
    let mut init_peak = Quantity::ZERO;
    for (i, c) in pod.init_containers.iter().enumerate() {
        let request = container_request(c, "initContainers", i, resource)?;
        let in_use = if c.restart_policy == Some("Always") {
            total = total.saturating_add(request);
            sidecars = sidecars.saturating_add(request);
            sidecars
        } else {
            request.saturating_add(sidecars)
        };
        init_peak = init_peak.max(in_use);
    }
    let mut total = total.max(init_peak);
    if let Some(overhead) = pod.overhead {
        total = total.saturating_add(checked(overhead, || format!("spec.overhead[{resource}]"))?);
    }
    Ok(total.value())
}

/// One container's request: `requests[r]`, else `limits[r]` (what the API
/// server's defaulting would have copied), else zero.
fn container_request(
    c: &ContainerGpu,
    list: &str,
    index: usize,
    resource: &str,
) -> Result<Quantity, InvalidQuantity> {
    let (value, kind) = match (c.request, c.limit) {
        (Some(request), _) => (request, "requests"),
        (None, Some(limit)) => (limit, "limits"),
        (None, None) => return Ok(Quantity::ZERO),
    };
    checked(value, || {
        format!("spec.{list}[{index}].resources.{kind}[{resource}]")
    })
}

/// `value` parsed and non-negative; `field` names it in the error (built only
/// on error, so valid pods allocate nothing).
fn checked(value: &str, field: impl FnOnce() -> String) -> Result<Quantity, InvalidQuantity> {
    let invalid = |error: String| InvalidQuantity {
        field: field(),
        value: value.to_string(),
        error,
    };
    match parse_quantity(value) {
        Ok(q) if q.is_negative() => Err(invalid(NEGATIVE_MESSAGE.to_string())),
        Ok(q) => Ok(q),
        Err(e) => Err(invalid(e.kind().message().to_string())),
    }
}

/// [`summarize_resource`] for [`GPU_RESOURCE`].
pub fn summarize<'a>(pods: impl IntoIterator<Item = PodGpu<'a>>) -> Summary {
    summarize_resource(GPU_RESOURCE, pods)
}

/// Sums [`pod_outcome`] per node. A pod with an invalid quantity contributes
/// nothing and gets an entry in [`Summary::invalid`]; other pods are
/// unaffected. Deterministic: the result does not depend on pod order except
/// for the order of `invalid`.
pub fn summarize_resource<'a>(
    resource: &str,
    pods: impl IntoIterator<Item = PodGpu<'a>>,
) -> Summary {
    let mut summary = Summary::default();
    for pod in pods {
        match pod_outcome(&pod, resource) {
            PodOutcome::Skipped(_) | PodOutcome::Counted { gpus: 0, .. } => {}
            PodOutcome::Counted { node, gpus } => {
                // get_mut first: no allocation for a node already seen.
                if let Some(sum) = summary.per_node.get_mut(node) {
                    *sum = sum.saturating_add(gpus);
                } else {
                    summary.per_node.insert(node.to_string(), gpus);
                }
            }
            PodOutcome::Invalid(bad) => summary.invalid.push(InvalidPod {
                namespace: pod.namespace.to_string(),
                name: pod.name.to_string(),
                field: bad.field,
                value: truncate_chars(&bad.value, INVALID_VALUE_MAX_CHARS).into_owned(),
                message: bad.error,
            }),
        }
    }
    summary
}

/// The ConfigMap `data`: node name → decimal device count; nodes with 0 are
/// omitted.
pub fn summary_data(summary: &Summary) -> BTreeMap<String, String> {
    summary
        .per_node
        .iter()
        .filter(|(_, &gpus)| gpus > 0)
        .map(|(node, gpus)| (node.clone(), gpus.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container requesting `request` and limiting `limit` devices.
    fn container<'a>(request: Option<&'a str>, limit: Option<&'a str>) -> ContainerGpu<'a> {
        ContainerGpu {
            request,
            limit,
            restart_policy: None,
        }
    }

    /// A container whose request is `q`.
    fn req(q: &str) -> ContainerGpu<'_> {
        container(Some(q), None)
    }

    /// A regular init container whose request is `q`.
    fn init(q: &str) -> ContainerGpu<'_> {
        req(q)
    }

    /// A sidecar (restartable init container) whose request is `q`.
    fn sidecar(q: &str) -> ContainerGpu<'_> {
        ContainerGpu {
            restart_policy: Some("Always"),
            ..req(q)
        }
    }

    /// A running pod `default/<name>` on `node-a`, without containers.
    fn pod(name: &str) -> PodGpu<'_> {
        PodGpu {
            namespace: "default",
            name,
            node_name: Some("node-a"),
            phase: Some("Running"),
            ..PodGpu::default()
        }
    }

    impl<'a> PodGpu<'a> {
        fn on(mut self, node: &'a str) -> Self {
            self.node_name = Some(node);
            self
        }
        fn unscheduled(mut self) -> Self {
            self.node_name = None;
            self
        }
        fn in_phase(mut self, phase: Option<&'a str>) -> Self {
            self.phase = phase;
            self
        }
        fn with(mut self, c: ContainerGpu<'a>) -> Self {
            self.containers.push(c);
            self
        }
        fn with_init(mut self, c: ContainerGpu<'a>) -> Self {
            self.init_containers.push(c);
            self
        }
        fn with_overhead(mut self, q: &'a str) -> Self {
            self.overhead = Some(q);
            self
        }
    }

    fn request(p: PodGpu) -> i64 {
        pod_gpu_request(&p).expect("valid pod")
    }

    #[test]
    fn request_wins_over_limit_and_limit_fills_a_missing_request() {
        let cases: &[(&str, ContainerGpu, i64)] = &[
            ("request only", container(Some("2"), None), 2),
            ("limit only", container(None, Some("3")), 3),
            ("both: request wins", container(Some("1"), Some("4")), 1),
            (
                "explicit zero request wins",
                container(Some("0"), Some("4")),
                0,
            ),
            ("neither", container(None, None), 0),
            (
                "unused junk limit is ignored",
                container(Some("1"), Some("junk")),
                1,
            ),
        ];
        for (what, c, want) in cases {
            assert_eq!(request(pod("p").with(*c)), *want, "{what}");
        }
    }

    #[test]
    fn containers_add_up() {
        let p = pod("p")
            .with(req("1"))
            .with(req("2"))
            .with(container(None, None));
        assert_eq!(request(p), 3);
    }

    #[test]
    fn init_container_larger_than_the_sum_sets_the_request() {
        let cases: &[(&str, PodGpu, i64)] = &[
            (
                "init larger",
                pod("p").with(req("1")).with(req("1")).with_init(init("4")),
                4,
            ),
            (
                "init smaller",
                pod("p").with(req("3")).with_init(init("2")),
                3,
            ),
            (
                "max not sum of inits",
                pod("p").with_init(init("2")).with_init(init("3")),
                3,
            ),
            (
                "init only",
                pod("p").with_init(container(None, Some("5"))),
                5,
            ),
        ];
        for (what, p, want) in cases {
            assert_eq!(request(p.clone()), *want, "{what}");
        }
    }

    #[test]
    fn sidecars_add_to_containers_and_to_later_init_containers_only() {
        let cases: &[(&str, PodGpu, i64)] = &[
            (
                "sidecar adds to containers",
                pod("p").with(req("1")).with_init(sidecar("2")),
                3,
            ),
            (
                // init runs alongside the sidecar started before it: 2 + 3
                "sidecar before init",
                pod("p")
                    .with(req("1"))
                    .with_init(sidecar("2"))
                    .with_init(init("3")),
                5,
            ),
            (
                // init runs before the sidecar starts: max(3, 1 + 2)
                "sidecar after init",
                pod("p")
                    .with(req("1"))
                    .with_init(init("3"))
                    .with_init(sidecar("2")),
                3,
            ),
            (
                // sidecars accumulate: 1 + 1 + 3 while the last init runs
                "two sidecars before init",
                pod("p")
                    .with_init(sidecar("1"))
                    .with_init(sidecar("1"))
                    .with_init(init("3")),
                5,
            ),
            (
                // first init sees 1 sidecar (1+3), second sees 2 (2+1)
                "sidecars between inits",
                pod("p")
                    .with_init(sidecar("1"))
                    .with_init(init("3"))
                    .with_init(sidecar("1"))
                    .with_init(init("1")),
                4,
            ),
            (
                "other restart policies are regular init containers",
                pod("p").with(req("1")).with_init(ContainerGpu {
                    restart_policy: Some("OnFailure"),
                    ..req("2")
                }),
                2,
            ),
        ];
        for (what, p, want) in cases {
            assert_eq!(request(p.clone()), *want, "{what}");
        }
    }

    #[test]
    fn overhead_is_added_after_the_max() {
        let cases: &[(&str, PodGpu, i64)] = &[
            (
                "overhead on containers",
                pod("p").with(req("1")).with_overhead("1"),
                2,
            ),
            ("overhead alone", pod("p").with_overhead("2"), 2),
            (
                "overhead on init peak",
                pod("p")
                    .with(req("1"))
                    .with_init(init("3"))
                    .with_overhead("1"),
                4,
            ),
        ];
        for (what, p, want) in cases {
            assert_eq!(request(p.clone()), *want, "{what}");
        }
    }

    #[test]
    fn fractional_quantities_round_up_once_on_the_pod_total() {
        let cases: &[(&str, PodGpu, i64)] = &[
            ("500m", pod("p").with(req("500m")), 1),
            (
                "two halves make one",
                pod("p").with(req("500m")).with(req("0.5")),
                1,
            ),
            (
                "three halves make two",
                pod("p").with(req("0.5")).with(req("0.5")).with(req("0.5")),
                2,
            ),
            ("1n", pod("p").with(req("1n")), 1),
            ("exponent", pod("p").with(req("1e1")), 10),
            ("kilo", pod("p").with(req("1k")), 1000),
            (
                "1.5 init vs 1 container",
                pod("p").with(req("1")).with_init(init("1.5")),
                2,
            ),
            (
                "half plus half overhead",
                pod("p").with(req("0.5")).with_overhead("500m"),
                1,
            ),
        ];
        for (what, p, want) in cases {
            assert_eq!(request(p.clone()), *want, "{what}");
        }
    }

    #[test]
    fn huge_requests_saturate() {
        let p = pod("p")
            .with(req("9Ei"))
            .with(req("1e30"))
            .with_overhead("8Ei");
        assert_eq!(request(p), i64::MAX);
        let s = summarize([
            pod("a").with(req("9223372036854775807")),
            pod("b").with(req("9223372036854775807")),
        ]);
        assert_eq!(s.per_node.get("node-a"), Some(&i64::MAX));
    }

    #[test]
    fn only_scheduled_unfinished_pods_count() {
        let cases: &[(&str, PodGpu, Option<SkipReason>)] = &[
            ("running", pod("p"), None),
            (
                "pending but bound",
                pod("p").in_phase(Some("Pending")),
                None,
            ),
            ("no phase", pod("p").in_phase(None), None),
            ("unknown phase", pod("p").in_phase(Some("Unknown")), None),
            ("odd phase", pod("p").in_phase(Some("succeeded")), None),
            (
                "succeeded",
                pod("p").in_phase(Some("Succeeded")),
                Some(SkipReason::Terminated),
            ),
            (
                "failed",
                pod("p").in_phase(Some("Failed")),
                Some(SkipReason::Terminated),
            ),
            (
                "no node",
                pod("p").unscheduled(),
                Some(SkipReason::Unscheduled),
            ),
            ("empty node", pod("p").on(""), Some(SkipReason::Unscheduled)),
            (
                "unscheduled and failed",
                pod("p").unscheduled().in_phase(Some("Failed")),
                Some(SkipReason::Unscheduled),
            ),
        ];
        for (what, p, skip) in cases {
            let p = p.clone().with(req("1"));
            let want = match skip {
                Some(reason) => PodOutcome::Skipped(*reason),
                None => PodOutcome::Counted {
                    node: "node-a",
                    gpus: 1,
                },
            };
            assert_eq!(pod_outcome(&p, GPU_RESOURCE), want, "{what}");
        }
    }

    #[test]
    fn terminal_and_unscheduled_pods_are_not_summed_nor_parsed() {
        let s = summarize([
            pod("done").in_phase(Some("Succeeded")).with(req("4")),
            pod("crashed").in_phase(Some("Failed")).with(req("junk")),
            pod("pending").unscheduled().with(req("-1")),
        ]);
        assert_eq!(s, Summary::default());
    }

    #[test]
    fn pods_on_the_same_node_add_up_and_nodes_stay_separate() {
        let s = summarize([
            pod("a").on("node-b").with(req("1")),
            pod("b").on("node-a").with(req("2")),
            pod("c").on("node-b").with(req("3")),
            pod("d").on("node-c").with_init(init("1")),
        ]);
        let want: BTreeMap<String, i64> = [("node-a", 2), ("node-b", 4), ("node-c", 1)]
            .map(|(n, g)| (n.to_string(), g))
            .into();
        assert_eq!(s.per_node, want);
        assert!(s.invalid.is_empty());
        let data: Vec<(String, String)> = summary_data(&s).into_iter().collect();
        assert_eq!(
            data,
            [("node-a", "2"), ("node-b", "4"), ("node-c", "1")]
                .map(|(n, g)| (n.to_string(), g.to_string()))
        );
    }

    #[test]
    fn nodes_without_gpus_are_omitted() {
        let s = summarize([
            pod("cpu-only").on("node-a").with(container(None, None)),
            pod("zero").on("node-b").with(req("0")),
            pod("zero-milli").on("node-b").with(req("0m")),
            pod("gpu").on("node-c").with(req("1")),
        ]);
        assert_eq!(s.per_node.keys().collect::<Vec<_>>(), ["node-c"]);
        assert_eq!(summary_data(&s).keys().collect::<Vec<_>>(), ["node-c"]);
        // summary_data filters even a hand-made zero entry.
        let mut hand_made = Summary::default();
        hand_made.per_node.insert("node-z".to_string(), 0);
        assert!(summary_data(&hand_made).is_empty());
    }

    #[test]
    fn output_does_not_depend_on_pod_order() {
        let pods = [
            pod("a").on("node-b").with(req("1")),
            pod("b").on("node-a").with(req("2")),
            pod("c").on("node-b").with(req("1500m")),
        ];
        let forward = summarize(pods.clone());
        let backward = summarize(pods.into_iter().rev());
        assert_eq!(forward, backward);
        assert_eq!(forward.per_node.get("node-b"), Some(&3));
    }

    #[test]
    fn junk_quantities_produce_an_invalid_entry_and_do_not_affect_other_pods() {
        let cases: &[(PodGpu, &str, &str, &str)] = &[
            (
                pod("bad-request").with(req("1")).with(req("two")),
                "spec.containers[1].resources.requests[nvidia.com/gpu]",
                "two",
                "quantities must match the regular expression",
            ),
            (
                pod("bad-limit").with(container(None, Some("1K"))),
                "spec.containers[0].resources.limits[nvidia.com/gpu]",
                "1K",
                "unable to parse quantity's suffix",
            ),
            (
                pod("bad-init")
                    .with_init(sidecar("1"))
                    .with_init(init(" 1")),
                "spec.initContainers[1].resources.requests[nvidia.com/gpu]",
                " 1",
                "quantities must match",
            ),
            (
                pod("bad-overhead").with(req("1")).with_overhead("1.1.1"),
                "spec.overhead[nvidia.com/gpu]",
                "1.1.1",
                "quantities must match",
            ),
            (
                pod("empty").with(req("")),
                "spec.containers[0].resources.requests[nvidia.com/gpu]",
                "",
                "quantities must match",
            ),
            (
                pod("negative").with(req("2")).with(req("-1")),
                "spec.containers[1].resources.requests[nvidia.com/gpu]",
                "-1",
                "must be greater than or equal to 0",
            ),
            (
                pod("negative-overhead")
                    .with(req("2"))
                    .with_overhead("-500m"),
                "spec.overhead[nvidia.com/gpu]",
                "-500m",
                "must be greater than or equal to 0",
            ),
        ];
        for (bad, field, value, message) in cases {
            let s = summarize([
                pod("good-1").on("node-a").with(req("1")),
                bad.clone().on("node-a"),
                pod("good-2").on("node-b").with(req("2")),
            ]);
            let what = bad.name;
            assert_eq!(s.per_node.get("node-a"), Some(&1), "{what}");
            assert_eq!(s.per_node.get("node-b"), Some(&2), "{what}");
            assert_eq!(s.invalid.len(), 1, "{what}");
            let entry = &s.invalid[0];
            assert_eq!(
                (entry.namespace.as_str(), entry.name.as_str()),
                ("default", bad.name),
                "{what}"
            );
            assert_eq!(entry.field, *field, "{what}");
            assert_eq!(entry.value, *value, "{what}");
            assert!(entry.message.contains(message), "{what}: {}", entry.message);
        }
    }

    #[test]
    fn negative_zero_is_not_negative() {
        assert_eq!(request(pod("p").with(req("-0")).with(req("1"))), 1);
    }

    #[test]
    fn field_paths_name_the_configured_resource() {
        let p = pod("p").with(req("x"));
        let err = pod_request(&p, "amd.com/gpu").err().map(|e| e.field);
        assert_eq!(
            err.as_deref(),
            Some("spec.containers[0].resources.requests[amd.com/gpu]")
        );
        let s = summarize_resource("amd.com/gpu", [p]);
        assert_eq!(
            s.invalid[0].field,
            "spec.containers[0].resources.requests[amd.com/gpu]"
        );
    }

    #[test]
    fn long_junk_values_are_cut_for_events() {
        let junk = "x".repeat(10_000);
        let s = summarize([pod("p").with(req(&junk))]);
        let value = &s.invalid[0].value;
        assert!(value.ends_with('…'));
        assert_eq!(value.chars().count(), INVALID_VALUE_MAX_CHARS + 1);
        let err = pod_gpu_request(&pod("p").with(req(&junk))).err();
        assert_eq!(err.map(|e| e.value.len()), Some(10_000));
    }

    #[test]
    fn invalid_quantity_displays_field_value_and_reason() {
        let err = pod_gpu_request(&pod("p").with_overhead("1K")).err();
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("spec.overhead[nvidia.com/gpu]: invalid quantity \"1K\": unable to parse quantity's suffix")
        );
    }

    #[test]
    fn never_panics_on_junk_pods() {
        let values = [
            None,
            Some(""),
            Some("1"),
            Some("-1"),
            Some("junk"),
            Some("9Ei"),
            Some("1e99"),
            Some("0.5"),
            Some(" "),
            Some("é"),
        ];
        let mut pods = Vec::new();
        for request in values {
            for limit in values {
                for overhead in values {
                    pods.push(PodGpu {
                        node_name: Some("n"),
                        containers: vec![container(request, limit)],
                        init_containers: vec![
                            ContainerGpu {
                                restart_policy: Some("Always"),
                                ..container(limit, request)
                            },
                            container(request, None),
                        ],
                        overhead,
                        ..pod("p")
                    });
                }
            }
        }
        let n = pods.len();
        let s = summarize(pods);
        assert!(s.invalid.len() < n);
        assert!(s.per_node.get("n").is_some_and(|&g| g > 0));
    }
}
