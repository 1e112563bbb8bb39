//! The layering of the library's top-level modules, checked over the
//! sources: data flows informer → store → keys → workqueue → guest →
//! actuator at run time, and at compile time the bottom of that path never
//! imports the top. [`LAYERS`] lists every module, bottom first; a module
//! may use only modules of lower layers (never its own layer, so no circle
//! can form). A new module must be given a layer here.
//!
//! Inside every folder of `src` the same holds without a table: its files
//! and subfolders never use each other in a circle. A facade `mod.rs`
//! declaring and re-exporting its submodules does not use them by that;
//! a submodule naming an item through the facade (`super::Item`) uses the
//! submodule the facade re-exports it from, or the facade itself.

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
        &[
            "compare",
            "events",
            "leader",
            "projection",
            "quarantine",
            "workqueue",
        ],
    ),
    ("caches, counters, contract", &["guest", "metrics", "store"]),
    (
        "reading the cluster and relating objects",
        &["claims", "client", "discovery", "informer", "relations"],
    ),
    ("reading what the guest writes", &["outputs"]),
    ("judging writes", &["guard"]),
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

    /// A source's code alone: comments and the contents of string and
    /// character literals blanked (newlines kept), so neither a path in a
    /// comment nor a brace in a string counts.
    fn code_only(text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::with_capacity(text.len());
        let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
            if c == '/' && next == Some('/') {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            } else if c == '/' && next == Some('*') {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        out.push(blank(chars[i]));
                        i += 1;
                    }
                }
            } else if (c == 'r' || (c == 'b' && next == Some('r'))) && !ident_before {
                // A raw string: r"..", r#".."#, br#".."#.
                let start = if c == 'b' { i + 2 } else { i + 1 };
                let hashes = chars[start..].iter().take_while(|c| **c == '#').count();
                if chars.get(start + hashes) != Some(&'"') {
                    out.push(c);
                    i += 1;
                    continue;
                }
                out.push('"');
                i = start + hashes + 1;
                while i < chars.len() {
                    if chars[i] == '"' && chars[i + 1..].iter().take(hashes).all(|c| *c == '#') {
                        i += 1 + hashes;
                        break;
                    }
                    out.push(blank(chars[i]));
                    i += 1;
                }
                out.push('"');
            } else if c == '"' {
                out.push('"');
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    let step = if chars[i] == '\\' { 2 } else { 1 };
                    for c in &chars[i..(i + step).min(chars.len())] {
                        out.push(blank(*c));
                    }
                    i += step;
                }
                out.push('"');
                i += 1;
            } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
                // A character literal (a lifetime has no closing quote).
                let end = (i + 2..chars.len())
                    .find(|&j| chars[j] == '\'')
                    .unwrap_or(chars.len() - 1);
                out.push_str("' '");
                i = end + 1;
            } else {
                // ASCII only, so byte and character positions agree.
                out.push(if c.is_ascii() { c } else { ' ' });
                i += 1;
            }
        }
        out
    }

    fn is_ident(c: char) -> bool {
        c.is_alphanumeric() || c == '_'
    }

    /// The paths of a use tree starting at `text` (`a::b::{c, d::e as f}`):
    /// each as its segments (a group's `self` being the group's prefix)
    /// and the name it is used by, when renamed.
    fn use_tree(text: &str, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
        let mut path = prefix.to_vec();
        let mut rest = text.trim_start();
        loop {
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 0;
                let mut start = 0;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            use_tree(&group[start..i], &path, out);
                            return;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            use_tree(&group[start..i], &path, out);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
            let name: String = rest
                .chars()
                .take_while(|c| is_ident(*c) || *c == '*')
                .collect();
            if name.is_empty() {
                break;
            }
            if name != "self" || path.is_empty() {
                path.push(name.clone());
            }
            rest = rest[name.len()..].trim_start();
            match rest.strip_prefix("::") {
                Some(r) => rest = r.trim_start(),
                None => break,
            }
        }
        let alias = rest.strip_prefix("as ").map(|a| {
            a.trim_start()
                .chars()
                .take_while(|c| is_ident(*c))
                .collect()
        });
        if !path.is_empty() && (path.len() > prefix.len() || text.trim() == "self") {
            out.push((path, alias));
        }
    }

    /// Whether the `use` at byte `at` of `code` is a re-export (`pub use`,
    /// `pub(crate) use`).
    fn public_use(code: &str, at: usize) -> bool {
        let before = code[..at].trim_end();
        before.ends_with("pub")
            || (before.ends_with(')')
                && before.rfind("pub(").is_some_and(|p| before.len() - p <= 16))
    }

    /// A module's path from its file, relative to `src`: `a/b.rs` and
    /// `a/b/mod.rs` are `a::b`.
    fn module_of(file: &str) -> Vec<String> {
        let mut path: Vec<String> = file
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if path.last().is_some_and(|l| l == "mod") {
            path.pop();
        }
        path
    }

    /// Where the path (or use tree) starting at byte `from` of `code` ends:
    /// after its last segment, or after the group closing it.
    fn path_end(code: &str, from: usize) -> usize {
        let b = code.as_bytes();
        let skip_space = |mut j: usize| {
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            j
        };
        let mut i = from;
        loop {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'*') {
                i += 1;
            }
            let j = skip_space(i);
            if !code[j..].starts_with("::") {
                return i;
            }
            let j = skip_space(j + 2);
            if b.get(j) != Some(&b'{') {
                i = j;
                continue;
            }
            let mut depth = 0;
            for (k, c) in b.iter().enumerate().skip(j) {
                match c {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return k + 1;
                        }
                    }
                    _ => {}
                }
            }
            return b.len();
        }
    }

    /// Every path a source names from its module `module` (`crate::`,
    /// `super::`, `self::` and its own submodules `modules` holds),
    /// resolved from the crate root, with the module it is named from
    /// (a file's inline `mod x { .. }` is a module of its own). A facade's
    /// `pub use` of a submodule (in `skip_reexports`) is left out.
    fn named_paths(
        code: &str,
        module: &[String],
        modules: &BTreeSet<Vec<String>>,
        skip_reexports: bool,
    ) -> Vec<(Vec<String>, Vec<String>)> {
        let text = code;
        let bytes = text.as_bytes();
        let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let mut out = Vec::new();
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                }
                _ => {}
            }
            let starts =
                ident(bytes[i]) && (i == 0 || !(ident(bytes[i - 1]) || bytes[i - 1] == b':'));
            if !starts {
                i += 1;
                continue;
            }
            let len = bytes[i..].iter().take_while(|b| ident(**b)).count();
            let word = &text[i..i + len];
            let after = &text[i + len..];
            let here: Vec<String> = module
                .iter()
                .cloned()
                .chain(inline.iter().map(|(m, _)| m.clone()))
                .collect();
            if word == "mod" {
                let rest = after.trim_start();
                let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
                if !name.is_empty() && rest[name.len()..].trim_start().starts_with('{') {
                    inline.push((name, depth));
                }
            }
            if word == "use" && skip_reexports && public_use(text, i) {
                i = text[i..].find(';').map_or(text.len(), |e| i + e);
                continue;
            }
            if !after.starts_with("::") {
                i += len;
                continue;
            }
            let base: Option<Vec<String>> = match word {
                "crate" => Some(Vec::new()),
                "self" => Some(here.clone()),
                "super" => Some(here[..here.len().saturating_sub(1)].to_vec()),
                _ => {
                    let mut child = here.clone();
                    child.push(word.to_string());
                    modules.contains(&child).then_some(here.clone())
                }
            };
            let Some(mut base) = base else {
                i += len;
                continue;
            };
            let mut tree_at = i;
            if matches!(word, "crate" | "self" | "super") {
                tree_at = i + len + 2;
                // `super::super::`.
                while text[tree_at..].trim_start().starts_with("super::") {
                    tree_at += text[tree_at..].find("super::").unwrap_or(0) + "super::".len();
                    base.pop();
                }
            }
            let end = path_end(text, tree_at);
            let mut paths = Vec::new();
            use_tree(&text[tree_at..end], &base, &mut paths);
            out.extend(paths.into_iter().map(|(p, _)| (here.clone(), p)));
            i = end.max(i + 1);
        }
        out
    }

    /// The circles among the files and subfolders of each folder of
    /// `files` (path relative to `src` → text), each named by its folder
    /// and its members, with a path that closes it.
    fn folder_circles(files: &BTreeMap<String, String>) -> Vec<String> {
        let modules: BTreeSet<Vec<String>> = files.keys().map(|f| module_of(f)).collect();
        // Each facade's re-exports: (folder, name) → the submodule.
        let mut reexports: BTreeMap<(Vec<String>, String), String> = BTreeMap::new();
        for (file, text) in files.iter().filter(|(f, _)| f.ends_with("mod.rs")) {
            let folder = module_of(file);
            let code = code_only(text);
            for (at, _) in code.match_indices("use ") {
                let word_start = at == 0 || !is_ident(code[..at].chars().last().unwrap_or(' '));
                if !word_start || !public_use(&code, at) {
                    continue;
                }
                let end = code[at..].find(';').map_or(code.len(), |e| at + e);
                let mut paths = Vec::new();
                use_tree(&code[at + 4..end], &[], &mut paths);
                for (p, alias) in paths {
                    let child = match p.first().map(String::as_str) {
                        Some("self") => p.get(1),
                        _ => p.first(),
                    };
                    let Some(child) = child.filter(|c| {
                        let mut m = folder.clone();
                        m.push(c.to_string());
                        modules.contains(&m)
                    }) else {
                        continue;
                    };
                    let name = alias.unwrap_or_else(|| p.last().cloned().unwrap_or_default());
                    reexports.insert((folder.clone(), name), child.clone());
                }
            }
        }
        // Edges within each folder: (folder, from, to) → a path naming it.
        let mut edges: BTreeMap<(Vec<String>, String, String), String> = BTreeMap::new();
        for (file, text) in files {
            let module = module_of(file);
            let facade = file.ends_with("mod.rs");
            for (from, path) in named_paths(&code_only(text), &module, &modules, facade) {
                for k in 1..=from.len() {
                    let folder = &from[..k];
                    let facade = format!("{}/mod.rs", folder.join("/"));
                    if path.len() <= k || path[..k] != *folder || !files.contains_key(&facade) {
                        continue;
                    }
                    // A submodule, or an item of the facade (its own, or
                    // one it re-exports from a submodule).
                    let unit = |seg: &String| -> String {
                        let mut child = folder.to_vec();
                        child.push(seg.clone());
                        if modules.contains(&child) {
                            return seg.clone();
                        }
                        reexports
                            .get(&(folder.to_vec(), seg.clone()))
                            .cloned()
                            .unwrap_or_else(|| "mod".to_string())
                    };
                    let source = from.get(k).map_or_else(|| "mod".to_string(), unit);
                    let target = unit(&path[k]);
                    if source == target {
                        continue;
                    }
                    edges
                        .entry((folder.to_vec(), source, target))
                        .or_insert_with(|| format!("{file}: {}", path.join("::")));
                }
            }
        }
        // A circle: a unit that reaches itself.
        let mut circles = Vec::new();
        let folders: BTreeSet<&Vec<String>> = edges.keys().map(|(f, _, _)| f).collect();
        for folder in folders {
            let next = |u: &str| -> Vec<&String> {
                edges
                    .keys()
                    .filter(|(f, a, _)| f == folder && a == u)
                    .map(|(_, _, b)| b)
                    .collect()
            };
            let units: BTreeSet<&String> = edges
                .keys()
                .filter(|(f, _, _)| f == folder)
                .map(|(_, a, _)| a)
                .collect();
            for start in units {
                // Breadth-first from `start`, remembering the way back.
                let mut came: BTreeMap<&String, &String> = BTreeMap::new();
                let mut todo = vec![start];
                let mut closed = None;
                while let Some(u) = todo.pop() {
                    for v in next(u) {
                        if v == start {
                            closed = Some(u);
                            break;
                        }
                        if !came.contains_key(v) {
                            came.insert(v, u);
                            todo.push(v);
                        }
                    }
                    if closed.is_some() {
                        break;
                    }
                }
                let Some(mut at) = closed else { continue };
                let mut way = vec![start.clone()];
                while at != start {
                    way.push(at.clone());
                    at = came[at];
                }
                way.push(start.clone());
                way.reverse();
                let proof =
                    edges[&(folder.clone(), way[way.len() - 2].clone(), start.clone())].clone();
                circles.push(format!(
                    "{}/: {} (closed by {proof})",
                    folder.join("/"),
                    way.join(" → ")
                ));
            }
        }
        circles
    }

    #[test]
    fn no_folder_has_a_circle_among_its_files() {
        let mut files = Vec::new();
        rust_files(&src(), &mut files);
        let sources: BTreeMap<String, String> = files
            .iter()
            .map(|f| {
                let relative = f.strip_prefix(src()).expect("under src");
                let name = relative.to_string_lossy().replace('\\', "/");
                (name, std::fs::read_to_string(f).expect("source file"))
            })
            .collect();
        let circles = folder_circles(&sources);
        assert!(
            circles.is_empty(),
            "circles inside folders:\n{}",
            circles.join("\n")
        );
    }

    fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(f, t)| (f.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn a_circle_inside_a_folder_is_caught() {
        // What `actuator/` once was: a sibling through another, and a
        // facade using what a child uses it for.
        let siblings = tree(&[
            ("x/mod.rs", "mod a;\nmod b;\n"),
            ("x/a.rs", "use super::b::B;\n"),
            ("x/b.rs", "fn f() { crate::x::a::g(\"{\") }\n"),
        ]);
        assert!(!folder_circles(&siblings).is_empty());
        let facade = tree(&[
            (
                "x/mod.rs",
                "mod a;\npub struct T;\nfn f() -> a::Part { todo!() }\n",
            ),
            ("x/a.rs", "use super::T;\npub enum Part {}\n"),
        ]);
        assert!(!folder_circles(&facade).is_empty());
        // Through a re-export: `super::B` is `b`'s.
        let reexport = tree(&[
            ("x/y/mod.rs", "mod a;\nmod b;\npub use b::{B, C as D};\n"),
            ("x/y/a.rs", "use super::D;\n"),
            ("x/y/b.rs", "use super::super::y::a::A;\n"),
        ]);
        assert!(!folder_circles(&reexport).is_empty());
    }

    #[test]
    fn a_facade_and_its_leaves_are_no_circle() {
        let files = tree(&[
            (
                "x/mod.rs",
                "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\npub use a::A;\npub(crate) use b::{self, B};\npub const C: u8 = 1;\n",
            ),
            ("x/a.rs", "use super::b::B;\nuse super::C;\n// super::tests\n"),
            ("x/b.rs", "pub struct B;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    fn s() -> &'static str { \"super::a::A}\" }\n}\n"),
            ("x/tests.rs", "use super::*;\nuse super::a::A;\n"),
        ]);
        assert_eq!(folder_circles(&files), Vec::<String>::new());
    }

    #[test]
    fn an_upward_import_is_caught() {
        // What the informer once did: the bottom importing the top.
        let layer = layer_of();
        let used = uses("use crate::controller::GuestController;");
        assert!(used.iter().any(|u| layer[u.as_str()] >= layer["informer"]));
    }
}
