//! Decoding of the Kubernetes protobuf request encoding for the few types
//! kubectl's generator commands send that way (`kubectl create namespace`,
//! `create configmap`, `create secret generic`): the `k8s\0` envelope, the
//! `runtime.Unknown` wrapper and `ObjectMeta`, `Namespace`, `ConfigMap`,
//! `Secret`, and `SelfSubjectAccessReview` (`kubectl auth can-i`); the
//! workload kinds are in `workloads`. Anything
//! else is reported as unsupported so the caller answers
//! 415. Responses are always JSON; this module never encodes.
//!
//! # Layout
//! - this file: the envelope, the kinds above, and [`decode`].
//! - `wire`: varints, fields, strings, map entries, [`ProtoError`].
//! - `meta`: `ObjectMeta`.
//! - `workloads`: the workload kinds, by field descriptors.

mod meta;
mod wire;
mod workloads;

use serde_json::{json, Map, Value};

use meta::{insert_entry, insert_nonempty, object_meta};
pub use wire::ProtoError;
use wire::{fields, map_entry, string, Field};

/// Media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";

fn decode_kind(kind: &str, raw: &[u8]) -> Result<Map<String, Value>, ProtoError> {
    let mut obj = Map::new();
    for (num, f) in fields(raw)? {
        let Field::Bytes(x) = f else {
            if let (Field::Varint(v), true) =
                (f, matches!((kind, num), ("ConfigMap", 4) | ("Secret", 5)))
            {
                obj.insert("immutable".into(), (v != 0).into());
            }
            continue;
        };
        match (kind, num) {
            (_, 1) => {
                obj.insert("metadata".into(), object_meta(x)?);
            }
            ("ConfigMap", 2) => insert_entry(&mut obj, "data", map_entry(x, false)?),
            ("ConfigMap", 3) => insert_entry(&mut obj, "binaryData", map_entry(x, true)?),
            ("Secret", 2) => insert_entry(&mut obj, "data", map_entry(x, true)?),
            ("Secret", 3) => insert_nonempty(&mut obj, "type", x)?,
            ("Secret", 4) => insert_entry(&mut obj, "stringData", map_entry(x, false)?),
            ("Namespace", 2) => {
                let mut finalizers = Vec::new();
                for (n, f) in fields(x)? {
                    if let (1, Field::Bytes(s)) = (n, f) {
                        finalizers.push(Value::String(string(s)?));
                    }
                }
                // `finalizers` is omitempty; the spec, a struct, is not.
                let spec = match finalizers.is_empty() {
                    true => json!({}),
                    false => json!({ "finalizers": finalizers }),
                };
                obj.insert("spec".into(), spec);
            }
            _ => {}
        }
    }
    Ok(obj)
}

/// `SelfSubjectAccessReview` (what `kubectl auth can-i` sends): the spec's
/// resource or non-resource attributes.
fn access_review(raw: &[u8]) -> Result<Value, ProtoError> {
    const RESOURCE: [&str; 7] = [
        "namespace",
        "verb",
        "group",
        "version",
        "resource",
        "subresource",
        "name",
    ];
    const NON_RESOURCE: [&str; 2] = ["path", "verb"];
    let mut spec = Map::new();
    for (num, f) in fields(raw)? {
        let (2, Field::Bytes(s)) = (num, f) else {
            continue;
        };
        for (n, f) in fields(s)? {
            let (key, names): (&str, &[&str]) = match (n, f) {
                (1, Field::Bytes(_)) => ("resourceAttributes", &RESOURCE),
                (2, Field::Bytes(_)) => ("nonResourceAttributes", &NON_RESOURCE),
                _ => continue,
            };
            let Field::Bytes(attrs) = f else { continue };
            let mut out = Map::new();
            for (i, f) in fields(attrs)? {
                if let (Some(name), Field::Bytes(x)) = (
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| names.get(i.wrapping_sub(1))),
                    f,
                ) {
                    out.insert((*name).to_string(), string(x)?.into());
                }
            }
            spec.insert(key.into(), Value::Object(out));
        }
    }
    Ok(json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": spec,
    }))
}

/// Decodes a protobuf request body into the JSON form of the object.
pub fn decode(body: &[u8]) -> Result<Value, ProtoError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or(ProtoError::Malformed("missing k8s protobuf prefix"))?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (num, f) in fields(rest)? {
        match (num, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm)? {
                    match (n, f) {
                        (1, Field::Bytes(x)) => api_version = string(x)?,
                        (2, Field::Bytes(x)) => kind = string(x)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(x)) => raw = x,
            (3, Field::Bytes(enc)) if !enc.is_empty() => {
                return Err(ProtoError::Unsupported("compressed protobuf".into()))
            }
            _ => {}
        }
    }
    if api_version == "authorization.k8s.io/v1" && kind == "SelfSubjectAccessReview" {
        return access_review(raw);
    }
    if let Some(obj) = workloads::decode(&api_version, &kind, raw) {
        let mut obj = obj?;
        obj.insert("apiVersion".into(), api_version.into());
        obj.insert("kind".into(), kind.into());
        return Ok(Value::Object(obj));
    }
    if api_version != "v1" || !matches!(kind.as_str(), "ConfigMap" | "Secret" | "Namespace") {
        return Err(ProtoError::Unsupported(format!("{api_version}/{kind}")));
    }
    let mut obj = decode_kind(&kind, raw)?;
    obj.insert("apiVersion".into(), api_version.into());
    obj.insert("kind".into(), kind.into());
    Ok(Value::Object(obj))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::wire::field;
    use super::*;

    #[test]
    fn decodes_a_configmap_envelope() {
        let meta = [
            field(1, b"demo"),
            field(11, &[field(1, b"app"), field(2, b"x")].concat()),
        ]
        .concat();
        let cm = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        ]
        .concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &cm)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo", "labels": {"app": "x"}}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn empty_strings_go_generated_code_writes_are_left_out_as_omitempty_does() {
        // ObjectMeta as kubectl 1.32 sends it for `create configmap c -n
        // ml`: name, then generateName, namespace, selfLink, uid and
        // resourceVersion, the empty ones written as "".
        let meta = [
            field(1, b"c"),
            field(2, b""),
            field(3, b"ml"),
            field(4, b""),
            field(5, b""),
            field(6, b""),
        ]
        .concat();
        let ns = [field(1, &[field(1, b"team")].concat()), field(2, b"")].concat();
        let tm = [field(1, b"v1"), field(2, b"Namespace")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &ns)].concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}, "spec": {}})
        );
        let secret = [field(1, &meta), field(3, b"")].concat();
        let tm = [field(1, b"v1"), field(2, b"Secret")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &secret)].concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c", "namespace": "ml"}})
        );
    }

    #[test]
    fn other_kinds_and_garbage_are_rejected() {
        let tm = [field(1, b"v1"), field(2, b"Pod")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm)].concat();
        assert!(matches!(decode(&body), Err(ProtoError::Unsupported(_))));
        assert!(matches!(decode(b"nope"), Err(ProtoError::Malformed(_))));
        assert!(matches!(
            decode(b"k8s\0\x0a\xff"),
            Err(ProtoError::Malformed(_))
        ));
    }
}
