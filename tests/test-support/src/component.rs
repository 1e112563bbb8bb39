//! `.wat` core modules turned into components with our WIT at test time
//! (the step `cargo build --target wasm32-wasip2` performs for Rust guests),
//! so failing and hand-written guests are text, never committed binaries.

use std::path::Path;

/// A core module's `cabi_realloc`: a bump allocator over a mutable global
/// `$heap` (the module declares it, at the first free address), growing
/// memory as needed and never freeing. Paste it into a `(module …)`.
pub const BUMP_REALLOC: &str = r#"(func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and
      (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
      (i32.xor (i32.sub (local.get 2) (i32.const 1)) (i32.const -1))))
    (global.set $heap (i32.add (local.get $p) (local.get 3)))
    (block
      (br_if 0 (i32.le_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536))))
      (drop (memory.grow (i32.add (i32.const 1)
        (i32.div_u (i32.sub (global.get $heap) (i32.mul (memory.size) (i32.const 65536))) (i32.const 65536))))))
    (local.get $p))"#;

/// `component` with a custom section `name` holding `data` appended: the
/// same component, as large as a test needs (a guest built by another
/// language's toolchain is mostly such bytes: an interpreter and its
/// library).
#[must_use]
pub fn with_custom_section(component: &[u8], name: &str, data: &[u8]) -> Vec<u8> {
    use wasm_encoder::ComponentSection;
    let mut out = component.to_vec();
    wasm_encoder::CustomSection {
        name: name.into(),
        data: data.into(),
    }
    .append_to_component(&mut out);
    out
}

/// `n` bytes that compress about as well as a component's code and data
/// (3 to 4 times): words of a small vocabulary in a fixed pseudo-random
/// order.
#[must_use]
pub fn code_like_bytes(n: usize) -> Vec<u8> {
    let words: Vec<String> = (0..4096u32)
        .map(|i| format!("f{:x}_{}", i.wrapping_mul(7919), i % 13))
        .collect();
    // A fixed linear congruential sequence: the same bytes every run.
    let mut state: u64 = 42;
    let mut out = Vec::with_capacity(n + 32);
    while out.len() < n {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let word = &words[usize::try_from(state >> 52).unwrap_or(0) % words.len()];
        out.extend_from_slice(word.as_bytes());
        out.push(b' ');
    }
    out.truncate(n);
    out
}

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
