//! The book's pages generated from the code: every flag of every product
//! subcommand, nested ones included (from clap's help, as
//! `wasmctrl SUBCOMMAND --help` prints it), and every metric family (from
//! the registry `/metrics` serves).
//!
//! Each test renders its page and compares it with the committed file in
//! `docs/src/operating/`; a stale page fails naming the command that
//! rewrites it (`make book-regenerate`, which sets
//! [`REGENERATE`]). A third test checks that every metric name the book or
//! README mentions is one the host registers.

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::CommandFactory;

use super::Cli;

/// Set (to anything) to rewrite the generated pages instead of checking them.
const REGENERATE: &str = "WASMCTRL_REGENERATE_BOOK";

/// The development subcommands (the `dev-server` feature's `demo` and
/// `apiserver`): not in the product binary, so not in the book.
fn dev_subcommands() -> Vec<String> {
    #[cfg(feature = "dev-server")]
    {
        use clap::Subcommand;
        super::dev::DevCommand::augment_subcommands(clap::Command::new("dev"))
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect()
    }
    #[cfg(not(feature = "dev-server"))]
    Vec::new()
}

/// The path of every command of `cmd` a user runs (one without
/// subcommands of its own), nested ones included, in the order `--help`
/// lists them; clap's `help` is left out.
fn runnable(cmd: &clap::Command) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = sub.get_name().to_string();
        if sub.has_subcommands() {
            out.extend(runnable(sub).into_iter().map(|mut path| {
                path.insert(0, name.clone());
                path
            }));
        } else {
            out.push(vec![name]);
        }
    }
    out
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// Compares `page` with the committed file, or rewrites it.
fn check(relative: &str, page: &str) {
    let path = repo().join(relative);
    if std::env::var_os(REGENERATE).is_some() {
        std::fs::write(&path, page).expect("writing the generated page");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "{relative} is stale (it no longer matches the code); regenerate it with \
         `make book-regenerate` ({REGENERATE}=1 cargo test -p wasmctrl --bin wasmctrl book::) \
         and commit the result"
    );
}

fn flags_page() -> String {
    let mut cli = Cli::command();
    cli.build();
    let mut page = String::from(
        "<!-- Generated from the CLI by `make book-regenerate` (host/src/cli/book.rs); do not edit. -->\n\
         # Flags\n\n\
         Every flag of the product binary's subcommands, as `wasmctrl SUBCOMMAND --help`\n\
         prints it. A test of the binary fails when this page no longer matches\n\
         the code. Every numeric flag is range-checked: a value out of range is a\n\
         usage error (exit 2) naming the flag and the range.\n",
    );
    let dev = dev_subcommands();
    let product = runnable(&cli)
        .into_iter()
        .filter(|path| !dev.contains(&path[0]));
    for path in product {
        let mut cmd = &mut cli;
        for name in &path {
            cmd = cmd
                .find_subcommand_mut(name)
                .unwrap_or_else(|| panic!("no subcommand {name}"));
        }
        let help = cmd.render_help().to_string();
        let help: Vec<&str> = help.lines().map(str::trim_end).collect();
        page += &format!(
            "\n## `wasmctrl {}`\n\n```text\n{}\n```\n",
            path.join(" "),
            help.join("\n").trim_end()
        );
    }
    page
}

/// `(family as scraped, type, help)` of every registered family.
fn families() -> Vec<(String, String, String)> {
    let text = wasmctrl::metrics::Metrics::new().encode();
    let mut help = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help.insert(name.to_string(), text.trim_end_matches('.').to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            // prometheus-client names a counter's samples `NAME_total`.
            let scraped = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            out.push((
                scraped,
                kind.to_string(),
                help.get(name).cloned().unwrap_or_default(),
            ));
        }
    }
    out
}

fn metrics_page() -> String {
    let mut page = String::from(
        "<!-- Generated from the metrics registry by `make book-regenerate` (host/src/cli/book.rs); do not edit. -->\n\
         | family | type | help |\n|---|---|---|\n",
    );
    for (name, kind, help) in families() {
        page += &format!("| `{name}` | {kind} | {} |\n", help.replace('|', "\\|"));
    }
    page
}

#[test]
fn every_runnable_command_is_found_however_deep_it_is_nested() {
    let cli = clap::Command::new("tool")
        .subcommand(clap::Command::new("run"))
        .subcommand(
            clap::Command::new("guest")
                .subcommand(clap::Command::new("configmap"))
                .subcommand(clap::Command::new("deep").subcommand(clap::Command::new("er"))),
        )
        .subcommand(clap::Command::new("shadow").subcommand(clap::Command::new("report")));
    let mut built = cli;
    built.build();
    assert_eq!(
        runnable(&built),
        [
            vec!["run"],
            vec!["guest", "configmap"],
            vec!["guest", "deep", "er"],
            vec!["shadow", "report"],
        ]
    );
}

#[test]
fn the_books_flags_page_is_what_the_cli_prints() {
    check("docs/src/operating/flags.md", &flags_page());
}

#[test]
fn the_books_metrics_list_is_what_the_registry_serves() {
    let families = families();
    assert!(
        families.len() > 20,
        "the registry encodes its families: {families:?}"
    );
    check("docs/src/operating/metrics-list.md", &metrics_page());
}

/// Words in `text` that look like metric names of the host's families.
fn metric_names(text: &str) -> BTreeSet<String> {
    const PREFIXES: &[&str] = &[
        "wasmctrl_",
        "controller_runtime_",
        "workqueue_",
        "rest_client_",
        "leader_election_",
    ];
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| PREFIXES.iter().any(|p| w.starts_with(p)) && !w.ends_with('_'))
        // `wasmctrl_guest_sdk`, `wasmctrl_apiserver::`, ...: crate names.
        .filter(|w| {
            !w.starts_with("wasmctrl_guest_sdk") && !w.starts_with("wasmctrl_guest_aggregate")
        })
        .filter(|w| {
            !matches!(
                *w,
                "wasmctrl_apiserver" | "wasmctrl_test_support" | "wasmctrl_snapshot"
            )
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_metric_the_book_names_is_registered() {
    let known: BTreeSet<String> = families()
        .into_iter()
        .flat_map(|(name, kind, _)| {
            let mut names = vec![name.clone()];
            if kind == "histogram" {
                for s in ["_bucket", "_sum", "_count"] {
                    names.push(format!("{name}{s}"));
                }
            }
            names
        })
        .collect();
    let mut pages = vec![repo().join("README.md")];
    let mut dirs = vec![repo().join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    let mut unknown = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).expect("a page is readable");
        for name in metric_names(&text) {
            if !known.contains(&name) {
                unknown.push(format!("{}: {name}", page.display()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "metric names the host does not register (known: {known:?}):\n{}",
        unknown.join("\n")
    );
}
