//! The Pod printer (`printPod`): READY counts ready running containers
//! (and started, ready sidecars) over containers plus sidecars; STATUS is
//! the phase or reason refined by init and container states; RESTARTS adds
//! `(<age> ago)` of the last termination; the wide cells are the first pod
//! IP, the node, the nominated node and the readiness gates passed. A
//! finished pod's row carries the `Completed` condition.

use serde_json::{json, Value};

use super::column::{col, wide, Column, Printer, AGE, NAME};
use super::descriptions as d;
use super::format::{age, condition, int, items, name, or, since, text};

pub(super) static POD: Printer = Printer {
    columns: &COLUMNS,
    row: pod,
    conditions: Some(conditions),
};

const COLUMNS: [Column; 9] = [
    NAME,
    col(
        "Ready",
        "string",
        "The aggregate readiness state of this pod for accepting traffic.",
    ),
    col(
        "Status",
        "string",
        "The aggregate status of the containers in this pod.",
    ),
    col(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    AGE,
    wide("IP", "string", d::POD_IP),
    wide("Node", "string", d::POD_NODE_NAME),
    wide("Nominated Node", "string", d::POD_NOMINATED_NODE),
    wide("Readiness Gates", "string", d::POD_READINESS_GATES),
];

/// The row's conditions: a Succeeded or Failed pod's row is `Completed`
/// (`podSuccessConditions`, `podFailedConditions`).
fn conditions(obj: &Value) -> Option<Value> {
    let (reason, message) = match text(obj, "/status/phase") {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
}

/// `node.NodeUnreachablePodReason`.
const NODE_LOST: &str = "NodeLost";

/// A container status's last termination time (`lastState.terminated.finishedAt`).
fn last_termination(status: &Value) -> Option<&str> {
    status
        .pointer("/lastState/terminated/finishedAt")
        .and_then(Value::as_str)
}

/// Keeps the later of two RFC 3339 times (`lastRestartDate.Before`); an
/// unparsable one never replaces a time.
fn later<'a>(current: Option<&'a str>, candidate: Option<&'a str>) -> Option<&'a str> {
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
    match (current, candidate.filter(|c| parse(c).is_some())) {
        (Some(a), Some(b)) if parse(a).is_none_or(|a| parse(b).is_some_and(|b| b > a)) => Some(b),
        (None, b) => b,
        (a, _) => a,
    }
}

/// `Init:ExitCode:1`-style reason for a terminated state without a reason.
fn terminated_reason(terminated: &Value, prefix: &str) -> String {
    let reason = text(terminated, "/reason");
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    let signal = int(terminated, "/signal");
    if signal != 0 {
        format!("{prefix}Signal:{signal}")
    } else {
        format!("{prefix}ExitCode:{}", int(terminated, "/exitCode"))
    }
}

fn pod(obj: &Value) -> Vec<Value> {
    let init_specs = items(obj, "/spec/initContainers");
    let sidecar = |name: &str| {
        init_specs
            .iter()
            .any(|c| c["name"] == name && c["restartPolicy"] == "Always")
    };
    let total = items(obj, "/spec/containers").len()
        + init_specs
            .iter()
            .filter(|c| c["restartPolicy"] == "Always")
            .count();
    let mut ready = 0usize;
    let mut restarts = 0i64;
    let mut sidecar_restarts = 0i64;
    let mut last_restart: Option<&str> = None;
    let mut last_sidecar_restart: Option<&str> = None;

    let phase = text(obj, "/status/phase");
    let mut reason = or(text(obj, "/status/reason"), phase);
    let conditions = items(obj, "/status/conditions");
    if conditions
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }

    let init_statuses = items(obj, "/status/initContainerStatuses");
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += int(c, "/restartCount");
        last_restart = later(last_restart, last_termination(c));
        let is_sidecar = sidecar(text(c, "/name"));
        if is_sidecar {
            sidecar_restarts += int(c, "/restartCount");
            last_sidecar_restart = later(last_sidecar_restart, last_termination(c));
        }
        let terminated = c.pointer("/state/terminated").filter(|t| t.is_object());
        let waiting_reason = text(c, "/state/waiting/reason");
        if terminated.is_some_and(|t| int(t, "/exitCode") == 0) {
            continue;
        }
        if is_sidecar && c["started"] == true {
            if c["ready"] == true {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(t) = terminated {
            terminated_reason(t, "Init:")
        } else if c.pointer("/state/waiting").is_some_and(Value::is_object)
            && !waiting_reason.is_empty()
            && waiting_reason != "PodInitializing"
        {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }

    let initialized = condition(conditions, "Initialized")
        .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"));
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for c in items(obj, "/status/containerStatuses").iter().rev() {
            restarts += int(c, "/restartCount");
            last_restart = later(last_restart, last_termination(c));
            let waiting_reason = text(c, "/state/waiting/reason");
            let terminated = c.pointer("/state/terminated").filter(|t| t.is_object());
            if c.pointer("/state/waiting").is_some_and(Value::is_object)
                && !waiting_reason.is_empty()
            {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = terminated_reason(t, "");
            } else if c["ready"] == true
                && c.pointer("/state/running").is_some_and(Value::is_object)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = condition(conditions, "Ready")
                .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"));
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }

    let deleting = obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if deleting && text(obj, "/status/reason") == NODE_LOST {
        reason = "Unknown".into();
    } else if deleting && phase != "Failed" && phase != "Succeeded" {
        reason = "Terminating".into();
    }

    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", since(t)),
        _ => restarts.to_string(),
    };

    let gates = items(obj, "/spec/readinessGates");
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let passed = gates
            .iter()
            .filter(|g| {
                condition(conditions, text(g, "/conditionType"))
                    .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"))
            })
            .count();
        format!("{passed}/{}", gates.len())
    };

    vec![
        name(obj),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_cell),
        age(obj),
        json!(or(text(obj, "/status/podIPs/0/ip"), "<none>")),
        json!(or(text(obj, "/spec/nodeName"), "<none>")),
        json!(or(text(obj, "/status/nominatedNodeName"), "<none>")),
        json!(readiness_gates),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minutes_ago(m: i64) -> String {
        (chrono::Utc::now() - chrono::Duration::minutes(m)).to_rfc3339()
    }

    #[test]
    fn two_containers_one_ready_and_a_restart() {
        let p = json!({
            "metadata": {"name": "p", "creationTimestamp": minutes_ago(60)},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}],
                     "readinessGates": [{"conditionType": "example.com/lb"}]},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}],
                "conditions": [{"type": "example.com/lb", "status": "True"}],
                "containerStatuses": [
                    {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                    {"name": "b", "ready": false, "restartCount": 2, "state": {"running": {}},
                     "lastState": {"terminated": {"exitCode": 1, "finishedAt": minutes_ago(5)}}}]}
        });
        let c = pod(&p);
        assert_eq!(c[0], "p");
        assert_eq!(c[1], "1/2");
        assert_eq!(c[2], "Running");
        assert_eq!(c[3], "2 (5m ago)");
        assert_eq!(c[4], "60m");
        assert_eq!(
            c[5..],
            [
                json!("10.0.0.5"),
                json!("n1"),
                json!("<none>"),
                json!("1/1")
            ]
        );
    }

    #[test]
    fn waiting_and_terminated_reasons_and_init_progress() {
        let waiting = json!({"spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "containerStatuses": [
                {"name": "a", "ready": false, "restartCount": 3,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let c = pod(&waiting);
        assert_eq!(c[2], "CrashLoopBackOff");
        assert_eq!(c[3], "3");
        assert_eq!(c[5], "<none>");
        assert_eq!(c[6], "<none>");

        let killed = json!({"spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Failed", "containerStatuses": [
                {"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}});
        assert_eq!(pod(&killed)[2], "Signal:9");

        let init = json!({"spec": {"initContainers": [{"name": "i1"}, {"name": "i2"}],
                                   "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
                {"name": "i2", "state": {"running": {}}}]}});
        assert_eq!(pod(&init)[2], "Init:1/2");

        let failed_init = json!({"spec": {"initContainers": [{"name": "i1"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "i1", "state": {"terminated": {"exitCode": 2}}}]}});
        assert_eq!(pod(&failed_init)[2], "Init:ExitCode:2");
    }

    #[test]
    fn finished_pods_rows_are_completed() {
        let done = json!({"status": {"phase": "Succeeded"}});
        assert_eq!(
            conditions(&done).unwrap(),
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
                    "message": "The pod has completed successfully."}])
        );
        assert_eq!(
            conditions(&json!({"status": {"phase": "Failed"}})).unwrap()[0]["reason"],
            "Failed"
        );
        assert!(conditions(&json!({"status": {"phase": "Running"}})).is_none());
    }

    #[test]
    fn sidecars_count_and_deletion_terminates() {
        let p = json!({
            "metadata": {"deletionTimestamp": "2000-01-01T00:00:00Z"},
            "spec": {"initContainers": [{"name": "s", "restartPolicy": "Always"}],
                     "containers": [{"name": "a"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Initialized", "status": "True"}],
                "initContainerStatuses": [{"name": "s", "started": true, "ready": true,
                                           "restartCount": 1, "state": {"running": {}}}],
                "containerStatuses": [{"name": "a", "ready": true, "state": {"running": {}}}]}});
        let c = pod(&p);
        assert_eq!(c[1], "2/2");
        assert_eq!(c[2], "Terminating");
        assert_eq!(c[3], "1");
        assert_eq!(c[4], "<unknown>");

        let done = json!({"metadata": {"deletionTimestamp": "2000-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}});
        assert_eq!(pod(&done)[2], "Completed");
    }
}
