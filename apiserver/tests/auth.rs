//! Bearer tokens and their rules as a client meets them: 401 for an
//! unknown token, 403 in the real server's words for a verb, namespace or
//! object name the rules do not grant, resourceNames reached only by name,
//! and an apply that creates needing the create verb too.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, WatchParams};
use kube::Error;
use serde_json::json;
use wasmctrl_apiserver::{ApiServerConfig, Rule, User};

use crate::common::{cm, create, create_error, pod, start, start_with, status};

#[tokio::test]
async fn missing_or_unknown_token_is_401() {
    let (server, _client) = start().await;
    let bad = server.client_for_token("not-a-token").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(bad, "default");
    let e = status(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (401, "Unauthorized"));
}

#[tokio::test]
async fn token_with_list_but_not_watch_gets_403_on_watch() {
    let (server, _c) = start_with(ApiServerConfig::default().token(
        "lister",
        User::with_rules("lister", vec![Rule::new(&["get", "list"], &["pods"])]),
    ))
    .await;
    let client = server.client_for_token("lister").await.unwrap();
    let pods: Api<Pod> = Api::all(client.clone());
    assert!(pods.list(&ListParams::default()).await.is_ok());
    let e = match pods.watch(&WatchParams::default(), "0").await {
        Err(e) => status(e),
        Ok(_) => panic!("watch must be forbidden"),
    };
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "pods is forbidden: User \"lister\" cannot watch resource \"pods\" in API group \"\" at the cluster scope"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    assert_eq!(
        status(cms.list(&ListParams::default()).await.unwrap_err()).code,
        403
    );
}

#[tokio::test]
async fn token_with_a_namespaced_rule_reads_only_in_that_namespace() {
    // What a RoleBinding in "default" grants: pods there, and (RBAC's
    // rule for Namespace objects) the Namespace "default" itself.
    let (server, admin) = start_with(ApiServerConfig::default().token(
        "ns-reader",
        User::with_rules(
            "ns-reader",
            vec![
                Rule::new(&["get", "list", "watch"], &["pods", "namespaces"])
                    .in_namespace("default"),
            ],
        ),
    ))
    .await;
    for ns in ["default", "kube-public"] {
        create(&Api::namespaced(admin.clone(), ns), &pod("p", json!({}))).await;
    }
    let client = server.client_for_token("ns-reader").await.unwrap();
    let forbidden = |e: Error, message: &str| {
        let e = status(e);
        assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
        assert_eq!(e.message, message);
    };

    // In its namespace: list, get and watch.
    let own: Api<Pod> = Api::namespaced(client.clone(), "default");
    let listed = own.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        own.get("p").await.unwrap().metadata.name.as_deref(),
        Some("p")
    );
    assert!(own.watch(&WatchParams::default(), "0").await.is_ok());

    // All namespaces is a cluster-scope request.
    let all: Api<Pod> = Api::all(client.clone());
    forbidden(
        all.list(&ListParams::default()).await.unwrap_err(),
        "pods is forbidden: User \"ns-reader\" cannot list resource \"pods\" in API group \"\" at the cluster scope",
    );
    match all.watch(&WatchParams::default(), "0").await {
        Err(e) => forbidden(
            e,
            "pods is forbidden: User \"ns-reader\" cannot watch resource \"pods\" in API group \"\" at the cluster scope",
        ),
        Ok(_) => panic!("watching pods in all namespaces must be forbidden"),
    }

    // Another namespace.
    let other: Api<Pod> = Api::namespaced(client.clone(), "kube-public");
    forbidden(
        other.list(&ListParams::default()).await.unwrap_err(),
        "pods is forbidden: User \"ns-reader\" cannot list resource \"pods\" in API group \"\" in the namespace \"kube-public\"",
    );
    forbidden(
        other.get("p").await.unwrap_err(),
        "pods \"p\" is forbidden: User \"ns-reader\" cannot get resource \"pods\" in API group \"\" in the namespace \"kube-public\"",
    );

    // A Namespace object is in its own namespace; listing them is cluster scope.
    let namespaces: Api<Namespace> = Api::all(client);
    assert!(namespaces.get("default").await.is_ok());
    forbidden(
        namespaces.get("kube-public").await.unwrap_err(),
        "namespaces \"kube-public\" is forbidden: User \"ns-reader\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"kube-public\"",
    );
    forbidden(
        namespaces.list(&ListParams::default()).await.unwrap_err(),
        "namespaces is forbidden: User \"ns-reader\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope",
    );
}

#[tokio::test]
async fn token_with_resource_names_reaches_only_the_named_object() {
    let (server, admin) = start_with(ApiServerConfig::default().token(
        "named",
        User::with_rules(
            "named",
            vec![Rule::new(&["get", "list", "watch", "update", "create"], &["configmaps"])
                .named(&["mine"])],
        ),
    ))
    .await;
    let admin_cms: Api<ConfigMap> = Api::namespaced(admin, "default");
    for name in ["mine", "theirs"] {
        create(&admin_cms, &cm(name, json!({"k": name}))).await;
    }
    let cms: Api<ConfigMap> =
        Api::namespaced(server.client_for_token("named").await.unwrap(), "default");
    assert!(cms.get("mine").await.is_ok());
    let e = status(cms.get("theirs").await.unwrap_err());
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "configmaps \"theirs\" is forbidden: User \"named\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
    // A list or watch names the object only through a metadata.name field selector.
    let one = cms
        .list(&ListParams::default().fields("metadata.name=mine"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    assert!(cms
        .watch(&WatchParams::default().fields("metadata.name=mine"), "0")
        .await
        .is_ok());
    let e = status(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "configmaps is forbidden: User \"named\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
    let e = status(
        cms.list(&ListParams::default().fields("metadata.name=theirs"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "configmaps \"theirs\" is forbidden: User \"named\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
    // A create names no object in its URL, so resourceNames never allow it.
    let e = create_error(&cms, &cm("mine2", json!({}))).await;
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "configmaps is forbidden: User \"named\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
}

#[tokio::test]
async fn an_apply_that_creates_is_authorized_as_create_too() {
    let (server, admin) = start().await;
    server.add_token(
        "patcher",
        User::with_rules(
            "patcher",
            vec![Rule::new(&["get", "patch"], &["configmaps"])],
        ),
    );
    let patcher = server.client_for_token("patcher").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(patcher, "default");
    let apply = PatchParams::apply("test").force();
    let doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
    let err = status(
        cms.patch("c", &apply, &Patch::Apply(&doc))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "configmaps \"c\" is forbidden: User \"patcher\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    // Once it exists, patch alone is enough.
    create(&Api::namespaced(admin, "default"), &cm("c", json!({}))).await;
    let applied = cms.patch("c", &apply, &Patch::Apply(&doc)).await.unwrap();
    assert_eq!(applied.data.unwrap()["k"], "v");
}
