//! Drives the embedded API server with unchanged third-party clients: the
//! real kubectl binary and the official Python `kubernetes` client
//! (`apiserver/tests/python_client.py`). A test whose client is not
//! installed fails under CI (`CI` set) and is skipped with a visible
//! message elsewhere (`wasmctrl_test_support::tools`).
#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};
use wasmctrl_test_support::kubectl::KUBECTL_TIMEOUT;
use wasmctrl_test_support::{tools, Kubectl};

const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels:\n    app: demo\ndata:\n  key: one\n";
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: nginx:1.27\n    resources:\n      limits:\n        nvidia.com/gpu: \"1\"\n";

#[tokio::test]
async fn kubectl_create_get_apply_patch_delete_and_watch() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };

    let cm = k.write("cm.yaml", CONFIGMAP);
    let out = k.ok(&["create", "-f", &cm]).await;
    assert_eq!(out.trim(), "configmap/demo created");
    let (ok, _, err) = k.run(&["create", "-f", &cm]).await;
    assert!(!ok);
    assert!(
        err.contains("AlreadyExists") || err.contains("already exists"),
        "{err}"
    );

    let json: Value =
        serde_json::from_str(&k.ok(&["get", "configmap", "demo", "-o", "json"]).await).unwrap();
    assert_eq!(json["data"]["key"], "one");
    assert_eq!(json["metadata"]["labels"]["app"], "demo");

    let table = k.ok(&["get", "configmaps"]).await;
    let header = table.lines().next().unwrap();
    assert!(
        header.starts_with("NAME") && header.contains("AGE"),
        "{table}"
    );
    assert!(table.contains("demo"));

    // server-side apply takes ownership of data.key away from kubectl-create with --force-conflicts
    let applied = k.write("applied.yaml", &CONFIGMAP.replace("key: one", "key: two"));
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", &applied]).await;
    assert!(!ok, "apply must conflict with kubectl-create's ownership");
    assert!(err.contains("conflict with \"kubectl-create\""), "{err}");
    assert!(err.contains(".data.key"), "{err}");
    let out = k
        .ok(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &applied,
        ])
        .await;
    assert_eq!(out.trim(), "configmap/demo serverside-applied");
    let json: Value = serde_json::from_str(
        &k.ok(&["get", "cm", "demo", "-o", "json", "--show-managed-fields"])
            .await,
    )
    .unwrap();
    assert_eq!(json["data"]["key"], "two");
    let managers: Vec<&str> = json["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kubectl"), "{managers:?}");

    // A strategic-merge (the default), a merge and a JSON patch.
    let patches = [
        (None, r#"{"data":{"extra":"x"}}"#),
        (Some("--type=merge"), r#"{"data":{"extra":"y"}}"#),
        (
            Some("--type=json"),
            r#"[{"op":"remove","path":"/data/extra"}]"#,
        ),
    ];
    for (kind, patch) in patches {
        let mut args = vec!["patch", "configmap", "demo"];
        args.extend(kind);
        args.extend(["-p", patch]);
        let out = k.ok(&args).await;
        assert_eq!(out.trim(), "configmap/demo patched", "{args:?}");
    }
    let json: Value =
        serde_json::from_str(&k.ok(&["get", "cm", "demo", "-o", "json"]).await).unwrap();
    assert!(json["data"].get("extra").is_none());

    let pod = k.write("pod.yaml", POD);
    k.ok(&["create", "-f", &pod]).await;
    let pods = k.ok(&["get", "pods"]).await;
    assert!(pods.lines().next().unwrap().contains("STATUS"), "{pods}");
    assert!(pods.contains("web") && pods.contains("Pending"), "{pods}");
    let phase = k
        .ok(&["get", "pod", "web", "-o", "jsonpath={.status.phase}"])
        .await;
    assert_eq!(phase, "Pending");

    // get -w prints the existing object, then changes, until its timeout
    let watch = tokio::spawn(
        k.command()
            .args(["get", "configmaps", "-w", "--request-timeout=3s"])
            .output(),
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    k.ok(&["label", "configmap", "demo", "watched=yes"]).await;
    let out = tokio::time::timeout(KUBECTL_TIMEOUT, watch)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("NAME"),
        "server-side table header: {stdout:?}"
    );
    assert!(
        stdout.lines().filter(|l| l.starts_with("demo ")).count() >= 2,
        "initial state and the label change: {stdout:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // generator commands send protobuf bodies
    assert_eq!(
        k.ok(&["create", "namespace", "work"]).await.trim(),
        "namespace/work created"
    );
    let out = k
        .ok(&[
            "-n",
            "work",
            "create",
            "configmap",
            "gen",
            "--from-literal=a=b",
        ])
        .await;
    assert_eq!(out.trim(), "configmap/gen created");
    let data = k
        .ok(&["-n", "work", "get", "cm", "gen", "-o", "jsonpath={.data.a}"])
        .await;
    assert_eq!(data, "b");
    // As a real server: the empty strings Go's protobuf code writes are
    // dropped (omitempty), and the namespace's finalizer, set by its
    // strategy after the managed fields are recorded, is nobody's.
    let meta = k
        .ok(&[
            "-n",
            "work",
            "get",
            "cm",
            "gen",
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.generateName}|{.metadata.managedFields[*].fieldsV1}",
        ])
        .await;
    assert_eq!(meta, r#"|{"f:data":{".":{},"f:a":{}}}"#);
    let ns = k
        .ok(&[
            "get",
            "namespace",
            "work",
            "--show-managed-fields",
            "-o",
            "jsonpath={.spec.finalizers}|{.metadata.managedFields[*].fieldsV1}",
        ])
        .await;
    assert_eq!(
        ns,
        r#"["kubernetes"]|{"f:metadata":{"f:labels":{".":{},"f:kubernetes.io/metadata.name":{}}}}"#
    );
    k.ok(&[
        "-n",
        "work",
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=k=v",
    ])
    .await;
    let secret = k
        .ok(&[
            "-n",
            "work",
            "get",
            "secret",
            "s",
            "-o",
            "jsonpath={.type} {.data.k}",
        ])
        .await;
    assert_eq!(secret, "Opaque dg==");
    let out = k
        .ok(&[
            "wait",
            "--for=jsonpath={.status.phase}=Pending",
            "pod/web",
            "--timeout=5s",
        ])
        .await;
    assert_eq!(out.trim(), "pod/web condition met");

    let out = k.ok(&["delete", "configmap", "demo"]).await;
    assert_eq!(out.trim(), "configmap \"demo\" deleted");
    let (ok, _, err) = k.run(&["get", "configmap", "demo"]).await;
    assert!(!ok);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
}

/// A Pod manifest with a typo'd container field.
const TYPO_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typo\nspec:\n  containers:\n  - name: c\n    image: nginx:1.27\n    imagePullPolicyy: Always\n";

#[tokio::test]
async fn kubectl_refuses_unknown_fields_unless_validation_is_off() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };
    let typo = k.write("typo.yaml", TYPO_POD);

    // kubectl sends fieldValidation=Strict by default, on create and on
    // client-side apply (which creates a missing object)
    for verb in ["create", "apply"] {
        let (ok, out, err) = k.run(&[verb, "-f", &typo]).await;
        assert!(!ok, "kubectl {verb} must fail: {out}");
        assert!(
            err.contains(r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.containers[0].imagePullPolicyy""#),
            "kubectl {verb}: {err}"
        );
    }
    let (ok, _, err) = k.run(&["get", "pod", "typo"]).await;
    assert!(!ok && err.contains("not found"), "{err}");

    // --validate=false is fieldValidation=Ignore: created, the field dropped
    let out = k.ok(&["apply", "--validate=false", "-f", &typo]).await;
    assert_eq!(out.trim(), "pod/typo created");
    let pod: Value =
        serde_json::from_str(&k.ok(&["get", "pod", "typo", "-o", "json"]).await).unwrap();
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.27");
    assert!(container.get("imagePullPolicyy").is_none(), "{container}");

    // --validate=warn: created, and kubectl prints the server's warning
    let warned = k.write(
        "warned.yaml",
        &TYPO_POD.replace("name: typo", "name: warned"),
    );
    let (ok, out, err) = k.run(&["create", "--validate=warn", "-f", &warned]).await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "pod/warned created");
    assert!(
        err.contains(r#"Warning: unknown field "spec.containers[0].imagePullPolicyy""#),
        "{err}"
    );
}

/// Time the Python client script may take (interpreter start included).
const PYTHON_TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_creates_lists_watches_patches_and_deletes() {
    let Some(python) = tools::python_client() else {
        return;
    };
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python_client.py");
    let out = tokio::time::timeout(
        PYTHON_TIMEOUT,
        tokio::process::Command::new(python)
            .arg(&script)
            .arg(&kubeconfig)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("python client timed out")
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "python client failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("python client: ok"), "{stdout}");
    // What the script did is visible to the kube client too.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(server.client().await.unwrap(), "py-client");
    let names: Vec<String> = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert!(names.iter().all(|n| n != "web-1"), "{names:?}");
}

#[tokio::test]
async fn kubectl_auth_can_i_and_whoami_answer_from_the_tokens_rules() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    server.add_token(
        "reader",
        wasmctrl_apiserver::User::with_rules(
            "system:serviceaccount:default:reader",
            vec![
                wasmctrl_apiserver::Rule::new(&["get", "list"], &["pods"]).in_namespace("default")
            ],
        ),
    );
    let Some(k) = Kubectl::for_token(&server, "reader") else {
        return;
    };
    // kubectl sends these reviews as protobuf.
    let (ok, out, _) = k
        .run(&["auth", "can-i", "list", "pods", "-n", "default"])
        .await;
    assert!(ok && out.trim() == "yes", "{out}");
    let refused: [&[&str]; 3] = [
        &["auth", "can-i", "watch", "pods", "-n", "default"],
        &["auth", "can-i", "list", "pods", "-n", "kube-system"],
        &["auth", "can-i", "list", "pods", "--all-namespaces"],
    ];
    for args in refused {
        let (ok, out, _) = k.run(args).await;
        assert!(!ok && out.trim() == "no", "{args:?} must be refused: {out}");
    }
    let out = k
        .ok(&[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ])
        .await;
    assert_eq!(out.trim(), "system:serviceaccount:default:reader");
}
