//! examples crate
