//! What kubectl users see of the server's write rules: the real server's
//! validation errors for custom resources and pods, printed by the real
//! kubectl. Skipped with a visible message when kubectl is not installed.
//! (A small local runner: the shared one in `kubectl` is being reworked.)

use std::path::PathBuf;
use std::time::Duration;

use wasmctrl_apiserver::RunningApiServer;

use crate::common::start;

/// Runs kubectl against `server` with `files` written beside its kubeconfig.
struct Kubectl {
    bin: PathBuf,
    dir: tempfile::TempDir,
}

impl Kubectl {
    fn new(server: &RunningApiServer) -> Option<Self> {
        let bin = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("kubectl"))
                .find(|p| p.is_file())
        })?;
        let dir = tempfile::tempdir().unwrap();
        server
            .write_kubeconfig(&dir.path().join("kubeconfig"))
            .unwrap();
        Some(Kubectl { bin, dir })
    }

    fn file(&self, name: &str, content: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p.display().to_string()
    }

    /// (success, stdout, stderr)
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(
            Duration::from_secs(20),
            tokio::process::Command::new(&self.bin)
                .arg("--kubeconfig")
                .arg(self.dir.path().join("kubeconfig"))
                .arg("--cache-dir")
                .arg(self.dir.path().join("cache"))
                .args(args)
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("kubectl timed out")
        .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              limit: {type: integer, minimum: 0}
";

#[tokio::test]
async fn kubectl_prints_the_real_validation_errors() {
    let (server, _client) = start().await;
    let Some(k) = Kubectl::new(&server) else {
        eprintln!("SKIPPED kubectl_prints_the_real_validation_errors: kubectl not found on PATH");
        return;
    };
    let crd = k.file("crd.yaml", CRD);
    let (ok, _, err) = k.run(&["create", "-f", &crd]).await;
    assert!(ok, "{err}");
    let bad = k.file(
        "bad.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {limit: -1}\n",
    );
    let (ok, _, err) = k.run(&["create", "-f", &bad]).await;
    assert!(!ok);
    assert!(
        err.contains(r#"Widget.example.com "w" is invalid: spec.limit: Invalid value: -1: spec.limit in body should be greater than or equal to 0"#),
        "{err}"
    );
    let pod = k.file(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: x:1\n    resources:\n      requests: {nvidia.com/gpu: \"1\"}\n",
    );
    let (ok, _, err) = k.run(&["create", "-f", &pod]).await;
    assert!(!ok);
    assert!(
        err.contains("spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"),
        "{err}"
    );
}

const LIST: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: one}
  data: {a: b}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: two}
  data: {c: d}
";

/// kubectl validates a `kind: List` client-side against the server's
/// OpenAPI document before it sends the items; without one it refused the
/// file unless `--validate=false` was given.
#[tokio::test]
async fn kubectl_applies_a_list_with_client_side_validation() {
    let (server, _client) = start().await;
    let Some(k) = Kubectl::new(&server) else {
        eprintln!(
            "SKIPPED kubectl_applies_a_list_with_client_side_validation: kubectl not found on PATH"
        );
        return;
    };
    let list = k.file("list.yaml", LIST);
    let (ok, out, err) = k.run(&["apply", "-f", &list]).await;
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("configmap/one created"), "{out}");
    assert!(out.contains("configmap/two created"), "{out}");
    // strict validation of a List still reports an item's unknown field
    let bad = k.file(
        "bad-list.yaml",
        &LIST.replace("data: {c: d}", "data: {c: d}\n  bogus: 1"),
    );
    let (ok, out, err) = k.run(&["apply", "--validate=strict", "-f", &bad]).await;
    assert!(!ok, "{out}");
    assert!(err.contains(r#"unknown field "bogus""#), "{err}");
}
