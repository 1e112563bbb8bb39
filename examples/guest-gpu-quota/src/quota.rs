//! The GpuQuota decision, as plain functions: how many GPUs a namespace's
//! pods hold (kube-scheduler's effective request, through the SDK's shared
//! [`pod_request`](wasmctrl_guest_sdk::pod_request) — the same counting as
//! the GPU summary) and the status a quota should show for it. No snapshot,
//! no plan, no I/O: the glue in `lib.rs` feeds it and writes the result.

use serde::Serialize;
use wasmctrl_guest_sdk::pod_request::{pod_outcome, InvalidQuantity, PodOutcome, PodResources};
use wasmctrl_guest_sdk::{is_condition_true, owned_conditions, Condition};

/// The condition type this controller owns.
pub const READY: &str = "Ready";
/// The reason of `Ready=False` (and of the Warning event) when over.
pub const OVER_LIMIT: &str = "OverLimit";
/// The reason of `Ready=True`.
pub const WITHIN_LIMIT: &str = "WithinLimit";

/// What a namespace's pods hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Devices held by scheduled, non-terminal pods with valid quantities
    /// (saturating).
    pub used: i64,
    /// Pods left out because of an invalid quantity: (name, why).
    pub invalid: Vec<(String, InvalidQuantity)>,
}

/// Sums the `resource` requests of `pods` (unscheduled and
/// `Succeeded`/`Failed` pods hold nothing).
pub fn usage<'a>(resource: &str, pods: impl IntoIterator<Item = PodResources<'a>>) -> Usage {
    let mut usage = Usage::default();
    for pod in pods {
        match pod_outcome(&pod, resource) {
            PodOutcome::Skipped(_) => {}
            PodOutcome::Counted { gpus, .. } => usage.used = usage.used.saturating_add(gpus),
            PodOutcome::Invalid(why) => usage.invalid.push((pod.name.to_string(), why)),
        }
    }
    usage
}

/// `status` of a GpuQuota, in the CRD's field names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaStatus {
    /// Devices held in the namespace.
    pub used: i64,
    /// The generation this status was computed from.
    pub observed_generation: i64,
    /// Only the conditions this controller owns (`Ready`): applying
    /// another controller's entries would make us co-own them.
    pub conditions: Vec<Condition>,
}

impl QuotaStatus {
    /// Whether `Ready` is `True`.
    pub fn is_ready(&self) -> bool {
        is_condition_true(&self.conditions, READY)
    }
}

/// The status for `used` devices against `limit` at `generation`, keeping
/// the `lastTransitionTime` of the `Ready` condition in `existing` unless
/// its status changes (`now_ms` stamps a change).
pub fn status(
    limit: i64,
    used: i64,
    generation: i64,
    existing: Vec<Condition>,
    now_ms: u64,
) -> QuotaStatus {
    let ready = if used <= limit {
        Condition::new(
            READY,
            true,
            WITHIN_LIMIT,
            format!("{used} of {limit} GPUs in use"),
        )
    } else {
        Condition::new(
            READY,
            false,
            OVER_LIMIT,
            format!("{used} GPUs in use, over the limit of {limit}"),
        )
    };
    let conditions = owned_conditions(existing, ready.observed_generation(generation), now_ms);
    QuotaStatus {
        used,
        observed_generation: generation,
        conditions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmctrl_guest_sdk::pod_request::ContainerResources;

    #[test]
    fn usage_counts_scheduled_running_pods_only() {
        let req = |q| ContainerResources::new(Some(q), None);
        let pods = [
            PodResources::new("ns", "a").on("n").with(req("2")),
            PodResources::new("ns", "b")
                .on("n")
                .in_phase(Some("Pending"))
                .with(req("1")),
            PodResources::new("ns", "c")
                .on("n")
                .in_phase(Some("Succeeded"))
                .with(req("4")),
            PodResources::new("ns", "d").unscheduled().with(req("8")),
            PodResources::new("ns", "e").on("n").with(req("two")),
        ];
        let u = usage("nvidia.com/gpu", pods);
        assert_eq!(u.used, 3);
        assert_eq!(u.invalid.len(), 1);
        assert_eq!(u.invalid[0].0, "e");
    }

    #[test]
    fn ready_follows_the_limit_and_keeps_only_our_condition() {
        let other = Condition::new("Synced", true, "Ok", "");
        for (limit, used, ready, reason) in [
            (4, 0, true, WITHIN_LIMIT),
            (4, 4, true, WITHIN_LIMIT),
            (4, 5, false, OVER_LIMIT),
            (0, 1, false, OVER_LIMIT),
        ] {
            let s = status(limit, used, 3, vec![other.clone()], 0);
            assert_eq!(s.is_ready(), ready, "{limit}/{used}");
            assert_eq!(s.conditions.len(), 1, "{limit}/{used}");
            assert_eq!(s.conditions[0].reason, reason, "{limit}/{used}");
            assert_eq!(s.conditions[0].observed_generation, 3);
            assert_eq!((s.used, s.observed_generation), (used, 3));
        }
    }
}
