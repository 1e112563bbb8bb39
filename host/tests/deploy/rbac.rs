//! The host runs with exactly the RBAC `rbac.yaml` grants, and exits naming
//! the verb and resource when one is missing or bound in the wrong place.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(super) async fn host_works_with_exactly_the_role_and_fails_loudly_without_one_verb() {
    let (server, admin, facts) = deploy_server().await;
    let rules = deployment_rules(&facts);
    let service_account = facts.user_name();
    server.add_token("exact", User::with_rules(&service_account, rules.clone()));
    let exact = server.client_for_token("exact").await.unwrap();

    crate::support::pod("a")
        .on("n1")
        .requesting("2")
        .create(&admin)
        .await;

    // The replica's two jobs with exactly the Role: win the Lease, then run
    // the guest (watch pods everywhere, apply the summary).
    let identity = "wasmctrl-0";
    let elector = LeaderElector::new(
        exact.clone(),
        LeaderElectionConfig::default()
            .lease_name(&facts.lease_name)
            .namespace(&facts.namespace)
            .identity(identity),
    )
    .unwrap();
    let mut status = elector.status();
    let lease = elector.spawn();
    tokio::time::timeout(crate::support::CONVERGE, status.until_leading())
        .await
        .expect("the elector acquires the Lease in time")
        .expect("the elector leads");
    let held = Api::<Lease>::namespaced(admin.clone(), &facts.namespace)
        .get(&facts.lease_name)
        .await
        .unwrap();
    assert_eq!(
        held.spec.unwrap().holder_identity.as_deref(),
        Some(identity)
    );

    let config = SupervisorConfig {
        guests: vec![crate::support::guest_path()],
        namespace: facts.namespace.clone(),
        controller: ControllerConfig::default().instance(Some(identity.into())),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    };
    let host = Supervisor::start(exact.clone(), config, None)
        .await
        .expect("the host starts with exactly the Role");
    let running = crate::support::spawn(Arc::new(host), Duration::from_secs(5));
    crate::support::eventually("the summary converges with exactly the Role", || {
        let admin = admin.clone();
        let ns = facts.namespace.clone();
        async move { summary(&admin, &ns).await == Some(crate::support::data(&[("n1", "2")])) }
    })
    .await;
    let errors = running.controller().metrics().errors();
    assert_eq!(errors, 0, "no request was refused");
    assert!(!running.is_finished(), "the host keeps running");
    running.stop().await.expect("the host stops cleanly");
    lease.stop().await.expect("the Lease is released");

    // One verb less: the real binary, pointed at the server with that token,
    // exits non-zero naming the resource and the verb instead of idling.
    let fails_without = |verb: &str, resource: &str, extra_args: &'static [&'static str]| {
        let user = User::with_rules(&service_account, without_verb(&rules, verb, resource));
        run_binary_until_it_fails(&server, &facts, user, extra_args)
    };
    let (last, stderr) = fails_without("watch", "pods", &[]).await;
    assert!(
        last.contains("watch") && last.contains("pods"),
        "the final error names the verb and the resource: {stderr}"
    );

    // Checked before anything starts, and named precisely: the output the
    // guest writes, and the Lease of leader election.
    let (last, stderr) = fails_without("patch", "configmaps", &[]).await;
    assert!(
        last.contains(&format!(
            "configmaps \"gpu-summary\" is forbidden: User \"{service_account}\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"{}\"",
            facts.namespace
        )),
        "the final error names the output: {stderr}"
    );
    let (last, stderr) = fails_without("create", "configmaps", &[]).await;
    assert!(
        last.contains(&format!(
            "configmaps is forbidden: User \"{service_account}\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"{}\"",
            facts.namespace
        )),
        "an apply that creates needs create: {stderr}"
    );
    let (last, stderr) = fails_without(
        "update",
        "leases",
        &["--leader-elect", "--identity=replica-1"],
    )
    .await;
    assert!(
        last.contains("cannot update resource \"leases\" in API group \"coordination.k8s.io\""),
        "the final error names the Lease verb: {stderr}"
    );
}

/// Runs the real binary against `server` as `user` and waits for it to
/// exit, which it must, non-zero. Returns the last line of its stderr (the
/// final error) and the whole stderr.
pub(super) async fn run_binary_until_it_fails(
    server: &RunningApiServer,
    facts: &DeploymentFacts,
    user: User,
    extra_args: &[&str],
) -> (String, String) {
    let token = "run-until-it-fails";
    server.add_token(token, user);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_for_token(token)).unwrap();
    let out = tokio::time::timeout(
        EXIT_TIMEOUT,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
            .arg("run")
            .arg("--guest")
            .arg(crate::support::guest_path())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg(format!("--namespace={}", facts.namespace))
            .arg("--no-guest-cache")
            .args(["--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0"])
            .args(extra_args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the host must exit, not idle, when it lacks a permission")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "exit status {}: {stderr}",
        out.status
    );
    let last = stderr.lines().last().unwrap_or_default().to_string();
    (last, stderr)
}

/// (verbs, groups, resources, resourceNames) of every rule, sorted: what
/// the rules grant, whatever their scope.
pub(super) fn grants(rules: &[Rule]) -> Vec<[Vec<String>; 4]> {
    let mut out: Vec<_> = rules
        .iter()
        .map(|r| {
            [
                r.verbs.clone(),
                r.groups.clone(),
                r.resources.clone(),
                r.resource_names.clone(),
            ]
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(super) async fn host_fails_loudly_when_the_pods_rule_is_bound_in_one_namespace_only() {
    let (server, admin, facts) = deploy_server().await;
    let pods_ns = crate::support::PODS_NS;
    // rbac.yaml with the ClusterRole's pods rule granted by a RoleBinding in
    // the pods' own namespace instead of the ClusterRoleBinding.
    let rbac = with_rule_bound_only_in(&documents(&read_manifest("rbac.yaml")), "pods", pods_ns);
    let rules = rules_bound_to(&rbac, &facts);
    assert_eq!(
        grants(&rules),
        grants(&deployment_rules(&facts)),
        "the very same verbs and resources, only placed differently"
    );
    let service_account = facts.user_name();
    crate::support::pod("a")
        .on("n1")
        .requesting("2")
        .create(&admin)
        .await;

    // The RoleBinding's grant is real in its namespace, and only there.
    server.add_token(
        "pods-in-one-namespace",
        User::with_rules(&service_account, rules.clone()),
    );
    let client = server
        .client_for_token("pods-in-one-namespace")
        .await
        .unwrap();
    let listed = Api::<Pod>::namespaced(client.clone(), pods_ns)
        .list(&ListParams::default())
        .await
        .expect("pods can be listed in the RoleBinding's namespace");
    assert_eq!(listed.items.len(), 1);
    match Api::<Pod>::all(client).list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("listing pods in all namespaces must be forbidden: {other:?}"),
    }

    // The guest watches pods in every namespace: the host exits naming the
    // verb, the resource and the cluster scope instead of idling.
    let (last, stderr) = run_binary_until_it_fails(
        &server,
        &facts,
        User::with_rules(&service_account, rules),
        &[],
    )
    .await;
    let refused = format!(
        "pods is forbidden: User \"{service_account}\" cannot list resource \"pods\" in API group \"\" at the cluster scope"
    );
    assert!(
        last.contains(&refused),
        "the final error is the server's refusal of the all-namespaces list: {stderr}"
    );
}
