//! The GPU summary through the incremental aggregate path in a running
//! host: real HTTPS, the real kube client. The controller keeps the
//! summary from per-pod contributions (no whole-snapshot reconcile of the
//! key): adds, a pod leaving the field selector (Succeeded) and a deletion
//! each end in the summary a whole snapshot would give.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use wasmctrl::controller::ControllerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_follows_adds_selector_exits_and_deletes_through_contributions() {
    let (_server, client) = server().await;
    let h = start_host(&client, ControllerConfig::default()).await;
    let controller = h.controller();
    let aggregate = controller
        .aggregate()
        .expect("the GPU guest exports the aggregator")
        .clone();
    assert_eq!(aggregate.key(), "gpu-summary");

    pod("a").on("n1").requesting("2").create(&client).await;
    pod("b").on("n1").requesting("1").create(&client).await;
    // No GPU: mapped, but no contribution. (A quantity the guest cannot
    // count never gets here: the API server refuses it, as a real one does.)
    pod("c").on("n2").create(&client).await;
    summary_becomes(&client, &[("n1", "3")]).await;
    // Two pods contribute to one group; the pod without GPUs to none.
    eventually("contributions cached", || async {
        aggregate.pending() == 0 && aggregate.sizes() == (2, 1)
    })
    .await;

    set_phase(&client, "a", "Succeeded").await;
    summary_becomes(&client, &[("n1", "1")]).await;
    delete_now(&client, "b").await;
    summary_becomes(&client, &[]).await;
    eventually("nothing left", || async {
        aggregate.pending() == 0 && aggregate.sizes() == (0, 0)
    })
    .await;
    h.stop().await.unwrap();
}

