//! `kubectl get` of built-in kinds prints the columns a real kube-apiserver
//! 1.32 sends in its Table responses (`pkg/printers/internalversion`), not
//! only NAME and AGE: a Deployment run to availability on a simulated node,
//! its ReplicaSet and pod, a Service and a ConfigMap, read back with
//! `-o wide`; then the node, namespaces, a Secret, a ServiceAccount, a Job,
//! a CronJob, an Event and an Ingress.
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

const MORE: &str = "\
apiVersion: v1
kind: Secret
metadata:
  name: token
stringData:
  token: s3cr3t
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: robot
---
apiVersion: batch/v1
kind: Job
metadata:
  name: once
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: \"0 3 * * *\"
  suspend: true
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: main
            image: busybox:1.36
---
apiVersion: v1
kind: Event
metadata:
  name: web.started
type: Normal
reason: Started
message: Started container nginx
involvedObject:
  kind: Pod
  name: web
  fieldPath: spec.containers{nginx}
source:
  component: kubelet
  host: sim-node-0
count: 2
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: site
spec:
  ingressClassName: nginx
  rules:
  - host: web.example
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80
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

    let nodes_out = k.ok(&["get", "nodes", "-o", "wide"]).await;
    let nodes = section(&nodes_out, "sim-node-0");
    assert_eq!(
        nodes[0],
        [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME"
        ]
    );
    let n = row(&nodes, "sim-node-0");
    assert_eq!(n[1..3], ["Ready", "<none>"]);
    assert_eq!(n[4], "v1.32.0");
    assert_eq!(n[6], "<none>");

    let namespaces_out = k.ok(&["get", "ns"]).await;
    let namespaces = section(&namespaces_out, "default");
    assert_eq!(namespaces[0], ["NAME", "STATUS", "AGE"]);
    assert_eq!(row(&namespaces, "default")[1], "Active");

    let rs_out = k.ok(&["get", "rs", "-o", "wide"]).await;
    let rs = section(&rs_out, "web-");
    assert_eq!(
        rs[0],
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(rs[1][1..4], ["1", "1", "1"]);
    assert!(rs[1][7].starts_with("app=web,pod-template-hash="), "{rs:?}");

    let more = k.write("more.yaml", MORE);
    k.ok(&["apply", "-f", &more]).await;
    let out = k.ok(&["get", "secret,sa,job,cronjob", "-o", "wide"]).await;
    let secrets = section(&out, "secret/token");
    assert_eq!(secrets[0], ["NAME", "TYPE", "DATA", "AGE"], "{out}");
    assert_eq!(
        row(&secrets, "secret/token")[1..3],
        ["Opaque", "1"],
        "{out}"
    );
    let sas = section(&out, "serviceaccount/robot");
    assert_eq!(sas[0], ["NAME", "SECRETS", "AGE"], "{out}");
    assert_eq!(row(&sas, "serviceaccount/robot")[1], "0", "{out}");
    let jobs = section(&out, "job.batch/once");
    assert_eq!(
        jobs[0],
        [
            "NAME",
            "STATUS",
            "COMPLETIONS",
            "DURATION",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{out}"
    );
    assert_eq!(
        row(&jobs, "job.batch/once")[1..3],
        ["Running", "0/1"],
        "{out}"
    );
    let cronjobs = section(&out, "cronjob.batch/nightly");
    assert_eq!(
        cronjobs[0],
        [
            "NAME",
            "SCHEDULE",
            "TIMEZONE",
            "SUSPEND",
            "ACTIVE",
            "LAST SCHEDULE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{out}"
    );
    assert_eq!(
        row(&cronjobs, "cronjob.batch/nightly")[1..6],
        ["0 3 * * *", "<none>", "True", "0", "<none>"],
        "{out}"
    );

    let events_out = k.ok(&["get", "events", "-o", "wide"]).await;
    let events = section(&events_out, "pod/web");
    assert_eq!(
        events[0],
        [
            "LAST SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "SUBOBJECT",
            "SOURCE",
            "MESSAGE",
            "FIRST SEEN",
            "COUNT",
            "NAME"
        ],
        "{events_out}"
    );
    let started = events
        .iter()
        .find(|r| r.last() == Some(&"web.started"))
        .unwrap_or_else(|| panic!("{events_out}"));
    // No first or last timestamp was given: both ages are <unknown>.
    assert_eq!(
        started[..],
        [
            "<unknown>",
            "Normal",
            "Started",
            "pod/web",
            "spec.containers{nginx}",
            "kubelet, sim-node-0",
            "Started container nginx",
            "<unknown>",
            "2",
            "web.started"
        ],
        "{events_out}"
    );

    let ingresses_out = k.ok(&["get", "ingress"]).await;
    let ingresses = section(&ingresses_out, "site");
    assert_eq!(
        ingresses[0],
        ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
        "{ingresses_out}"
    );
    // ADDRESS is empty (no load balancer), so the split skips it.
    assert_eq!(
        row(&ingresses, "site")[1..4],
        ["nginx", "web.example", "80"],
        "{ingresses_out}"
    );
}
