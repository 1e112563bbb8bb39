//! Per-kind server-side printing for built-in kinds: the column definitions,
//! row cells and row conditions a real kube-apiserver 1.32 sends in a `meta.k8s.io/v1`
//! Table (`pkg/printers/internalversion/printers.go`: `AddHandlers` and the
//! `print<Kind>` functions). The real server always generates the wide
//! cells (`GenerateOptions{Wide: true}`) and kubectl hides priority-1
//! columns unless `-o wide`; so do we.
//!
//! Owns the table of printers (one per group and resource) and the
//! [`Column`] shape; the kinds' rules live in one file per group of kinds
//! (`pods`, `workloads`, `networking`, `config`, `cluster`, `events`), the shared
//! cell formatting in `format`, the swagger texts in `descriptions`. A
//! kind without a printer here is [`crate::http::table`]'s concern.
//! Presentation only: never filters, validates or writes.

mod cluster;
mod config;
mod descriptions;
mod events;
mod format;
mod networking;
mod pods;
mod workloads;

use serde_json::{json, Value};

/// One column definition (`metav1.TableColumnDefinition`).
pub(crate) struct Column {
    name: &'static str,
    ty: &'static str,
    /// 1 for the wide (`-o wide`) columns.
    priority: u8,
    description: &'static str,
}

/// A column shown by default.
const fn col(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty,
        priority: 0,
        description,
    }
}

/// A wide column (priority 1).
const fn wide(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty,
        priority: 1,
        description,
    }
}

/// The Name column every printer starts with.
const NAME: Column = Column {
    name: "Name",
    ty: "string",
    priority: 0,
    description: crate::http::printer_columns::NAME_DESCRIPTION,
};

/// The Age column (`translateTimestampSince(creationTimestamp)`).
const AGE: Column = col("Age", "string", descriptions::AGE);

/// `layoutContainerCells`' two wide columns.
const CONTAINERS: Column = wide(
    "Containers",
    "string",
    "Names of each container in the template.",
);
const IMAGES: Column = wide(
    "Images",
    "string",
    "Images referenced by each container in the template.",
);

/// A kind's printer: its columns and the function computing one row's
/// cells (as many as columns, wide ones included).
pub(crate) struct Printer {
    columns: &'static [Column],
    row: fn(&Value) -> Vec<Value>,
    /// The row's `conditions`, for the kinds whose rows have any.
    conditions: Option<fn(&Value) -> Option<Value>>,
}

impl Printer {
    /// The Table's `columnDefinitions`.
    pub(crate) fn definitions(&self) -> Vec<Value> {
        self.columns
            .iter()
            .map(|c| {
                let format = if c.name == "Name" { "name" } else { "" };
                json!({"name": c.name, "type": c.ty, "format": format,
                    "description": c.description, "priority": c.priority})
            })
            .collect()
    }

    /// One row's cells for `obj`.
    pub(crate) fn cells(&self, obj: &Value) -> Vec<Value> {
        (self.row)(obj)
    }

    /// One row's `conditions` for `obj`, if it has any.
    pub(crate) fn row_conditions(&self, obj: &Value) -> Option<Value> {
        self.conditions.and_then(|c| c(obj))
    }
}

/// The printer for `group`/`plural`, if the real server has one we copy.
pub(crate) fn printer(group: &str, plural: &str) -> Option<&'static Printer> {
    Some(match (group, plural) {
        ("", "pods") => &pods::POD,
        ("apps", "deployments") => &workloads::DEPLOYMENT,
        ("apps", "replicasets") => &workloads::REPLICA_SET,
        ("apps", "statefulsets") => &workloads::STATEFUL_SET,
        ("apps", "daemonsets") => &workloads::DAEMON_SET,
        ("batch", "jobs") => &workloads::JOB,
        ("batch", "cronjobs") => &workloads::CRON_JOB,
        ("", "services") => &networking::SERVICE,
        ("", "endpoints") => &networking::ENDPOINTS,
        ("networking.k8s.io", "ingresses") => &networking::INGRESS,
        ("", "events") => &events::EVENT,
        ("", "configmaps") => &config::CONFIG_MAP,
        ("", "secrets") => &config::SECRET,
        ("", "serviceaccounts") => &config::SERVICE_ACCOUNT,
        ("", "persistentvolumeclaims") => &config::PERSISTENT_VOLUME_CLAIM,
        ("", "namespaces") => &cluster::NAMESPACE,
        ("", "nodes") => &cluster::NODE,
        ("coordination.k8s.io", "leases") => &cluster::LEASE,
        _ => return None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_printers_rows_have_one_cell_per_column() {
        let empty = json!({"metadata": {"name": "x"}});
        for (g, p) in [
            ("", "pods"),
            ("apps", "deployments"),
            ("apps", "replicasets"),
            ("apps", "statefulsets"),
            ("apps", "daemonsets"),
            ("batch", "jobs"),
            ("batch", "cronjobs"),
            ("", "services"),
            ("", "endpoints"),
            ("networking.k8s.io", "ingresses"),
            ("", "events"),
            ("", "configmaps"),
            ("", "secrets"),
            ("", "serviceaccounts"),
            ("", "persistentvolumeclaims"),
            ("", "namespaces"),
            ("", "nodes"),
            ("coordination.k8s.io", "leases"),
        ] {
            let printer = printer(g, p).unwrap();
            let defs = printer.definitions();
            assert_eq!(defs.len(), printer.cells(&empty).len(), "{p}");
            let names = defs.iter().filter(|d| d["format"] == "name").count();
            assert_eq!(names, 1, "{p}");
            assert!(
                defs.iter()
                    .all(|d| !d["description"].as_str().unwrap().is_empty()),
                "{p}"
            );
            if p != "events" {
                // wide columns come last, and Name first, but for events
                assert_eq!(defs[0]["name"], "Name", "{p}");
                let priorities: Vec<u64> = defs
                    .iter()
                    .map(|d| d["priority"].as_u64().unwrap())
                    .collect();
                assert!(priorities.windows(2).all(|w| w[0] <= w[1]), "{p}");
            }
        }
        assert!(printer("rbac.authorization.k8s.io", "roles").is_none());
    }
}
