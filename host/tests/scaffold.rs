//! `wasmctrl new` from outside the repository: scaffold a guest crate into
//! a temporary directory, then do what its README tells its author — the
//! native tests, the `wasm32-wasip2` build with the guest profile, and
//! `wasmctrl reconcile` of the built component over `sample.yaml` — with
//! nothing copied from this repository but `Cargo.lock` (the versions the
//! workspace already built, so the shared target directory stays warm);
//! then every command of its README as written, but those that need a
//! cluster, the network or a running host (`rustup`, `kubectl`,
//! `wasmctrl run`, `wasmctrl replay`), so a README command nothing runs
//! fails the test.
//!
//! Its own test binary: its cargo builds must not run beside the
//! integration tests, whose timings they would disturb.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The repository's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// Where scaffolded crates build: `scaffold/` in the workspace's target
/// directory (`CARGO_TARGET_DIR`, relative to the workspace root when
/// relative, as `make` passes it), shared between runs.
fn target_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    workspace().join(target).join("scaffold")
}

fn wasmctrl(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// The shell commands of `readme`'s ```sh blocks, one per command: `\`
/// continuations joined, `# …` comments dropped.
fn readme_commands(readme: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            _ if in_sh => {
                let line = line.split(" #").next().unwrap_or("").trim();
                match line.strip_suffix('\\') {
                    Some(head) => pending.push_str(head),
                    None => {
                        pending.push_str(line);
                        let command = pending.split_whitespace().collect::<Vec<_>>().join(" ");
                        if !command.is_empty() {
                            commands.push(command);
                        }
                        pending.clear();
                    }
                }
            }
            _ => {}
        }
    }
    commands
}

fn cargo(args: &[&str], cwd: &Path) -> Output {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(cargo)
        .args(args)
        .current_dir(cwd)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap()
}

