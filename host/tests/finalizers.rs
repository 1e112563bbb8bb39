//! Contract 0.2 writes against the embedded API server over real HTTPS: a
//! finalizer-holding custom resource (status subresource) reconciled by a
//! `.wat` guest — the host adds the finalizer, the guest's plan writes
//! status through `/status` and releases the finalizer once the deletion
//! timestamp appears (also after a host restart in the middle of a
//! deletion), and no write ever resurrects a deleted object.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams, WatchEvent, WatchParams};
use kube::Client;
use serde_json::json;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::WriteVerb;
use wasmctrl::supervisor::SupervisorConfig;

use crate::support::wat::{
    guest, Behaviour, WatKeys, WatManifest, WatRef, WatRule, WatWatch, WatWrite,
};
use crate::support::widget::{install_widget_crd, widgets};
use crate::support::*;

const FINALIZER: &str = "example.com/cleanup";
const NAME: &str = "z";

/// The widget controller: per-object keys with a host-managed finalizer;
/// status "Seen" while the widget lives; status "Cleaning" and the
/// finalizer released once it is being deleted.
fn widget_guest() -> Vec<u8> {
    selected_widget_guest(None)
}

/// [`widget_guest`], watching only the widgets `label_selector` selects.
fn selected_widget_guest(label_selector: Option<&str>) -> Vec<u8> {
    let m = WatManifest {
        name: "widgets".into(),
        watches: vec![WatWatch {
            label_selector: label_selector.map(str::to_string),
            ..WatWatch::widgets("widgets", WatKeys::PerObject, Some(FINALIZER))
        }],
        writes: vec![WatRule::widget_status()],
    };
    let status = |phase: &str| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": NAME, "namespace": PODS_NS},
               "status": {"phase": phase}})
        .to_string()
    };
    let target = WatRef {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        namespace: Some(PODS_NS.into()),
        name: NAME.into(),
    };
    guest(
        &m,
        Behaviour::ByLifecycle {
            live: vec![WatWrite::ApplyStatus(status("Seen"))],
            deleting: vec![
                WatWrite::ApplyStatus(status("Cleaning")),
                WatWrite::RemoveFinalizer(target, FINALIZER.into()),
            ],
        },
    )
}

async fn start_widget_host(client: &Client, dir: &std::path::Path) -> RunningHost {
    let path = dir.join("widgets.wasm");
    std::fs::write(&path, widget_guest()).unwrap();
    let config = SupervisorConfig {
        guests: vec![path],
        namespace: HOST_NS.into(),
        controller: ControllerConfig::default(),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    };
    run_host(client, config, None).await
}

fn widget(cycle: u32) -> DynamicObject {
    crate::support::widget::widget(NAME, cycle)
}

#[tokio::test]
async fn the_host_adds_the_finalizer_the_plan_writes_status_and_releases_it_on_deletion() {
    let (_server, client) = server().await;
    install_widget_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let host = start_widget_host(&client, dir.path()).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), PODS_NS, &widgets());
    api.create(&PostParams::default(), &widget(0))
        .await
        .unwrap();
    eventually(
        "finalizer added and status written through /status",
        || async {
            let Some(w) = api.get_opt(NAME).await.unwrap() else {
                return false;
            };
            w.metadata.finalizers.unwrap_or_default() == [FINALIZER]
                && w.data["status"]["phase"] == "Seen"
        },
    )
    .await;
    api.delete(NAME, &DeleteParams::default()).await.unwrap();
    eventually(
        "the plan releases the finalizer and the widget goes",
        || async { api.get_opt(NAME).await.unwrap().is_none() },
    )
    .await;
    let metrics = host.controller().metrics().clone();
    assert!(metrics.written(WriteVerb::AddFinalizer) >= 1);
    assert!(metrics.written(WriteVerb::ApplyStatus) >= 1);
    // Gone once the server applied the patch, maybe before the host read
    // the answer and counted it.
    eventually("the finalizer removal is counted", || async {
        metrics.written(WriteVerb::RemoveFinalizer) >= 1
    })
    .await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_deletion_begun_while_the_host_is_down_is_finished_by_the_next_host() {
    let (_server, client) = server().await;
    install_widget_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), PODS_NS, &widgets());
    let host = start_widget_host(&client, dir.path()).await;
    api.create(&PostParams::default(), &widget(0))
        .await
        .unwrap();
    eventually("the host added its finalizer", || async {
        api.get_opt(NAME)
            .await
            .unwrap()
            .is_some_and(|w| w.metadata.finalizers.unwrap_or_default() == [FINALIZER])
    })
    .await;
    host.stop().await.unwrap();
    api.delete(NAME, &DeleteParams::default()).await.unwrap();
    stays_for(
        Duration::from_millis(500),
        "the finalizer holds the widget",
        || async {
            api.get_opt(NAME)
                .await
                .unwrap()
                .is_some_and(|w| w.metadata.deletion_timestamp.is_some())
        },
    )
    .await;
    let host = start_widget_host(&client, dir.path()).await;
    eventually(
        "the restarted host lets the guest finish the deletion",
        || async { api.get_opt(NAME).await.unwrap().is_none() },
    )
    .await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn fifty_rapid_create_delete_cycles_leave_zero_zombies() {
    let (_server, client) = server().await;
    install_widget_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), PODS_NS, &widgets());
    // Every object that ever exists is seen by this watch: each one the
    // test created carries spec.cycle; a zombie (made by a late write)
    // would not.
    let mut events = api
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    let host = start_widget_host(&client, dir.path()).await;
    const CYCLES: u32 = 50;
    for cycle in 0..CYCLES {
        loop {
            match api.create(&PostParams::default(), &widget(cycle)).await {
                Ok(_) => break,
                // The previous incarnation is still finalizing.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(e) => panic!("create {cycle}: {e}"),
            }
        }
        api.delete(NAME, &DeleteParams::default()).await.unwrap();
    }
    eventually("the last widget is gone", || async {
        api.get_opt(NAME).await.unwrap().is_none()
    })
    .await;
    stays_for(Duration::from_secs(1), "no widget comes back", || async {
        api.get_opt(NAME).await.unwrap().is_none()
    })
    .await;
    assert_one_creation_per_cycle(&mut events, CYCLES).await;
    let metrics = host.controller().metrics().clone();
    eprintln!(
        "dropped writes: status {}, remove-finalizer {}, add-finalizer {}",
        metrics.dropped(WriteVerb::ApplyStatus),
        metrics.dropped(WriteVerb::RemoveFinalizer),
        metrics.dropped(WriteVerb::AddFinalizer)
    );
    host.stop().await.unwrap();
}

