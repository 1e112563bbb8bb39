//! A crate's sources read into its module import graph, for the layering
//! tests of `wasmctrl` and `wasmctrl-apiserver`: every file under `src` is
//! parsed with `syn`, and every path it names through `crate::`, `super::`,
//! `self::` or one of its own child modules (use trees, expressions, types,
//! patterns, and the tokens of macro calls) is resolved to the module it
//! names. On that graph it checks a table of layers ([`Crate::check_layers`])
//! and the absence of import circles inside each folder
//! ([`Crate::folder_circles`]).
//!
//! It owns reading and resolving; it never decides a crate's layers (each
//! crate keeps its table and exceptions beside its code), never compiles or
//! expands macros, and never follows paths into other crates. Comments,
//! doc comments and string literals are never code here: they are not
//! tokens.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Why a crate's sources could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or folder under `src` could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A source file is not Rust `syn` can parse.
    #[error("parsing {path}: {source}")]
    Parse {
        /// The file, relative to `src`.
        path: String,
        /// Where and why parsing stopped.
        source: syn::Error,
    },
}

/// What this module returns.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A table of layers, bottom first: a name for each layer and its
/// top-level modules.
pub type Layers<'a> = [(&'a str, &'a [&'a str])];

/// Where a facade is named in a circle: the folder's own `mod.rs` (or
/// `folder.rs`) and the items it defines.
pub const FACADE: &str = "<self>";

/// One path a file names, resolved from the crate root.
#[derive(Debug, Clone)]
struct Reference {
    /// The module it is named from (a file's inline `mod x { .. }` is a
    /// module of its own).
    from: Vec<String>,
    /// What it names: modules, then perhaps an item (`*` for a glob).
    path: Vec<String>,
    /// A `pub use` (of any visibility) re-exporting it.
    reexport: bool,
    /// The name a use tree renames it to (`as alias`).
    alias: Option<String>,
    /// Inside `#[cfg(test)]` code.
    test: bool,
}

/// One source file: its module and the paths it names.
#[derive(Debug)]
struct File {
    module: Vec<String>,
    references: Vec<Reference>,
}

/// A crate's sources as a module import graph.
#[derive(Debug)]
pub struct Crate {
    /// Each file by its path relative to `src` (`a/b.rs`).
    files: BTreeMap<String, File>,
    /// Every module with a file, and the folders above them.
    modules: BTreeSet<Vec<String>>,
    /// Re-exports into a module's own subtree: (module, name) → the path
    /// it stands for.
    reexports: BTreeMap<(Vec<String>, String), Vec<String>>,
}

