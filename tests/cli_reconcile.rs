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
    let plan = plan(&["--objects", &file, "--namespace", "ops"], None);
    assert_eq!(
        plan["apply"],
        json!([{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "gpu-summary", "namespace": "ops"},
                "data": {"n1": "3", "n2": "1"}}])
    );
    assert_eq!(plan["delete"], json!([]));
    assert_eq!(plan["events"], json!([]));
    assert_eq!(plan["requeue-after-ms"], Value::Null);
    assert_eq!(plan["key"], "gpu-summary");
}

#[test]
fn yaml_from_stdin_with_configuration_and_a_bad_quantity() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n  nodeName: n1\n  containers:\n  - name: c\n    resources:\n      requests: {nvidia.com/gpu: 1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad, namespace: ml}\nspec:\n  nodeName: n1\n  containers:\n  - name: c\n    resources:\n      requests: {nvidia.com/gpu: one}\n";
    let plan = plan(
        &[
            "--objects",
            "-",
            "--config",
            "name=gpus",
            "--config",
            "namespace=infra",
        ],
        Some(yaml),
    );
    assert_eq!(
        plan["apply"][0]["metadata"],
        json!({"name": "gpus", "namespace": "infra"})
    );
    assert_eq!(plan["apply"][0]["data"], json!({"n1": "1"}));
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
