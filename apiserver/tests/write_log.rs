//! The write log (`ApiServerConfig::write_log`): every stored write, in the
//! store's order, with who sent it (`User-Agent`, user); what stores
//! nothing (a no-op patch, a read, a refused write) is not in it; off by
//! default.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use wasmctrl_apiserver::{ApiServerConfig, RunningApiServer};

use crate::common::{cm, start, start_with};

/// An admin client whose requests carry `User-Agent: agent`.
async fn client_as(server: &RunningApiServer, agent: &str) -> Client {
    let mut config = server
        .kube_config_for_token(server.admin_token())
        .await
        .unwrap();
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(agent).unwrap(),
    ));
    Client::try_from(config).unwrap()
}

#[tokio::test]
async fn every_stored_write_is_logged_with_its_sender_and_nothing_else() {
    let (server, _) = start_with(ApiServerConfig::default().write_log(true)).await;
    let log = server.write_log();
    let base = log.len();
    let a: Api<ConfigMap> = Api::namespaced(client_as(&server, "one/1 (r-a)").await, "default");
    let b: Api<ConfigMap> = Api::namespaced(client_as(&server, "one/1 (r-b)").await, "default");
    let created = a
        .create(&PostParams::default(), &cm("c", json!({"k": "1"})))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({"data": {"k": "2"}}));
    let patched = b.patch("c", &PatchParams::default(), &patch).await.unwrap();
    // Nothing changes: no new version, nothing logged.
    b.patch("c", &PatchParams::default(), &patch).await.unwrap();
    a.get("c").await.unwrap();
    // Refused: nothing stored.
    a.create(&PostParams::default(), &cm("c", json!({})))
        .await
        .unwrap_err();
    let records: Vec<_> = log.records().into_iter().skip(base).collect();
    let seen: Vec<(&str, &str, &str, u64)> = records
        .iter()
        .map(|r| {
            (
                r.user_agent.as_str(),
                r.resource.as_str(),
                r.name.as_str(),
                r.rv,
            )
        })
        .collect();
    let rv = |c: &ConfigMap| {
        c.metadata
            .resource_version
            .clone()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        seen,
        vec![
            ("one/1 (r-a)", "configmaps", "c", rv(&created)),
            ("one/1 (r-b)", "configmaps", "c", rv(&patched)),
        ]
    );
    assert!(records
        .iter()
        .all(|r| r.namespace == "default" && r.user == "admin"));
    assert!(records[0].at <= records[1].at);
}

#[tokio::test]
async fn the_write_log_is_off_by_default() {
    let (server, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("c", json!({"k": "1"})))
        .await
        .unwrap();
    assert!(!server.write_log().is_on());
    assert!(server.write_log().is_empty());
}