impl Crate {
    /// Reads and parses every `.rs` file under `src`.
    pub fn scan(src: &Path) -> Result<Self> {
        let mut files = Vec::new();
        rust_files(src, &mut files)?;
        let mut sources = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).map_err(|source| Error::Io {
                path: file.clone(),
                source,
            })?;
            let relative = file.strip_prefix(src).unwrap_or(&file);
            sources.push((relative.to_string_lossy().replace('\\', "/"), text));
        }
        Self::from_sources(sources)
    }

    /// A crate from in-memory sources: (path relative to `src`, text).
    pub fn from_sources<P, T>(sources: impl IntoIterator<Item = (P, T)>) -> Result<Self>
    where
        P: AsRef<str>,
        T: AsRef<str>,
    {
        let parsed: Vec<(String, Vec<String>, syn::File)> = sources
            .into_iter()
            .map(|(path, text)| {
                let path = path.as_ref().to_string();
                let ast = syn::parse_file(text.as_ref()).map_err(|source| Error::Parse {
                    path: path.clone(),
                    source,
                })?;
                Ok((path.clone(), module_of(&path), ast))
            })
            .collect::<Result<_>>()?;
        let mut modules = BTreeSet::new();
        for (_, module, _) in &parsed {
            for n in 1..=module.len() {
                modules.insert(module[..n].to_vec());
            }
        }
        let mut files = BTreeMap::new();
        let mut test_modules = Vec::new();
        for (path, module, ast) in &parsed {
            let mut walker = Walker {
                modules: &modules,
                here: module.clone(),
                inline: vec![BTreeSet::new()],
                test: 0,
                reexport: false,
                references: Vec::new(),
                test_modules: Vec::new(),
            };
            walker.visit_file(ast);
            test_modules.extend(walker.test_modules);
            let file = File {
                module: module.clone(),
                references: walker.references,
            };
            files.insert(path.clone(), file);
        }
        // A file declared `#[cfg(test)] mod name;` is test code throughout.
        for file in files.values_mut() {
            if test_modules.iter().any(|t| file.module.starts_with(t)) {
                file.references.iter_mut().for_each(|r| r.test = true);
            }
        }
        // What each module re-exports from its own subtree, by the name it
        // is re-exported as (`pub use b::C as D` makes `D` stand for `b::C`).
        let mut reexports = BTreeMap::new();
        for r in files.values().flat_map(|f| &f.references) {
            if r.reexport && r.path.len() > r.from.len() && r.path.starts_with(&r.from) {
                let name = r.alias.as_ref().or(r.path.last()).filter(|n| *n != "*");
                if let Some(name) = name {
                    reexports.insert((r.from.clone(), name.clone()), r.path.clone());
                }
            }
        }
        Ok(Self {
            files,
            modules,
            reexports,
        })
    }

    /// `path` with every re-export it goes through replaced by what the
    /// re-export stands for (`crate::body` → `crate::http::body` when the
    /// root says `pub use http::body`).
    fn resolve(&self, path: &[String]) -> Vec<String> {
        let mut path = path.to_vec();
        // Bounded: a re-export chain is short, and a bad one must not hang.
        for _ in 0..16 {
            let found = (0..path.len()).find_map(|i| {
                let target = self.reexports.get(&(path[..i].to_vec(), path[i].clone()))?;
                let mut next = target.clone();
                next.extend_from_slice(&path[i + 1..]);
                (next != path).then_some(next)
            });
            match found {
                Some(next) => path = next,
                None => break,
            }
        }
        path
    }

    /// The top-level modules of the crate that file `file` (relative to
    /// `src`) names, itself included; none for a file not in the crate.
    pub fn modules_used(&self, file: &str) -> BTreeSet<String> {
        self.files
            .get(file)
            .into_iter()
            .flat_map(|f| &f.references)
            .filter_map(|r| self.resolve(&r.path).first().cloned())
            .collect()
    }

    /// Every use of a top-level module of the crate's own layer or above,
    /// one human-readable line each. Files of top-level modules in
    /// `ignore`, of modules without a layer, and the crate roots are not
    /// checked; a module appearing in two layers is reported too.
    pub fn check_layers(&self, layers: &Layers<'_>, ignore: &[&str]) -> Vec<String> {
        let mut wrong = Vec::new();
        let mut layer: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, (_, modules)) in layers.iter().enumerate() {
            for m in *modules {
                if layer.insert(m, i).is_some() {
                    wrong.push(format!("{m} is in two layers"));
                }
            }
        }
        for (file, source) in &self.files {
            let Some(top) = source.module.first() else {
                continue;
            };
            if ignore.contains(&top.as_str()) {
                continue;
            }
            let Some(&from) = layer.get(top.as_str()) else {
                continue;
            };
            for used in self.modules_used(file) {
                let Some(&to) = layer.get(used.as_str()) else {
                    continue;
                };
                if used != *top && to >= from {
                    wrong.push(format!(
                        "{file} uses crate::{used} ({}: layer {to}) from {top} ({}: layer {from})",
                        layers[to].0, layers[from].0,
                    ));
                }
            }
        }
        wrong
    }

    /// The import circles between the parts of each folder (a module with
    /// submodules in files of their own, the crate root excepted): its
    /// submodules and its facade ([`FACADE`]). One line per circle, as
    /// `folder: a → b → a (closed by file: path)`.
    ///
    /// Test code (`#[cfg(test)]`) is left out: tests use a module as any
    /// caller does. A module re-exporting its own submodules' items
    /// (`pub use a::A;`) does not use them by that, and an item named
    /// through such a re-export (`super::A`) is the submodule's.
    pub fn folder_circles(&self) -> Vec<String> {
        // (folder, from, to) → one reference making that edge.
        let mut edges: BTreeMap<(Vec<String>, String, String), String> = BTreeMap::new();
        for (file, source) in &self.files {
            for r in source.references.iter().filter(|r| !r.test) {
                let path = self.resolve(&r.path);
                for k in 1..=r.from.len() {
                    let folder = &r.from[..k];
                    if !self.is_folder(folder) || !path.starts_with(folder) {
                        continue;
                    }
                    if r.reexport && r.path.starts_with(&r.from) {
                        continue;
                    }
                    let from = self.part(folder, &r.from);
                    let to = self.part(folder, &path);
                    if from != to {
                        edges
                            .entry((folder.to_vec(), from, to))
                            .or_insert_with(|| format!("{file}: {}", path.join("::")));
                    }
                }
            }
        }
        let mut by_folder: BTreeMap<&Vec<String>, BTreeMap<&String, BTreeSet<&String>>> =
            BTreeMap::new();
        for (folder, from, to) in edges.keys() {
            by_folder
                .entry(folder)
                .or_default()
                .entry(from)
                .or_default()
                .insert(to);
        }
        let mut found = Vec::new();
        for (folder, graph) in by_folder {
            for walk in cycles(&graph) {
                let closing = (
                    folder.clone(),
                    walk[walk.len() - 2].clone(),
                    walk[walk.len() - 1].clone(),
                );
                found.push(format!(
                    "{}: {} (closed by {})",
                    folder.join("/"),
                    walk.join(" → "),
                    edges[&closing],
                ));
            }
        }
        found
    }

    /// Whether `module` has submodules in files of their own.
    fn is_folder(&self, module: &[String]) -> bool {
        self.modules
            .iter()
            .any(|m| m.len() > module.len() && m.starts_with(module))
    }

    /// The part of `folder` that `path` (inside it) names: a submodule, or
    /// the facade.
    fn part(&self, folder: &[String], path: &[String]) -> String {
        match path.get(folder.len()) {
            Some(child) if self.modules.contains(&path[..=folder.len()]) => child.clone(),
            _ => FACADE.to_string(),
        }
    }
}

