//! A Service's cluster IP and node ports as the real server's allocators
//! hand them out, seen through the kube client: never one value to two
//! Services however many creates race, a requested value another Service
//! holds refused in the real server's words, and a value given up (the
//! Service deleted, or moved to another port) free for the next Service.
//! Wording: kubernetes `pkg/registry/core/service/storage/alloc.go`
//! (`failed to allocate IP %v: %v` on `spec.clusterIPs`) and
//! `ipallocator/interfaces.go` (`ErrAllocated`).

use std::collections::HashSet;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::common::{create, create_error, merge_patch, start};

fn node_port_service(name: &str, spec: serde_json::Value) -> Service {
    let mut s = json!({"metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80}]}});
    if let (Some(base), Some(extra)) = (s["spec"].as_object_mut(), spec.as_object()) {
        base.extend(extra.clone());
    }
    serde_json::from_value(s).unwrap()
}

fn cluster_ip(s: &Service) -> String {
    s.spec.as_ref().unwrap().cluster_ip.clone().unwrap()
}

fn node_port(s: &Service) -> i32 {
    s.spec.as_ref().unwrap().ports.as_ref().unwrap()[0]
        .node_port
        .unwrap()
}

#[tokio::test]
async fn concurrent_creates_never_hand_one_ip_or_node_port_to_two_services() {
    let (_s, client) = start().await;
    let api: Api<Service> = Api::namespaced(client, "default");
    // More Services than half the cluster IPs, all in flight at once.
    const N: usize = 150;
    let created: Vec<Service> = futures::stream::iter(0..N)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(
                    &PostParams::default(),
                    &node_port_service(&format!("s{i}"), json!({})),
                )
                .await
            }
        })
        .buffer_unordered(64)
        .try_collect()
        .await
        .unwrap();
    let ips: HashSet<String> = created.iter().map(cluster_ip).collect();
    let ports: HashSet<i32> = created.iter().map(node_port).collect();
    assert_eq!((ips.len(), ports.len()), (N, N));
}

#[tokio::test]
async fn a_requested_ip_or_node_port_another_service_holds_is_refused_in_the_real_servers_words() {
    let (_s, client) = start().await;
    let api: Api<Service> = Api::namespaced(client, "default");
    create(
        &api,
        &node_port_service(
            "first",
            json!({"clusterIP": "10.0.0.50", "ports": [{"port": 80, "nodePort": 30050}]}),
        ),
    )
    .await;
    let st = create_error(
        &api,
        &node_port_service("second", json!({"clusterIP": "10.0.0.50"})),
    )
    .await;
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            422,
            "Service \"second\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.0.0.50\"}: failed to allocate IP 10.0.0.50: provided IP is already allocated"
        )
    );
    let st = create_error(
        &api,
        &node_port_service("second", json!({"clusterIP": "10.1.0.7"})),
    )
    .await;
    assert_eq!(
        st.message,
        "Service \"second\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.1.0.7\"}: failed to allocate IP 10.1.0.7: provided IP 10.1.0.7 is not in the valid range"
    );
    assert!(api.get_opt("second").await.unwrap().is_none());
}

#[tokio::test]
async fn a_deleted_services_ip_and_node_port_go_to_the_next_service_that_asks() {
    let (_s, client) = start().await;
    let api: Api<Service> = Api::namespaced(client, "default");
    let wanted = json!({"clusterIP": "10.0.0.60", "ports": [{"port": 80, "nodePort": 30060}]});
    create(&api, &node_port_service("old", wanted.clone())).await;
    let st = create_error(&api, &node_port_service("new", wanted.clone())).await;
    assert_eq!(st.code, 422, "{}", st.message);
    api.delete("old", &DeleteParams::default()).await.unwrap();
    let new = create(&api, &node_port_service("new", wanted)).await;
    assert_eq!(
        (cluster_ip(&new).as_str(), node_port(&new)),
        ("10.0.0.60", 30060)
    );
}

#[tokio::test]
async fn a_node_port_an_update_gives_up_is_free_and_the_new_one_is_held() {
    let (_s, client) = start().await;
    let api: Api<Service> = Api::namespaced(client, "default");
    let on = |n: i32| json!({"ports": [{"port": 80, "protocol": "TCP", "nodePort": n}]});
    create(&api, &node_port_service("moves", on(30070))).await;
    merge_patch(&api, "moves", json!({"spec": on(30071)})).await;
    let taker = create(&api, &node_port_service("taker", on(30070))).await;
    assert_eq!(node_port(&taker), 30070);
    let st = create_error(&api, &node_port_service("late", on(30071))).await;
    assert_eq!(
        st.message,
        "Service \"late\" is invalid: spec.ports[0].nodePort: Invalid value: 30071: provided port is already allocated"
    );
}
