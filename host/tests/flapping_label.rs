//! The flapping label (issue 41): a namespace provisioner in the aggregate
//! shape (`tests/guests/guest-tiers`: one key over every Namespace, three
//! children per Namespace labelled `tier`, deleted when the label goes)
//! while a person flips one Namespace's label off and on every second, with
//! nothing else writing. Right after each of the host's own deletes and
//! creates its cache is behind the server; that is no other writer. No
//! write war, every child in place at the end, and never a second apply
//! of a child the host just created (nor a second delete of one it just
//! deleted).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{LimitRange, Namespace, ResourceQuota};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::support::*;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::supervisor::SupervisorConfig;

/// The Namespace whose label flips.
const FLAPPING: &str = "flapping";
/// A Namespace labelled throughout.
const STEADY: &str = "steady";
/// Label changes, one a second: five times off, five times on.
const FLIPS: usize = 10;
/// The children's resources (plural, as in a request's path) and names.
const CHILDREN: [(&str, &str); 3] = [
    ("resourcequotas", "tier-quota"),
    ("limitranges", "tier-limits"),
    ("rolebindings", "tier-view"),
];

async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"tier": "gold"}}
    }))
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Sets (or removes) the Namespace's `tier` label, as `kubectl label` does.
async fn label(client: &Client, name: &str, on: bool) {
    let tier = if on { json!("gold") } else { json!(null) };
    Api::<Namespace>::all(client.clone())
        .patch(
            name,
            &PatchParams {
                field_manager: Some("kubectl-label".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"metadata": {"labels": {"tier": tier}}})),
        )
        .await
        .unwrap();
}

/// How many of the three children `namespace` has.
async fn children(client: &Client, namespace: &str) -> usize {
    let quota = Api::<ResourceQuota>::namespaced(client.clone(), namespace)
        .get_opt(CHILDREN[0].1)
        .await
        .unwrap();
    let limits = Api::<LimitRange>::namespaced(client.clone(), namespace)
        .get_opt(CHILDREN[1].1)
        .await
        .unwrap();
    let binding = Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .get_opt(CHILDREN[2].1)
        .await
        .unwrap();
    [quota.is_some(), limits.is_some(), binding.is_some()]
        .into_iter()
        .filter(|&present| present)
        .count()
}

/// Each child's writes, in the order the host sent them: `PATCH` (an
/// apply) or `DELETE`, by `namespace/plural/name`.
fn writes_by_child(requests: &Requests) -> BTreeMap<String, Vec<String>> {
    let mut by_child: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in requests.lock().unwrap().iter() {
        let Some((method, path)) = line.split_once(' ') else {
            continue;
        };
        if method != "PATCH" && method != "DELETE" {
            continue;
        }
        let path = path.split('?').next().unwrap_or(path);
        for ns in [FLAPPING, STEADY] {
            for (plural, name) in CHILDREN {
                if path.ends_with(&format!("/namespaces/{ns}/{plural}/{name}")) {
                    by_child
                        .entry(format!("{ns}/{plural}/{name}"))
                        .or_default()
                        .push(method.to_string());
                }
            }
        }
    }
    by_child
}

#[tokio::test]
async fn a_label_flipped_every_second_is_no_write_war_and_every_child_is_in_place() {
    let (_server, admin) = server().await;
    namespace(&admin, FLAPPING).await;
    namespace(&admin, STEADY).await;
    let (client, requests) = recording(&admin);
    let config = SupervisorConfig {
        guests: vec![built_guest("guest_tiers")],
        ..host_config(ControllerConfig::default())
    };
    let host = run_host(&client, config, None).await;
    let metrics = host.controller().metrics().clone();
    eventually("both Namespaces have their three children", || async {
        children(&admin, FLAPPING).await == 3 && children(&admin, STEADY).await == 3
    })
    .await;

    for flip in 0..FLIPS {
        let on = flip % 2 == 1;
        label(&admin, FLAPPING, on).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eventually("the flapping Namespace has its three children", || async {
        children(&admin, FLAPPING).await == 3 && host.idle()
    })
    .await;

    assert_eq!(children(&admin, STEADY).await, 3);
    assert_eq!(metrics.held_back_writes(), 0, "no write held back");
    let scraped = host.metrics.as_ref().unwrap().encode();
    let wars: Vec<_> = prom::samples(&scraped)
        .into_iter()
        .filter(|(series, v)| series.starts_with("wasmctrl_write_wars_total") && *v > 0.0)
        .collect();
    assert!(wars.is_empty(), "write wars: {wars:?}");
    let events = events_with_reason(&admin, None, "WriteWar").await;
    assert!(events.is_empty(), "WriteWar events: {events:?}");

    // Nobody else writes the children and their content never changes:
    // each one's writes alternate create (apply) and delete, beginning
    // with a create. An apply right after a create, or a delete right
    // after a delete, was decided on a cache behind the host's own write.
    let by_child = writes_by_child(&requests);
    assert_eq!(by_child.len(), 6, "every child was written: {by_child:?}");
    for (child, writes) in &by_child {
        let alternating = writes
            .iter()
            .enumerate()
            .all(|(i, w)| w == if i % 2 == 0 { "PATCH" } else { "DELETE" });
        assert!(alternating, "{child}: {writes:?}");
    }
    let steady: Vec<_> = by_child
        .iter()
        .filter(|(child, _)| child.starts_with(STEADY))
        .collect();
    assert!(
        steady.iter().all(|(_, w)| w.len() == 1),
        "the steady Namespace's children were created once: {steady:?}"
    );
    let flapping = by_child
        .iter()
        .filter(|(child, _)| child.starts_with(FLAPPING))
        .map(|(_, w)| w.len())
        .max()
        .unwrap_or(0);
    eprintln!("flapping label: {FLIPS} flips, 0 wars, 3/3 children, up to {flapping} writes per child: {by_child:?}");
}
