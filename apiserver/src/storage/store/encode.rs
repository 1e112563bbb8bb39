//! A stored object's encoding: its JSON with `metadata.resourceVersion`
//! set, and the encoding split around that value, so an update can both
//! tell a no-op and encode the new version from one serialization. It
//! never decides which resourceVersion an object gets (the store does).

use std::sync::Arc;

use serde_json::Value;

use super::record::StoreError;

pub(super) fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

pub(super) fn encode(obj: &Value) -> Result<Arc<[u8]>, StoreError> {
    serde_json::to_vec(obj)
        .map(Arc::from)
        .map_err(|e| StoreError::Serialize(e.to_string()))
}

/// The JSON of a `metadata.resourceVersion` of `rv`.
pub(super) fn rv_json(rv: u64) -> String {
    format!("\"{rv}\"")
}

/// `obj` (an object whose `metadata` is an object with a
/// `resourceVersion`) encoded as [`encode`] does but without the value of
/// `metadata.resourceVersion`, and where that value goes: the encoding
/// with any resourceVersion is the bytes before, its JSON, the bytes
/// after. `None` for any other `obj`.
pub(super) fn encode_around_rv(obj: &Value) -> Result<Option<(Vec<u8>, usize)>, StoreError> {
    let Value::Object(root) = obj else {
        return Ok(None);
    };
    let Some(Value::Object(meta)) = root.get("metadata") else {
        return Ok(None);
    };
    if !meta.contains_key("resourceVersion") {
        return Ok(None);
    }
    let write = |out: &mut Vec<u8>, v: &dyn erased::Json| {
        v.write(out)
            .map_err(|e| StoreError::Serialize(e.to_string()))
    };
    let mut out = Vec::new();
    let mut at = 0;
    out.push(b'{');
    for (i, (k, v)) in root.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(&mut out, k)?;
        out.push(b':');
        if k != "metadata" {
            write(&mut out, v)?;
            continue;
        }
        out.push(b'{');
        for (j, (mk, mv)) in meta.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            write(&mut out, mk)?;
            out.push(b':');
            if mk == "resourceVersion" {
                at = out.len();
            } else {
                write(&mut out, mv)?;
            }
        }
        out.push(b'}');
    }
    out.push(b'}');
    Ok(Some((out, at)))
}

/// Keys and values written as `serde_json` writes them.
mod erased {
    pub(super) trait Json {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    }

    impl<T: serde::Serialize> Json for T {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
            serde_json::to_writer(out, self)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_encoding_around_the_resource_version_is_the_encoding() {
        let objs = [
            json!({"metadata": {"resourceVersion": "1"}}),
            json!({"a": 1, "metadata": {"a\"\\\u{1}é": [1, {"b": null}], "resourceVersion": "x", "z": {}}, "z": "\n"}),
            json!({"metadata": {"name": "n", "resourceVersion": "", "uid": "u"}, "data": {"k": "v", "resourceVersion": "5"}}),
        ];
        for obj in objs {
            let (rest, at) = encode_around_rv(&obj).unwrap().unwrap();
            for rv in [0, 7, 123_456_789] {
                let mut with = obj.clone();
                set_rv(&mut with, rv);
                let mut joined = rest[..at].to_vec();
                joined.extend_from_slice(rv_json(rv).as_bytes());
                joined.extend_from_slice(&rest[at..]);
                assert_eq!(joined, serde_json::to_vec(&with).unwrap(), "{obj}");
            }
        }
        for other in [
            json!([1]),
            json!({"metadata": 1}),
            json!({"metadata": {}}),
            json!({}),
        ] {
            assert!(encode_around_rv(&other).unwrap().is_none(), "{other}");
        }
    }
}
