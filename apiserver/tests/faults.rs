//! Fault injection as a client meets it: injected 429/500/409/503 answers
//! (and kube's retries of them), denied verbs, latency, dropped watches,
//! listener restarts that keep the state, and the admin endpoint that
//! injects the same faults over HTTP for admin tokens only.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! (kube's typed calls, raw requests where kube has none) and never
//! reaches into the server's internals beyond its fault handle.

use std::time::{Duration, Instant};

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, Error};
use serde_json::json;
use wasmctrl_apiserver::{ApiServerConfig, FailRequests, Rule, User};

use crate::common::{
    client_without_retries, cm, create, create_error, list_rv, next, next_or_end, start,
    start_with, status, watch, WAIT,
};

#[tokio::test]
async fn injected_429_is_retried_by_kube_after_retry_after() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    server.faults().fail(
        FailRequests::new(429, 1)
            .verb("list")
            .resource("configmaps")
            .retry_after(1),
    );
    let started = Instant::now();
    cms.list(&ListParams::default()).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "Retry-After was honoured"
    );
    assert_eq!(server.faults().injected_failures(), 1);
}

#[tokio::test]
async fn injected_500_and_409_reach_the_client_once() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    server
        .faults()
        .fail(FailRequests::new(500, 1).verb("create"));
    let e = create_error(&cms, &cm("a", json!({}))).await;
    assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"));
    create(&cms, &cm("a", json!({}))).await;
    server
        .faults()
        .fail(FailRequests::new(409, 1).verb("update"));
    let cur = cms.get("a").await.unwrap();
    let e = status(
        cms.replace("a", &PostParams::default(), &cur)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    cms.replace("a", &PostParams::default(), &cur)
        .await
        .unwrap();
}

#[tokio::test]
async fn injected_503_is_retried_by_default_and_surfaces_without_retries() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    create(&cms, &cm("x", json!({}))).await;
    server
        .faults()
        .fail(FailRequests::new(503, 2).verb("get").retry_after(0));
    cms.get("x").await.unwrap();
    assert_eq!(
        server.faults().injected_failures(),
        2,
        "both 503s were retried"
    );

    let no_retry: Api<ConfigMap> =
        Api::namespaced(client_without_retries(&server).await, "default");
    server.faults().fail(FailRequests::new(503, 1).verb("get"));
    let e = status(no_retry.get("x").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (503, "ServiceUnavailable"));
    assert_eq!(server.faults().injected_failures(), 3);
}

#[tokio::test]
async fn denied_verb_and_latency_faults_are_observed() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    server.faults().deny_verb("delete");
    create(&cms, &cm("a", json!({}))).await;
    let e = status(cms.delete("a", &DeleteParams::default()).await.unwrap_err());
    assert_eq!(e.code, 403);
    assert!(e.message.contains("cannot delete resource \"configmaps\""));
    server.faults().set_latency(Duration::from_millis(300));
    let started = Instant::now();
    cms.get("a").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    server.faults().clear();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn listener_restart_keeps_state_and_ends_open_watches() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&cms, &cm("kept", json!({}))).await;
    let rv = list_rv(&cms).await;
    let mut stream = watch(&cms, &WatchParams::default().timeout(30), &rv).await;
    server.stop_listener().await.unwrap();
    let ended = tokio::time::timeout(WAIT, stream.try_next()).await.unwrap();
    assert!(
        !matches!(ended, Ok(Some(_))),
        "watch ended when the listener stopped"
    );
    assert!(cms.get("kept").await.is_err(), "no server while stopped");
    server.restart_listener().await.unwrap();
    let fresh = server.client().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(fresh, "default");
    assert!(cms.get("kept").await.is_ok());
}

#[tokio::test]
async fn dropped_watch_ends_the_stream() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let rv = list_rv(&cms).await;
    let mut stream = watch(&cms, &WatchParams::default().timeout(30), &rv).await;
    // The watch is live (not merely accepted) once it delivers a change
    // made after it started; only then can a drop end it.
    create(&cms, &cm("seen", json!({}))).await;
    assert!(matches!(next(&mut stream).await, WatchEvent::Added(_)));
    server.faults().drop_watches();
    let ended = next_or_end(&mut stream).await;
    assert!(ended.is_none());
}

async fn post_fault(client: &Client, body: serde_json::Value) -> Result<serde_json::Value, Error> {
    let req = axum::http::Request::post("/wasmctrl/faults")
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap();
    client.request::<serde_json::Value>(req).await
}

#[tokio::test]
async fn admin_fault_endpoint_injects_failures_and_restarts_the_listener() {
    let (server, client) = start_with(
        ApiServerConfig::default().token("user", User::with_rules("user", vec![Rule::all()])),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&cms, &cm("kept", json!({}))).await;

    let user = server.client_for_token("user").await.unwrap();
    let e = status(
        post_fault(&user, json!({"action": "drop-watches"}))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403, "only admin tokens may inject faults");

    let ok = post_fault(
        &client,
        json!({"action": "fail", "verb": "get", "resource": "configmaps", "count": 1, "code": 500}),
    )
    .await
    .unwrap();
    assert_eq!(ok["status"], "Success");
    assert_eq!(status(cms.get("kept").await.unwrap_err()).code, 500);
    assert!(cms.get("kept").await.is_ok());

    post_fault(
        &client,
        json!({"action": "restart-listener", "down_millis": 400}),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + WAIT;
    let mut was_down = false;
    loop {
        assert!(
            Instant::now() < deadline,
            "listener never came back (down seen: {was_down})"
        );
        let fresh = server.client().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(fresh, "default");
        match api.get("kept").await {
            Ok(_) if was_down => break,
            Ok(_) => {}
            Err(Error::Api(s)) => panic!("unexpected API error {s:?}"),
            Err(_) => was_down = true,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
