//! `wasmctrl new NAME --lang typescript` from outside the repository: the
//! package written, then what its README tells its author, with the
//! checkout's pinned toolchain on `PATH` — `npm install` (its one
//! dependency is the SDK's directory: no network), `npm test` (tsc, then
//! every `node --test` test passing), `npm run component` — and `wasmctrl
//! reconcile` of the component over `sample.yaml`: the child's apply and
//! the status.

use std::process::Command;

use wasmctrl_test_support::tools;

use super::{ok, wasmctrl, workspace, writes};

#[test]
fn a_typescript_guest_package_tests_builds_and_reconciles_outside_the_repository() {
    let bin = workspace().join("toolchains/js/node_modules/.bin");
    if !bin.join("componentize-qjs").exists() || tools::on_path("npm").is_none() {
        tools::missing(
            "the JavaScript toolchain",
            "is not installed (toolchains/js/node_modules, npm)",
            "make toolchains",
        );
        return;
    }
    assert!(
        workspace()
            .join("wit/typescript/dist/src/index.js")
            .exists(),
        "build the TypeScript SDK first: make guests-js"
    );
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().join("my-app");
    let printed = ok(
        "wasmctrl new --lang typescript",
        &wasmctrl(
            &[
                "new",
                "my-app",
                "--lang",
                "typescript",
                "--dir",
                dir.to_str().unwrap(),
            ],
            outside.path(),
        ),
    );
    assert!(printed.contains("package.json"), "{printed}");
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let npm = |args: &[&str]| {
        Command::new("npm")
            .args(args)
            .current_dir(&dir)
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    ok(
        "npm install",
        &npm(&["install", "--no-audit", "--no-fund", "--offline"]),
    );
    let report = ok("npm test", &npm(&["test"]));
    assert!(
        report.contains("# pass 6") && report.contains("# fail 0"),
        "{report}"
    );
    ok("npm run component", &npm(&["run", "component"]));
    let wasm = dir.join("dist/my_app.wasm");
    let plan = writes(&wasm, &[&dir.join("sample.yaml")], "default/sample", &dir);
    assert_eq!(plan.len(), 2, "{plan:?}");
    let child = &plan[0]["apply"];
    assert_eq!(child["data"]["message"], "hello from my-app");
    assert_eq!(child["metadata"]["ownerReferences"][0]["kind"], "MyApp");
    assert!(plan[1].get("apply-status").is_some(), "{plan:?}");
}
