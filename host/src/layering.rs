//! The layering of the library's top-level modules, checked over the
//! sources: data flows informer → store → keys → workqueue → guest →
//! actuator at run time, and at compile time the bottom of that path never
//! imports the top. [`LAYERS`] lists every module, bottom first; a module
//! may use only modules of lower layers (never its own layer, so no circle
//! can form). A new module must be given a layer here.

/// Every top-level module of the library, by layer, bottom first.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves: no module of ours",
        &[
            "config",
            "failure",
            "permissions",
            "request",
            "sync",
            "urlpath",
        ],
    ),
    (
        "mechanisms",
        &["events", "leader", "projection", "quarantine", "workqueue"],
    ),
    ("caches, counters, contract", &["guest", "metrics", "store"]),
    (
        "reading the cluster and relating objects",
        &["claims", "client", "discovery", "informer", "relations"],
    ),
    ("acting on plans", &["actuator", "aggregate"]),
    ("comparing plans", &["shadow"]),
    ("recording cases", &["recording"]),
    ("one guest's control loop", &["controller"]),
    ("the host", &["supervisor"]),
    ("tools over the runtime", &["offline"]),
];

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    use super::LAYERS;

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    /// The `mod NAME;` declarations of a crate root (`lib.rs`, `main.rs`).
    fn declared(root: &str) -> BTreeSet<String> {
        let text = std::fs::read_to_string(src().join(root)).expect("crate root");
        text.lines()
            .filter_map(|l| {
                let l = l.trim();
                let l = l.strip_prefix("pub ").unwrap_or(l);
                l.strip_prefix("mod ")?
                    .strip_suffix(';')
                    .map(str::to_string)
            })
            .collect()
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("source directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The top-level modules a source names through `crate::` paths, code
    /// only (comments and doc links do not count): `crate::a::b`,
    /// `crate::{a, b::{c}}`.
    fn uses(text: &str) -> BTreeSet<String> {
        let code: String = text
            .lines()
            .map(|l| match l.find("//") {
                Some(at) => &l[..at],
                None => l,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let ident = |s: &str| -> String {
            s.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        };
        let mut out = BTreeSet::new();
        for (at, _) in code.match_indices("crate::") {
            let rest = &code[at + "crate::".len()..];
            let Some(group) = rest.strip_prefix('{') else {
                out.insert(ident(rest));
                continue;
            };
            // The first name of each item at the group's top level.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphanumeric() || c == '_') => {
                        out.insert(ident(&group[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        }
        out
    }

    fn layer_of() -> BTreeMap<&'static str, usize> {
        let mut layer = BTreeMap::new();
        for (i, (_, modules)) in LAYERS.iter().enumerate() {
            for m in *modules {
                assert!(layer.insert(*m, i).is_none(), "{m} is in two layers");
            }
        }
        layer
    }

    #[test]
    fn every_library_module_has_a_layer() {
        let layer = layer_of();
        let modules = declared("lib.rs");
        let missing: Vec<_> = modules
            .iter()
            .filter(|m| *m != "layering" && !layer.contains_key(m.as_str()))
            .collect();
        assert!(missing.is_empty(), "modules without a layer: {missing:?}");
        let stale: Vec<_> = layer.keys().filter(|m| !modules.contains(**m)).collect();
        assert!(
            stale.is_empty(),
            "layers name modules that do not exist: {stale:?}"
        );
    }

    #[test]
    fn no_module_uses_a_module_of_its_own_layer_or_above() {
        let layer = layer_of();
        let binary = declared("main.rs");
        let mut files = Vec::new();
        rust_files(&src(), &mut files);
        let mut wrong = Vec::new();
        for file in files {
            let relative = file.strip_prefix(src()).expect("under src");
            let top = relative
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .map(|c| c.trim_end_matches(".rs"))
                .expect("a file name");
            if matches!(top, "lib" | "main" | "layering") || binary.contains(top) {
                continue;
            }
            let Some(&from) = layer.get(top) else {
                continue;
            };
            let text = std::fs::read_to_string(&file).expect("source file");
            for used in uses(&text) {
                let Some(&to) = layer.get(used.as_str()) else {
                    continue;
                };
                if used != top && to >= from {
                    wrong.push(format!(
                        "{} uses crate::{used} ({}: layer {to}) from {top} ({}: layer {from})",
                        relative.display(),
                        LAYERS[to].0,
                        LAYERS[from].0,
                    ));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "imports against the layering:\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn the_scanner_reads_paths_and_groups_and_skips_comments() {
        let text = "use crate::store::{Change, Handler};\n\
                    use crate::{guest::{self, Gvk},\n    sync::lock, metrics};\n\
                    // crate::controller in a comment\n\
                    /// [`crate::supervisor`]\n\
                    let x = crate::informer::Informer::start(); // crate::actuator\n";
        let found: Vec<String> = uses(text).into_iter().collect();
        assert_eq!(found, ["guest", "informer", "metrics", "store", "sync"]);
    }

    #[test]
    fn an_upward_import_is_caught() {
        // What the informer once did: the bottom importing the top.
        let layer = layer_of();
        let used = uses("use crate::controller::GuestController;");
        assert!(used.iter().any(|u| layer[u.as_str()] >= layer["informer"]));
    }
}
