//! Graceful pod deletion, and the one part of a kubelet a controller can
//! observe: finishing it.
//!
//! Deleting a pod that is bound to a node and not terminal does not remove
//! it: like the real API server (`podStrategy.CheckGracefulDelete` and
//! `rest.BeforeDelete`), the pod gets `metadata.deletionTimestamp` (now plus
//! the grace period) and `deletionGracePeriodSeconds`, and stays — still
//! holding its node's resources — until its kubelet has stopped it and
//! deletes it for good. A later delete may only shorten the grace period.
//! Unscheduled pods, `Succeeded`/`Failed` pods and `gracePeriodSeconds: 0`
//! are removed at once.
//!
//! There are no kubelets here, so (unless disabled in the server's config)
//! a timer stands in for the pod's kubelet and removes the pod when its
//! grace period ends. This module decides and schedules; it never handles
//! requests or other kinds of objects.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::rules::objects::meta_str;
use crate::storage::store::{ObjKey, Store, StoreError};

/// The grace period the API server defaults `terminationGracePeriodSeconds` to.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The latest `deletionTimestamp` written: 9999-12-30T22:00:00Z, the
/// latest instant both a four-digit-year RFC 3339 timestamp and the kube
/// client's time type (jiff's `Timestamp::MAX`, which leaves room for
/// offsets) can hold. The real server computes `now + grace` with Go's
/// wrapping `time.Duration` arithmetic (`rest.BeforeDelete`), so a huge
/// grace period gives it a meaningless timestamp; here it saturates at
/// this instant instead, which every client can still parse.
const LATEST_TIMESTAMP_SECONDS: i64 = 253_402_207_200;

/// What a DELETE does to a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PodDeletion {
    /// Remove it now (or mark it, if finalizers hold it).
    Immediate,
    /// Already terminating with a grace period at least this short: unchanged.
    Pending,
    /// Mark it terminating: these metadata fields, then remove it after `grace`.
    Graceful {
        /// Seconds until the kubelet removes it.
        grace: i64,
        /// The new `metadata.deletionTimestamp`.
        deletion_timestamp: String,
    },
}

/// Decides what deleting `pod` with DeleteOptions `opts` does.
pub(crate) fn pod_deletion(pod: &Value, opts: &Value) -> PodDeletion {
    let requested = opts.get("gracePeriodSeconds").and_then(Value::as_i64);
    let now = chrono::Utc::now();
    if meta_str(pod, "deletionTimestamp").is_some() {
        let current = pod
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if current == 0 {
            return PodDeletion::Immediate;
        }
        return match requested {
            Some(g) if g < current => {
                if g <= 0 {
                    return PodDeletion::Immediate;
                }
                // The deadline moves earlier by the difference.
                let ts = meta_str(pod, "deletionTimestamp")
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map_or(now, |t| t.with_timezone(&chrono::Utc));
                PodDeletion::Graceful {
                    grace: g,
                    deletion_timestamp: rfc3339(offset(ts, g.saturating_sub(current))),
                }
            }
            _ => PodDeletion::Pending,
        };
    }
    let mut grace = requested.unwrap_or_else(|| {
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(DEFAULT_GRACE_SECONDS)
    });
    let scheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let terminal = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if !scheduled || terminal {
        grace = 0;
    }
    // podStrategy.CheckGracefulDelete (pkg/registry/core/pod/strategy.go):
    // a negative period becomes 1 second.
    if grace < 0 {
        grace = 1;
    }
    if grace == 0 {
        return PodDeletion::Immediate;
    }
    PodDeletion::Graceful {
        grace,
        deletion_timestamp: rfc3339(offset(now, grace)),
    }
}

/// Writes a [`PodDeletion::Graceful`] decision into `pod`'s metadata.
pub(crate) fn mark_terminating(pod: &mut Value, grace: i64, deletion_timestamp: &str) {
    let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let first = !meta.contains_key("deletionTimestamp");
    meta.insert("deletionTimestamp".into(), json!(deletion_timestamp));
    meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
    // Like rest.BeforeDelete: the generation moves when deletion starts.
    if first {
        if let Some(g) = meta
            .get("generation")
            .and_then(Value::as_i64)
            .filter(|g| *g > 0)
        {
            meta.insert("generation".into(), json!(g.saturating_add(1)));
        }
    }
}

/// After `grace`, removes the pod `key` (if it is still the same pod, still
/// terminating, and no finalizer holds it) — what its kubelet would do once
/// the containers stopped.
pub(crate) fn finish_after(
    store: Arc<Store>,
    storage: String,
    key: ObjKey,
    uid: String,
    grace: Duration,
) {
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        for _ in 0..16 {
            let Some(current) = store.get(&storage, &key) else {
                return;
            };
            let v = current.value();
            let same_pod = meta_str(&v, "uid") == Some(uid.as_str());
            let finalizers = v
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if !same_pod || meta_str(&v, "deletionTimestamp").is_none() || finalizers {
                return;
            }
            match store.delete(&storage, &key, Some(current.rv), None) {
                Err(StoreError::Conflict) => continue,
                _ => return,
            }
        }
    });
}