/// The names a crate root (`lib.rs`, `main.rs`) declares with `mod NAME;`.
pub fn declared_modules(root: &Path) -> Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(root).map_err(|source| Error::Io {
        path: root.to_path_buf(),
        source,
    })?;
    let ast = syn::parse_file(&text).map_err(|source| Error::Parse {
        path: root.display().to_string(),
        source,
    })?;
    Ok(ast
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) if m.content.is_none() => Some(m.ident.to_string()),
            _ => None,
        })
        .collect())
}

/// What is wrong with a table of layers for the modules a crate root
/// declares: modules without a layer (except those in `ignore`), and
/// layers naming modules that do not exist.
pub fn layer_table_gaps(
    layers: &Layers<'_>,
    declared: &BTreeSet<String>,
    ignore: &[&str],
) -> Vec<String> {
    let layered: BTreeSet<&str> = layers.iter().flat_map(|(_, m)| m.iter().copied()).collect();
    let missing = declared
        .iter()
        .filter(|m| !ignore.contains(&m.as_str()) && !layered.contains(m.as_str()))
        .map(|m| format!("module {m} has no layer"));
    let stale = layered
        .iter()
        .filter(|m| !declared.contains(**m))
        .map(|m| format!("the layers name {m}, which is not a module"));
    missing.chain(stale).collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let io = |source| Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    Ok(())
}

