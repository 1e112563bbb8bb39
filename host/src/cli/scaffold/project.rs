//! What every language's templates share: the checked request
//! ([`Project`]) and what was asked ([`Options`], [`Lang`]), why scaffolding
//! fails ([`ScaffoldError`]), and the check that a directory holds an SDK
//! package. It writes no file and knows no template.

use std::fs;
use std::path::{Path, PathBuf};

use super::builtin::KindError;

/// Why a guest crate cannot be scaffolded.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name is not both a crate name and a DNS label.
    #[error("{name:?} cannot name a guest: {reason}")]
    Name {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `--group`, `--version` or `--kind` is not what a CRD accepts.
    #[error("--{flag} {value:?}: {reason}")]
    Type {
        /// The flag.
        flag: &'static str,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `--for` names no built-in kind.
    #[error("--for: {0}")]
    Kind(#[from] KindError),
    /// The target directory holds something already.
    #[error("{0} already exists and is not an empty directory: choose another --dir")]
    NotEmpty(PathBuf),
    /// The SDK directory is not the guest SDK.
    #[error("no wasmctrl guest SDK at {path}: {reason}; pass --sdk-path with the wit/rust/sdk directory of a wasmctrl checkout")]
    Sdk {
        /// The directory tried.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// The SDK directory is not the TypeScript guest SDK (`--lang typescript`).
    #[error("no wasmctrl TypeScript guest SDK at {path}: {reason}; pass --sdk-path with the wit/typescript directory of a wasmctrl checkout")]
    TypeScriptSdk {
        /// The directory tried.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// Creating or writing a file failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The language of the guest project (`--lang`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A crate built for `wasm32-wasip2` with the Rust SDK (`wit/rust/sdk`).
    #[default]
    Rust,
    /// A Python project built by componentize-py with the Python SDK
    /// (`wit/python`), tested by pytest.
    Python,
    /// An npm package in TypeScript built by componentize-qjs with the
    /// TypeScript SDK (`wit/typescript`), tested by `node --test`.
    #[value(name = "typescript")]
    TypeScript,
}

/// What `wasmctrl new` was asked for.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The crate's and the guest's name (a DNS label starting with a letter).
    pub name: String,
    /// The custom resource's API group; default `example.com`.
    pub group: Option<String>,
    /// Its version; default `v1`.
    pub version: Option<String>,
    /// Its kind; default: the name in UpperCamelCase (`my-app` → `MyApp`).
    pub kind: Option<String>,
    /// A built-in kind to control instead of a custom resource (`--for`:
    /// `namespaces`, `deployments.apps`, `Service`); excludes `group`,
    /// `version` and `kind`.
    pub builtin: Option<String>,
    /// The SDK's directory (`wit/rust/sdk` or `wit/python` of a wasmctrl
    /// checkout, by `lang`).
    pub sdk_path: PathBuf,
    /// The project's language.
    pub lang: Lang,
}

/// A checked request: every name the templates need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Project {
    /// The package and guest name.
    pub name: String,
    /// The library's name (`-` → `_`): the component is `<crate_name>.wasm`.
    pub crate_name: String,
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name (also the primary watch's name).
    pub plural: String,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
    /// Whether the kind is built in (`--for`): no CRD, no finalizer, the
    /// labelled objects' ConfigMaps.
    pub builtin: bool,
    /// The SDK directory, absolute.
    pub sdk_path: PathBuf,
    /// The project's language.
    pub lang: Lang,
}

/// `path`, absolute and UTF-8, if its `manifest` (`Cargo.toml`,
/// `pyproject.toml`) names the package `package`.
pub(super) fn check_package(
    path: &Path,
    manifest: &str,
    package: &str,
) -> Result<PathBuf, ScaffoldError> {
    let fail = |reason: String| ScaffoldError::Sdk {
        path: path.to_path_buf(),
        reason,
    };
    let dir = fs::canonicalize(path).map_err(|e| fail(e.to_string()))?;
    let text = fs::read_to_string(dir.join(manifest))
        .map_err(|e| fail(format!("reading its {manifest}: {e}")))?;
    if !text.contains(&format!("name = \"{package}\"")) {
        return Err(fail(format!("its {manifest} is not the package {package}")));
    }
    if dir.to_str().is_none() {
        return Err(fail("the path is not UTF-8".to_string()));
    }
    Ok(dir)
}