/// `t` moved by `seconds` (either sign), saturating at the Unix epoch and at
/// [`LATEST_TIMESTAMP_SECONDS`]: never panics, never leaves the range an
/// RFC 3339 timestamp with a four-digit year can express.
pub(crate) fn offset(
    t: chrono::DateTime<chrono::Utc>,
    seconds: i64,
) -> chrono::DateTime<chrono::Utc> {
    let secs = t.timestamp().saturating_add(seconds);
    let secs = secs.clamp(0, LATEST_TIMESTAMP_SECONDS);
    chrono::DateTime::from_timestamp(secs, 0).unwrap_or(t)
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: &str, phase: &str) -> Value {
        json!({
            "metadata": {"name": "p", "uid": "u", "generation": 1},
            "spec": {"nodeName": node},
            "status": {"phase": phase}
        })
    }

    fn grace_of(d: PodDeletion) -> Option<i64> {
        match d {
            PodDeletion::Graceful { grace, .. } => Some(grace),
            _ => None,
        }
    }

    #[test]
    fn a_running_scheduled_pod_terminates_with_its_grace_period() {
        assert_eq!(
            grace_of(pod_deletion(&pod("n1", "Running"), &json!({}))),
            Some(30)
        );
        let mut p = pod("n1", "Running");
        p["spec"]["terminationGracePeriodSeconds"] = json!(5);
        assert_eq!(grace_of(pod_deletion(&p, &json!({}))), Some(5));
        // DeleteOptions win over the pod's own period.
        assert_eq!(
            grace_of(pod_deletion(&p, &json!({"gracePeriodSeconds": 2}))),
            Some(2)
        );
    }

    #[test]
    fn unscheduled_terminal_and_zero_grace_pods_go_at_once() {
        let now = PodDeletion::Immediate;
        assert_eq!(pod_deletion(&pod("", "Pending"), &json!({})), now);
        assert_eq!(pod_deletion(&pod("n1", "Succeeded"), &json!({})), now);
        assert_eq!(pod_deletion(&pod("n1", "Failed"), &json!({})), now);
        assert_eq!(
            pod_deletion(&pod("n1", "Running"), &json!({"gracePeriodSeconds": 0})),
            now
        );
    }

    #[test]
    fn huge_and_negative_grace_periods_never_panic_and_stay_parseable() {
        for g in [
            i64::MAX,
            1_000_000_000_000,
            9_223_372_036_854_775,
            i64::MAX / 1000 + 1,
        ] {
            let PodDeletion::Graceful {
                grace,
                deletion_timestamp,
            } = pod_deletion(&pod("n1", "Running"), &json!({"gracePeriodSeconds": g}))
            else {
                panic!("a scheduled running pod is deleted gracefully");
            };
            assert_eq!(grace, g);
            assert_eq!(deletion_timestamp, "9999-12-30T22:00:00Z");
            assert!(chrono::DateTime::parse_from_rfc3339(&deletion_timestamp).is_ok());
        }
        // podStrategy.CheckGracefulDelete: negative means one second.
        assert_eq!(
            grace_of(pod_deletion(
                &pod("n1", "Running"),
                &json!({"gracePeriodSeconds": -5})
            )),
            Some(1)
        );
        // Shortening a saturated deadline stays in range too.
        let mut p = pod("n1", "Running");
        mark_terminating(&mut p, i64::MAX, "9999-12-30T22:00:00Z");
        let PodDeletion::Graceful {
            deletion_timestamp, ..
        } = pod_deletion(&p, &json!({"gracePeriodSeconds": 1}))
        else {
            panic!("shortening keeps it graceful");
        };
        assert!(chrono::DateTime::parse_from_rfc3339(&deletion_timestamp).is_ok());
        // A stored generation at the top of its range does not overflow.
        let mut p = pod("n1", "Running");
        p["metadata"]["generation"] = json!(i64::MAX);
        mark_terminating(&mut p, 30, "2026-01-01T00:00:30Z");
        assert_eq!(p["metadata"]["generation"], i64::MAX);
    }

    #[test]
    fn a_terminating_pod_may_only_have_its_grace_period_shortened() {
        let mut p = pod("n1", "Running");
        mark_terminating(&mut p, 30, "2026-01-01T00:00:30Z");
        assert_eq!(p["metadata"]["generation"], 2);
        assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 30);
        assert_eq!(pod_deletion(&p, &json!({})), PodDeletion::Pending);
        assert_eq!(
            pod_deletion(&p, &json!({"gracePeriodSeconds": 60})),
            PodDeletion::Pending
        );
        assert_eq!(
            pod_deletion(&p, &json!({"gracePeriodSeconds": 10})),
            PodDeletion::Graceful {
                grace: 10,
                deletion_timestamp: "2026-01-01T00:00:10Z".into()
            }
        );
        assert_eq!(
            pod_deletion(&p, &json!({"gracePeriodSeconds": 0})),
            PodDeletion::Immediate
        );
        // Shortening does not move the generation again.
        mark_terminating(&mut p, 10, "2026-01-01T00:00:10Z");
        assert_eq!(p["metadata"]["generation"], 2);
    }
}
