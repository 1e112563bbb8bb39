//! A pod's effective request of one resource, as kube-scheduler computes it:
//! which pods hold resources at all (scheduled, not `Succeeded`/`Failed`),
//! and how much each requests. Pure functions over borrowed pod fields (read
//! from a snapshot with [`PodResourceFields`]): no I/O, no clock, and no
//! panic on any snapshot content. Shared by every guest that counts devices
//! (the GPU summary per node, the GPU quota per namespace), so they all count
//! the same way.
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

use std::fmt;

use crate::quantity::{parse_quantity, truncate_chars, Quantity};
use crate::snapshot::{Field, Object, SchemaError, WatchSchema};

/// Phases in which a pod no longer holds its devices.
const TERMINAL_PHASES: [&str; 2] = ["Succeeded", "Failed"];

/// Longest prefix of an offending value shown by [`InvalidQuantity`]'s
/// `Display`, so that a Warning event quoting it stays well under the API's
/// 1 KiB message limit.
pub const INVALID_VALUE_MAX_CHARS: usize = 128;

/// The message for a negative quantity, as API validation words it.
const NEGATIVE_MESSAGE: &str = "must be greater than or equal to 0";

/// The counted resource's fields of one container, as written in the pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContainerResources<'a> {
    /// `resources.requests[<resource>]`.
    pub request: Option<&'a str>,
    /// `resources.limits[<resource>]`.
    pub limit: Option<&'a str>,
    /// `restartPolicy` (init containers only; `Always` marks a sidecar).
    pub restart_policy: Option<&'a str>,
}

/// The fields of one pod a request needs, borrowed from the snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodResources<'a> {
    /// `metadata.namespace`.
    pub namespace: &'a str,
    /// `metadata.name`.
    pub name: &'a str,
    /// `spec.nodeName`.
    pub node_name: Option<&'a str>,
    /// `status.phase`.
    pub phase: Option<&'a str>,
    /// `spec.containers`, in order.
    pub containers: Vec<ContainerResources<'a>>,
    /// `spec.initContainers`, in order (the order matters for sidecars).
    pub init_containers: Vec<ContainerResources<'a>>,
    /// `spec.overhead[<resource>]`.
    pub overhead: Option<&'a str>,
}

impl<'a> ContainerResources<'a> {
    /// A container with the given request and limit.
    pub fn new(request: Option<&'a str>, limit: Option<&'a str>) -> Self {
        ContainerResources {
            request,
            limit,
            restart_policy: None,
        }
    }

    /// As an init container: a sidecar (`restartPolicy: Always`).
    #[must_use]
    pub fn sidecar(self) -> Self {
        ContainerResources {
            restart_policy: Some("Always"),
            ..self
        }
    }
}

/// Fixture builders: a pod read from a snapshot fills the fields directly.
impl<'a> PodResources<'a> {
    /// The pod `namespace/name`, unscheduled, without phase or containers.
    pub fn new(namespace: &'a str, name: &'a str) -> Self {
        PodResources {
            namespace,
            name,
            ..PodResources::default()
        }
    }

    /// Bound to `node`.
    #[must_use]
    pub fn on(mut self, node: &'a str) -> Self {
        self.node_name = Some(node);
        self
    }

    /// Not bound to a node.
    #[must_use]
    pub fn unscheduled(mut self) -> Self {
        self.node_name = None;
        self
    }

    /// In `phase` (`None`: no phase reported yet).
    #[must_use]
    pub fn in_phase(mut self, phase: Option<&'a str>) -> Self {
        self.phase = phase;
        self
    }

    /// With one more (regular) container.
    #[must_use]
    pub fn with(mut self, c: ContainerResources<'a>) -> Self {
        self.containers.push(c);
        self
    }

    /// With one more init container.
    #[must_use]
    pub fn with_init(mut self, c: ContainerResources<'a>) -> Self {
        self.init_containers.push(c);
        self
    }

    /// With a pod overhead of `q`.
    #[must_use]
    pub fn with_overhead(mut self, q: &'a str) -> Self {
        self.overhead = Some(q);
        self
    }
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

/// Whether `pod` holds devices, and how many: [`pod_request`] for pods that
/// are scheduled and not terminated. Quantities of skipped pods are not
/// looked at (the scheduler does not account for those pods either).
pub fn pod_outcome<'a>(pod: &PodResources<'a>, resource: &str) -> PodOutcome<'a> {
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

