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
//!
//! Reading the sources is `wasmctrl_test_support::layering`'s; this file
//! holds only the table and the tests over it.

/// Every top-level module of the library, by layer, bottom first.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves: no module of ours",
        &[
            "config",
            "delivery",
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
    ("electing per guest", &["leader_per_guest"]),
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
    use std::path::{Path, PathBuf};

    use wasmctrl_test_support::layering::{declared_modules, layer_table_gaps, Crate};

    use super::LAYERS;

    /// This module itself: test code, given no layer.
    const IGNORE: &[&str] = &["layering"];

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    fn sources() -> Crate {
        Crate::scan(&src()).expect("the library's sources")
    }

    #[test]
    fn every_library_module_has_a_layer() {
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
    fn the_scanner_reads_paths_and_groups_and_skips_comments() {
        let text = "use crate::store::{Change, Handler};\n\
                    use crate::{guest::{self, Gvk},\n    sync::lock, metrics};\n\
                    // crate::controller in a comment\n\
                    /// [`crate::supervisor`]\n\
                    fn f() { let x = crate::informer::Informer::start(); } // crate::actuator\n";
        let used = Crate::from_sources([("config.rs", text)])
            .expect("parses")
            .modules_used("config.rs");
        assert_eq!(
            used.into_iter().collect::<Vec<_>>(),
            ["guest", "informer", "metrics", "store", "sync"]
        );
    }

    #[test]
    fn no_folder_has_a_circle_among_its_files() {
        let circles = sources().folder_circles();
        assert!(
            circles.is_empty(),
            "circles inside folders:\n{}",
            circles.join("\n")
        );
    }

    fn circles(files: &[(&str, &str)]) -> Vec<String> {
        Crate::from_sources(files.iter().copied())
            .expect("parses")
            .folder_circles()
    }

    #[test]
    fn a_circle_inside_a_folder_is_caught() {
        // What `actuator/` once was: a sibling through another, and a
        // facade using what a child uses it for.
        let siblings = [
            ("x/mod.rs", "mod a;\nmod b;\n"),
            ("x/a.rs", "use super::b::B;\n"),
            ("x/b.rs", "fn f() { crate::x::a::g(\"{\") }\n"),
        ];
        assert!(!circles(&siblings).is_empty());
        let facade = [
            (
                "x/mod.rs",
                "mod a;\npub struct T;\nfn f() -> a::Part { todo!() }\n",
            ),
            ("x/a.rs", "use super::T;\npub enum Part {}\n"),
        ];
        assert!(!circles(&facade).is_empty());
        // Through a re-export: `super::B` is `b`'s.
        let reexport = [
            ("x/y/mod.rs", "mod a;\nmod b;\npub use b::{B, C as D};\n"),
            ("x/y/a.rs", "use super::D;\n"),
            ("x/y/b.rs", "use super::super::y::a::A;\n"),
        ];
        assert!(!circles(&reexport).is_empty());
    }

    #[test]
    fn a_facade_and_its_leaves_are_no_circle() {
        let files = [
            (
                "x/mod.rs",
                "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\npub use a::A;\npub(crate) use b::{self, B};\npub const C: u8 = 1;\n",
            ),
            ("x/a.rs", "use super::b::B;\nuse super::C;\n// super::tests\n"),
            ("x/b.rs", "pub struct B;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    fn s() -> &'static str { \"super::a::A}\" }\n}\n"),
            ("x/tests.rs", "use super::*;\nuse super::a::A;\n"),
        ];
        assert_eq!(circles(&files), Vec::<String>::new());
    }

    #[test]
    fn an_upward_import_is_caught() {
        // What the informer once did: the bottom importing the top.
        let informer =
            Crate::from_sources([("informer/mod.rs", "use crate::controller::GuestController;")])
                .expect("parses");
        let wrong = informer.check_layers(LAYERS, IGNORE);
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert!(wrong[0].contains("uses crate::controller"), "{wrong:?}");
    }
}
