//! The workload printers: Deployment (READY ready/desired, UP-TO-DATE,
//! AVAILABLE), ReplicaSet (DESIRED, CURRENT, READY), StatefulSet (READY
//! ready/desired), DaemonSet (the five scheduling counts and NODE
//! SELECTOR), Job (STATUS from its conditions, COMPLETIONS, DURATION) and
//! CronJob (SCHEDULE, TIMEZONE, SUSPEND, ACTIVE, LAST SCHEDULE), each
//! with the template's CONTAINERS and IMAGES (and SELECTOR) when wide.

use serde_json::{json, Value};

use super::column::{col, wide, Printer, AGE, CONTAINERS, IMAGES, NAME};
use super::descriptions as d;
use super::format::human_duration;
use super::format::{
    age, condition, containers, format_label_selector, format_labels, int, items, name,
    seconds_since, selector_string, since, text,
};

/// "Number of the pod with ready state", the Ready column of Deployments
/// and StatefulSets.
const READY_PODS: &str = "Number of the pod with ready state";

pub(super) static DEPLOYMENT: Printer = Printer::new(
    &[
        NAME,
        col("Ready", "string", READY_PODS),
        col("Up-to-date", "string", d::DEPLOY_UPDATED),
        col("Available", "string", d::DEPLOY_AVAILABLE),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", d::DEPLOY_SELECTOR),
    ],
    deployment,
);

/// A workload's row, as `printDeployment` and its kin lay it out: the
/// name, the kind's `cells`, the age, the names and images of the
/// containers at `containers_at` (`layoutContainerCells`), then the
/// `selector` cell, if the kind has one.
fn workload_row(
    obj: &Value,
    cells: Vec<Value>,
    containers_at: &str,
    selector: Option<Value>,
) -> Vec<Value> {
    let [names, images] = containers(obj, containers_at);
    let mut row = vec![name(obj)];
    row.extend(cells);
    row.extend([age(obj), names, images]);
    row.extend(selector);
    row
}

/// `spec.replicas`, 1 when absent (the default every stored object has).
fn desired(obj: &Value) -> i64 {
    obj.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn deployment(obj: &Value) -> Vec<Value> {
    let selector =
        selector_string(obj.pointer("/spec/selector")).unwrap_or_else(|| "<invalid>".into());
    workload_row(
        obj,
        vec![
            json!(format!(
                "{}/{}",
                int(obj, "/status/readyReplicas"),
                desired(obj)
            )),
            json!(int(obj, "/status/updatedReplicas")),
            json!(int(obj, "/status/availableReplicas")),
        ],
        "/spec/template/spec/containers",
        Some(json!(selector)),
    )
}

pub(super) static REPLICA_SET: Printer = Printer::new(
    &[
        NAME,
        col("Desired", "integer", d::RS_REPLICAS),
        col("Current", "integer", d::RS_STATUS_REPLICAS),
        col("Ready", "integer", d::RS_READY),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", d::RS_SELECTOR),
    ],
    replica_set,
);

fn replica_set(obj: &Value) -> Vec<Value> {
    workload_row(
        obj,
        vec![
            json!(desired(obj)),
            json!(int(obj, "/status/replicas")),
            json!(int(obj, "/status/readyReplicas")),
        ],
        "/spec/template/spec/containers",
        Some(json!(format_label_selector(obj.pointer("/spec/selector")))),
    )
}

pub(super) static STATEFUL_SET: Printer = Printer::new(
    &[
        NAME,
        col("Ready", "string", READY_PODS),
        AGE,
        CONTAINERS,
        IMAGES,
    ],
    stateful_set,
);

fn stateful_set(obj: &Value) -> Vec<Value> {
    workload_row(
        obj,
        vec![json!(format!(
            "{}/{}",
            int(obj, "/status/readyReplicas"),
            desired(obj)
        ))],
        "/spec/template/spec/containers",
        None,
    )
}

pub(super) static DAEMON_SET: Printer = Printer::new(
    &[
        NAME,
        col("Desired", "integer", d::DS_DESIRED),
        col("Current", "integer", d::DS_CURRENT),
        col("Ready", "integer", d::DS_READY),
        col("Up-to-date", "integer", d::DS_UPDATED),
        col("Available", "integer", d::DS_AVAILABLE),
        col("Node Selector", "string", d::POD_NODE_SELECTOR),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", d::DS_SELECTOR),
    ],
    daemon_set,
);

fn daemon_set(obj: &Value) -> Vec<Value> {
    workload_row(
        obj,
        vec![
            json!(int(obj, "/status/desiredNumberScheduled")),
            json!(int(obj, "/status/currentNumberScheduled")),
            json!(int(obj, "/status/numberReady")),
            json!(int(obj, "/status/updatedNumberScheduled")),
            json!(int(obj, "/status/numberAvailable")),
            json!(format_labels(
                obj.pointer("/spec/template/spec/nodeSelector")
            )),
        ],
        "/spec/template/spec/containers",
        Some(json!(format_label_selector(obj.pointer("/spec/selector")))),
    )
}

pub(super) static JOB: Printer = Printer::new(
    &[
        NAME,
        col("Status", "string", "Status of the job."),
        col("Completions", "string", d::JOB_SUCCEEDED),
        col("Duration", "string", "Time required to complete the job."),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", d::JOB_SELECTOR),
    ],
    job,
);

/// `hasJobCondition`: the first condition of `type_` has status True.
fn has_condition(obj: &Value, type_: &str) -> bool {
    condition(items(obj, "/status/conditions"), type_)
        .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"))
}

fn job(obj: &Value) -> Vec<Value> {
    let succeeded = int(obj, "/status/succeeded");
    let completions = match obj.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let parallelism = int(obj, "/spec/parallelism");
            if parallelism > 1 {
                format!("{succeeded}/1 of {parallelism}")
            } else {
                format!("{succeeded}/1")
            }
        }
    };
    let start = text(obj, "/status/startTime");
    let completion = text(obj, "/status/completionTime");
    let duration = match (seconds_since(start), seconds_since(completion)) {
        (None, _) => String::new(),
        (Some(s), None) => human_duration(s),
        (Some(s), Some(c)) => human_duration(s - c),
    };
    let status = if has_condition(obj, "Complete") {
        "Complete"
    } else if has_condition(obj, "Failed") {
        "Failed"
    } else if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        "Terminating"
    } else if has_condition(obj, "Suspended") {
        "Suspended"
    } else if has_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    workload_row(
        obj,
        vec![json!(status), json!(completions), json!(duration)],
        "/spec/template/spec/containers",
        Some(json!(format_label_selector(obj.pointer("/spec/selector")))),
    )
}

