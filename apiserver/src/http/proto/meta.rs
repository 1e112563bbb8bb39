//! `ObjectMeta` (with its owner references and label and annotation
//! maps) decoded from protobuf into its JSON form, leaving out the empty
//! values Go's `omitempty` leaves out. It never decodes a whole object.

use serde_json::{Map, Value};

use super::wire::{fields, map_entry, string, Field, ProtoError};

pub(crate) fn insert_entry(obj: &mut Map<String, Value>, key: &str, entry: (String, Value)) {
    if let Value::Object(m) = obj.entry(key).or_insert_with(|| Value::Object(Map::new())) {
        m.insert(entry.0, entry.1);
    }
}

fn owner_reference(b: &[u8]) -> Result<Value, ProtoError> {
    let mut o = Map::new();
    for (num, f) in fields(b)? {
        match (num, f) {
            (1, Field::Bytes(x)) => {
                o.insert("kind".into(), string(x)?.into());
            }
            (3, Field::Bytes(x)) => {
                o.insert("name".into(), string(x)?.into());
            }
            (4, Field::Bytes(x)) => {
                o.insert("uid".into(), string(x)?.into());
            }
            (5, Field::Bytes(x)) => {
                o.insert("apiVersion".into(), string(x)?.into());
            }
            (6, Field::Varint(v)) => {
                o.insert("controller".into(), (v != 0).into());
            }
            (7, Field::Varint(v)) => {
                o.insert("blockOwnerDeletion".into(), (v != 0).into());
            }
            _ => {}
        }
    }
    Ok(Value::Object(o))
}

/// Inserts string `x` at `key` unless it is empty. Go's generated protobuf
/// code writes every non-pointer string, empty or not (kubectl's body for
/// `create configmap` carries `generateName`, `uid` and `resourceVersion`
/// as ""); decoded into the Go struct, an empty one is then dropped from
/// JSON by the field's `omitempty`, as it is here.
pub(crate) fn insert_nonempty(
    m: &mut Map<String, Value>,
    key: &str,
    x: &[u8],
) -> Result<(), ProtoError> {
    let s = string(x)?;
    if !s.is_empty() {
        m.insert(key.into(), s.into());
    }
    Ok(())
}

pub(crate) fn object_meta(b: &[u8]) -> Result<Value, ProtoError> {
    let mut m = Map::new();
    for (num, f) in fields(b)? {
        match (num, f) {
            (1, Field::Bytes(x)) => insert_nonempty(&mut m, "name", x)?,
            (2, Field::Bytes(x)) => insert_nonempty(&mut m, "generateName", x)?,
            (3, Field::Bytes(x)) => insert_nonempty(&mut m, "namespace", x)?,
            (5, Field::Bytes(x)) => insert_nonempty(&mut m, "uid", x)?,
            (6, Field::Bytes(x)) => insert_nonempty(&mut m, "resourceVersion", x)?,
            (11, Field::Bytes(x)) => insert_entry(&mut m, "labels", map_entry(x, false)?),
            (12, Field::Bytes(x)) => insert_entry(&mut m, "annotations", map_entry(x, false)?),
            (13, Field::Bytes(x)) => {
                let r = owner_reference(x)?;
                if let Value::Array(a) = m
                    .entry("ownerReferences")
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    a.push(r);
                }
            }
            (14, Field::Bytes(x)) => {
                let s = string(x)?;
                if let Value::Array(a) = m
                    .entry("finalizers")
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    a.push(s.into());
                }
            }
            _ => {}
        }
    }
    Ok(Value::Object(m))
}