/// The pod's request of `resource` as kube-scheduler computes it (see the
/// module docs), rounded up to a whole number once, on the pod's exact total.
/// `resource` only names fields in the error. Errors on the first quantity
/// (containers, then init containers, then overhead) that does not parse or
/// is negative; quantities the formula does not use (a limit next to a
/// request) are not parsed.
pub fn pod_request(pod: &PodResources, resource: &str) -> Result<i64, InvalidQuantity> {
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
    c: &ContainerResources,
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

/// The pod projection a request of `resource` needs, in
/// [`PodResourceFields`]'s order: add it to the pod watch's `fields`.
pub fn pod_resource_paths(resource: &str) -> Vec<String> {
    vec![
        "spec.nodeName".to_string(),
        "status.phase".to_string(),
        format!("spec.containers[*].resources.requests['{resource}']"),
        format!("spec.containers[*].resources.limits['{resource}']"),
        "spec.initContainers[*].restartPolicy".to_string(),
        format!("spec.initContainers[*].resources.requests['{resource}']"),
        format!("spec.initContainers[*].resources.limits['{resource}']"),
        format!("spec.overhead['{resource}']"),
    ]
}

/// The resolved [`pod_resource_paths`] of a pod watch: reads a
/// [`PodResources`] from each pod of a snapshot.
#[derive(Clone, Copy, Debug)]
pub struct PodResourceFields {
    node_name: Field,
    phase: Field,
    requests: Field,
    limits: Field,
    init_restart_policy: Field,
    init_requests: Field,
    init_limits: Field,
    overhead: Field,
}

impl PodResourceFields {
    /// Resolves [`pod_resource_paths`]`(resource)` in `pods`; an error names
    /// the first path the watch does not project.
    pub fn resolve(pods: &WatchSchema<'_>, resource: &str) -> Result<Self, SchemaError> {
        let paths = pod_resource_paths(resource);
        let f = |i: usize| pods.field(&paths[i]);
        Ok(PodResourceFields {
            node_name: f(0)?,
            phase: f(1)?,
            requests: f(2)?,
            limits: f(3)?,
            init_restart_policy: f(4)?,
            init_requests: f(5)?,
            init_limits: f(6)?,
            overhead: f(7)?,
        })
    }

    /// The pod's fields. Container lists line up element by element (the
    /// projection's `[*]` paths share their prefix); a list cut short reads
    /// as absent values.
    pub fn read<'a>(&self, pod: &Object<'a>) -> PodResources<'a> {
        let containers = |req: Field, lim: Field, policy: Option<Field>| {
            let n = pod
                .len(req)
                .max(pod.len(lim))
                .max(policy.map_or(0, |p| pod.len(p)));
            (0..n)
                .map(|i| ContainerResources {
                    request: pod.text_at(req, i),
                    limit: pod.text_at(lim, i),
                    restart_policy: policy.and_then(|p| pod.text_at(p, i)),
                })
                .collect()
        };
        PodResources {
            namespace: pod.namespace(),
            name: pod.name(),
            node_name: pod.text(self.node_name),
            phase: pod.text(self.phase),
            containers: containers(self.requests, self.limits, None),
            init_containers: containers(
                self.init_requests,
                self.init_limits,
                Some(self.init_restart_policy),
            ),
            overhead: pod.text(self.overhead),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: &str = "nvidia.com/gpu";

    /// A container requesting `request` and limiting `limit` devices.
    fn container<'a>(request: Option<&'a str>, limit: Option<&'a str>) -> ContainerResources<'a> {
        ContainerResources::new(request, limit)
    }

    /// A container whose request is `q`.
    fn req(q: &str) -> ContainerResources<'_> {
        container(Some(q), None)
    }

    /// A regular init container whose request is `q`.
    fn init(q: &str) -> ContainerResources<'_> {
        req(q)
    }

    /// A sidecar (restartable init container) whose request is `q`.
    fn sidecar(q: &str) -> ContainerResources<'_> {
        req(q).sidecar()
    }

    /// A running pod `default/<name>` on `node-a`, without containers.
    fn pod(name: &str) -> PodResources<'_> {
        PodResources::new("default", name)
            .on("node-a")
            .in_phase(Some("Running"))
    }

    fn request(p: PodResources) -> i64 {
        pod_request(&p, GPU).expect("valid pod")
    }

    #[test]
    fn request_wins_over_limit_and_limit_fills_a_missing_request() {
        let cases: &[(&str, ContainerResources, i64)] = &[
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
        let cases: &[(&str, PodResources, i64)] = &[
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
        let cases: &[(&str, PodResources, i64)] = &[
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
                pod("p").with(req("1")).with_init(ContainerResources {
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
        let cases: &[(&str, PodResources, i64)] = &[
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
        let cases: &[(&str, PodResources, i64)] = &[
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
    fn only_scheduled_unfinished_pods_count() {
        let cases: &[(&str, PodResources, Option<SkipReason>)] = &[
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
            assert_eq!(pod_outcome(&p, GPU), want, "{what}");
        }
    }

    #[test]
    fn negative_zero_is_not_negative() {
        assert_eq!(request(pod("p").with(req("-0")).with(req("1"))), 1);
    }
}
