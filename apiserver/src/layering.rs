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
//!
//! Reading the sources is `wasmctrl_test_support::layering`'s; this file
//! holds only the table and the tests over it.

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
    use std::path::{Path, PathBuf};

    use wasmctrl_test_support::layering::{declared_modules, layer_table_gaps, Crate};

    use super::LAYERS;

    /// This module itself: test code, given no layer.
    const IGNORE: &[&str] = &["layering"];

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    fn sources() -> Crate {
        Crate::scan(&src()).expect("the crate's sources")
    }

    #[test]
    fn every_module_has_a_layer() {
        let declared = declared_modules(&src().join("lib.rs")).expect("crate root");
        let gaps = layer_table_gaps(LAYERS, &declared, IGNORE);
        assert!(gaps.is_empty(), "{}", gaps.join("\n"));
    }

    #[test]
    fn no_module_uses_a_module_of_its_own_layer_or_above() {
        let wrong = sources().check_layers(LAYERS, IGNORE);
        assert!(
            wrong.is_empty(),
            "imports against the layering:\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn no_folder_holds_an_import_circle() {
        let found = sources().folder_circles();
        assert!(
            found.is_empty(),
            "import circles inside folders:\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn the_scanner_reads_paths_groups_and_relative_paths_and_skips_comments() {
        let files = [
            ("lib.rs", "mod auth;\npub use storage::registry;\n"),
            ("storage/registry.rs", ""),
            ("controllers/kubelet.rs", ""),
            ("auth/gc/graph.rs", ""),
            (
                "auth/gc/mod.rs",
                "use crate::storage::store::{Store, ObjKey};\n\
                 use crate::{rules::{self, crd}, status};\n\
                 use super::super::controllers::kubelet::{self, PodDeletion};\n\
                 use graph::Graph;\n\
                 // crate::http in a comment\n\
                 /// [`crate::http`]\n\
                 fn f() { let x = crate::registry::Registry::new(); } // crate::http\n",
            ),
        ];
        let used = Crate::from_sources(files)
            .expect("parses")
            .modules_used("auth/gc/mod.rs");
        // `graph` is the file's own child; `registry` is `storage`'s.
        assert_eq!(
            used.into_iter().collect::<Vec<_>>(),
            ["auth", "controllers", "rules", "status", "storage"]
        );
    }

    #[test]
    fn an_upward_import_is_caught() {
        // What the garbage collector once did: a controller naming the
        // HTTP layer's state.
        let files = [(
            "controllers/gc/mod.rs",
            "use crate::http::handlers::AppState;\n",
        )];
        let wrong = Crate::from_sources(files)
            .expect("parses")
            .check_layers(LAYERS, IGNORE);
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert!(wrong[0].contains("uses crate::http"), "{wrong:?}");
    }

    fn circles(files: &[(&str, &str)]) -> Vec<String> {
        Crate::from_sources(files.iter().copied())
            .expect("parses")
            .folder_circles()
    }

    #[test]
    fn a_circle_between_the_files_of_a_folder_is_caught() {
        let files = [
            (
                "storage/store/mod.rs",
                "mod list;\nuse list::page;\npub struct Inner;\n",
            ),
            (
                "storage/store/list.rs",
                "use super::Inner;\nuse super::encode::rv;\n",
            ),
            ("storage/store/encode.rs", "pub fn rv() {}\n"),
        ];
        assert_eq!(
            circles(&files),
            ["storage/store: <self> → list → <self> (closed by storage/store/list.rs: storage::store::Inner)"]
        );
        let acyclic = [
            ("storage/store/mod.rs", "mod list;\nuse list::page;\n"),
            ("storage/store/list.rs", "use super::encode::rv;\n"),
            ("storage/store/encode.rs", "pub fn rv() {}\n"),
        ];
        assert!(circles(&acyclic).is_empty());
        let through_crate = [
            ("http/a.rs", "use crate::http::b::f;\n"),
            ("http/b.rs", "use crate::http::c::g;\n"),
            ("http/c.rs", "use super::a::h;\n"),
        ];
        assert_eq!(
            circles(&through_crate),
            ["http: a → b → c → a (closed by http/c.rs: http::a::h)"]
        );
    }
}
