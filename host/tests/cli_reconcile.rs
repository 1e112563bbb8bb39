//! `wasmctrl reconcile`: the offline CLI runs the real guest over kubectl
//! dumps and YAML, prints the plan, and fails loudly on bad input.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

fn wasmctrl(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmctrl"));
    cmd.args(args)
        .arg("--no-guest-cache")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

/// `wasmctrl reconcile --guest <the GPU guest> ARGS` with `stdin`, which
/// must succeed: the plan it prints.
fn plan(args: &[&str], stdin: Option<&str>) -> Value {
    let guest = crate::support::guest_path();
    let guest_args = ["reconcile", "--guest", guest.to_str().unwrap()];
    let out = wasmctrl(&[&guest_args[..], args].concat(), stdin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn pod(name: &str, node: Option<&str>, phase: &str, gpus: &str) -> Value {
    let mut spec =
        json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
           "spec": spec, "status": {"phase": phase}})
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn kubectl_list_dump_produces_the_summary_plan() {
    let dir = tempfile::tempdir().unwrap();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        pod("a", Some("n1"), "Running", "2"),
        pod("b", Some("n1"), "Pending", "1"),
        pod("c", Some("n2"), "Running", "1"),
        pod("done", Some("n3"), "Succeeded", "4"),
        pod("failed", Some("n3"), "Failed", "4"),
        pod("waiting", None, "Pending", "4"),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "ml"}},
    ]});
    let file = write(&dir, "dump.json", &list.to_string());
    let doc = plan(&["--objects", &file, "--namespace", "ops"], None);
    assert_eq!(
        doc["request"],
        json!({"key": "gpu-summary", "watch": null, "presence": null})
    );
    let plan = &doc["plan"];
    assert_eq!(
        plan["writes"],
        json!([{"apply": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "gpu-summary", "namespace": "ops"},
                "data": {"n1": "3", "n2": "1"}}}])
    );
    assert_eq!(plan["events"], json!([]));
    assert_eq!(plan["requeue-after-ms"], Value::Null);
}

#[test]
fn yaml_from_stdin_with_configuration_and_a_bad_quantity() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n  nodeName: n1\n  containers:\n  - name: c\n    resources:\n      requests: {nvidia.com/gpu: 1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad, namespace: ml}\nspec:\n  nodeName: n1\n  containers:\n  - name: c\n    resources:\n      requests: {nvidia.com/gpu: one}\n";
    let doc = plan(
        &[
            "--objects",
            "-",
            "--config",
            "name=gpus",
            "--config",
            "namespace=infra",
            "--key",
            "gpu-summary",
            "--now",
            "2026-01-02T03:04:05Z",
        ],
        Some(yaml),
    );
    let plan = &doc["plan"];
    let applied = &plan["writes"][0]["apply"];
    assert_eq!(
        applied["metadata"],
        json!({"name": "gpus", "namespace": "infra"})
    );
    assert_eq!(applied["data"], json!({"n1": "1"}));
    assert_eq!(plan["events"][0]["event-type"], "warning");
    assert_eq!(plan["events"][0]["reason"], "InvalidQuantity");
    assert_eq!(
        plan["events"][0]["regarding"],
        json!({"api-version": "v1", "kind": "Pod", "namespace": "ml", "name": "bad"})
    );
}

#[test]
fn bad_input_exits_non_zero_naming_the_file_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let g = crate::support::guest_path();
    let g = g.to_str().unwrap();
    let cases = [
        (
            write(&dir, "broken.json", "{\"kind\": \"List\", "),
            "broken.json: not valid JSON or YAML",
        ),
        (
            write(&dir, "nokind.yaml", "apiVersion: v1\nmetadata: {name: x}\n"),
            "nokind.yaml: object 0 (x): has no kind",
        ),
        (
            dir.path().join("missing.json").display().to_string(),
            "missing.json: cannot read",
        ),
    ];
    for (file, want) in cases {
        let out = wasmctrl(&["reconcile", "--guest", g, "--objects", &file], None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{file} should fail");
        assert!(err.contains(want), "{file}: stderr was {err}");
        assert!(
            out.stdout.is_empty(),
            "nothing printed on stdout on failure"
        );
    }
    let bad_runs: [(&[&str], &str); 2] = [
        (
            &["--guest", "/nonexistent.wasm", "--objects", "-"],
            "/nonexistent.wasm",
        ),
        (
            &["--guest", g, "--objects", "-", "--config", "bogus=1"],
            "bogus",
        ),
    ];
    for (args, want) in bad_runs {
        let out = wasmctrl(&[&["reconcile"], args].concat(), Some("[]"));
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(String::from_utf8_lossy(&out.stderr).contains(want));
    }
}

#[test]
fn an_error_names_each_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("latin1.json");
    std::fs::write(&file, b"[{\"kind\": \"Pod\", \"x\": \"caf\xe9\"}]").unwrap();
    let g = crate::support::guest_path();
    let out = wasmctrl(
        &[
            "reconcile",
            "--guest",
            g.to_str().unwrap(),
            "--objects",
            file.to_str().unwrap(),
        ],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("latin1.json: cannot read: not UTF-8"), "{err}");
    assert_eq!(err.matches("not UTF-8").count(), 1, "{err}");
    assert_eq!(err.matches("invalid utf-8").count(), 1, "{err}");
}

#[test]
fn a_now_no_api_server_would_store_is_refused() {
    let g = crate::support::guest_path();
    let g = g.to_str().unwrap();
    // metav1.Time is RFC 3339 with a four-digit year: 9999-12-31T23:59:59Z
    // is the last instant an API server stores.
    for now in ["253402300800000", "18446744073709551615"] {
        let out = wasmctrl(
            &["reconcile", "--guest", g, "--objects", "-", "--now", now],
            Some("[]"),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--now {now} was accepted");
        assert!(
            err.contains("--now") && err.contains("9999-12-31T23:59:59"),
            "{now}: {err}"
        );
    }
    for now in ["253402300799999", "9999-12-31T23:59:59.999Z", "0"] {
        let out = wasmctrl(
            &["reconcile", "--guest", g, "--objects", "-", "--now", now],
            Some("[]"),
        );
        assert!(
            out.status.success(),
            "--now {now}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_configuration_or_manifest_error_names_the_declared_guest_and_its_file() {
    let g = crate::support::guest_path();
    let out = wasmctrl(
        &[
            "reconcile",
            "--guest",
            g.to_str().unwrap(),
            "--objects",
            "-",
            "--config",
            "bogus=1",
        ],
        Some("[]"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("guest gpu-summary (guest_gpu_summary.wasm): invalid manifest: the guest rejected its configuration"),
        "{err}"
    );

    use crate::support::wat::{guest, Behaviour, WatKeys, WatManifest, WatWatch};
    let mut m = WatManifest::writing_its_own_configmap("liar", "ops");
    m.watches = vec![WatWatch::pods(
        "pods",
        WatKeys::SameNamespace("apps".into()),
    )];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("liar-v2.wasm");
    std::fs::write(&file, guest(&m, Behaviour::Apply(vec![]))).unwrap();
    let out = wasmctrl(
        &[
            "reconcile",
            "--guest",
            file.to_str().unwrap(),
            "--objects",
            "-",
        ],
        Some("[]"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(r#"guest liar (liar-v2.wasm): invalid manifest: watches[0] (pods).keys.same-namespace: names watch "apps""#),
        "{err}"
    );
}