fn ok(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failure(what: &str, out: &Output) -> String {
    assert!(!out.status.success(), "{what} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `wasmctrl reconcile` of the component over `objects`: the plan's writes.
fn writes(wasm: &Path, objects: &[&Path], cwd: &Path) -> Vec<Value> {
    let mut args = vec!["reconcile", "--guest", wasm.to_str().unwrap()];
    for o in objects {
        args.extend(["--objects", o.to_str().unwrap()]);
    }
    args.extend([
        "--key",
        "default/sample",
        "--now",
        "2026-01-01T00:00:00Z",
        "--no-guest-cache",
    ]);
    let out = ok("wasmctrl reconcile", &wasmctrl(&args, cwd));
    let doc: Value = serde_json::from_str(&out).unwrap();
    doc["plan"]["writes"].as_array().unwrap().clone()
}

#[test]
fn a_scaffolded_guest_tests_builds_and_runs_offline_outside_the_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().canonicalize().unwrap();
    assert!(!outside.starts_with(workspace()), "{}", outside.display());
    let dir = outside.join("widget-op");
    let args = [
        "new",
        "widget-op",
        "--group",
        "ops.example.org",
        "--kind",
        "Widget",
        "--dir",
    ];
    let printed = ok(
        "wasmctrl new",
        &wasmctrl(&[&args[..], &[dir.to_str().unwrap()]].concat(), &outside),
    );
    assert!(
        printed.contains("cargo build --target wasm32-wasip2 --profile guest"),
        "{printed}"
    );
    std::fs::copy(workspace().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();

    // rustfmt-clean as generated.
    ok("cargo fmt --check", &cargo(&["fmt", "--check"], &dir));
    let tests = cargo(&["test"], &dir);
    let report = ok("cargo test", &tests);
    assert!(report.contains("test result: ok. 6 passed"), "{report}");
    ok(
        "the guest build",
        &cargo(
            &["build", "--target", "wasm32-wasip2", "--profile", "guest"],
            &dir,
        ),
    );
    let wasm = target_dir().join("wasm32-wasip2/guest/widget_op.wasm");
    let size = std::fs::metadata(&wasm).unwrap().len();
    assert!(size <= 262_144, "{} is {size} bytes", wasm.display());

    // The sample alone: the child is planned, controlled by the Widget, and
    // Ready is False until it exists.
    let sample = dir.join("sample.yaml");
    let plan = writes(&wasm, &[&sample], &dir);
    assert_eq!(plan.len(), 2, "{plan:#?}");
    let child = &plan[0]["apply"];
    assert_eq!(child["kind"], "ConfigMap");
    assert_eq!(child["metadata"]["name"], "sample");
    assert_eq!(child["data"]["message"], "hello from widget-op");
    let owner = &child["metadata"]["ownerReferences"][0];
    assert_eq!(owner["apiVersion"], "ops.example.org/v1");
    assert_eq!(owner["kind"], "Widget");
    assert_eq!(owner["uid"], "3f6c1d2a-sample");
    assert_eq!(owner["controller"], true);
    let status = &plan[1]["apply-status"];
    assert_eq!(status["kind"], "Widget");
    assert_eq!(status["status"]["observedGeneration"], 1);
    assert_eq!(status["status"]["conditions"][0]["status"], "False");

    // With the child the plan applied (as the README says): Ready is True.
    let applied = dir.join("child.json");
    let mut cm = child.clone();
    cm["metadata"]["uid"] = "7d1c2a9e-child".into();
    std::fs::write(&applied, cm.to_string()).unwrap();
    let plan = writes(&wasm, &[&sample, &applied], &dir);
    assert_eq!(
        plan[1]["apply-status"]["status"]["conditions"][0]["status"],
        "True"
    );

    // Every command of its README, as written (from the crate's directory,
    // `target/` being where the builds above went): run, or one that needs
    // a cluster, the network or a running host's recordings.
    std::os::unix::fs::symlink(target_dir(), dir.join("target")).unwrap();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let commands = readme_commands(&readme);
    let cache = tmp.path().join("cache");
    let mut ran = Vec::new();
    for command in &commands {
        // What a pipe feeds (`| kubectl apply -f -`) needs a cluster.
        let head = command.split(" | ").next().unwrap_or_default();
        let words: Vec<&str> = head.split_whitespace().collect();
        let out = match words.as_slice() {
            ["cargo", args @ ..] => cargo(args, &dir),
            ["wasmctrl", args @ ("reconcile" | "guest"), ..] => {
                Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
                    .args(&words[1..])
                    .current_dir(&dir)
                    .env("XDG_CACHE_HOME", &cache)
                    .output()
                    .unwrap_or_else(|e| panic!("{args}: {e}"))
            }
            ["rustup", ..] | ["kubectl", ..] | ["wasmctrl", "run" | "replay", ..] => continue,
            _ => {
                panic!("README command {command:?} is neither run here nor known to need a cluster")
            }
        };
        ran.push((command.clone(), ok(command, &out)));
    }
    let ran_named = |prefix: &str| {
        ran.iter()
            .find(|(c, _)| c.starts_with(prefix))
            .unwrap_or_else(|| panic!("no README command {prefix}…: {commands:#?}"))
            .1
            .clone()
    };
    let plan: Value = serde_json::from_str(&ran_named("wasmctrl reconcile")).unwrap();
    assert_eq!(
        plan["plan"]["writes"].as_array().map(Vec::len),
        Some(2),
        "{plan:#}"
    );
    let configmap = ran_named("wasmctrl guest configmap");
    assert!(configmap.contains("widget-op.wasm"), "{configmap}");
    ran_named("cargo test");
    ran_named("cargo build --target wasm32-wasip2 --profile guest");
}

#[test]
fn bad_names_and_non_empty_directories_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in ["My_Op", "fn", "9op"] {
        let e = failure(bad, &wasmctrl(&["new", bad], tmp.path()));
        assert!(e.contains("cannot name a guest"), "{e}");
    }
    let e = failure(
        "--group",
        &wasmctrl(&["new", "op", "--group", "nodots"], tmp.path()),
    );
    assert!(e.contains("--group \"nodots\""), "{e}");
    std::fs::create_dir(tmp.path().join("op")).unwrap();
    std::fs::write(tmp.path().join("op/keep.txt"), "mine").unwrap();
    let e = failure("non-empty", &wasmctrl(&["new", "op"], tmp.path()));
    assert!(
        e.contains("already exists and is not an empty directory"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(tmp.path().join("op")).unwrap().count(), 1);
    let e = failure(
        "sdk",
        &wasmctrl(&["new", "op2", "--sdk-path", "/nonexistent"], tmp.path()),
    );
    assert!(e.contains("no wasmctrl guest SDK at /nonexistent"), "{e}");
    assert!(!tmp.path().join("op2").exists());
}
