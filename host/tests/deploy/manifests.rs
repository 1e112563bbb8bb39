//! Every manifest in `examples/deploy/` is accepted by `kubectl apply
//! --server-side`, file by file and as the kustomization.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_manifest_is_accepted_by_server_side_apply() {
    let facts = deployment_facts();
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };
    // The kustomization in a copy of the directory, beside the generated
    // guest ConfigMap, exactly as the book (docs/src/operating/deploy.md) has a person do it.
    let copy = k.dir().join("deploy");
    std::fs::create_dir(&copy).unwrap();
    for name in MANIFESTS
        .iter()
        .chain(&["kustomization.yaml"])
        .filter(|n| **n != GUEST_CONFIGMAP_FILE)
    {
        std::fs::copy(deploy_dir().join(name), copy.join(name)).unwrap();
    }
    generate_guest_configmap(&copy, &facts);

    let mut refused = Vec::new();
    for name in MANIFESTS {
        let file = copy.join(name).display().to_string();
        let (ok, out, err) = k
            .run(&[
                "apply",
                "--server-side",
                "--field-manager=deploy-test",
                "-f",
                &file,
            ])
            .await;
        if !ok {
            refused.push(format!("{name}:\n{out}{err}"));
        }
    }
    assert!(
        refused.is_empty(),
        "server-side apply refused:\n{}",
        refused.join("\n")
    );

    let mut objects = 0;
    for name in MANIFESTS {
        for object in documents(&std::fs::read_to_string(copy.join(name)).unwrap()) {
            let resource = kubectl_resource(&object);
            let obj_name = object["metadata"]["name"].as_str().unwrap();
            let mut args = vec![
                "get",
                resource.as_str(),
                obj_name,
                "-o",
                "json",
                "--show-managed-fields",
            ];
            if let Some(ns) = object["metadata"]["namespace"].as_str() {
                args.extend(["-n", ns]);
            }
            let (ok, out, err) = k.run(&args).await;
            assert!(ok, "kubectl {args:?} failed: {err}");
            let live: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(live["kind"], object["kind"], "{name}: {obj_name}");
            assert_eq!(live["metadata"]["name"], object["metadata"]["name"]);
            assert!(
                out.contains("deploy-test"),
                "{name}: {obj_name} is owned by the applier: {out}"
            );
            objects += 1;
        }
    }
    assert_eq!(objects, 1 + 5 + 1 + 1, "every object was checked");

    let cm: Value = serde_json::from_str(
        &k.run(&[
            "get",
            "configmap",
            &facts.guest_configmap,
            "-n",
            &facts.namespace,
            "-o",
            "json",
        ])
        .await
        .1,
    )
    .unwrap();
    let stored = cm["binaryData"][&facts.guest_key].as_str().unwrap();
    let built = std::fs::read(crate::support::guest_path()).unwrap();
    use base64::Engine;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(stored)
            .unwrap(),
        built,
        "the guest survives the round trip byte for byte"
    );

    // The kustomization names every file and applies as one unit (again:
    // a second server-side apply of the same objects is accepted).
    let (ok, out, err) = k
        .run(&[
            "apply",
            "--server-side",
            "--field-manager=deploy-test",
            "-k",
            &copy.display().to_string(),
        ])
        .await;
    assert!(ok, "kubectl apply -k failed: {err}\n{out}");
    assert_eq!(out.lines().count(), objects, "{out}");
}
