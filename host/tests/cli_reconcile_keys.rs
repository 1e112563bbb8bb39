//! `wasmctrl reconcile` prints one plan per request key, each its own JSON
//! document in the contract's field names; `--key` picks one.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::guest_runtime::println_guest_path;

fn wasmctrl(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(args)
        .arg("--no-guest-cache")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

/// Every JSON document on stdout, in order.
fn documents(out: &Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap()
}

const TWO_CONFIGMAPS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: ops}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ops}\n";

/// The test guest, one key per ConfigMap in `ops`, applying ConfigMap
/// `out` with the key it was called for.
fn per_object_args(guest: &str) -> Vec<&str> {
    vec![
        "reconcile",
        "--guest",
        guest,
        "--objects",
        "-",
        "--namespace",
        "ops",
        "--config",
        "keys=per-object",
        "--config",
        "output=out",
    ]
}

fn applied(key: &str) -> Value {
    // A per-object key's snapshot holds its primary only (no relations
    // declared), so the guest sees one object.
    json!({
        "request": {"key": key, "watch": "watched", "presence": "present"},
        "plan": {
            "writes": [{"apply": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "out", "namespace": "ops"},
                       "data": {"key": key, "objects": "1"}}}],
            "events": [],
            "requeue-after-ms": null,
        },
    })
}

#[test]
fn without_key_every_key_gets_its_own_plan_document_in_key_order() {
    let g = println_guest_path();
    let out = wasmctrl(&per_object_args(g.to_str().unwrap()), TWO_CONFIGMAPS);
    assert_eq!(documents(&out), vec![applied("ops/a"), applied("ops/b")]);
}

#[test]
fn key_flag_reconciles_only_the_key_named_and_a_gone_primary_without_its_object() {
    let g = println_guest_path();
    let mut args = per_object_args(g.to_str().unwrap());
    args.extend(["--key", "ops/b"]);
    let out = wasmctrl(&args, TWO_CONFIGMAPS);
    assert_eq!(documents(&out), vec![applied("ops/b")]);

    // A primary that is gone: reconciled as the host does once it is
    // deleted, its object absent from the snapshot.
    let mut args = per_object_args(g.to_str().unwrap());
    args.extend(["--key", "ops/gone"]);
    let out = wasmctrl(&args, TWO_CONFIGMAPS);
    let docs = documents(&out);
    assert_eq!(docs.len(), 1);
    assert_eq!(
        docs[0]["request"],
        json!({"key": "ops/gone", "watch": "watched", "presence": "gone"})
    );
    assert_eq!(
        docs[0]["plan"]["writes"][0]["apply"]["data"],
        json!({"key": "ops/gone", "objects": "0"})
    );

    // Not a primary's key in the watched namespace: refused, naming the
    // keys there are.
    for key in ["elsewhere/x", "a/b/c"] {
        let mut args = per_object_args(g.to_str().unwrap());
        args.extend(["--key", key]);
        let out = wasmctrl(&args, TWO_CONFIGMAPS);
        assert!(!out.status.success(), "{key}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key) && err.contains("ops/a"), "{err}");
    }
}

#[test]
fn key_flag_of_an_aggregate_guest_refuses_a_key_it_does_not_produce() {
    let g = println_guest_path();
    let args = [
        "reconcile",
        "--guest",
        g.to_str().unwrap(),
        "--objects",
        "-",
        "--namespace",
        "ops",
        "--key",
        "ops/a",
    ];
    let out = wasmctrl(&args, TWO_CONFIGMAPS);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no request key \"ops/a\""), "{err}");
}
