//! What a component imports, read from its type before it is linked, so a
//! guest that needs a capability the sandbox never grants is refused by
//! name instead of failing to link with a type error.
//!
//! Owns the list of WASI packages the host will not provide and why. It
//! never links or instantiates anything; imports not named here are linked
//! by the runtime (stdio, see [`super::stdio`]) or defined to trap.

use wasmtime::component::Component;
use wasmtime::Engine;

/// WASI packages a guest may import but the host never provides, with the
/// reason given to the guest's author. Their interfaces carry resource
/// types (file descriptors, sockets, HTTP bodies) that a trap stub cannot
/// stand in for.
const NOT_PROVIDED: &[(&str, &str)] = &[
    ("wasi:filesystem/", "guests have no filesystem access"),
    ("wasi:sockets/", "guests have no network access"),
    ("wasi:http/", "guests have no network access"),
];

/// Every import name of `component` (`wasi:cli/stdout@0.2.6`, ...).
pub fn names(component: &Component, engine: &Engine) -> Vec<String> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The imports of `component` the host will not provide, in import order.
pub fn unsupported(component: &Component, engine: &Engine) -> Vec<String> {
    names(component, engine)
        .into_iter()
        .filter(|n| reason(n).is_some())
        .collect()
}

fn reason(import: &str) -> Option<&'static str> {
    NOT_PROVIDED
        .iter()
        .find(|(prefix, _)| import.starts_with(prefix))
        .map(|(_, why)| *why)
}

/// `imports wasi:filesystem/preopens@0.2.6, wasi:filesystem/types@0.2.6,
/// which the host does not provide: guests have no filesystem access`.
pub fn describe(imports: &[String]) -> String {
    let mut why: Vec<&str> = imports.iter().filter_map(|i| reason(i)).collect();
    why.dedup();
    format!(
        "imports {}, which the host does not provide: {} (guests get stdout, stderr and the wasmctrl contract only)",
        imports.join(", "),
        why.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_each_import_and_why() {
        let msg = describe(&[
            "wasi:filesystem/preopens@0.2.6".into(),
            "wasi:filesystem/types@0.2.6".into(),
            "wasi:sockets/tcp@0.2.6".into(),
        ]);
        assert!(msg.contains("wasi:filesystem/preopens@0.2.6, wasi:filesystem/types@0.2.6, wasi:sockets/tcp@0.2.6"), "{msg}");
        assert!(
            msg.contains("guests have no filesystem access; guests have no network access"),
            "{msg}"
        );
    }

    #[test]
    fn stdio_and_the_contract_are_not_refused() {
        for ok in [
            "wasi:cli/stdout@0.2.6",
            "wasi:io/streams@0.2.6",
            "wasmctrl:controller/log@0.3.0",
            "wasi:clocks/wall-clock@0.2.6",
        ] {
            assert_eq!(reason(ok), None, "{ok}");
        }
    }
}
