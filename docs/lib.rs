//! The book (`docs/src`, built with `mdbook build docs`) and its checks.
//!
//! This crate holds no code. Its tests run with `cargo test -p
//! wasmctrl-docs`, and so with `make test`: `tests/book.rs` checks that
//! every relative link and `#anchor` of the book and of README.md
//! resolves, that every `{{#include}}` names a file and anchor that exist,
//! and that every Rust sample is either included from a compiled file or a
//! verbatim excerpt of one; `tests/key_mappings.rs` holds the worked
//! examples the page "Choosing key mappings" includes, run against the
//! guest SDK's `World`. The pages generated from the code (the `wasmctrl
//! run` flags, the metrics list) are checked by the host's own tests.