pub(super) static CRON_JOB: Printer = Printer::new(
    &[
        NAME,
        col("Schedule", "string", d::CRON_SCHEDULE),
        col("Timezone", "string", d::CRON_TIMEZONE),
        col("Suspend", "boolean", d::CRON_SUSPEND),
        col("Active", "integer", d::CRON_ACTIVE),
        col("Last Schedule", "string", d::CRON_LAST_SCHEDULE),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", d::JOB_SELECTOR),
    ],
    cron_job,
);

fn cron_job(obj: &Value) -> Vec<Value> {
    let last = match obj
        .pointer("/status/lastScheduleTime")
        .and_then(Value::as_str)
    {
        Some(t) => since(t),
        None => "<none>".into(),
    };
    // printBoolPtr
    let suspend = match obj.pointer("/spec/suspend").and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let timezone = obj
        .pointer("/spec/timeZone")
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    workload_row(
        obj,
        vec![
            json!(text(obj, "/spec/schedule")),
            json!(timezone),
            json!(suspend),
            json!(items(obj, "/status/active").len()),
            json!(last),
        ],
        "/spec/jobTemplate/spec/template/spec/containers",
        Some(json!(format_label_selector(
            obj.pointer("/spec/jobTemplate/spec/selector")
        ))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ago(secs: i64) -> String {
        (chrono::Utc::now() - chrono::Duration::seconds(secs)).to_rfc3339()
    }

    #[test]
    fn a_deployment_mid_rollout() {
        let d = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(30)},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [
                    {"name": "nginx", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]}}},
            "status": {"replicas": 4, "updatedReplicas": 2, "readyReplicas": 3, "availableReplicas": 3}
        });
        let c = deployment(&d);
        assert_eq!(
            c,
            [
                json!("web"),
                json!("3/3"),
                json!(2),
                json!(3),
                json!("30s"),
                json!("nginx,log"),
                json!("nginx:1.27,busybox"),
                json!("app=web")
            ]
        );
        let empty = deployment(&json!({"spec": {"replicas": 0}}));
        assert_eq!(empty[1], "0/0");
        assert_eq!(empty[7], "");
    }

    #[test]
    fn replica_sets_stateful_sets_and_daemon_sets() {
        let rs = json!({"spec": {"replicas": 2, "selector": {"matchLabels": {"app": "a"}}},
                        "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(replica_set(&rs)[1..4], [json!(2), json!(2), json!(1)]);
        assert_eq!(replica_set(&rs)[7], "app=a");
        let sts = json!({"spec": {"replicas": 3}, "status": {"readyReplicas": 2}});
        assert_eq!(stateful_set(&sts)[1], "2/3");
        let ds = json!({"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                       "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2}});
        let c = daemon_set(&ds);
        assert_eq!(
            c[1..7],
            [
                json!(3),
                json!(3),
                json!(2),
                json!(3),
                json!(2),
                json!("kubernetes.io/os=linux")
            ]
        );
        assert_eq!(c[10], "<none>");
    }

    #[test]
    fn a_complete_job_and_a_running_parallel_one() {
        let done = json!({"spec": {"completions": 1, "selector": {"matchLabels": {"job": "x"}}},
            "status": {"succeeded": 1, "startTime": ago(200), "completionTime": ago(20),
                       "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                                      {"type": "Complete", "status": "True"}]}});
        let c = job(&done);
        assert_eq!(c[1..4], [json!("Complete"), json!("1/1"), json!("3m")]);
        assert_eq!(c[7], "job=x");
        let running = json!({"spec": {"parallelism": 3}, "status": {"startTime": ago(5)}});
        assert_eq!(
            job(&running)[1..4],
            [json!("Running"), json!("0/1 of 3"), json!("5s")]
        );
        let suspended =
            json!({"status": {"conditions": [{"type": "Suspended", "status": "True"}]}});
        assert_eq!(
            job(&suspended)[1..4],
            [json!("Suspended"), json!("0/1"), json!("")]
        );
    }

    #[test]
    fn a_suspended_cron_job() {
        let cj = json!({"spec": {"schedule": "*/5 * * * *", "suspend": true,
                "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}},
            "status": {"active": [{"name": "j1"}], "lastScheduleTime": ago(120)}});
        let c = cron_job(&cj);
        assert_eq!(
            c[1..6],
            [
                json!("*/5 * * * *"),
                json!("<none>"),
                json!("True"),
                json!(1),
                json!("2m")
            ]
        );
        assert_eq!(c[7..], [json!("c"), json!("i"), json!("<none>")]);
        let never = cron_job(&json!({"spec": {"timeZone": "Etc/UTC"}}));
        assert_eq!(
            never[2..6],
            [
                json!("Etc/UTC"),
                json!("<unset>"),
                json!(0),
                json!("<none>")
            ]
        );
    }
}