/// A module's path from its file, relative to `src`: `a/b.rs` and
/// `a/b/mod.rs` are `a::b`; `lib.rs` and `main.rs` are the root.
fn module_of(file: &str) -> Vec<String> {
    let mut path: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if path.last().is_some_and(|l| l == "mod") || matches!(file, "lib.rs" | "main.rs") {
        path.pop();
    }
    path
}

/// Whether attributes hold exactly `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string() == "test")
    })
}

/// One file's walk: the module it is in and what it names.
struct Walker<'m> {
    /// Every module with a file.
    modules: &'m BTreeSet<Vec<String>>,
    /// The module being walked (the file's, then inline ones).
    here: Vec<String>,
    /// The inline modules declared in each module being walked.
    inline: Vec<BTreeSet<String>>,
    /// How many `#[cfg(test)]` items enclose the walk.
    test: usize,
    /// Inside a `pub use`.
    reexport: bool,
    references: Vec<Reference>,
    /// Modules declared `#[cfg(test)] mod name;`.
    test_modules: Vec<Vec<String>>,
}

impl Walker<'_> {
    /// Where a path starting with `first` (followed by more) starts from
    /// the crate root, if it is one of ours.
    fn base(&self, first: &str) -> Option<Vec<String>> {
        match first {
            "crate" => Some(Vec::new()),
            "self" => Some(self.here.clone()),
            "super" => Some(self.here[..self.here.len().saturating_sub(1)].to_vec()),
            child => {
                let mut path = self.here.clone();
                path.push(child.to_string());
                let inline = self.inline.last().is_some_and(|i| i.contains(child));
                (inline || self.modules.contains(&path)).then(|| self.here.clone())
            }
        }
    }

    /// Records `segments` (at least two), when it starts at one of ours.
    fn path(&mut self, segments: &[String]) {
        if segments.len() < 2 {
            return;
        }
        let Some(mut base) = self.base(&segments[0]) else {
            return;
        };
        let mut rest = &segments[1..];
        if segments[0] != "crate" && segments[0] != "self" && segments[0] != "super" {
            rest = segments;
        }
        while let Some(("super", more)) = rest.split_first().map(|(f, m)| (f.as_str(), m)) {
            base.pop();
            rest = more;
        }
        base.extend(rest.iter().cloned());
        self.push(base);
    }

    fn push(&mut self, path: Vec<String>) {
        self.references.push(Reference {
            from: self.here.clone(),
            path,
            reexport: self.reexport,
            alias: None,
            test: self.test > 0,
        });
    }

    /// Walks a use tree below `prefix` (the segments read so far).
    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_name(n.ident.to_string(), None, prefix),
            syn::UseTree::Rename(r) => {
                self.use_name(r.ident.to_string(), Some(r.rename.to_string()), prefix);
            }
            syn::UseTree::Glob(_) => self.use_name("*".to_string(), None, prefix),
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.use_tree(item, prefix);
                }
            }
        }
    }

    /// A use tree's last segment `name` (`self`: the group's prefix).
    fn use_name(&mut self, name: String, alias: Option<String>, prefix: &mut Vec<String>) {
        if name == "self" {
            self.use_leaf(prefix, alias);
        } else {
            prefix.push(name);
            self.use_leaf(prefix, alias);
            prefix.pop();
        }
    }

    /// One path of a use tree, perhaps renamed.
    fn use_leaf(&mut self, segments: &[String], alias: Option<String>) {
        let before = self.references.len();
        self.path(segments);
        if let Some(added) = self.references.get_mut(before) {
            added.alias = alias;
        }
    }

    /// The paths in a macro call's tokens: `a::b::c` runs of identifiers.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            if let TokenTree::Group(g) = &trees[i] {
                self.tokens(g.stream());
                i += 1;
                continue;
            }
            let mut segments = Vec::new();
            let mut j = i;
            while let Some(TokenTree::Ident(ident)) = trees.get(j) {
                segments.push(ident.to_string());
                match (trees.get(j + 1), trees.get(j + 2)) {
                    (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                        if a.as_char() == ':' && b.as_char() == ':' =>
                    {
                        j += 3;
                    }
                    _ => {
                        j += 1;
                        break;
                    }
                }
            }
            // Only a path's first segment opens one: not `x.y::z` or
            // `$crate` mid-path.
            let after_colon = i >= 1
                && matches!(&trees[i - 1], TokenTree::Punct(p) if p.as_char() == ':' || p.as_char() == '.');
            if segments.len() >= 2 && !after_colon {
                self.path(&segments);
            }
            i = j.max(i + 1);
        }
    }
}