/// Reads the widget watch's `Added` events: exactly one per cycle, each one
/// a widget the test created (a zombie made by a late write has no
/// `spec.cycle`).
async fn assert_one_creation_per_cycle(
    events: &mut (impl futures::Stream<Item = Result<WatchEvent<DynamicObject>, kube::Error>> + Unpin),
    cycles: u32,
) {
    let mut added = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while added.len() < cycles as usize + 1 {
        let next = tokio::time::timeout_at(deadline, events.next()).await;
        let Ok(Some(event)) = next else { break };
        if let WatchEvent::Added(w) = event.unwrap() {
            added.push(w.data["spec"]["cycle"].clone());
        }
    }
    let zombies: Vec<_> = added.iter().filter(|c| c.is_null()).collect();
    assert!(
        zombies.is_empty(),
        "objects created by a late write: {zombies:?}"
    );
    assert_eq!(
        added.len(),
        cycles as usize,
        "one creation per cycle: {added:?}"
    );
}

/// Each widget lives long enough for the host to add its finalizer, so every
/// deletion goes through the guest's clean-up (status "Cleaning", then the
/// finalizer released) and the next widget is created the moment the last
/// one is gone: the late writes of a finished clean-up must never bring it
/// back.
#[tokio::test]
async fn cycles_that_finalize_through_the_guest_leave_zero_zombies() {
    let (_server, client) = server().await;
    install_widget_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), PODS_NS, &widgets());
    let mut events = api
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    let host = start_widget_host(&client, dir.path()).await;
    const CYCLES: u32 = 20;
    for cycle in 0..CYCLES {
        api.create(&PostParams::default(), &widget(cycle))
            .await
            .unwrap_or_else(|e| panic!("create {cycle}: {e}"));
        eventually("the host adds its finalizer", || async {
            api.get_opt(NAME).await.unwrap().is_some_and(|w| {
                w.metadata
                    .finalizers
                    .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
            })
        })
        .await;
        api.delete(NAME, &DeleteParams::default()).await.unwrap();
        eventually("the guest's clean-up releases the widget", || async {
            api.get_opt(NAME).await.unwrap().is_none()
        })
        .await;
    }
    stays_for(Duration::from_secs(1), "no widget comes back", || async {
        api.get_opt(NAME).await.unwrap().is_none()
    })
    .await;
    assert_one_creation_per_cycle(&mut events, CYCLES).await;
    let metrics = host.controller().metrics().clone();
    // A widget is gone once the server applied the patch, which can be
    // before the host has read the answer and counted the write.
    eventually(
        "every deletion was finished by the guest's plan (finalizer removals counted)",
        || async { metrics.written(WriteVerb::RemoveFinalizer) >= u64::from(CYCLES) },
    )
    .await;
    host.stop().await.unwrap();
}

