//! The GPU summary's arithmetic: the per-node totals of the devices that
//! pods scheduled there request, which become the ConfigMap's `data`. How
//! much one pod requests (kube-scheduler's effective request: requests
//! defaulting to limits, init containers and restartable sidecars, pod
//! overhead; unscheduled and `Succeeded`/`Failed` pods hold nothing) is the
//! SDK's [`pod_request`](wasmctrl_guest_sdk::pod_request), shared with the
//! GPU-quota guest. Pure functions over borrowed pod fields: no I/O, no
//! clock, and no panic on any snapshot content.

use std::collections::BTreeMap;

pub use wasmctrl_guest_sdk::pod_request::{
    pod_outcome, pod_request, ContainerResources as ContainerGpu, InvalidQuantity, PodOutcome,
    PodResources as PodGpu, SkipReason, INVALID_VALUE_MAX_CHARS,
};
use wasmctrl_guest_sdk::quantity::truncate_chars;

/// The extended resource counted by default.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

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

/// [`pod_request`] for [`GPU_RESOURCE`].
pub fn pod_gpu_request(pod: &PodGpu) -> Result<i64, InvalidQuantity> {
    pod_request(pod, GPU_RESOURCE)
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
            PodOutcome::Counted { node, .. } if !crate::node_key::is_config_map_key(node) => {
                crate::node_key::skipped(pod.namespace, pod.name, node);
            }
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
        ContainerGpu::new(request, limit)
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
        req(q).sidecar()
    }

    /// A running pod `default/<name>` on `node-a`, without containers.
    fn pod(name: &str) -> PodGpu<'_> {
        PodGpu::new("default", name)
            .on("node-a")
            .in_phase(Some("Running"))
    }

    fn request(p: PodGpu) -> i64 {
        pod_gpu_request(&p).expect("valid pod")
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
