//! Deletion as a client sees it: finalizers holding an object, delete
//! preconditions, deletecollection with a selector, graceful pod deletion
//! (with and without a kubelet) and namespace termination, which refuses
//! new content and waits for its pods before the namespace goes.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! (kube's typed calls, raw requests where kube has none) and never
//! reaches into the server's internals beyond its fault handle.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions, WatchParams};
use serde_json::json;
use wasmctrl_apiserver::ApiServerConfig;

use crate::common::{
    cm, create, create_error, eventually, list_names, list_rv, merge_patch, next_event_types, pod,
    start, start_with, status, watch,
};

#[tokio::test]
async fn finalizers_hold_deletion_until_the_last_one_is_removed() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut obj = cm("f", json!({}));
    obj.metadata.finalizers = Some(vec!["example.com/a".into(), "example.com/b".into()]);
    create(&cms, &obj).await;
    let rv = list_rv(&cms).await;
    let mut stream = watch(&cms, &WatchParams::default().timeout(10), &rv).await;
    cms.delete("f", &DeleteParams::background()).await.unwrap();
    let pending = cms.get("f").await.unwrap();
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(0));
    cms.patch(
        "f",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers/0"}]))
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    assert!(cms.get("f").await.is_ok(), "one finalizer left");
    merge_patch(&cms, "f", json!({"metadata": {"finalizers": null}})).await;
    let e = status(cms.get("f").await.unwrap_err());
    assert_eq!(e.code, 404);
    let kinds = next_event_types(&mut stream, 3).await;
    assert_eq!(kinds, ["MODIFIED", "MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn delete_preconditions_are_enforced() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    create(&cms, &cm("a", json!({}))).await;
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("wrong".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let e = status(cms.delete("a", &dp).await.unwrap_err());
    assert_eq!(e.code, 409);
    assert!(e
        .message
        .starts_with("Precondition failed: UID in precondition: wrong"));
    cms.delete("a", &DeleteParams::foreground()).await.unwrap();
    assert_eq!(status(cms.get("a").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn delete_collection_removes_only_selected_objects() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let mut obj = cm(name, json!({}));
        obj.metadata.labels = Some([("app".to_string(), app.to_string())].into());
        create(&cms, &obj).await;
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=x"),
    )
    .await
    .unwrap();
    let left = list_names(&cms, &ListParams::default()).await;
    assert_eq!(left, ["c"]);
}

fn scheduled(name: &str, grace: i64) -> Pod {
    let mut p = serde_json::to_value(pod(name, json!({}))).unwrap();
    p["spec"]["nodeName"] = json!("n1");
    p["spec"]["terminationGracePeriodSeconds"] = json!(grace);
    serde_json::from_value(p).unwrap()
}

fn namespace(name: &str) -> Namespace {
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .unwrap()
}

fn chrono_now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_scheduled_pod_is_graceful_until_its_kubelet_removes_it() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&pods, &scheduled("p", 2)).await;
    let mut stream = watch(&pods, &WatchParams::default(), "0").await;
    let started = Instant::now();
    // The DELETE answers with the pod, now terminating; it is still there.
    let out = pods.delete("p", &DeleteParams::default()).await.unwrap();
    let p = out.left().expect("graceful deletion returns the object");
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(2));
    let ts = p.metadata.deletion_timestamp.clone().unwrap().0;
    let now = chrono_now_secs();
    assert!(
        (ts.as_second() - now - 2).abs() <= 1,
        "deletionTimestamp is now + grace: {ts} vs now {now}"
    );
    let still = pods.get("p").await.unwrap();
    assert_eq!(
        still.metadata.deletion_timestamp,
        p.metadata.deletion_timestamp
    );
    // A second delete without a shorter period changes nothing.
    let again = pods
        .delete("p", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(again.metadata.resource_version, p.metadata.resource_version);
    // Watchers see MODIFIED (terminating), then DELETED once the grace
    // period is over.
    let kinds = next_event_types(&mut stream, 3).await;
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert!(pods.get_opt("p").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminating_pod_stays_without_a_kubelet_and_a_shorter_grace_period_removes_it() {
    let (_s, client) = start_with(ApiServerConfig::default().kubelet(false)).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&pods, &scheduled("p", 30)).await;
    pods.delete("p", &DeleteParams::default()).await.unwrap();
    let delete_with_grace = async |seconds: u32| {
        let dp = DeleteParams::default().grace_period(seconds);
        pods.delete("p", &dp).await.unwrap().left().unwrap()
    };
    let shortened = delete_with_grace(10).await;
    assert_eq!(shortened.metadata.deletion_grace_period_seconds, Some(10));
    // Longer is ignored.
    let same = delete_with_grace(60).await;
    assert_eq!(same.metadata.deletion_grace_period_seconds, Some(10));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        pods.get_opt("p").await.unwrap().is_some(),
        "no kubelet: still terminating"
    );
    // Zero means now (kubectl delete --force --grace-period=0).
    pods.delete("p", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert!(pods.get_opt("p").await.unwrap().is_none());

    // Unscheduled and terminal pods never wait.
    create(&pods, &pod("pending", json!({}))).await;
    pods.delete("pending", &DeleteParams::default())
        .await
        .unwrap();
    assert!(pods.get_opt("pending").await.unwrap().is_none());
    create(&pods, &scheduled("done", 30)).await;
    pods.patch_status(
        "done",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    pods.delete("done", &DeleteParams::default()).await.unwrap();
    assert!(pods.get_opt("done").await.unwrap().is_none());
}

#[tokio::test]
async fn leases_and_namespaces_round_trip_and_namespace_delete_empties_it() {
    let (_s, client) = start().await;
    let ns: Api<Namespace> = Api::all(client.clone());
    let created = create(&ns, &namespace("work")).await;
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    let leases: Api<Lease> = Api::namespaced(client.clone(), "work");
    let l: Lease = serde_json::from_value(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"}, "spec": {"holderIdentity": "me"}})).unwrap();
    create(&leases, &l).await;
    let got = leases.get("leader").await.unwrap();
    assert_eq!(got.spec.unwrap().holder_identity.as_deref(), Some("me"));
    // Deleting a namespace makes it Terminating at once; new content is
    // refused; the content, then the namespace, go in the background.
    let deleting = ns
        .delete("work", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the namespace is returned, terminating");
    assert_eq!(
        deleting.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let mut late = l.clone();
    late.metadata.name = Some("late".into());
    let refused = create_error(&leases, &late).await;
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "leases.coordination.k8s.io \"late\" is forbidden: unable to create new content in namespace work because it is being terminated"
    );
    eventually("the namespace is removed once empty", async || {
        ns.get_opt("work").await.unwrap().is_none()
    })
    .await;
    assert_eq!(status(leases.get("leader").await.unwrap_err()).code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_namespace_waits_for_its_running_pods_to_terminate() {
    let (_s, client) = start().await;
    let ns: Api<Namespace> = Api::all(client.clone());
    create(&ns, &namespace("job")).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "job");
    create(&pods, &scheduled("runner", 1)).await;
    ns.delete("job", &DeleteParams::default()).await.unwrap();
    // The sweep deletes the pod like anyone would: gracefully.
    let started = Instant::now();
    eventually("the pod starts terminating", async || {
        match pods.get_opt("runner").await.unwrap() {
            Some(p) => p.metadata.deletion_timestamp.is_some(),
            None => panic!("a running pod must terminate gracefully, not vanish"),
        }
    })
    .await;
    assert!(
        ns.get_opt("job").await.unwrap().is_some(),
        "still terminating"
    );
    eventually("gone after the pod's grace period", async || {
        ns.get_opt("job").await.unwrap().is_none()
    })
    .await;
    assert!(started.elapsed() >= Duration::from_millis(800));
    assert!(pods.get_opt("runner").await.unwrap().is_none());
}

#[tokio::test]
async fn a_write_naming_a_uid_never_creates_or_touches_a_namesake() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let apply = |uid: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "z", "uid": uid}, "data": {"k": "v"}})
    };
    let params = PatchParams::apply("test").force();
    // No object: an apply naming a uid is a 409, and nothing is created.
    let e = status(
        cms.patch("z", &params, &Patch::Apply(apply("gone")))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert!(e.message.contains("uid mismatch"), "{}", e.message);
    assert_eq!(status(cms.get("z").await.unwrap_err()).code, 404);
    // A namesake: the uid is immutable (422), the namesake untouched.
    let live = create(&cms, &cm("z", json!({}))).await;
    let e = status(
        cms.patch("z", &params, &Patch::Apply(apply("gone")))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(e.message.contains("metadata.uid"), "{}", e.message);
    // The right uid applies.
    let uid = live.metadata.uid.unwrap();
    let done = cms
        .patch("z", &params, &Patch::Apply(apply(&uid)))
        .await
        .unwrap();
    assert_eq!(done.data.unwrap()["k"], "v");
    // A status apply of a missing object is a 404, never a create.
    let e = status(
        cms.patch_status("missing", &params, &Patch::Apply(apply("x")))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn a_terminating_namespace_reports_what_remains_in_its_conditions() {
    let (_s, client) = start().await;
    wasmctrl_test_support::create_namespace(&client, "t").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    let mut held = cm("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    create(&cms, &held).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete("t", &DeleteParams::default())
        .await
        .unwrap();
    let conditions = |ns: &Namespace| {
        let cs = ns.status.as_ref().and_then(|s| s.conditions.clone());
        cs.unwrap_or_default()
            .into_iter()
            .map(|c| {
                (
                    c.type_,
                    c.status,
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default(),
                )
            })
            .collect::<Vec<_>>()
    };
    let api = namespaces.clone();
    eventually("the namespace reports its remaining content", async || {
        conditions(&api.get("t").await.unwrap()).len() == 5
    })
    .await;
    let c = conditions(&namespaces.get("t").await.unwrap());
    let s = |t: &str, st: &str, r: &str, m: &str| {
        (t.to_string(), st.to_string(), r.to_string(), m.to_string())
    };
    assert_eq!(
        c,
        [
            s("NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered", "All resources successfully discovered"),
            s("NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
            s("NamespaceDeletionContentFailure", "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
            s("NamespaceContentRemaining", "True", "SomeResourcesRemain", "Some resources are remaining: configmaps. has 1 resource instances"),
            s("NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"),
        ]
    );
    merge_patch(&cms, "held", json!({"metadata": {"finalizers": null}})).await;
    let api = namespaces.clone();
    eventually("the namespace goes once its content is gone", async || {
        api.get_opt("t").await.unwrap().is_none()
    })
    .await;
}
