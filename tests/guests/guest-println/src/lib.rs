//! A tiny std guest that exercises what a guest author does while debugging:
//! `println!`, `eprintln!` and `panic!`. The host's tests load it to prove
//! that stdout and stderr reach the host's logs and that a panic's message
//! reaches the host's error; it is also a minimal example of a guest that
//! watches any kind (a custom resource, say) and writes one ConfigMap.
//!
//! It never does I/O beyond printing (the host does every read and write).
//!
//! Configuration keys (all optional):
//! - `name`: the guest's name (default `println`);
//! - `watch`: the kind to watch, `GROUP/VERSION/KIND` (`/v1/Pod` for a
//!   core kind; default `/v1/ConfigMap` in the host's namespace);
//! - `output`: a ConfigMap name in the host's namespace; each reconcile
//!   applies it with the key and the number of watched objects it saw;
//! - `panic`: `describe` or `reconcile` makes that call panic with a
//!   message naming it;
//! - `keys`: `per-object` makes every watched object its own request key
//!   (default: one aggregate key, `println`);
//! - `lines`: a reconcile first prints this many 100-byte lines to stdout
//!   (to exceed the host's per-call output cap).

#[allow(missing_docs, unsafe_code, clippy::all)]
mod bindings {
    wit_bindgen::generate!({ world: "controller", path: "../../../wit" });
}

use bindings::exports::wasmctrl::controller::reconciler::Guest;
use bindings::wasmctrl::controller::types::{
    Environment, GroupVersionKind, KeyMapping, Manifest, Plan, ReconcileError, Request, Snapshot,
    Watch, Write, WriteRule,
};

/// The aggregate key every change maps to.
pub const KEY: &str = "println";

fn config<'a>(env: &'a Environment, key: &str) -> Option<&'a str> {
    env.config
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn watched_kind(env: &Environment) -> Result<(GroupVersionKind, Option<String>), String> {
    let Some(spec) = config(env, "watch") else {
        let gvk = GroupVersionKind {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        return Ok((gvk, Some(env.namespace.clone())));
    };
    let mut parts = spec.splitn(3, '/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(group), Some(version), Some(kind)) if !version.is_empty() && !kind.is_empty() => {
            let gvk = GroupVersionKind {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
            };
            Ok((gvk, None))
        }
        _ => Err(format!("watch={spec}: expected GROUP/VERSION/KIND")),
    }
}

fn configmap() -> GroupVersionKind {
    GroupVersionKind {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
    }
}

/// The guest.
pub struct PrintlnGuest;

impl Guest for PrintlnGuest {
    fn describe(env: Environment) -> Result<Manifest, String> {
        println!("describe: namespace {}", env.namespace);
        if config(&env, "panic") == Some("describe") {
            panic!("told to panic in describe");
        }
        let (gvk, namespace) = watched_kind(&env)?;
        let writes = match config(&env, "output") {
            Some(name) => vec![WriteRule {
                gvk: configmap(),
                namespace: Some(env.namespace.clone()),
                names: vec![name.to_string()],
                status: false,
            }],
            None => Vec::new(),
        };
        Ok(Manifest {
            name: config(&env, "name").unwrap_or("println").to_string(),
            watches: vec![Watch {
                name: "watched".to_string(),
                gvk,
                plural: None,
                namespace,
                label_selector: None,
                field_selector: None,
                fields: Vec::new(),
                indexes: Vec::new(),
                keys: match config(&env, "keys") {
                    Some("per-object") => KeyMapping::PerObject,
                    _ => KeyMapping::Aggregate(KEY.to_string()),
                },
                finalizer: None,
            }],
            writes,
            resync_seconds: None,
        })
    }

    fn reconcile(
        env: Environment,
        request: Request,
        snapshot: Snapshot,
    ) -> Result<Plan, ReconcileError> {
        let key = request.key;
        let seen = snapshot.object_watch.len();
        let lines = config(&env, "lines").and_then(|n| n.parse::<u32>().ok());
        for i in 0..lines.unwrap_or(0) {
            println!("line {i:06} {}", "x".repeat(88));
        }
        println!("reconcile {key}: {seen} objects");
        eprintln!("reconcile {key}: to stderr");
        if config(&env, "panic") == Some("reconcile") {
            panic!("told to panic in reconcile of {key}");
        }
        let writes = match config(&env, "output") {
            Some(name) => vec![Write::Apply(format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":{},"namespace":{}}},"data":{{"key":{},"objects":"{seen}"}}}}"#,
                quote(name),
                quote(&env.namespace),
                quote(&key),
            ))],
            None => Vec::new(),
        };
        Ok(Plan {
            writes,
            events: Vec::new(),
            requeue_after_ms: None,
        })
    }
}

/// `s` as a JSON string literal.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// Exported only in the component build: the export symbols' names are not
// valid native link names.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)] // the generated export shims; this crate's own code has none
mod export {
    use super::PrintlnGuest;
    crate::bindings::export!(PrintlnGuest with_types_in crate::bindings);
}
