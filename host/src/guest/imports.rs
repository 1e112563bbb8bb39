//! What a component imports and exports, read from its binary before it is
//! compiled, so a guest the host will refuse anyway (another world, another
//! contract version, an import the sandbox never grants, the component
//! model's async ABI, too large) is refused by name in milliseconds instead
//! of after a Cranelift compile of tens of seconds.
//!
//! Owns the list of WASI packages the host will not provide and why, and
//! the size cap. It never compiles, links or instantiates anything; the
//! imports it accepts are linked by the runtime (the governed WASI of
//! [`super::wasi`], the contract) or defined to trap.

use wasmparser::{
    CanonicalFunction, CanonicalOption, ComponentExternName, Encoding, Parser, Payload,
};

use super::{GuestErrorKind, CONTRACT_VERSION, RECONCILER};

/// The largest component the host loads (100 MiB); a CPython guest is
/// ~18 MB.
pub const MAX_COMPONENT_BYTES: usize = 100 << 20;

/// WASI packages a guest may import but the host never provides, with the
/// reason given to the guest's author and how to build without them.
const NOT_PROVIDED: &[(&str, &str)] = &[(
    "wasi:http/",
    "guests have no network access; rebuild without it: jco componentize / componentize-js `--disable http` (`-d http`)",
)];

/// The top-level imports and exports of a component binary.
#[derive(Debug, Default)]
pub struct Inspected {
    /// Import names (`wasi:cli/stdout@0.2.9`, ...), in order.
    pub imports: Vec<String>,
    /// Export names (`wasmctrl:controller/reconciler@0.3.0`, ...).
    pub exports: Vec<String>,
    /// Whether any canonical function uses the component model's async
    /// ABI (or its threads).
    pub uses_async: bool,
}

/// Reads `bytes`' imports and exports without compiling, and refuses what
/// the host would refuse after compiling: too large, not a component, a
/// component of another world or contract version, the async ABI, an
/// import the host never provides.
pub fn check(bytes: &[u8]) -> Result<Inspected, GuestErrorKind> {
    if bytes.len() > MAX_COMPONENT_BYTES {
        return Err(GuestErrorKind::TooLarge {
            size: bytes.len(),
            max: MAX_COMPONENT_BYTES,
        });
    }
    let found = inspect(bytes)?;
    let version = found
        .exports
        .iter()
        .find_map(|name| name.strip_prefix(RECONCILER));
    match version {
        None => return Err(GuestErrorKind::World(found.exports)),
        Some(v) if Some(v) != CONTRACT_VERSION.strip_prefix("wasmctrl:controller@") => {
            return Err(GuestErrorKind::Version {
                found: v.to_string(),
            })
        }
        Some(_) => {}
    }
    if found.uses_async {
        return Err(GuestErrorKind::Async);
    }
    let unsupported: Vec<String> = found
        .imports
        .iter()
        .filter(|n| reason(n).is_some())
        .cloned()
        .collect();
    if !unsupported.is_empty() {
        return Err(GuestErrorKind::Unsupported(unsupported));
    }
    Ok(found)
}

/// The top-level imports and exports of `bytes` (a malformed binary, or a
/// core module, is a [`GuestErrorKind::Compile`] error).
pub fn inspect(bytes: &[u8]) -> Result<Inspected, GuestErrorKind> {
    let malformed = |e: wasmparser::BinaryReaderError| {
        GuestErrorKind::Compile(format!("malformed component: {e}"))
    };
    let mut found = Inspected::default();
    // Nested modules and components are parsed in line; only depth 0 is
    // the component's own interface.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(malformed)? {
            Payload::Version { encoding, .. } if depth == 0 && encoding != Encoding::Component => {
                return Err(GuestErrorKind::Compile(
                    "a core WebAssembly module, not a component (build it for wasm32-wasip2, or with componentize-py / jco)".into(),
                ));
            }
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    found.imports.push(name(import.map_err(malformed)?.name));
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    found.exports.push(name(export.map_err(malformed)?.name));
                }
            }
            Payload::ComponentCanonicalSection(reader) => {
                for function in reader {
                    found.uses_async |= is_async(&function.map_err(malformed)?);
                }
            }
            _ => {}
        }
    }
    Ok(found)
}

fn name(n: ComponentExternName<'_>) -> String {
    n.name.to_string()
}

/// Whether `f` needs the component model's async ABI or its threads,
/// which this host's engine does not enable.
fn is_async(f: &CanonicalFunction) -> bool {
    let async_options = |options: &[CanonicalOption]| {
        options
            .iter()
            .any(|o| matches!(o, CanonicalOption::Async | CanonicalOption::Callback(_)))
    };
    match f {
        CanonicalFunction::Lift { options, .. } | CanonicalFunction::Lower { options, .. } => {
            async_options(options)
        }
        CanonicalFunction::ResourceNew { .. }
        | CanonicalFunction::ResourceDrop { .. }
        | CanonicalFunction::ResourceRep { .. } => false,
        _ => true,
    }
}

fn reason(import: &str) -> Option<&'static str> {
    NOT_PROVIDED
        .iter()
        .find(|(prefix, _)| import.starts_with(prefix))
        .map(|(_, why)| *why)
}

/// `imports wasi:http/outgoing-handler@0.2.3, which the host does not
/// provide: guests have no network access; rebuild without it: …`.
pub fn describe(imports: &[String]) -> String {
    let mut why: Vec<&str> = imports.iter().filter_map(|i| reason(i)).collect();
    why.dedup();
    format!(
        "imports {}, which the host does not provide: {} (guests get the wasmctrl contract and a governed WASI 0.2: stdio to the log, clocks at env.now, seeded randomness, no files, no network)",
        imports.join(", "),
        why.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_each_import_and_the_flag_that_drops_it() {
        let msg = describe(&[
            "wasi:http/types@0.2.3".into(),
            "wasi:http/outgoing-handler@0.2.3".into(),
        ]);
        assert!(
            msg.starts_with(
                "imports wasi:http/types@0.2.3, wasi:http/outgoing-handler@0.2.3, which the host does not provide: guests have no network access"
            ),
            "{msg}"
        );
        assert!(msg.contains("--disable http` (`-d http`)"), "{msg}");
    }

    #[test]
    fn wasi_the_host_governs_and_the_contract_are_not_refused() {
        for ok in [
            "wasi:cli/stdout@0.2.6",
            "wasi:io/streams@0.2.12",
            "wasmctrl:controller/log@0.3.0",
            "wasi:clocks/wall-clock@0.2.0",
            "wasi:filesystem/preopens@0.2.9",
            "wasi:sockets/tcp@0.2.9",
        ] {
            assert_eq!(reason(ok), None, "{ok}");
        }
    }

    #[test]
    fn an_oversized_or_malformed_binary_is_refused_before_compiling() {
        let big = vec![0u8; MAX_COMPONENT_BYTES + 1];
        assert!(matches!(
            check(&big),
            Err(GuestErrorKind::TooLarge { size, max }) if size == MAX_COMPONENT_BYTES + 1 && max == MAX_COMPONENT_BYTES
        ));
        assert!(matches!(
            check(b"\0asm junk"),
            Err(GuestErrorKind::Compile(_))
        ));
    }
}
