//! Third-party tools a test drives (kubectl, the Python client): found on
//! the machine, or else the test fails under CI and is skipped elsewhere.
//!
//! A test that cannot run must never pass silently. Under CI (the `CI`
//! environment variable, which `.ci/run` sets) a missing tool fails the test
//! with a message naming the tool; on a developer's machine the test prints
//! a `SKIPPED` line saying what to install and returns.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// Whether this run is CI's: `CI` is set to anything but empty, `0` or
/// `false`.
#[must_use]
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// The running test's name (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("this test")
        .to_string()
}

/// Reports that `tool` is missing (`why`, and `install` says how to get
/// it): panics under CI, else prints `SKIPPED <test>: …` to stderr. The
/// caller returns after it. The line reaches the terminal even when
/// libtest captures the test's output.
pub fn missing(tool: &str, why: &str, install: &str) {
    let test = test_name();
    assert!(
        !in_ci(),
        "{test}: {tool} is required under CI (CI is set) but {why}; install it: {install} (.ci/run does)"
    );
    // Straight to the process's stderr: libtest captures `eprintln!` of a
    // passing test, and a skip must be seen.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {tool} {why}; install it ({install}) to run this test, and CI=1 makes it required"
    );
}

/// The first executable named `name` on `PATH`.
#[must_use]
pub fn on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// kubectl on `PATH`; when it is missing, [`missing`] fails (CI) or skips.
#[must_use]
pub fn kubectl() -> Option<PathBuf> {
    let found = on_path("kubectl");
    if found.is_none() {
        missing(
            "kubectl",
            "is not on PATH",
            "a v1.32 kubectl binary on PATH",
        );
    }
    found
}

/// A `python3` that can `import kubernetes` (the official Python client);
/// when there is none, [`missing`] fails (CI) or skips.
#[must_use]
pub fn python_client() -> Option<PathBuf> {
    let Some(python) = on_path("python3") else {
        missing(
            "python3",
            "is not on PATH",
            "python3, then `python3 -m pip install kubernetes`",
        );
        return None;
    };
    let imports = Command::new(&python)
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        missing(
            "the Python client",
            "`python3 -c \"import kubernetes\"` failed",
            "`python3 -m pip install kubernetes`",
        );
        return None;
    }
    Some(python)
}
