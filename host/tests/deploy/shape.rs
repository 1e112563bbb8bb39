//! The Deployment's args, ports, probes and security settings agree with
//! the binary and the Dockerfile.

use super::*;

/// The port of a `--NAME=HOST:PORT` argument.
pub(super) fn addr_port(args: &[String], name: &str) -> u64 {
    args.iter()
        .find_map(|a| a.strip_prefix(&format!("--{name}=")))
        .and_then(|addr| addr.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("the Deployment passes --{name}=HOST:PORT"))
}

#[test]
pub(super) fn the_deployment_runs_hardened_with_probes_on_the_ports_the_host_serves() {
    let deployment = documents(&read_manifest("deployment.yaml")).remove(0);
    let pod = &deployment["spec"]["template"]["spec"];
    let c = container(&deployment);
    let args = strings(&c["args"]);
    assert_eq!(deployment["spec"]["replicas"], 2, "a leader and a standby");
    assert!(args.iter().any(|a| a == "--leader-elect"), "{args:?}");

    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["runAsUser"], 65532);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"]);
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    for kind in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                c["resources"][kind][resource].is_string(),
                "resources.{kind}.{resource} is set"
            );
        }
    }

    // Downward API: the identity and the namespace the args refer to.
    let env = c["env"].as_array().unwrap();
    for (var, field) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        assert!(
            env.iter()
                .any(|e| e["name"] == var && e["valueFrom"]["fieldRef"]["fieldPath"] == field),
            "{var} comes from {field}"
        );
    }
    assert!(args.iter().any(|a| a == "--namespace=$(POD_NAMESPACE)"));

    // Probes hit the port --health-addr serves; the metrics port is named.
    let port = |name: &str| {
        c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("a container port named {name}"))
    };
    assert_eq!(port("health"), addr_port(&args, "health-addr"));
    assert_eq!(port("metrics"), addr_port(&args, "metrics-addr"));
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert!(
            get["port"] == "health" || get["port"].as_u64() == Some(port("health")),
            "{probe} uses the health port"
        );
    }

    // The compiled-guest cache is the one writable place, an emptyDir.
    let cache = args
        .iter()
        .find_map(|a| a.strip_prefix("--guest-cache-dir="))
        .expect("--guest-cache-dir=…");
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == cache)
        .expect("the cache directory is a volume mount");
    assert!(pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["name"] == mount["name"] && v["emptyDir"].is_object()));

    // The image bakes the guest where the Deployment looks for it, and runs
    // as the same user.
    let dockerfile = std::fs::read_to_string(deploy_dir().join("../../Dockerfile")).unwrap();
    let guest = &args[args.iter().position(|a| a == "--guest-dir").unwrap() + 1];
    assert!(
        dockerfile.contains(&format!(" {guest}/gpu-summary.wasm\n")),
        "the Dockerfile bakes a guest into {guest}"
    );
    assert!(
        dockerfile.contains("\nUSER 65532"),
        "the image runs as 65532"
    );
    assert!(dockerfile.contains("ENTRYPOINT [\"/usr/local/bin/wasmctrl\"]"));
    let facts = deployment_facts();
    assert_eq!(
        pod["serviceAccountName"].as_str(),
        Some(facts.service_account.as_str())
    );
}

#[test]
pub(super) fn the_deployment_args_are_ones_the_binary_accepts() {
    let deployment = documents(&read_manifest("deployment.yaml")).remove(0);
    let args = strings(&container(&deployment)["args"]);
    // clap rejects an unknown or malformed argument before it reaches --help.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(&args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wasmctrl {args:?} is refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `$(VAR)` references in container args, expanded as the kubelet does.
pub(super) fn expand(arg: &str, env: &BTreeMap<String, String>) -> String {
    env.iter().fold(arg.to_string(), |a, (k, v)| {
        a.replace(&format!("$({k})"), v)
    })
}
