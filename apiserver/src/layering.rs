//! The layering of the server's modules, checked over the sources: a
//! request flows http → controllers/rules → storage at run time, and at
//! compile time the bottom of that path never imports the top. [`LAYERS`]
//! lists every top-level module, bottom first; a module may use only
//! modules of lower layers (never its own layer, so no circle can form
//! between them). A new module must be given a layer here.
//!
//! Inside a module the same holds between its files: no folder holds an
//! import circle between its files and submodules (its `mod.rs` or facade
//! file counts as one of them).

/// Every top-level module of the crate, by layer, bottom first.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves: who may do what, errors as Status, objects and resources",
        &["auth", "status", "storage"],
    ),
    ("knobs and patch semantics", &["config", "patch"]),
    ("the semantics of each kind", &["rules"]),
    ("the shared cluster state", &["cluster"]),
    ("the control plane's stand-ins", &["controllers"]),
    ("serving requests", &["http"]),
];

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    use super::LAYERS;

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    /// The `mod NAME;` declarations of the crate root.
    fn declared() -> BTreeSet<String> {
        let text = std::fs::read_to_string(src().join("lib.rs")).expect("crate root");
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

    /// The names the crate root re-exports from its modules
    /// (`pub use http::{body, ...};` makes `crate::body` a path into
    /// `http`), each with the module it comes from.
    fn aliases() -> BTreeMap<String, String> {
        let text = std::fs::read_to_string(src().join("lib.rs")).expect("crate root");
        let modules = declared();
        let mut out = BTreeMap::new();
        for statement in code(&text).split(';') {
            let Some(rest) = statement.trim().strip_prefix("pub use ") else {
                continue;
            };
            let Some((module, _)) = rest.split_once("::") else {
                continue;
            };
            if !modules.contains(module) {
                continue;
            }
            for path in use_paths(&rest[module.len() + 2..]) {
                if let Some(last) = path.last() {
                    out.insert(last.clone(), module.to_string());
                }
            }
        }
        out
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

    /// The module path of a source file (`http/handlers/reads.rs` →
    /// `[http, handlers, reads]`, `rules/crd/mod.rs` → `[rules, crd]`).
    fn module_of(relative: &Path) -> Vec<String> {
        let mut path: Vec<String> = relative
            .components()
            .filter_map(|c| c.as_os_str().to_str())
            .map(|c| c.trim_end_matches(".rs").to_string())
            .collect();
        if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
            path.pop();
        }
        path
    }

    /// Code only: line comments (doc comments too) and inline `mod tests
    /// { ... }` blocks at the end of a file, whose `super` is the file
    /// itself, are left out (the test modules of their own files are left
    /// out of the circle check).
    fn code(text: &str) -> String {
        let mut out = Vec::new();
        for line in text.lines() {
            if line.trim() == "mod tests {" {
                break;
            }
            out.push(match line.find("//") {
                Some(at) => &line[..at],
                None => line,
            });
        }
        out.join("\n")
    }

    fn ident(s: &str) -> &str {
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        &s[..end]
    }

    /// The paths of a use tree after its prefix: `a::b` → `[a, b]`,
    /// `a::{b, c::{d}}` → `[a, b]`, `[a, c, d]`; `self` in a group is the
    /// group's prefix, and `*` ends a path.
    fn use_paths(tree: &str) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        tree_paths(tree.trim_start(), &mut Vec::new(), &mut out);
        out
    }

    /// Reads one use tree at the start of `s` below `prefix`; returns the
    /// bytes read.
    fn tree_paths(s: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
        let depth = prefix.len();
        let mut at = 0;
        loop {
            let rest = &s[at..];
            let trimmed = rest.trim_start();
            at += rest.len() - trimmed.len();
            if let Some(group) = trimmed.strip_prefix('{') {
                at += 1;
                let mut inner = group;
                loop {
                    let skip = inner.len() - inner.trim_start().len();
                    at += skip;
                    inner = &inner[skip..];
                    if inner.starts_with('}') {
                        at += 1;
                        break;
                    }
                    if let Some(after) = inner.strip_prefix(',') {
                        at += 1;
                        inner = after;
                        continue;
                    }
                    if inner.is_empty() {
                        break;
                    }
                    let read = tree_paths(inner, prefix, out).max(1);
                    at += read;
                    inner = &inner[read..];
                }
                break;
            }
            let name = ident(trimmed);
            if name.is_empty() {
                if depth < prefix.len() {
                    out.push(prefix.clone());
                }
                break;
            }
            at += name.len();
            if name != "self" {
                prefix.push(name.to_string());
            }
            let next = &s[at..];
            match next.strip_prefix("::") {
                Some(_) => at += 2,
                None => {
                    out.push(prefix.clone());
                    // `name as alias`: the alias is not a path.
                    let after = next.trim_start();
                    if let Some(alias) = after.strip_prefix("as ") {
                        let alias = alias.trim_start();
                        at += next.len() - alias.len() + ident(alias).len();
                    }
                    break;
                }
            }
        }
        prefix.truncate(depth);
        at
    }

    /// Every module path a file of module `module` names, made absolute:
    /// `crate::a::b`, `super::c` and `self::d` paths (use trees included),
    /// and, in a module with submodules, a path through one of them
    /// (`graph::Graph` in `gc/mod.rs`). Crate-root aliases are resolved.
    fn references(
        text: &str,
        module: &[String],
        children: &BTreeSet<String>,
        aliases: &BTreeMap<String, String>,
    ) -> Vec<Vec<String>> {
        let code = code(text);
        let mut out = Vec::new();
        let bytes = code.as_bytes();
        let mut i = 0;
        while i < code.len() {
            let before = if i == 0 { b' ' } else { bytes[i - 1] };
            let starts_word = !(before.is_ascii_alphanumeric() || before == b'_' || before == b':');
            let word = ident(&code[i..]);
            if !starts_word || word.is_empty() || !code[i + word.len()..].starts_with("::") {
                i += code[i..].chars().next().map_or(1, char::len_utf8);
                continue;
            }
            let mut base: Vec<String> = match word {
                "crate" => Vec::new(),
                "self" => module.to_vec(),
                "super" => module[..module.len().saturating_sub(1)].to_vec(),
                child if children.contains(child) => module.to_vec(),
                _ => {
                    i += word.len();
                    continue;
                }
            };
            let mut rest = &code[i..];
            if matches!(word, "crate" | "self" | "super") {
                rest = &rest[word.len() + 2..];
                while let Some(more) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = more;
                }
            }
            // A path from the crate root may go through one of its re-exports.
            let from_root = base.is_empty();
            for path in use_paths(rest) {
                let mut full = base.clone();
                full.extend(path);
                if from_root {
                    if let Some(real) = full.first().and_then(|f| aliases.get(f)).cloned() {
                        if real != full[0] {
                            full.insert(0, real);
                        }
                    }
                }
                out.push(full);
            }
            i += word.len();
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

    /// Every source file of the crate, with its module path and text.
    fn sources() -> Vec<(PathBuf, Vec<String>, String)> {
        let mut files = Vec::new();
        rust_files(&src(), &mut files);
        files.sort();
        files
            .into_iter()
            .map(|file| {
                let relative = file.strip_prefix(src()).expect("under src").to_path_buf();
                let module = module_of(&relative);
                let text = std::fs::read_to_string(&file).expect("source file");
                (relative, module, text)
            })
            .collect()
    }

    /// The submodules of each module that has any.
    fn children_of(modules: &[Vec<String>]) -> BTreeMap<Vec<String>, BTreeSet<String>> {
        let mut children: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
        for m in modules {
            for n in 0..m.len() {
                children
                    .entry(m[..n].to_vec())
                    .or_default()
                    .insert(m[n].clone());
            }
        }
        children
    }

    #[test]
    fn every_module_has_a_layer() {
        let layer = layer_of();
        let modules = declared();
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

    /// Each file's uses of other top-level modules of its own layer or above.
    fn upward_uses(
        files: &[(PathBuf, Vec<String>, String)],
        layer: &BTreeMap<&str, usize>,
    ) -> Vec<String> {
        let aliases = aliases();
        let modules: Vec<Vec<String>> = files.iter().map(|(_, m, _)| m.clone()).collect();
        let children = children_of(&modules);
        let mut wrong = Vec::new();
        for (relative, module, text) in files {
            let Some(top) = module.first() else { continue };
            let Some(&from) = layer.get(top.as_str()) else {
                continue;
            };
            let kids = children.get(module).cloned().unwrap_or_default();
            let used: BTreeSet<String> = references(text, module, &kids, &aliases)
                .into_iter()
                .filter_map(|p| p.first().cloned())
                .collect();
            for used in used {
                let Some(&to) = layer.get(used.as_str()) else {
                    continue;
                };
                if used != *top && to >= from {
                    wrong.push(format!(
                        "{} uses crate::{used} ({}: layer {to}) from {top} ({}: layer {from})",
                        relative.display(),
                        LAYERS[to].0,
                        LAYERS[from].0,
                    ));
                }
            }
        }
        wrong
    }

    #[test]
    fn no_module_uses_a_module_of_its_own_layer_or_above() {
        let wrong = upward_uses(&sources(), &layer_of());
        assert!(
            wrong.is_empty(),
            "imports against the layering:\n{}",
            wrong.join("\n")
        );
    }

    /// The import circles between the parts of each module with
    /// submodules: its submodules and itself (`<self>`: its `mod.rs` or
    /// facade file), as `folder: a → b → a`.
    fn circles(files: &[(PathBuf, Vec<String>, String)]) -> Vec<String> {
        let aliases = aliases();
        let modules: Vec<Vec<String>> = files.iter().map(|(_, m, _)| m.clone()).collect();
        let children = children_of(&modules);
        let mut found = Vec::new();
        for (folder, parts) in &children {
            if folder.is_empty() {
                // The crate root's parts are the layers above.
                continue;
            }
            let part_of = |m: &[String]| -> Option<String> {
                if !m.starts_with(folder) {
                    return None;
                }
                Some(match m.get(folder.len()) {
                    Some(p) if parts.contains(p) => p.clone(),
                    _ => "<self>".to_string(),
                })
            };
            let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (_, module, text) in files {
                // Tests in a file module of their own use the module's
                // facade as any caller does.
                if module.iter().any(|m| m == "tests") {
                    continue;
                }
                let Some(from) = part_of(module) else {
                    continue;
                };
                let kids = children.get(module).cloned().unwrap_or_default();
                for path in references(text, module, &kids, &aliases) {
                    match part_of(&path) {
                        Some(to) if to != from => {
                            edges.entry(from.clone()).or_default().insert(to);
                        }
                        _ => {}
                    }
                }
            }
            for circle in cycles(&edges) {
                found.push(format!("{}: {}", folder.join("/"), circle.join(" → ")));
            }
        }
        found
    }

    /// One cycle through each node that is on any, as a walk `a → b → a`.
    fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
        let mut found = Vec::new();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for start in edges.keys() {
            if seen.contains(start) {
                continue;
            }
            // Breadth-first back to `start`, keeping the shortest walk.
            let mut came_from: BTreeMap<String, String> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start.clone()]);
            let mut closed = None;
            while let Some(node) = queue.pop_front() {
                for next in edges.get(&node).into_iter().flatten() {
                    if next == start {
                        closed = Some(node.clone());
                        break;
                    }
                    if !came_from.contains_key(next) {
                        came_from.insert(next.clone(), node.clone());
                        queue.push_back(next.clone());
                    }
                }
                if closed.is_some() {
                    break;
                }
            }
            let Some(mut node) = closed else { continue };
            let mut walk = vec![start.clone()];
            while node != *start {
                walk.insert(1, node.clone());
                node = came_from[&node].clone();
            }
            walk.push(start.clone());
            seen.extend(walk.iter().cloned());
            found.push(walk);
        }
        found
    }

    #[test]
    fn no_folder_holds_an_import_circle() {
        let found = circles(&sources());
        assert!(
            found.is_empty(),
            "import circles inside folders:\n{}",
            found.join("\n")
        );
    }

    fn file(path: &str, text: &str) -> (PathBuf, Vec<String>, String) {
        let relative = PathBuf::from(path);
        let module = module_of(&relative);
        (relative, module, text.to_string())
    }

    #[test]
    fn the_scanner_reads_paths_groups_and_relative_paths_and_skips_comments() {
        let kids = BTreeSet::from(["graph".to_string()]);
        let module = ["controllers".to_string(), "gc".to_string()];
        let text = "use crate::storage::store::{Store, ObjKey};\n\
                    use crate::{rules::{self, crd}, status};\n\
                    use super::kubelet::{self, PodDeletion};\n\
                    use graph::Graph;\n\
                    // crate::http in a comment\n\
                    /// [`crate::http`]\n\
                    let x = crate::registry::Registry::new(); // crate::http\n";
        let aliases = BTreeMap::from([("registry".to_string(), "storage".to_string())]);
        let found: BTreeSet<String> = references(text, &module, &kids, &aliases)
            .into_iter()
            .map(|p| p.join("::"))
            .collect();
        let want: BTreeSet<String> = [
            "storage::store::Store",
            "storage::store::ObjKey",
            "rules",
            "rules::crd",
            "status",
            "controllers::kubelet",
            "controllers::kubelet::PodDeletion",
            "controllers::gc::graph::Graph",
            "storage::registry::Registry::new",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(found, want);
    }

    #[test]
    fn an_upward_import_is_caught() {
        // What the garbage collector once did: a controller naming the
        // HTTP layer's state.
        let files = [file(
            "controllers/gc/mod.rs",
            "use crate::http::handlers::AppState;\n",
        )];
        let wrong = upward_uses(&files, &layer_of());
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert!(wrong[0].contains("uses crate::http"), "{wrong:?}");
    }

    #[test]
    fn a_circle_between_the_files_of_a_folder_is_caught() {
        let files = [
            file(
                "storage/store/mod.rs",
                "mod list;\nuse list::page;\npub struct Inner;\n",
            ),
            file(
                "storage/store/list.rs",
                "use super::Inner;\nuse super::encode::rv;\n",
            ),
            file("storage/store/encode.rs", "pub fn rv() {}\n"),
        ];
        let found = circles(&files);
        assert_eq!(found, ["storage/store: <self> → list → <self>"]);
        let acyclic = [
            file("storage/store/mod.rs", "mod list;\nuse list::page;\n"),
            file("storage/store/list.rs", "use super::encode::rv;\n"),
            file("storage/store/encode.rs", "pub fn rv() {}\n"),
        ];
        assert!(circles(&acyclic).is_empty());
        let through_crate = [
            file("http/a.rs", "use crate::http::b::f;\n"),
            file("http/b.rs", "use crate::http::c::g;\n"),
            file("http/c.rs", "use super::a::h;\n"),
        ];
        assert_eq!(circles(&through_crate), ["http: a → b → c → a"]);
    }
}