impl<'ast> Visit<'ast> for Walker<'_> {
    fn visit_file(&mut self, file: &'ast syn::File) {
        if let Some(set) = self.inline.last_mut() {
            set.extend(file.items.iter().filter_map(inline_module));
        }
        syn::visit::visit_file(self, file);
    }

    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        let test = is_test(attrs);
        self.test += usize::from(test);
        syn::visit::visit_item(self, item);
        self.test -= usize::from(test);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let mut module = self.here.clone();
        module.push(item.ident.to_string());
        let Some((_, items)) = &item.content else {
            if self.test > 0 {
                self.test_modules.push(module);
            }
            return;
        };
        let outer = std::mem::replace(&mut self.here, module);
        self.inline
            .push(items.iter().filter_map(inline_module).collect());
        for item in items {
            self.visit_item(item);
        }
        self.inline.pop();
        self.here = outer;
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if item.leading_colon.is_some() {
            return;
        }
        self.reexport = !matches!(item.vis, syn::Visibility::Inherited);
        self.use_tree(&item.tree, &mut Vec::new());
        self.reexport = false;
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.path(&segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }

    // `pub(crate)`, `pub(super)` and `pub(in path)` grant, never use.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
}

/// The name of an inline module (`mod x { .. }`).
fn inline_module(item: &syn::Item) -> Option<String> {
    match item {
        syn::Item::Mod(m) if m.content.is_some() => Some(m.ident.to_string()),
        _ => None,
    }
}

