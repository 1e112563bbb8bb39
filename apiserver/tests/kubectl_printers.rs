//! `kubectl get` of built-in kinds prints the columns a real kube-apiserver
//! 1.32 sends in its Table responses (`pkg/printers/internalversion`), not
//! only NAME and AGE: a Deployment run to availability on a simulated node,
//! its pod, a Service and a ConfigMap, read back with `-o wide`.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use wasmctrl_apiserver::{ApiServer, ApiServerConfig};
use wasmctrl_test_support::Kubectl;

const OBJECTS: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
  - port: 80
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  a: one
  b: two
";

/// The section of kubectl's table output (one per kind) holding `marker`,
/// split into cells at the column gaps (kubectl pads columns with at least
/// three spaces).
fn section<'a>(out: &'a str, marker: &str) -> Vec<Vec<&'a str>> {
    let block = out
        .split("\n\n")
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("no section with {marker:?} in\n{out}"));
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect()
}

fn row<'a>(rows: &'a [Vec<&'a str>], name: &str) -> &'a [&'a str] {
    rows.iter()
        .find(|r| r[0] == name)
        .unwrap_or_else(|| panic!("no row {name} in {rows:?}"))
}

#[tokio::test]
async fn kubectl_get_wide_prints_the_built_in_kinds_columns() {
    let server = ApiServer::start(ApiServerConfig::default().simulated_nodes(1))
        .await
        .unwrap();
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };
    let file = k.write("objects.yaml", OBJECTS);
    k.ok(&["apply", "-f", &file]).await;

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let available = k
            .ok(&[
                "get",
                "deploy",
                "web",
                "-o",
                "jsonpath={.status.availableReplicas}",
            ])
            .await;
        if available.trim() == "1" {
            break;
        }
        assert!(Instant::now() < deadline, "web never became available");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cluster_ip = k
        .ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"])
        .await;
    let pod_ip = k
        .ok(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[0].status.podIP}",
        ])
        .await;
    let node = k
        .ok(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[0].spec.nodeName}",
        ])
        .await;

    let out = k.ok(&["get", "deploy,svc,cm,pods", "-o", "wide"]).await;

    let deploys = section(&out, "deployment.apps/");
    assert_eq!(
        deploys[0],
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{out}"
    );
    let web = row(&deploys, "deployment.apps/web");
    assert_eq!(web[1..4], ["1/1", "1", "1"], "{out}");
    assert_eq!(web[5..], ["nginx", "nginx:1.27", "app=web"], "{out}");

    let services = section(&out, "service/");
    assert_eq!(
        services[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ],
        "{out}"
    );
    let svc = row(&services, "service/web");
    assert_eq!(
        svc[1..5],
        ["ClusterIP", cluster_ip.trim(), "<none>", "80/TCP"],
        "{out}"
    );
    assert_eq!(svc[6], "app=web", "{out}");

    let cms = section(&out, "configmap/");
    assert_eq!(cms[0], ["NAME", "DATA", "AGE"], "{out}");
    assert_eq!(row(&cms, "configmap/settings")[1], "2", "{out}");

    let pods = section(&out, "pod/");
    assert_eq!(
        pods[0],
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ],
        "{out}"
    );
    let pod = pods
        .iter()
        .find(|r| r[0].starts_with("pod/web-"))
        .unwrap_or_else(|| panic!("no web pod in {out}"));
    assert_eq!(pod[1..4], ["1/1", "Running", "0"], "{out}");
    assert_eq!(
        pod[5..],
        [pod_ip.trim(), node.trim(), "<none>", "<none>"],
        "{out}"
    );
}