/// The widget controller with a child: while the widget lives it applies
/// a ConfigMap `z-child`; once it is being deleted it deletes the child
/// and releases the finalizer.
fn widget_with_child_guest() -> Vec<u8> {
    let m = WatManifest {
        name: "widgets".into(),
        watches: vec![WatWatch::widgets(
            "widgets",
            WatKeys::PerObject,
            Some(FINALIZER),
        )],
        writes: vec![WatRule {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(PODS_NS.into()),
            names: Vec::new(),
            status: false,
        }],
    };
    let child = WatRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some(PODS_NS.into()),
        name: "z-child".into(),
    };
    let target = WatRef {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        namespace: Some(PODS_NS.into()),
        name: NAME.into(),
    };
    guest(
        &m,
        Behaviour::ByLifecycle {
            live: vec![WatWrite::Apply(crate::support::wat::configmap_doc(
                PODS_NS,
                "z-child",
                &[("of", NAME)],
            ))],
            deleting: vec![
                WatWrite::Delete(child),
                WatWrite::RemoveFinalizer(target, FINALIZER.into()),
            ],
        },
    )
}

async fn start_child_host(client: &Client, dir: &std::path::Path) -> RunningHost {
    let path = dir.join("widgets.wasm");
    std::fs::write(&path, widget_with_child_guest()).unwrap();
    let config = SupervisorConfig {
        guests: vec![path],
        namespace: HOST_NS.into(),
        controller: ControllerConfig::default(),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    };
    run_host(client, config, None).await
}

#[tokio::test]
async fn a_refused_finalizer_add_is_not_followed_by_a_reconcile_on_the_stale_cache() {
    let (server, client) = server().await;
    install_widget_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let host = start_child_host(&client, dir.path()).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), PODS_NS, &widgets());
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), PODS_NS);
    // The finalizer patch answers 404, as when the widget was deleted
    // before it landed; the cache still holds the widget.
    let faults = server.faults();
    faults.fail(
        wasmctrl_apiserver::FailRequests::new(404, 1)
            .verb("patch")
            .resource("widgets"),
    );
    api.create(&PostParams::default(), &widget(0))
        .await
        .unwrap();
    eventually("the finalizer patch was refused", || async {
        faults.injected_failures() == 1
    })
    .await;
    api.delete(NAME, &DeleteParams::default()).await.unwrap();
    stays_for(
        Duration::from_secs(1),
        "no child is created for the gone widget",
        || async { cms.get_opt("z-child").await.unwrap().is_none() },
    )
    .await;
    assert!(api.get_opt(NAME).await.unwrap().is_none());
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_primary_deleted_before_its_finalizer_lands_gets_no_child() {
    let (_server, client) = server().await;
    install_widget_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let host = start_child_host(&client, dir.path()).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), PODS_NS, &widgets());
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), PODS_NS);
    // Create/delete races 0-60 ms apart: the delete often lands before the
    // host's finalizer does.
    for i in 0..30u64 {
        let _ = api.create(&PostParams::default(), &widget(0)).await;
        tokio::time::sleep(Duration::from_millis((i * 7) % 61)).await;
        let _ = api.delete(NAME, &DeleteParams::default()).await;
        eventually("the widget is gone", || async {
            api.get_opt(NAME).await.unwrap().is_none()
        })
        .await;
    }
    let metrics = host.controller().metrics().clone();
    eventually("the host is idle", || async {
        idle(&host.controller(), host.metrics.as_ref().unwrap())
    })
    .await;
    stays_for(
        Duration::from_millis(800),
        "no widget and no child is left behind",
        || async {
            api.get_opt(NAME).await.unwrap().is_none()
                && cms.get_opt("z-child").await.unwrap().is_none()
        },
    )
    .await;
    assert!(metrics.reconciles() > 0);
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_primary_leaving_the_watchs_selector_has_the_hosts_finalizer_released() {
    let (_server, client) = server().await;
    install_widget_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("widgets.wasm");
    std::fs::write(&path, selected_widget_guest(Some("managed=yes"))).unwrap();
    let config = SupervisorConfig {
        guests: vec![path],
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    };
    let host = run_host(&client, config, None).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), PODS_NS, &widgets());
    let mut managed = widget(0);
    managed.metadata.labels = Some([("managed".to_string(), "yes".to_string())].into());
    api.create(&PostParams::default(), &managed).await.unwrap();
    let finalizers = || async {
        api.get_opt(NAME)
            .await
            .unwrap()
            .map(|w| w.metadata.finalizers.unwrap_or_default())
    };
    eventually("the host added its finalizer", || async {
        finalizers().await == Some(vec![FINALIZER.to_string()])
    })
    .await;
    // A person takes the widget out of the controller's hands: no watch of
    // this host will ever see it again, so nothing could release the
    // finalizer when the widget is deleted. The host releases it now.
    let unmanage = json!({"metadata": {"labels": {"managed": "no"}}});
    api.patch(
        NAME,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&unmanage),
    )
    .await
    .unwrap();
    eventually("the finalizer released", || async {
        finalizers().await == Some(Vec::new())
    })
    .await;
    api.delete(NAME, &DeleteParams::default()).await.unwrap();
    eventually("deleted, not stuck terminating", || async {
        api.get_opt(NAME).await.unwrap().is_none()
    })
    .await;
    let metrics = host.controller().metrics().clone();
    assert!(metrics.written(WriteVerb::RemoveFinalizer) >= 1, "counted");
    assert_eq!(metrics.errors(), 0);
    host.stop().await.unwrap();
}
