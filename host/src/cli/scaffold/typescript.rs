//! `wasmctrl new NAME --lang typescript`: the same controller as the Rust
//! scaffold (a custom resource with a child ConfigMap, status, the
//! host-managed finalizer, its CRD and sample object) as an npm package in
//! TypeScript: `src/guest.ts` written with the TypeScript SDK
//! (`wit/typescript`, a `file:` dependency on a directory it checks),
//! `node --test` tests, the component's entry and the build scripts that
//! use the checkout's pinned toolchain (`toolchains/js`). [`super`] checks
//! the names and writes the files; this module checks the SDK and fills
//! the templates. Never runs npm and never reaches the network; built-in
//! kinds (`--for`) are the Rust scaffold's only.

use std::fs;
use std::path::{Path, PathBuf};

use super::project::{Project, ScaffoldError};

/// The TypeScript SDK of the source tree this binary was built from; it
/// may not exist where the binary runs.
pub fn source_tree_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/typescript")
}

/// `path`, absolute, if it is the TypeScript SDK's package directory.
pub fn check_sdk(path: &Path) -> Result<PathBuf, ScaffoldError> {
    let fail = |reason: String| ScaffoldError::TypeScriptSdk {
        path: path.to_path_buf(),
        reason,
    };
    let dir = fs::canonicalize(path).map_err(|e| fail(e.to_string()))?;
    let manifest = fs::read_to_string(dir.join("package.json"))
        .map_err(|e| fail(format!("reading its package.json: {e}")))?;
    if !manifest.contains("\"name\": \"wasmctrl-guest-sdk\"") {
        return Err(fail(
            "its package.json is not the package wasmctrl-guest-sdk (the wit/typescript directory)"
                .to_string(),
        ));
    }
    if dir.to_str().is_none() {
        return Err(fail("the path is not UTF-8".to_string()));
    }
    Ok(dir)
}

/// Every file of the package: its path relative to the package's directory
/// and its text.
pub fn files(project: &Project) -> Vec<(&'static str, String)> {
    let sdk = project.sdk_path.to_string_lossy().into_owned();
    // The SDK is `wit/typescript` of a checkout: the contract and the
    // pinned toolchain sit beside it.
    let checkout = project.sdk_path.join("../..");
    let checkout = fs::canonicalize(&checkout).unwrap_or(checkout);
    let wit = checkout.join("wit/controller.wit");
    let toolchain = checkout.join("toolchains/js");
    [
        (
            "package.json",
            include_str!("templates/typescript/package.json.tmpl"),
        ),
        (
            "tsconfig.json",
            include_str!("templates/typescript/tsconfig.json.tmpl"),
        ),
        (
            ".gitignore",
            include_str!("templates/typescript/gitignore.tmpl"),
        ),
        (
            "README.md",
            include_str!("templates/typescript/README.md.tmpl"),
        ),
        ("crd.yaml", include_str!("templates/crd.yaml.tmpl")),
        ("sample.yaml", include_str!("templates/sample.yaml.tmpl")),
        (
            "src/guest.ts",
            include_str!("templates/typescript/guest.ts.tmpl"),
        ),
        (
            "src/component.ts",
            include_str!("templates/typescript/component.ts.tmpl"),
        ),
        (
            "test/guest.test.ts",
            include_str!("templates/typescript/guest.test.ts.tmpl"),
        ),
    ]
    .into_iter()
    .map(|(path, template)| {
        let text = template
            .replace("{{ts_sdk}}", &sdk)
            .replace("{{wit_path}}", &wit.to_string_lossy())
            .replace("{{toolchain}}", &toolchain.to_string_lossy());
        (path, project.render(&text))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::scaffold::project::{Lang, Options};

    fn options(name: &str) -> Options {
        Options {
            name: name.to_string(),
            sdk_path: Lang::TypeScript.source_tree_sdk(),
            lang: Lang::TypeScript,
            ..Options::default()
        }
    }

    #[test]
    fn the_package_names_the_sdk_the_contract_and_the_kind_with_no_placeholder_left() {
        let p = Project::new(&options("my-app")).expect("a valid request");
        let files = p.files();
        for (path, text) in &files {
            assert!(!text.contains("{{"), "{path}: {text}");
        }
        let text = |name: &str| &files.iter().find(|(p, _)| *p == name).expect("written").1;
        let package: serde_json::Value = serde_json::from_str(text("package.json")).expect("JSON");
        let sdk = package["dependencies"]["wasmctrl-guest-sdk"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(sdk, format!("file:{}", p.sdk_path.display()));
        assert!(package["scripts"]["component"]
            .as_str()
            .is_some_and(|s| s.contains("wit/controller.wit") && s.contains("dist/my_app.wasm")));
        assert!(text("src/guest.ts").contains("gvk(\"example.com\", \"v1\", \"MyApp\")"));
        assert!(text("crd.yaml").contains("name: myapps.example.com"));
    }

    #[test]
    fn the_rust_sdk_or_a_built_in_kind_is_refused() {
        let mut rust = options("my-app");
        rust.sdk_path = Lang::Rust.source_tree_sdk();
        let err = Project::new(&rust).unwrap_err().to_string();
        assert!(
            err.contains("no wasmctrl TypeScript guest SDK") && err.contains("package.json"),
            "{err}"
        );
        let mut builtin = options("my-app");
        builtin.builtin = Some("namespaces".into());
        let err = Project::new(&builtin).unwrap_err().to_string();
        assert!(err.contains("Rust only"), "{err}");
    }
}
