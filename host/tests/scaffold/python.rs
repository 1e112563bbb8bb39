//! `wasmctrl new --lang python` from outside the repository: every command
//! of its README runs as written — pytest on plain CPython (its three tests
//! passing) and componentize-py's default build of the component, which
//! `wasmctrl reconcile` then runs over `sample.yaml` (the child's apply and
//! the status). Without
//! python3 + pytest or componentize-py the test is skipped, and fails under
//! CI.

use std::path::Path;
use std::process::Command;

use wasmctrl_test_support::tools::{missing, on_path};

use super::{ok, readme_commands, wasmctrl, workspace, writes};

/// `python3` that can run pytest, and componentize-py; `None` after
/// [`missing`] when either is not there.
fn toolchain() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let python = on_path("python3").filter(|p| {
        Command::new(p)
            .args(["-m", "pytest", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(python) = python else {
        missing(
            "python3 with pytest",
            "`python3 -m pytest --version` failed",
            "python3, then `python3 -m pip install pytest`",
        );
        return None;
    };
    let Some(componentize) = on_path("componentize-py") else {
        missing(
            "componentize-py",
            "is not on PATH",
            "`make toolchains` (toolchains/python/requirements.txt)",
        );
        return None;
    };
    Some((python, componentize))
}

/// Runs `command` (a README line) in `dir`: its words, the binaries
/// resolved here. What it printed.
fn run(command: &str, dir: &Path, tools: &(std::path::PathBuf, std::path::PathBuf)) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    let program = match words[0] {
        "python3" => tools.0.clone(),
        "componentize-py" => tools.1.clone(),
        // Run below, through the host's own `reconcile`.
        "wasmctrl" => return String::new(),
        other => panic!("README command {command:?}: {other} is not run here"),
    };
    let out = Command::new(program)
        .args(&words[1..])
        .current_dir(dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    ok(command, &out)
}

#[test]
fn a_python_guest_scaffolded_tests_with_pytest_and_builds_with_componentize_py() {
    let Some(tools) = toolchain() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().canonicalize().unwrap();
    assert!(!outside.starts_with(workspace()));
    let dir = outside.join("widget-py");
    let printed = ok(
        "wasmctrl new --lang python",
        &wasmctrl(
            &[
                "new",
                "widget-py",
                "--lang",
                "python",
                "--group",
                "ops.example.org",
                "--kind",
                "Widget",
                "--dir",
                dir.to_str().unwrap(),
            ],
            &outside,
        ),
    );
    assert!(printed.contains("python3 -m pytest"), "{printed}");
    assert!(printed.contains("componentize-py -d "), "{printed}");
    assert!(dir.join("app.py").is_file() && !dir.join("Cargo.toml").exists());

    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let commands = readme_commands(&readme);
    let mut ran = Vec::new();
    for command in &commands {
        ran.push((command.clone(), run(command, &dir, &tools)));
    }
    let printed_by = |prefix: &str| {
        ran.iter()
            .find(|(c, _)| c.starts_with(prefix))
            .map(|(_, out)| out.clone())
            .unwrap_or_else(|| panic!("no README command {prefix}…: {commands:#?}"))
    };
    let report = printed_by("python3 -m pytest");
    assert!(report.contains("3 passed"), "{report}");
    printed_by("componentize-py");
    let wasm = dir.join("widget_py.wasm");
    assert!(wasm.is_file());
    // The default componentize-py build runs on the host as it is.
    assert!(
        commands.iter().any(|c| c.starts_with("wasmctrl reconcile")),
        "{commands:#?}"
    );
    let plan = writes(&wasm, &[&dir.join("sample.yaml")], "default/sample", &dir);
    assert_eq!(plan.len(), 2, "{plan:?}");
    let child = &plan[0]["apply"];
    assert_eq!(child["metadata"]["ownerReferences"][0]["kind"], "Widget");
    assert!(child["data"]["message"].is_string(), "{plan:?}");
    assert!(plan[1].get("apply-status").is_some(), "{plan:?}");
}
