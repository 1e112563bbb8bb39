//! `wasmctrl new --lang python`: the same controller as the Rust crate
//! (a child ConfigMap, status, the host-managed finalizer), as a
//! Python guest project built by componentize-py and tested by pytest; the
//! CRD and sample object are the Rust crate's templates. Owns the Python
//! templates (`templates/python/`) and the check that a directory is the
//! Python SDK (`wit/python` of a wasmctrl checkout). Never runs Python or
//! componentize-py.

use std::path::{Path, PathBuf};

use super::project::{Project, ScaffoldError};

/// The Python SDK of the source tree this binary was built from.
pub fn source_tree_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/python")
}

/// `path`, absolute, if it is the Python SDK's directory (`wit/python`:
/// its `pyproject.toml` names the package `wasmctrl`).
pub fn check_sdk(path: &Path) -> Result<PathBuf, ScaffoldError> {
    super::project::check_package(path, "pyproject.toml", "wasmctrl")
}

/// The project's files: path relative to its directory, and template.
pub fn templates() -> [(&'static str, &'static str); 7] {
    [
        (
            "pyproject.toml",
            include_str!("templates/python/pyproject.toml.tmpl"),
        ),
        (
            ".gitignore",
            include_str!("templates/python/gitignore.tmpl"),
        ),
        ("README.md", include_str!("templates/python/README.md.tmpl")),
        ("crd.yaml", include_str!("templates/crd.yaml.tmpl")),
        ("sample.yaml", include_str!("templates/sample.yaml.tmpl")),
        ("app.py", include_str!("templates/python/app.py.tmpl")),
        (
            "tests/test_app.py",
            include_str!("templates/python/test_app.py.tmpl"),
        ),
    ]
}

/// The placeholders only the Python templates have: the SDK's source
/// directory (as a TOML string, and plain) and its WIT directory.
pub fn placeholders(project: &Project) -> [(&'static str, String); 3] {
    let src = project.sdk_path.join("src");
    let plain = src.to_string_lossy().to_string();
    [
        (
            "{{sdk_src}}",
            serde_json::to_string(&plain).unwrap_or_default(),
        ),
        ("{{sdk_src_plain}}", plain.clone()),
        (
            "{{sdk_wit}}",
            src.join("wasmctrl/wit").to_string_lossy().to_string(),
        ),
    ]
}