/// One cycle through each node on any, as a walk `a → b → a`, shortest
/// first from each start not yet on a found cycle.
fn cycles(graph: &BTreeMap<&String, BTreeSet<&String>>) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut seen: BTreeSet<&String> = BTreeSet::new();
    for &start in graph.keys() {
        if seen.contains(start) {
            continue;
        }
        let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        let mut closed = None;
        'search: while let Some(node) = queue.pop_front() {
            for &next in graph.get(node).into_iter().flatten() {
                if next == start {
                    closed = Some(node);
                    break 'search;
                }
                if !came_from.contains_key(next) {
                    came_from.insert(next, node);
                    queue.push_back(next);
                }
            }
        }
        let Some(mut node) = closed else { continue };
        let mut walk = vec![start];
        while node != start {
            walk.insert(1, node);
            node = came_from[node];
        }
        walk.push(start);
        seen.extend(walk.iter().copied());
        found.push(walk.into_iter().cloned().collect());
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn krate(files: &[(&str, &str)]) -> Crate {
        Crate::from_sources(files.iter().copied()).unwrap()
    }

    /// Every path file `file` names, resolved, as `a::b::c`.
    fn named(c: &Crate, file: &str) -> BTreeSet<String> {
        c.files[file]
            .references
            .iter()
            .map(|r| c.resolve(&r.path).join("::"))
            .collect()
    }

    const LAYERS: &Layers<'static> = &[("bottom", &["a"]), ("middle", &["b"]), ("top", &["c"])];

    #[test]
    fn use_trees_groups_aliases_and_relative_paths_are_read() {
        let c = krate(&[
            ("lib.rs", "mod store;\nmod rules;\nmod controllers;\n"),
            ("controllers/gc/mod.rs", "mod graph;\n"),
            ("controllers/gc/graph.rs", ""),
            (
                "controllers/gc/x.rs",
                "use crate::store::{Change, Handler as H};\n\
                 use crate::{rules::{self, crd}, status};\n\
                 use super::super::kubelet::{self, PodDeletion};\n\
                 use self::inner::Y;\n\
                 mod inner { pub struct Y; fn f() { super::graph::g(); } }\n\
                 fn f() -> crate::store::Store { <crate::rules::R as crate::rules::T>::new() }\n",
            ),
        ]);
        let want = [
            "store::Change",
            "store::Handler",
            "rules",
            "rules::crd",
            "status",
            "controllers::kubelet",
            "controllers::kubelet::PodDeletion",
            "controllers::gc::x::inner::Y",
            "controllers::gc::x::graph::g",
            "store::Store",
            "rules::R",
            "rules::T::new",
        ];
        let found = named(&c, "controllers/gc/x.rs");
        assert_eq!(found, want.iter().map(|s| s.to_string()).collect());
    }

    #[test]
    fn child_modules_are_paths_of_ours_and_other_crates_are_not() {
        let c = krate(&[
            ("gc/mod.rs", "mod graph;\nuse graph::Graph;\nuse std::fmt;\nfn f() { ::graph::x(); tokio::spawn(); self.go(); }\n"),
            ("gc/graph.rs", ""),
        ]);
        assert_eq!(
            named(&c, "gc/mod.rs"),
            BTreeSet::from(["gc::graph::Graph".to_string()])
        );
    }

    #[test]
    fn comments_strings_and_visibility_are_not_uses() {
        let c = krate(&[(
            "a.rs",
            "// crate::b in a comment\n\
             /// [`crate::c`] in a doc\n\
             /* crate::d */\n\
             pub(super) fn f() -> &'static str { \"crate::e::{\" }\n\
             pub(in crate::f) struct S;\n",
        )]);
        assert!(named(&c, "a.rs").is_empty());
    }

    #[test]
    fn macro_calls_are_read_as_tokens() {
        let c = krate(&[(
            "a.rs",
            "fn f() { assert!(crate::b::ok(), \"crate::c\"); matches!(x, crate::d::E::F); }\n\
             macro_rules! m { () => { $crate::g::h() } }\n",
        )]);
        let want = ["b::ok", "d::E::F", "g::h"];
        assert_eq!(
            named(&c, "a.rs"),
            want.iter().map(|s| s.to_string()).collect()
        );
    }

    #[test]
    fn root_reexports_resolve_to_their_module() {
        let c = krate(&[
            (
                "lib.rs",
                "mod a;\nmod b;\nmod c;\npub use c::{body, wire as w};\n",
            ),
            (
                "a.rs",
                "use crate::body::Body;\nfn f() { crate::w::go() }\n",
            ),
            ("c/body.rs", ""),
            ("c/wire.rs", ""),
        ]);
        let wrong = c.check_layers(LAYERS, &[]);
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert!(
            wrong[0].starts_with("a.rs uses crate::c (top: layer 2)"),
            "{wrong:?}"
        );
        assert_eq!(
            named(&c, "a.rs"),
            BTreeSet::from(["c::body::Body".to_string(), "c::wire::go".to_string()])
        );
    }

    #[test]
    fn a_module_may_use_lower_layers_and_itself_only() {
        let c = krate(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\nmod tools;\n"),
            ("a.rs", "use crate::a::x;\n"),
            ("b/mod.rs", "use crate::a;\nuse super::c::C;\n"),
            ("c.rs", "use crate::{a, b};\n"),
            ("tools.rs", "use crate::c;\n"),
        ]);
        assert_eq!(
            c.check_layers(LAYERS, &[]),
            ["b/mod.rs uses crate::c (top: layer 2) from b (middle: layer 1)"]
        );
        assert!(c.check_layers(LAYERS, &["b"]).is_empty());
        let twice: &Layers<'_> = &[("one", &["a"]), ("two", &["a"])];
        assert_eq!(c.check_layers(twice, &[]), ["a is in two layers"]);
    }

    #[test]
    fn the_table_must_cover_the_declared_modules() {
        let declared = BTreeSet::from(["a".to_string(), "b".to_string(), "layering".to_string()]);
        let gaps = layer_table_gaps(&LAYERS[..1], &declared, &["layering"]);
        assert_eq!(gaps, ["module b has no layer"]);
        let gaps = layer_table_gaps(LAYERS, &declared, &["layering"]);
        assert_eq!(gaps, ["the layers name c, which is not a module"]);
    }

    #[test]
    fn circles_between_siblings_and_with_the_facade_are_found() {
        let siblings = krate(&[
            ("x/mod.rs", "mod a;\nmod b;\n"),
            ("x/a.rs", "use super::b::B;\n"),
            ("x/b.rs", "fn f() { crate::x::a::g(\"{\") }\n"),
        ]);
        assert_eq!(
            siblings.folder_circles(),
            ["x: a → b → a (closed by x/b.rs: x::a::g)"]
        );
        let facade = krate(&[
            (
                "x/mod.rs",
                "mod a;\npub struct T;\nfn f() -> a::Part { todo!() }\n",
            ),
            ("x/a.rs", "use super::T;\npub enum Part {}\n"),
        ]);
        assert_eq!(
            facade.folder_circles(),
            ["x: <self> → a → <self> (closed by x/a.rs: x::T)"]
        );
        let no_facade_file = krate(&[
            ("http/a.rs", "use crate::http::b::f;\n"),
            ("http/b.rs", "use crate::http::c::g;\n"),
            ("http/c.rs", "use super::a::h;\n"),
        ]);
        assert_eq!(
            no_facade_file.folder_circles(),
            ["http: a → b → c → a (closed by http/c.rs: http::a::h)"]
        );
    }

    #[test]
    fn an_item_reexported_by_the_facade_is_its_submodules() {
        let through = krate(&[
            ("x/y/mod.rs", "mod a;\nmod b;\npub use b::{B, C as D};\n"),
            ("x/y/a.rs", "use super::D;\n"),
            ("x/y/b.rs", "use super::super::y::a::A;\n"),
        ]);
        assert_eq!(
            through.folder_circles(),
            ["x/y: a → b → a (closed by x/y/b.rs: x::y::a::A)"]
        );
    }

    #[test]
    fn a_facade_and_its_leaves_and_tests_are_no_circle() {
        let c = krate(&[
            (
                "x/mod.rs",
                "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\npub use a::A;\n\
                 pub(crate) use b::{self, B};\npub const C: u8 = 1;\n",
            ),
            (
                "x/a.rs",
                "use super::b::B;\nuse super::C;\n// super::tests\n",
            ),
            (
                "x/b.rs",
                "pub struct B;\n#[cfg(test)]\nmod tests {\n    use super::super::a::A;\n    \
                 fn s() -> &'static str { \"super::a::A}\" }\n}\n",
            ),
            (
                "x/tests.rs",
                "use super::*;\nuse super::a::A;\nuse super::b::B;\n",
            ),
        ]);
        assert_eq!(c.folder_circles(), Vec::<String>::new());
    }

    #[test]
    fn unparsable_sources_are_an_error() {
        let err = Crate::from_sources([("a.rs", "fn {")]).unwrap_err();
        assert!(err.to_string().starts_with("parsing a.rs"), "{err}");
    }

    #[test]
    fn module_paths_come_from_file_paths() {
        assert_eq!(module_of("lib.rs"), Vec::<String>::new());
        assert_eq!(module_of("a/b/mod.rs"), ["a", "b"]);
        assert_eq!(module_of("a/b.rs"), ["a", "b"]);
    }
}