/// Which entries of the summary's `data` each (manager, operation) owns.
async fn data_owners(client: &kube::Client) -> Vec<(String, String, Vec<String>)> {
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), HOST_NS);
    let cm = cms.get("gpu-summary").await.unwrap();
    let mut out = Vec::new();
    for e in cm.metadata.managed_fields.unwrap_or_default() {
        let fields = e.fields_v1.map(|f| f.0).unwrap_or_default();
        let keys = fields
            .get("f:data")
            .and_then(|d| d.as_object())
            .map(|d| {
                d.keys()
                    .filter_map(|k| k.strip_prefix("f:").map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        out.push((
            e.manager.unwrap_or_default(),
            e.operation.unwrap_or_default(),
            keys,
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_group_is_written_as_its_entry_alone_and_foreign_entries_stay() {
    let (_server, client) = server().await;
    let h = start_host(&client, ControllerConfig::default()).await;
    const ME: &str = "wasmctrl/gpu-summary";

    pod("a").on("n1").requesting("2").create(&client).await;
    summary_becomes(&client, &[("n1", "2")]).await;
    // The summary was created by an apply.
    let owners = data_owners(&client).await;
    assert!(
        owners
            .iter()
            .any(|(m, op, keys)| m == ME && op == "Apply" && keys == &["n1"]),
        "{owners:?}"
    );

    // One group changes: the host patches that entry only (owned through
    // its Update entry), the rest of the object untouched.
    pod("b").on("n2").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "2"), ("n2", "1")]).await;
    let owners = data_owners(&client).await;
    assert!(
        owners
            .iter()
            .any(|(m, op, keys)| m == ME && op == "Update" && keys == &["n2"]),
        "n2 written by a merge patch: {owners:?}"
    );
    assert!(
        owners
            .iter()
            .any(|(m, op, keys)| m == ME && op == "Apply" && keys == &["n1"]),
        "n1 still owned through the apply: {owners:?}"
    );

    // Someone else adds an entry of their own: the host leaves it alone.
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), HOST_NS);
    cms.patch(
        "gpu-summary",
        &kube::api::PatchParams {
            field_manager: Some("ops-team".into()),
            ..Default::default()
        },
        &kube::api::Patch::Merge(serde_json::json!({"data": {"note": "hands off"}})),
    )
    .await
    .unwrap();

    // A group owned through the apply disappears, and one owned through
    // the merge changes: both by entry, the foreign entry kept.
    delete_now(&client, "a").await;
    summary_becomes(&client, &[("n2", "1"), ("note", "hands off")]).await;
    set_phase(&client, "b", "Succeeded").await;
    summary_becomes(&client, &[("note", "hands off")]).await;
    pod("c").on("n3").requesting("4").create(&client).await;
    summary_becomes(&client, &[("n3", "4"), ("note", "hands off")]).await;
    let owners = data_owners(&client).await;
    assert!(
        owners
            .iter()
            .any(|(m, _, keys)| m == "ops-team" && keys == &["note"]),
        "{owners:?}"
    );
    assert!(
        owners
            .iter()
            .filter(|(m, _, _)| m == ME)
            .all(|(_, _, keys)| keys.iter().all(|k| k == "n3")),
        "the host owns only what it wants: {owners:?}"
    );
    h.stop().await.unwrap();
}

/// The summary ConfigMap's key.
fn summary_key() -> wasmctrl::guest::ObjectKey {
    wasmctrl::guest::ObjectKey {
        gvk: wasmctrl::guest::Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        },
        namespace: Some(HOST_NS.into()),
        name: "gpu-summary".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_go_by_patch_at_a_known_version_and_anyone_elses_edit_is_repaired() {
    let (_server, client) = server().await;
    let h = start_host(&client, ControllerConfig::default()).await;
    let controller = h.controller();
    let known = || {
        controller
            .actuator()
            .outputs()
            .chains()
            .holds(&summary_key())
    };
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), HOST_NS);
    let by_ops = kube::api::PatchParams {
        field_manager: Some("ops-team".into()),
        ..Default::default()
    };

    pod("a").on("n1").requesting("2").create(&client).await;
    summary_becomes(&client, &[("n1", "2")]).await;
    // Created by a full apply, whose result the host does not know (unit
    // tests of `entries` check that a full apply ends the chain). Whether
    // the entries are known yet is a race here: a reconcile that finds
    // nothing to write (the pod's status update, say) already learns them
    // from the live object. The next change is decided on the live object
    // and merge-patched: from there the host knows the entries.
    pod("b").on("n2").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "2"), ("n2", "1")]).await;
    eventually("the entries known", || async { known() }).await;
    pod("c").on("n3").requesting("4").create(&client).await;
    summary_becomes(&client, &[("n1", "2"), ("n2", "1"), ("n3", "4")]).await;
    eventually("still known after our own patch", || async { known() }).await;

    // Someone else changes one of our entries: forgotten, and put back
    // from the live object.
    cms.patch(
        "gpu-summary",
        &by_ops,
        &kube::api::Patch::Merge(serde_json::json!({"data": {"n1": "99"}})),
    )
    .await
    .unwrap();
    summary_becomes(&client, &[("n1", "2"), ("n2", "1"), ("n3", "4")]).await;
    eventually("known again", || async { known() }).await;
    // A group that goes away is removed by entry; another manager's entry
    // with the same key as a group we never had stays.
    cms.patch(
        "gpu-summary",
        &by_ops,
        &kube::api::Patch::Merge(serde_json::json!({"data": {"mine": "x"}})),
    )
    .await
    .unwrap();
    eventually("known again", || async { known() }).await;
    delete_now(&client, "b").await;
    summary_becomes(&client, &[("mine", "x"), ("n1", "2"), ("n3", "4")]).await;

    // Deleted by someone: created again whole, with every entry.
    cms.delete("gpu-summary", &Default::default())
        .await
        .unwrap();
    summary_becomes(&client, &[("n1", "2"), ("n3", "4")]).await;
    pod("d").on("n4").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "2"), ("n3", "4"), ("n4", "1")]).await;
    h.stop().await.unwrap();
}
