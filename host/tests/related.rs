//! Key mappings through real informers: a change to an owned object wakes
//! its controller owner, a change to an object linked by an index wakes the
//! primaries with the same index value (both the old and the new one when
//! the value changes; only those of its namespace for a `same-namespace:`
//! link), and each per-object reconcile's snapshot holds its primary's
//! related objects only. Driven by `tests/guests/guest-related`,
//! which reports what each reconcile saw in a ConfigMap `seen-<primary>`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use crate::support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::supervisor::SupervisorConfig;

async fn start(client: &Client) -> RunningHost {
    let config = SupervisorConfig {
        guests: vec![built_guest("guest_related")],
        ..host_config(ControllerConfig::default())
    };
    run_host(client, config, None).await
}

fn cms(client: &Client) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), PODS_NS)
}

/// A watched ConfigMap: `role`, optional `data.team`, optional controller
/// owner (name, uid).
async fn create(
    client: &Client,
    name: &str,
    role: &str,
    team: Option<&str>,
    owner: Option<(&str, &str)>,
) {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"role": role}}, "data": {}});
    if let Some(team) = team {
        cm["data"]["team"] = json!(team);
    }
    if let Some((owner, uid)) = owner {
        cm["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
            "name": owner, "uid": uid, "controller": true}]);
    }
    let cm: ConfigMap = serde_json::from_value(cm).unwrap();
    cms(client)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

async fn uid(client: &Client, name: &str) -> String {
    cms(client).get(name).await.unwrap().metadata.uid.unwrap()
}

/// What primary `owner`'s last reconcile saw: (owned, members).
async fn seen(client: &Client, owner: &str) -> Option<(String, String)> {
    let reports: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    let data: BTreeMap<String, String> = reports
        .get_opt(&format!("seen-{owner}"))
        .await
        .unwrap()?
        .data
        .unwrap_or_default();
    let get = |k: &str| data.get(k).cloned().unwrap_or_default();
    Some((get("owned"), get("members")))
}

async fn sees(client: &Client, owner: &str, owned: &str, members: &str) {
    let want = Some((owned.to_string(), members.to_string()));
    let what = format!("{owner} sees owned=[{owned}] members=[{members}]");
    eventually(&what, || async { seen(client, owner).await == want }).await;
}

#[tokio::test]
async fn owned_and_indexed_changes_wake_exactly_their_primaries_with_only_their_related_objects() {
    let (_server, client) = server().await;
    create(&client, "alpha", "owner", Some("red"), None).await;
    create(&client, "beta", "owner", Some("blue"), None).await;
    let host = start(&client).await;
    sees(&client, "alpha", "", "").await;
    sees(&client, "beta", "", "").await;

    // Owner mapping: a controller-owned object wakes its owner only.
    let alpha = uid(&client, "alpha").await;
    create(&client, "part-1", "owned", None, Some(("alpha", &alpha))).await;
    sees(&client, "alpha", "part-1", "").await;

    // By-index: a member of team blue wakes beta only.
    create(&client, "member-1", "member", Some("blue"), None).await;
    sees(&client, "beta", "", "member-1").await;
    assert_eq!(
        seen(&client, "alpha").await,
        Some(("part-1".into(), String::new()))
    );

    // The member moves to team red: both the primary it left and the one
    // it joined are reconciled.
    let patch = json!({"data": {"team": "red"}});
    cms(&client)
        .patch("member-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    sees(&client, "alpha", "part-1", "member-1").await;
    sees(&client, "beta", "", "").await;

    // A new red member wakes alpha only.
    create(&client, "member-2", "member", Some("red"), None).await;
    sees(&client, "alpha", "part-1", "member-1,member-2").await;
    assert_eq!(
        seen(&client, "beta").await,
        Some((String::new(), String::new()))
    );

    // A primary's own index value changes: beta joins team red and its
    // snapshot now holds red's members.
    cms(&client)
        .patch("beta", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    sees(&client, "beta", "", "member-1,member-2").await;

    // Deleting an owned object wakes its owner.
    cms(&client)
        .delete("part-1", &DeleteParams::default())
        .await
        .unwrap();
    sees(&client, "alpha", "", "member-1,member-2").await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn objects_owned_by_another_kind_or_without_a_controller_reference_wake_nobody() {
    let (_server, client) = server().await;
    create(&client, "alpha", "owner", Some("red"), None).await;
    let host = start(&client).await;
    sees(&client, "alpha", "", "").await;
    let reconciles = host.reconciles();
    let alpha = uid(&client, "alpha").await;
    // Same name, but the owner is a Secret: not one of our primaries.
    let cm: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "stray", "labels": {"role": "owned"}, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Secret", "name": "alpha", "uid": alpha, "controller": true}]}}))
    .unwrap();
    cms(&client)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    // The right owner, but not its controller reference.
    let cm: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "shared", "labels": {"role": "owned"}, "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "alpha", "uid": alpha, "controller": false}]}}))
    .unwrap();
    cms(&client)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    // A member of a team no primary is in.
    create(&client, "loner", "member", Some("green"), None).await;
    stays_for(
        std::time::Duration::from_secs(2),
        "no primary is reconciled",
        || async { host.reconciles() == reconciles },
    )
    .await;
    assert_eq!(
        seen(&client, "alpha").await,
        Some((String::new(), String::new()))
    );
    host.stop().await.unwrap();
}

/// The `data.settings` of primary `owner`'s last report.
async fn settings_seen(client: &Client, owner: &str) -> Option<String> {
    let reports: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    let report = reports.get_opt(&format!("seen-{owner}")).await.unwrap()?;
    Some(report.data?.get("settings").cloned().unwrap_or_default())
}

#[tokio::test]
async fn a_same_namespace_index_link_relates_each_owner_to_the_settings_of_its_namespace_only() {
    let (_server, client) = server().await;
    let setting = |namespace: &str, value: &str| {
        serde_json::from_value::<ConfigMap>(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "shared", "namespace": namespace, "labels": {"role": "setting"}},
            "data": {"value": value}}))
        .unwrap()
    };
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    let owner: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "alpha", "labels": {"role": "owner"}},
        "data": {"team": "red", "settings": "shared"}}))
    .unwrap();
    cms(&client)
        .create(&PostParams::default(), &owner)
        .await
        .unwrap();
    // A namesake in another namespace: not alpha's.
    elsewhere
        .create(&PostParams::default(), &setting(HOST_NS, "1"))
        .await
        .unwrap();
    let host = start(&client).await;
    eventually("alpha sees no settings", || async {
        settings_seen(&client, "alpha").await == Some(String::new())
    })
    .await;

    // The settings of alpha's own namespace wake it, and only they are in
    // its snapshot.
    cms(&client)
        .create(&PostParams::default(), &setting(PODS_NS, "1"))
        .await
        .unwrap();
    let want = format!("{PODS_NS}/shared");
    eventually("alpha sees the settings of its namespace", || async {
        settings_seen(&client, "alpha").await.as_deref() == Some(want.as_str())
    })
    .await;

    // A change to the namesake elsewhere wakes nobody.
    let reconciles = host.reconciles();
    let patch = json!({"data": {"value": "2"}});
    elsewhere
        .patch("shared", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    stays_for(
        std::time::Duration::from_secs(2),
        "no primary is reconciled",
        || async { host.reconciles() == reconciles },
    )
    .await;
    host.stop().await.unwrap();
}
