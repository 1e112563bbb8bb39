//! The protobuf wire format as Kubernetes messages use it: varints,
//! length-delimited fields, strings and map entries, and the decoder's
//! error. It reads bytes only; it never knows a Kubernetes type.

use base64::Engine;
use serde_json::Value;

/// Why a protobuf body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// Not a well-formed Kubernetes protobuf message.
    #[error("malformed protobuf body: {0}")]
    Malformed(&'static str),
    /// Well-formed, but of a kind this server cannot decode from protobuf.
    #[error("protobuf decoding of {0} is not supported; send application/json")]
    Unsupported(String),
}

#[derive(Clone, Copy)]
pub(crate) enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, ProtoError> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf
            .get(*pos)
            .ok_or(ProtoError::Malformed("truncated varint"))?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err(ProtoError::Malformed("varint too long"))
}

pub(crate) fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ProtoError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (num, wire) = (key >> 3, key & 7);
        let f = match wire {
            0 => Field::Varint(varint(buf, &mut pos)?),
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?)
                    .map_err(|_| ProtoError::Malformed("length overflow"))?;
                let end = pos
                    .checked_add(len)
                    .filter(|e| *e <= buf.len())
                    .ok_or(ProtoError::Malformed("truncated field"))?;
                let b = &buf[pos..end];
                pos = end;
                Field::Bytes(b)
            }
            1 => {
                pos += 8;
                continue;
            }
            5 => {
                pos += 4;
                continue;
            }
            _ => return Err(ProtoError::Malformed("unsupported wire type")),
        };
        out.push((num, f));
    }
    Ok(out)
}

pub(crate) fn string(b: &[u8]) -> Result<String, ProtoError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtoError::Malformed("string is not UTF-8"))
}

/// A `map<string, string>` (or bytes, base64-encoded as JSON does) entry.
pub(crate) fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), ProtoError> {
    let mut k = String::new();
    let mut v = Value::String(String::new());
    for (num, f) in fields(b)? {
        if let Field::Bytes(x) = f {
            match num {
                1 => k = string(x)?,
                2 if bytes_value => {
                    v = Value::String(base64::engine::general_purpose::STANDARD.encode(x));
                }
                2 => v = Value::String(string(x)?),
                _ => {}
            }
        }
    }
    Ok((k, v))
}

/// A length-delimited field `num` holding `bytes`, for the tests' bodies.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn field(num: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![u8::try_from((num << 3) | 2).unwrap()];
    out.push(u8::try_from(bytes.len()).unwrap());
    out.extend_from_slice(bytes);
    out
}
