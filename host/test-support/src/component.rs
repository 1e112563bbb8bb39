//! `.wat` core modules turned into components with our WIT at test time
//! (the step `cargo build --target wasm32-wasip2` performs for Rust guests),
//! so failing and hand-written guests are text, never committed binaries.

use std::path::Path;

/// The repository's `wit/` directory.
fn wit_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit"))
}

/// A component of world `controller` from a core module in WAT.
#[must_use]
pub fn component_from_wat(wat: &str) -> Vec<u8> {
    component_from_wat_in(wat, &[], "controller")
}

/// A component of `world` from a core module in WAT, resolved against our
/// `wit/` plus the `extra` WIT documents (name, text) pushed after it, in
/// order; `world` is looked up in the last package pushed.
#[must_use]
pub fn component_from_wat_in(wat: &str, extra: &[(&str, &str)], world: &str) -> Vec<u8> {
    let mut module = wat::parse_str(wat).expect("test .wat parses");
    let mut resolve = wit_parser::Resolve::default();
    let (mut package, _) = resolve.push_dir(wit_dir()).expect("wit/ resolves");
    for (name, text) in extra {
        package = resolve
            .push_str(name, text)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let world = resolve
        .select_world(&[package], Some(world))
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .unwrap();
    wit_component::ComponentEncoder::default()
        .module(&module)
        .unwrap()
        .validate(true)
        .encode()
        .expect("the module implements the world")
}
