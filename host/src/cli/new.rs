//! `wasmctrl new`: the flags of the guest-crate scaffold and what it prints
//! once the crate is written; the crate itself is [`super::scaffold`]'s.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::scaffold::{Lang, Options, Project};

#[derive(Args)]
pub struct NewArgs {
    /// The crate's and the guest's name: a DNS label starting with a letter.
    name: String,
    /// The custom resource's API group; default: example.com.
    #[arg(long)]
    group: Option<String>,
    /// The custom resource's version; default: v1.
    #[arg(long = "version")]
    api_version: Option<String>,
    /// The custom resource's kind; default: NAME in UpperCamelCase.
    #[arg(long)]
    kind: Option<String>,
    /// A controller of this built-in kind instead of a custom resource: its
    /// plural, singular, short name or kind as kubectl takes them, optionally
    /// `.group`-qualified (`namespaces`, `deployments.apps`,
    /// `roles.rbac.authorization.k8s.io`, `Service`).
    #[arg(long = "for", value_name = "KIND", conflicts_with_all = ["group", "api_version", "kind"])]
    builtin: Option<String>,
    /// Where to write the crate (a new or empty directory); default: ./NAME.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The guest SDK (`wit/rust/sdk`, or `wit/python` with `--lang python`,
    /// or `wit/typescript` with `--lang typescript`, of a wasmctrl
    /// checkout); default: the SDK of the source tree this binary was built
    /// from.
    #[arg(long)]
    sdk_path: Option<PathBuf>,
    /// The guest's language: a Rust crate, a Python project built by
    /// componentize-py and tested by pytest, or a TypeScript package built
    /// by componentize-qjs and tested by node --test.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
}

/// Writes the crate and prints the files written and what to run next.
pub fn new_guest(args: NewArgs) -> anyhow::Result<()> {
    let project = Project::new(&Options {
        name: args.name.clone(),
        group: args.group,
        version: args.api_version,
        kind: args.kind,
        builtin: args.builtin,
        sdk_path: args.sdk_path.unwrap_or_else(|| args.lang.source_tree_sdk()),
        lang: args.lang,
    })?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let key = if project.namespaced {
        "default/sample"
    } else {
        "sample"
    };
    let written = project.write(&dir)?;
    let mut out = String::new();
    for path in &written {
        out += &format!("created {}\n", path.display());
    }
    let (test, build, wasm) = match project.lang {
        Lang::Rust => (
            "cargo test".to_string(),
            "cargo build --target wasm32-wasip2 --profile guest".to_string(),
            format!("target/wasm32-wasip2/guest/{}.wasm", project.crate_name),
        ),
        Lang::TypeScript => (
            "npm install && npm test".to_string(),
            "npm run component".to_string(),
            format!("dist/{}.wasm", project.crate_name),
        ),
        Lang::Python => {
            let src = project.sdk_path.join("src");
            (
                "python3 -m pytest".to_string(),
                format!(
                    "componentize-py -d {} -w controller componentize -p . -p {} app -o {}.wasm",
                    src.join("wasmctrl/wit").display(),
                    src.display(),
                    project.crate_name
                ),
                format!("{}.wasm", project.crate_name),
            )
        }
    };
    out += &format!(
        "\nnext, in {dir}:\n  {test}\n  {build}\n  \
         wasmctrl reconcile --guest {wasm} --objects sample.yaml --key {key}\n\
         (README.md there says more)\n",
        dir = dir.display(),
    );
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .context("writing to stdout")
}
