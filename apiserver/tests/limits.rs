//! What one client can do to the server: nothing it sends may crash a
//! handler, freeze the runtime, hold a connection open for ever or make
//! the server keep unbounded memory. Bodies (size, nesting), grace
//! periods, TLS and header timeouts, watches whose clients stop reading,
//! history bounded by bytes, watches at future resourceVersions, and the
//! kubeconfig's file mode.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, WatchEvent, WatchParams};
use kube::Client;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wasmctrl_apiserver::{ApiServerConfig, RunningApiServer, User};

use crate::common::{bind, cm, create, eventually, next, start, start_with, status, WAIT};

/// A raw request through the kube client; the `Status` it failed with.
async fn refused(
    client: &Client,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> kube::core::Status {
    let req = axum::http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", content_type)
        .body(body)
        .unwrap();
    match client.request::<serde_json::Value>(req).await {
        Err(e) => status(e),
        Ok(v) => panic!(
            "expected a failure, got {}",
            v.to_string().chars().take(200).collect::<String>()
        ),
    }
}

/// A TLS connection to the server that trusts its CA, nothing sent yet.
async fn tls(server: &RunningApiServer) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(server.ca_pem().as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(server.addr()).await.unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// True once the peer closed (EOF or reset) within [`WAIT`].
async fn closed_by_server(mut read: impl AsyncReadExt + Unpin) -> bool {
    let mut buf = [0u8; 1024];
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    ended.is_ok()
}

#[tokio::test]
async fn a_huge_grace_period_neither_panics_nor_stores_an_unparseable_timestamp() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for (name, grace) in [
        ("p1", 1_000_000_000_000u64),
        ("p2", 9_223_372_036_854_775_807),
    ] {
        create(&pods, &crate::common::pod(name, json!({}))).await;
        bind(&pods, name, "n1").await;
        // kube's DeleteParams holds a u32: send the value by hand.
        let req = axum::http::Request::builder()
            .method("DELETE")
            .uri(format!("/api/v1/namespaces/default/pods/{name}"))
            .header("content-type", "application/json")
            .body(
                json!({"gracePeriodSeconds": grace})
                    .to_string()
                    .into_bytes(),
            )
            .unwrap();
        let deleted: serde_json::Value = client.request(req).await.unwrap();
        assert_eq!(
            deleted["metadata"]["deletionTimestamp"], "9999-12-30T22:00:00Z",
            "saturated at the latest instant clients can parse"
        );
        // The typed client parses what is stored.
        let pod = pods.get(name).await.unwrap();
        assert!(pod.metadata.deletion_timestamp.is_some());
        // and it can still be removed for good
        pods.delete(name, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
}

/// A DELETE of `/api/v1/namespaces/default/pods/{name}` with `query` and
/// `body`, as a raw request (kube's DeleteParams cannot send these).
async fn delete_raw(
    client: &Client,
    name: &str,
    query: &str,
    body: &str,
) -> Result<serde_json::Value, kube::core::Status> {
    let req = axum::http::Request::builder()
        .method("DELETE")
        .uri(format!("/api/v1/namespaces/default/pods/{name}{query}"))
        .header("content-type", "application/json")
        .body(body.as_bytes().to_vec())
        .unwrap();
    client.request(req).await.map_err(status)
}

#[tokio::test]
async fn delete_options_come_from_the_query_without_a_body_and_bad_values_are_400() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    create(&pods, &crate::common::pod("q", json!({}))).await;
    bind(&pods, "q", "n1").await;
    // `?gracePeriodSeconds=0` and no body: gone at once, as on a real
    // server (the pod's own 30 s would otherwise apply).
    delete_raw(&client, "q", "?gracePeriodSeconds=0", "")
        .await
        .unwrap();
    eventually("pod q deleted at once", async || {
        pods.get_opt("q").await.unwrap().is_none()
    })
    .await;
    // With a body, the body's options are the request's: the query is not read.
    create(&pods, &crate::common::pod("b", json!({}))).await;
    bind(&pods, "b", "n1").await;
    let kept = delete_raw(
        &client,
        "b",
        "?gracePeriodSeconds=0",
        r#"{"gracePeriodSeconds": 40}"#,
    )
    .await
    .unwrap();
    assert_eq!(kept["metadata"]["deletionGracePeriodSeconds"], 40);
    // Values that are no int64 are refused, nothing changed.
    create(&pods, &crate::common::pod("bad", json!({}))).await;
    bind(&pods, "bad", "n1").await;
    for (query, body) in [
        ("?gracePeriodSeconds=soon", ""),
        ("?gracePeriodSeconds=99999999999999999999", ""),
        ("?orphanDependents=maybe", ""),
        ("", r#"{"gracePeriodSeconds": 99999999999999999999}"#),
        ("", r#"{"gracePeriodSeconds": 2.5}"#),
        ("", r#"{"gracePeriodSeconds": "10"}"#),
    ] {
        let s = delete_raw(&client, "bad", query, body).await.unwrap_err();
        assert_eq!(
            (s.code, s.reason.as_str()),
            (400, "BadRequest"),
            "{query} {body}: {}",
            s.message
        );
        let pod = pods.get("bad").await.unwrap();
        assert!(pod.metadata.deletion_timestamp.is_none(), "{query} {body}");
    }
}

#[tokio::test]
async fn bodies_over_3_mib_get_413_before_anything_parses_them() {
    let (_s, client) = start().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let padding = "x".repeat(3 * 1024 * 1024);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
        "data": {"a": padding}})
    .to_string();
    let s = refused(&client, path, "application/json", body.into_bytes()).await;
    assert_eq!((s.code, s.reason.as_str()), (413, "RequestEntityTooLarge"));
    assert_eq!(s.message, "Request entity too large: limit is 3145728");
    // The limit is a knob.
    let (_s, client) = start_with(ApiServerConfig::default().max_request_body_bytes(1024)).await;
    let body = serde_json::to_vec(&cm("c", json!({"a": "x".repeat(2000)}))).unwrap();
    let s = refused(&client, path, "application/json", body).await;
    assert_eq!(s.code, 413);
}

#[tokio::test]
async fn deeply_nested_bodies_are_refused_before_parsing_for_any_token() {
    let (server, _client) = start().await;
    // A user with no rules may still ask self access reviews.
    server.add_token("nobody", User::with_rules("nobody", Vec::new()));
    let client = server.client_for_token("nobody").await.unwrap();
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    for depth in [128, 10_001, 100_000] {
        let body = "[".repeat(depth) + &"]".repeat(depth);
        for ct in ["application/yaml", "application/json"] {
            let s = refused(&client, path, ct, body.clone().into_bytes()).await;
            assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{ct}");
            assert!(
                s.message.contains("exceeded max depth of 127"),
                "{ct}: {}",
                s.message
            );
        }
    }
    // The server stays responsive.
    assert!(server
        .client()
        .await
        .unwrap()
        .apiserver_version()
        .await
        .is_ok());
}

#[tokio::test]
async fn a_connection_that_never_completes_the_tls_handshake_is_closed() {
    let (server, _client) =
        start_with(ApiServerConfig::default().tls_handshake_timeout(Duration::from_millis(200)))
            .await;
    let tcp = TcpStream::connect(server.addr()).await.unwrap();
    assert!(closed_by_server(tcp).await, "still open after {WAIT:?}");
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let (server, _client) =
        start_with(ApiServerConfig::default().header_read_timeout(Duration::from_millis(200)))
            .await;
    let mut conn = tls(&server).await;
    conn.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    conn.flush().await.unwrap();
    assert!(closed_by_server(conn).await, "still open after {WAIT:?}");
}

/// Opens a watch of configmaps in `default` over a raw connection and
/// never reads its response.
async fn unread_watch(
    server: &RunningApiServer,
    query: &str,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut conn = tls(server).await;
    let req = format!(
        "GET /api/v1/namespaces/default/configmaps?watch=true{query} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\r\n",
        server.admin_token()
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    conn.flush().await.unwrap();
    conn
}

/// Writes changes of about 100 KB each until `done` holds (at most 2,000).
async fn write_until(client: &Client, what: &str, mut done: impl AsyncFnMut() -> bool) {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let fill = "y".repeat(100_000);
    for i in 0..2_000 {
        if done().await {
            return;
        }
        let name = format!("c{}", i % 20);
        let _ = cms.delete(&name, &DeleteParams::default()).await;
        create(&cms, &cm(&name, json!({"a": fill}))).await;
    }
    panic!("{what}");
}

#[tokio::test]
async fn a_watch_whose_client_never_reads_still_ends_at_its_timeout() {
    let (server, client) = start_with(
        // so only the timeout can end it
        ApiServerConfig::default().watch_send_deadline(Duration::from_secs(3600)),
    )
    .await;
    let before = server.change_subscribers();
    let _held = unread_watch(&server, "&timeoutSeconds=1").await;
    eventually("the watch subscribed", async || {
        server.change_subscribers() > before
    })
    .await;
    write_until(
        &client,
        "the watch outlived its timeoutSeconds",
        async || server.change_subscribers() == before,
    )
    .await;
}

#[tokio::test]
async fn a_watch_whose_client_stops_reading_is_cut_off_and_lets_go_of_the_history() {
    let (server, client) =
        start_with(ApiServerConfig::default().watch_send_deadline(Duration::from_millis(300)))
            .await;
    let before = server.change_subscribers();
    let _held = unread_watch(&server, "").await;
    eventually("the watch subscribed", async || {
        server.change_subscribers() > before
    })
    .await;
    write_until(&client, "the stalled watch was never cut off", async || {
        server.change_subscribers() == before
    })
    .await;
    // Watches of clients that read are unaffected.
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut events = crate::common::watch(&cms, &WatchParams::default(), "0").await;
    create(&cms, &cm("after", json!({}))).await;
    loop {
        if let WatchEvent::Added(c) = next(&mut events).await {
            if c.metadata.name.as_deref() == Some("after") {
                break;
            }
        }
    }
}

#[tokio::test]
async fn history_is_bounded_by_bytes_and_older_watches_get_410() {
    let (server, client) = start_with(ApiServerConfig::default().history_bytes(1024 * 1024)).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let start_rv = crate::common::list_rv(&cms).await;
    let fill = "z".repeat(200_000);
    for i in 0..20 {
        create(&cms, &cm(&format!("c{i}"), json!({"a": fill}))).await;
        assert!(
            server.history_bytes() <= 1024 * 1024,
            "{}",
            server.history_bytes()
        );
    }
    let mut events = crate::common::watch(&cms, &WatchParams::default(), &start_rv).await;
    match next(&mut events).await {
        WatchEvent::Error(e) => assert_eq!(e.code, 410, "{e:?}"),
        other => panic!("expected 410 Gone, got {other:?}"),
    }
}

#[tokio::test]
async fn initial_events_at_a_future_resource_version_time_out_with_504() {
    let (server, client) = start_with(
        ApiServerConfig::default().too_large_resource_version_wait(Duration::from_millis(200)),
    )
    .await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let future = server.current_resource_version() + 1000;
    let wp = WatchParams::streaming_lists();
    let mut events = crate::common::watch(&cms, &wp, &future.to_string()).await;
    match next(&mut events).await {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
            assert_eq!(
                e.message,
                format!(
                    "Timeout: Too large resource version: {future}, current: {}",
                    server.current_resource_version()
                )
            );
        }
        other => panic!("expected 504, got {other:?}"),
    }
}

#[tokio::test]
async fn initial_events_wait_for_a_resource_version_the_store_reaches() {
    let (server, client) = start_with(
        ApiServerConfig::default().too_large_resource_version_wait(Duration::from_secs(3600)),
    )
    .await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let next_rv = server.current_resource_version() + 1;
    let wp = WatchParams::streaming_lists();
    let mut events = crate::common::watch(&cms, &wp, &next_rv.to_string()).await;
    create(&cms, &cm("a", json!({}))).await;
    match next(&mut events).await {
        WatchEvent::Added(c) => assert_eq!(c.metadata.name.as_deref(), Some("a")),
        other => panic!("expected the initial ADDED, got {other:?}"),
    }
}

#[cfg(unix)]
#[tokio::test]
async fn the_kubeconfig_is_written_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (server, _client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, "old").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    server.write_kubeconfig(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains(server.admin_token()));
    let fresh = dir.path().join("fresh");
    server.write_kubeconfig(&fresh).unwrap();
    assert_eq!(
        std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[tokio::test]
async fn a_watch_with_an_enormous_timeout_still_streams() {
    let (server, client) = start().await;
    let mut conn = unread_watch(&server, &format!("&timeoutSeconds={}", u64::MAX)).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    create(&cms, &cm("seen", json!({}))).await;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let found = tokio::time::timeout(WAIT, async {
        while !String::from_utf8_lossy(&got).contains("\"seen\"") {
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "the watch ended: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    assert!(found.is_ok(), "{}", String::from_utf8_lossy(&got));
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
}

/// The first bytes the server sends on `conn` (its status line at least).
async fn first_bytes(conn: &mut tokio_rustls::client::TlsStream<TcpStream>) -> String {
    let mut buf = [0u8; 256];
    let n = conn.read(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

// One runtime worker serves everything; the test's own connections are
// driven from the test's thread. A body decoded on that worker would stall
// /readyz until it is done; decoded on the blocking pool, it cannot.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn readyz_answers_while_a_slow_body_is_being_decoded() {
    let (server, _client) = start().await;
    server.add_token("nobody", User::with_rules("nobody", Vec::new()));
    // Under the size and nesting limits (2.8 MB, depth 1), and a second or
    // more of YAML scanning in a debug build.
    let body = format!("[{}1]", "1,".repeat(1_400_000));
    let mut slow = tls(&server).await;
    let req = format!(
        "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer nobody\r\nContent-Type: application/yaml\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    slow.write_all(req.as_bytes()).await.unwrap();
    slow.flush().await.unwrap();
    let mut ready = tls(&server).await;
    ready
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    ready.flush().await.unwrap();
    tokio::select! {
        biased;
        r = first_bytes(&mut ready) => assert!(r.starts_with("HTTP/1.1 200"), "{r}"),
        s = first_bytes(&mut slow) => panic!("the slow body was answered before /readyz: {s}"),
    }
    // and the slow body gets its answer too
    let s = tokio::time::timeout(WAIT * 6, first_bytes(&mut slow))
        .await
        .unwrap();
    assert!(s.starts_with("HTTP/1.1 400"), "{s}");
}

#[tokio::test]
async fn a_watch_stuck_in_its_initial_events_does_not_hold_later_changes() {
    let (server, client) = start_with(
        // so only the bound on held changes can end it
        ApiServerConfig::default().watch_send_deadline(Duration::from_secs(3600)),
    )
    .await;
    // More initial events than the watch's buffer and the socket hold.
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let fill = "w".repeat(100_000);
    for i in 0..250 {
        create(&cms, &cm(&format!("init{i}"), json!({"a": fill}))).await;
    }
    let before = server.change_subscribers();
    let _held = unread_watch(&server, "").await;
    eventually("the watch subscribed", async || {
        server.change_subscribers() > before
    })
    .await;
    write_until(
        &client,
        "the stuck watch kept every later change",
        async || server.change_subscribers() == before,
    )
    .await;
}
