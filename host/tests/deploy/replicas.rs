//! Two replicas with the Deployment's own args and env elect one leader,
//! are both ready, converge the summary and exit 0 on SIGTERM; three with
//! the per-guest overlay's (`examples/deploy-per-guest`, rendered by
//! `kubectl kustomize`) lead the guest once, with exactly the same Role.

use super::shape::expand;
use super::*;

/// One replica: the binary with the Deployment's own args and env, where
/// only what a pod gets from its node is replaced (the guest file, writable
/// cache, addresses, and a kubeconfig instead of the in-cluster one).
fn start_replica(pod_name: &str, namespace: &str, kubeconfig: &Path) -> Replica {
    let deployment = documents(&read_manifest("deployment.yaml")).remove(0);
    start_replica_of(&deployment, pod_name, namespace, kubeconfig)
}

/// [`start_replica`] with the args and env of `deployment`.
fn start_replica_of(
    deployment: &Value,
    pod_name: &str,
    namespace: &str,
    kubeconfig: &Path,
) -> Replica {
    let c = container(deployment);
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for e in c["env"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap().to_string();
        let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            Some("metadata.name") => pod_name.to_string(),
            Some("metadata.namespace") => namespace.to_string(),
            Some(other) => panic!("unexpected downward API field {other}"),
            None => e["value"].as_str().unwrap().to_string(),
        };
        env.insert(name, value);
    }
    Replica::start(pod_name, |command, dir, health, metrics| {
        let cache = dir.join("cache");
        std::fs::create_dir(&cache).unwrap();
        let mut args = Vec::new();
        let mut raw = strings(&c["args"]).into_iter();
        while let Some(arg) = raw.next() {
            let arg = expand(&arg, &env);
            match arg.split_once('=') {
                _ if arg == "--guest-dir" => {
                    raw.next();
                    let guests = dir.join("guests");
                    std::fs::create_dir_all(&guests).unwrap();
                    std::fs::copy(
                        crate::support::guest_path(),
                        guests.join("gpu-summary.wasm"),
                    )
                    .unwrap();
                    args.push(arg);
                    args.push(guests.display().to_string());
                }
                Some(("--health-addr", _)) => args.push(format!("--health-addr={health}")),
                Some(("--metrics-addr", _)) => args.push(format!("--metrics-addr={metrics}")),
                Some(("--guest-cache-dir", _)) => {
                    args.push(format!("--guest-cache-dir={}", cache.display()))
                }
                _ => args.push(arg),
            }
        }
        args.push(format!("--kubeconfig={}", kubeconfig.display()));
        command.args(&args).envs(&env);
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_with_the_deployment_args_and_exactly_the_role_elect_one_leader_and_converge()
{
    let (server, admin, facts) = deploy_server().await;
    let rules = deployment_rules(&facts);
    server.add_token("sa", User::with_rules(&facts.user_name(), rules));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_for_token("sa")).unwrap();
    crate::support::pod("a")
        .on("n1")
        .requesting("2")
        .create(&admin)
        .await;

    let names = ["wasmctrl-7d9f-a", "wasmctrl-7d9f-b"];
    let mut replicas: Vec<Replica> = names
        .iter()
        .map(|n| start_replica(n, &facts.namespace, &kubeconfig))
        .collect();
    for r in &mut replicas {
        r.wait_ready().await;
        assert_eq!(r.healthz().await, Some(200));
        assert_eq!(http_status(r.metrics, "/metrics").await, Some(200));
    }
    crate::support::eventually("the summary converges", || {
        let admin = admin.clone();
        let ns = facts.namespace.clone();
        async move { summary(&admin, &ns).await == Some(crate::support::data(&[("n1", "2")])) }
    })
    .await;
    let lease = Api::<Lease>::namespaced(admin.clone(), &facts.namespace)
        .get(&facts.lease_name)
        .await
        .expect("the replicas elect through the Lease the Deployment names");
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(names.contains(&holder.as_str()), "holder {holder:?}");

    for r in replicas {
        r.stop_cleanly().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_of_the_per_guest_overlay_with_exactly_the_role_lead_the_guest_once() {
    let (server, admin, facts) = deploy_server().await;
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };
    // The overlay beside a copy of the base, as a person renders it.
    let base = k.dir().join("deploy");
    std::fs::create_dir(&base).unwrap();
    for name in MANIFESTS
        .iter()
        .chain(&["kustomization.yaml"])
        .filter(|n| **n != GUEST_CONFIGMAP_FILE)
    {
        std::fs::copy(deploy_dir().join(name), base.join(name)).unwrap();
    }
    generate_guest_configmap(&base, &facts);
    let overlay = k.dir().join("deploy-per-guest");
    std::fs::create_dir(&overlay).unwrap();
    std::fs::copy(
        deploy_dir().join("../deploy-per-guest/kustomization.yaml"),
        overlay.join("kustomization.yaml"),
    )
    .unwrap();
    let (ok, out, err) = k.run(&["kustomize", &overlay.display().to_string()]).await;
    assert!(ok, "kubectl kustomize: {err}");
    let deployment = documents(&out)
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the overlay renders the Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert!(
        strings(&container(&deployment)["args"]).contains(&"--leader-elect=per-guest".to_string())
    );

    let rules = deployment_rules(&facts);
    server.add_token("sa", User::with_rules(&facts.user_name(), rules));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_for_token("sa")).unwrap();
    crate::support::pod("a")
        .on("n1")
        .requesting("2")
        .create(&admin)
        .await;
    let names = ["wasmctrl-5c8b-a", "wasmctrl-5c8b-b", "wasmctrl-5c8b-c"];
    let mut replicas: Vec<Replica> = names
        .iter()
        .map(|n| start_replica_of(&deployment, n, &facts.namespace, &kubeconfig))
        .collect();
    for r in &mut replicas {
        r.wait_ready().await;
    }
    crate::support::eventually("the summary converges", || {
        let admin = admin.clone();
        let ns = facts.namespace.clone();
        async move { summary(&admin, &ns).await == Some(crate::support::data(&[("n1", "2")])) }
    })
    .await;
    let leases = Api::<Lease>::namespaced(admin.clone(), &facts.namespace);
    let guest_lease = wasmctrl::leader_per_guest::guest_lease(&facts.lease_name, "gpu-summary");
    let holder = leases
        .get(&guest_lease)
        .await
        .expect("the guest's Lease is named after the Deployment's --lease-name")
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(names.contains(&holder.as_str()), "holder {holder:?}");
    // Every replica is present; exactly the holder says it leads the guest.
    let selector = format!(
        "wasmctrl.dev/lease-group={},wasmctrl.dev/lease-role=replica",
        facts.lease_name
    );
    crate::support::eventually("three presence Leases", || {
        let (leases, selector) = (leases.clone(), selector.clone());
        async move {
            let list = leases.list(&ListParams::default().labels(&selector)).await;
            list.is_ok_and(|l| l.items.len() == 3)
        }
    })
    .await;
    for r in &replicas {
        let text = r.scrape().await.unwrap();
        let leads = crate::support::prom::metric(
            &text,
            "wasmctrl_guest_leader",
            &["guest=\"gpu-summary\""],
        );
        assert_eq!(leads, f64::from(u8::from(r.id == holder)), "{}", r.id);
    }
    for r in replicas {
        r.stop_cleanly().await;
    }
}
