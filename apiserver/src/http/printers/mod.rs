//! Per-kind server-side printing for built-in kinds: the column definitions,
//! row cells and row conditions a real kube-apiserver 1.32 sends in a `meta.k8s.io/v1`
//! Table (`pkg/printers/internalversion/printers.go`: `AddHandlers` and the
//! `print<Kind>` functions). The real server always generates the wide
//! cells (`GenerateOptions{Wide: true}`) and kubectl hides priority-1
//! columns unless `-o wide`; so do we.
//!
//! Owns the table of printers (one per group and resource); the
//! [`column::Column`] and [`Printer`] shapes are `column`'s, the kinds' rules live in one file per group of kinds
//! (`pods`, `workloads`, `networking`, `config`, `cluster`, `events`), the shared
//! cell formatting in `format`, the swagger texts in `descriptions`. A
//! kind without a printer here is [`crate::http::table`]'s concern.
//! Presentation only: never filters, validates or writes.

mod cluster;
mod column;
mod config;
mod descriptions;
mod events;
mod format;
mod networking;
mod pods;
mod workloads;

pub(crate) use column::Printer;
pub(crate) use descriptions::NAME_DESCRIPTION;
pub use format::human_duration;

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
    use serde_json::json;

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
