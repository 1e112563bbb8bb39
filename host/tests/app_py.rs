//! guest-app built in Python (`examples/guest-app-py`, componentize-py's
//! default build, which `make guest-py` writes once per run to
//! `target/guests-py/guest_app.wasm`) on the embedded API server beside the
//! Rust build: the same steps driven on two servers, one host each, and
//! after every step both have converged and hold the same world — every
//! App's generation, status (transition times aside, the two hosts' clocks
//! differ) and finalizers, every ConfigMap's data and owner references
//! (uids aside, each server makes its own). The compiled component is kept
//! in `target/guest-cache`, so it compiles once per digest, not per run.

use std::path::PathBuf;

use kube::api::DeleteParams;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::supervisor::SupervisorConfig;

use super::*;

/// The Python build of guest-app (`make guest-py`).
fn python_guest() -> PathBuf {
    let p = target_dir().join("guests-py/guest_app.wasm");
    assert!(
        p.exists(),
        "build the Python guest first: make guest-py ({} is missing)",
        p.display()
    );
    p
}

async fn start_python_host(client: &Client) -> RunningHost {
    let cache = target_dir().join("guest-cache");
    let config = SupervisorConfig {
        guests: vec![python_guest()],
        namespace: HOST_NS.into(),
        controller: wasmctrl::controller::ControllerConfig::default()
            .resync(Duration::from_secs(600)),
        runtime: RuntimeConfig::default().cache_dir(Some(cache)),
        ..SupervisorConfig::default()
    };
    run_host(client, config, None).await
}

/// Every App and ConfigMap of `namespaces`, uids and transition times
/// left out.
async fn world(client: &Client, namespaces: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for ns in namespaces {
        for app in apps(client, ns).list(&ListParams::default()).await.unwrap() {
            let mut status = app.data["status"].clone();
            if let Some(cs) = status["conditions"].as_array_mut() {
                cs.iter_mut()
                    .for_each(|c| c["lastTransitionTime"] = Value::Null);
            }
            let key = format!("app {ns}/{}", app.metadata.name.unwrap_or_default());
            out.insert(
                key,
                json!({"generation": app.metadata.generation, "spec": app.data["spec"],
                       "status": status, "finalizers": app.metadata.finalizers}),
            );
        }
        for cm in configmaps(client, ns)
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            let owners: Vec<Value> = cm
                .metadata
                .owner_references
                .unwrap_or_default()
                .into_iter()
                .map(|r| {
                    json!([
                        r.api_version,
                        r.kind,
                        r.name,
                        r.controller,
                        r.block_owner_deletion
                    ])
                })
                .collect();
            let key = format!("configmap {ns}/{}", cm.metadata.name.unwrap_or_default());
            out.insert(key, json!({"data": cm.data, "owners": owners}));
        }
    }
    Value::Object(out)
}

/// Both servers converged on `want` for each App of `converged`, and
/// gone for each of `gone`; then the same world.
async fn same_world(
    step: &str,
    clients: &[&Client; 2],
    converged: &[(&str, &[(&str, &str)])],
    gone: &[&str],
) {
    for client in clients {
        for (name, want) in converged {
            converges(client, PODS_NS, name, want).await;
        }
        for name in gone {
            let (api, cms) = (apps(client, PODS_NS), configmaps(client, PODS_NS));
            eventually(
                &format!("{step}: {name} and its child are gone"),
                || async {
                    api.get_opt(name).await.unwrap().is_none()
                        && cms.get_opt(name).await.unwrap().is_none()
                },
            )
            .await;
        }
    }
    let (rust, python) = (
        world(clients[0], &[PODS_NS]).await,
        world(clients[1], &[PODS_NS]).await,
    );
    assert_eq!(
        python, rust,
        "{step}: the Python build's world differs from the Rust build's"
    );
}

#[tokio::test]
async fn the_python_build_keeps_the_same_world_as_the_rust_build_at_every_step() {
    let (_rust_server, rust) = app_server().await;
    let (_python_server, python) = app_server().await;
    let rust_host = start_app_host(&rust, Duration::from_secs(600)).await;
    let python_host = start_python_host(&python).await;
    let clients = [&rust, &python];

    for c in clients {
        create_app(c, PODS_NS, "a1", "hello", 1).await;
        create_app(c, PODS_NS, "a2", "hi", 2).await;
    }
    let a1 = [("message", "hello"), ("replicas", "1")];
    let a2 = [("message", "hi"), ("replicas", "2")];
    same_world("create", &clients, &[("a1", &a1), ("a2", &a2)], &[]).await;

    for c in clients {
        set_banner(c, PODS_NS, "maintenance").await;
    }
    let a1 = [
        ("banner", "maintenance"),
        ("message", "hello"),
        ("replicas", "1"),
    ];
    let a2 = [
        ("banner", "maintenance"),
        ("message", "hi"),
        ("replicas", "2"),
    ];
    same_world(
        "shared settings",
        &clients,
        &[("a1", &a1), ("a2", &a2)],
        &[],
    )
    .await;

    for c in clients {
        edit_spec(c, PODS_NS, "a1", json!({"message": "bye", "replicas": 5})).await;
    }
    let a1 = [
        ("banner", "maintenance"),
        ("message", "bye"),
        ("replicas", "5"),
    ];
    same_world("spec edit", &clients, &[("a1", &a1), ("a2", &a2)], &[]).await;

    for c in clients {
        edit_child(c, PODS_NS, "a2", json!({"message": "by hand"})).await;
    }
    same_world("a person's edit of a child", &clients, &[("a2", &a2)], &[]).await;

    for c in clients {
        configmaps(c, PODS_NS)
            .delete("a1", &DeleteParams::default())
            .await
            .unwrap();
    }
    same_world("a child deleted", &clients, &[("a1", &a1)], &[]).await;

    for c in clients {
        apps(c, PODS_NS)
            .delete("a2", &DeleteParams::default())
            .await
            .unwrap();
    }
    same_world("an App deleted", &clients, &[("a1", &a1)], &["a2"]).await;

    let m = app_controller(&python_host).metrics().clone();
    assert_eq!(m.errors(), 0, "the Python guest's reconcile errors");
    assert_eq!(write_wars(&python_host), 0, "write wars");
    rust_host.stop().await.unwrap();
    python_host.stop().await.unwrap();
}
