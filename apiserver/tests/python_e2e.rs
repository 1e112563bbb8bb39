//! The official Python client's own end-to-end suite
//! (`tests/peer-suites/python-client-e2e/`, vendored unmodified) against the
//! embedded server: every test the real 1.32 kube-apiserver passes
//! (`real-1.32.txt`) must pass here, and every other test must be one the
//! suite's README lists as needing a kubelet. It needs python3 with the
//! `kubernetes`, `pytest` and `pytest-timeout` packages; a missing one fails
//! under CI and skips elsewhere (`wasmctrl_test_support::tools`).
//!
//! A test binary of its own, so that no other test of the server runs
//! beside it: the suite's per-test limit is the real server's run's (45 s),
//! and the parallel tests of the main binary once pushed one of its tests
//! past it on a loaded machine.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::json;
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};
use wasmctrl_test_support::tools;

/// pytest's per-test limit; the suite's longest waits are 60 s loops that
/// only a kubelet ends (the real server's run used the same limit).
const PER_TEST_TIMEOUT_SECONDS: u64 = 45;

/// Time the whole suite may take.
const SUITE_TIMEOUT: Duration = Duration::from_secs(900);

/// Simulated nodes the server runs the suite with, so pods are bound and
/// run, and only what needs a real container runtime fails.
const NODES: usize = 2;

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peer-suites/python-client-e2e")
}

/// `PASSED`/`FAILED`/`ERROR`/`SKIPPED` per test id (`file.py::Class::test`)
/// from pytest's `-v` lines or `real-1.32.txt`'s `VERDICT id` lines; a test
/// reported twice (a teardown error after a pass) keeps its worst verdict.
fn verdicts(text: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (id, verdict) = match words.as_slice() {
            [v, id] if id.contains("::") => (*id, *v),
            [id, v, ..] if id.contains("::") => (*id, *v),
            _ => continue,
        };
        if !matches!(verdict, "PASSED" | "FAILED" | "ERROR" | "SKIPPED") {
            continue;
        }
        let id = id.rsplit("e2e_test/").next().unwrap_or(id).to_string();
        let entry = out.entry(id).or_insert_with(|| verdict.to_string());
        if verdict != "PASSED" {
            *entry = verdict.to_string();
        }
    }
    out
}

/// The test ids README's "Tests that need a kubelet" section lists (lines
/// starting with "- `id`").
fn needs_kubelet(readme: &str) -> BTreeSet<String> {
    readme
        .split("## Tests that need a kubelet")
        .nth(1)
        .unwrap_or("")
        .split("\n## ")
        .next()
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

/// A python3 that can import the client, pytest and pytest-timeout.
fn python_with_pytest() -> Option<PathBuf> {
    let python = tools::python_client()?;
    let imports = std::process::Command::new(&python)
        .args(["-c", "import pytest, pytest_timeout"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        tools::missing(
            "pytest",
            "`python3 -c \"import pytest, pytest_timeout\"` failed",
            "`python3 -m pip install pytest pytest-timeout`",
        );
        return None;
    }
    Some(python)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_e2e_suite_passes_what_the_real_server_passes() {
    let Some(python) = python_with_pytest() else {
        return;
    };
    let dir = suite_dir();
    let real = verdicts(&std::fs::read_to_string(dir.join("real-1.32.txt")).unwrap());
    let kubelet_only = needs_kubelet(&std::fs::read_to_string(dir.join("README.md")).unwrap());
    assert!(
        !kubelet_only.is_empty(),
        "README lists the tests that need a kubelet"
    );

    let server = ApiServer::start(ApiServerConfig::default().simulated_nodes(NODES))
        .await
        .unwrap();
    // test_client.py's pod tests first wait up to 30 s for the `default`
    // ServiceAccount, which kube-controller-manager's ServiceAccount
    // controller creates; the embedded server runs no such controller.
    let sa: Api<ServiceAccount> = Api::namespaced(server.client().await.unwrap(), "default");
    sa.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap(),
    )
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();

    let out = tokio::time::timeout(
        SUITE_TIMEOUT,
        tokio::process::Command::new(python)
            .args(["-m", "pytest", "-p", "no:cacheprovider", "-v"])
            .arg(format!("--timeout={PER_TEST_TIMEOUT_SECONDS}"))
            .arg("kubernetes/e2e_test")
            .current_dir(&dir)
            .env("KUBECONFIG", &kubeconfig)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client's e2e suite timed out")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let here = verdicts(&stdout);
    // The verdicts, for the log (libtest shows them with --nocapture or on failure).
    for (id, v) in &here {
        eprintln!("{v} {id}");
    }

    let ids = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<BTreeSet<_>>();
    assert_eq!(
        ids(&here),
        ids(&real),
        "the suite ran other tests than the real server's run:\n{stdout}"
    );
    let regressed: Vec<&String> = real
        .iter()
        .filter(|(id, v)| *v == "PASSED" && here[*id] != "PASSED")
        .map(|(id, _)| id)
        .collect();
    assert!(
        regressed.is_empty(),
        "pass on the real 1.32 server, not here: {regressed:?}\n{stdout}"
    );
    let failing: BTreeSet<String> = here
        .iter()
        .filter(|(_, v)| *v != "PASSED")
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(
        failing, kubelet_only,
        "the failing tests must be exactly README's kubelet-only list\n{stdout}"
    );
}

#[test]
fn verdict_lines_of_pytest_and_of_the_recorded_run_parse_alike() {
    let pytest = "kubernetes/e2e_test/test_a.py::T::test_x PASSED [ 50%]\n\
                  kubernetes/e2e_test/test_a.py::T::test_x ERROR [ 50%]\n\
                  kubernetes/e2e_test/test_a.py::T::test_y PASSED [100%]\n\
                  ==== 2 passed ====";
    let recorded = "ERROR test_a.py::T::test_x\nPASSED test_a.py::T::test_y\n";
    assert_eq!(verdicts(pytest), verdicts(recorded));
    assert_eq!(verdicts(pytest)["test_a.py::T::test_x"], "ERROR");
    let readme = "# x\n## Tests that need a kubelet\n- `a.py::T::t` — exec\nprose\n## Next\n- `b.py::T::u`\n";
    assert_eq!(
        needs_kubelet(readme),
        BTreeSet::from(["a.py::T::t".to_string()])
    );
}
