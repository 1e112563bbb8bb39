//! Request bodies: reads one up to the real server's size limit (413
//! `RequestEntityTooLarge` beyond it), refuses nesting deeper than the real
//! decoders accept (400) before any decoder runs, so a hostile body costs
//! at most a linear scan of a bounded number of bytes before it is
//! rejected, and decodes an object body by its Content-Type. It never
//! interprets an object's fields, and it is called off the async runtime
//! for decoding (see `handlers::dispatch`).

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{header, HeaderMap};
use futures::StreamExt;
use serde_json::Value;

use super::proto;
use crate::status::{ApiError, Result};

pub use crate::config::DEFAULT_MAX_REQUEST_BODY_BYTES;

/// Deepest nesting of arrays and objects a body may have here: what this
/// server's decoders take (serde_json's recursion limit; serde_yaml's is one more),
/// checked in one pass before either runs, so every body deeper than this
/// gets the same 400 at once. A real server takes far deeper bodies (Go's
/// `encoding/json` and `sigs.k8s.io/json` `maxNestingDepth`, go-yaml's
/// `max_flow_level`: 10000); no Kubernetes object nests anywhere near
/// either.
pub const MAX_NESTING_DEPTH: usize = 127;

/// Reads a request body of at most `limit` bytes.
///
/// # Errors
///
/// [`ApiError::RequestEntityTooLarge`] with the real server's message
/// (`limitedReadBody` in `apiserver/pkg/endpoints/handlers/rest.go`) as
/// soon as the body (or its declared `Content-Length`) exceeds `limit`,
/// without buffering the rest; [`ApiError::BadRequest`] if reading fails.
pub(crate) async fn read(req: Request, limit: usize) -> Result<Bytes> {
    let too_large = || ApiError::RequestEntityTooLarge(format!("limit is {limit}"));
    let declared = req
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut stream = req.into_body().into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::BadRequest(format!("unable to read request body: {e}")))?;
        if out.len() + chunk.len() > limit {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(out))
}

/// Refuses a JSON or YAML body whose arrays and objects nest deeper than
/// `max`, in one pass and without decoding it
/// ([`wasmctrl_kube_rules::nesting::deeper_than`]).
///
/// # Errors
///
/// [`ApiError::BadRequest`] naming the limit, worded like the real
/// decoders' "exceeded max depth" errors.
pub(crate) fn check_depth(body: &[u8], max: usize) -> Result<()> {
    if wasmctrl_kube_rules::nesting::deeper_than(body, max) {
        return Err(ApiError::BadRequest(format!(
            "the object provided is unrecognized or malformed: exceeded max depth of {max}"
        )));
    }
    Ok(())
}

fn parse_json(body: &[u8]) -> Result<Value> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the object provided is unrecognized or malformed: json parse error: {e}"
        ))
    })?;
    if !v.is_object() {
        return Err(ApiError::BadRequest(
            "the object provided is unrecognized or malformed: expected a JSON object".into(),
        ));
    }
    Ok(v)
}

/// Decodes a server-side apply body (`application/apply-patch+yaml`) as
/// the YAML decoder does: a body in the plain JSON subset that YAML reads
/// exactly as JSON (see [`plain_json`]) is parsed as JSON, which is far
/// cheaper for a large body; anything else goes to the YAML decoder,
/// which gives every YAML-only behaviour and error.
///
/// # Errors
///
/// The YAML decoder's error.
pub(crate) fn parse_apply(body: &[u8]) -> std::result::Result<Value, serde_yaml::Error> {
    if let Some(v) = plain_json(body) {
        return Ok(v);
    }
    serde_yaml::from_slice(body)
}

/// Deepest nesting [`plain_json`] takes (both decoders refuse beyond 128,
/// counted each their way).
const PLAIN_JSON_DEPTH: usize = 64;

/// Longest key [`plain_json`] takes (YAML refuses implicit keys of more
/// than 1024 characters).
const PLAIN_JSON_KEY: usize = 512;

/// `body` parsed as JSON when it is a JSON object the YAML decoder reads
/// as the same value: printable ASCII without tabs (YAML refuses some
/// characters JSON takes, and tabs where it indents), nested at most
/// [`PLAIN_JSON_DEPTH`] deep, no key longer than [`PLAIN_JSON_KEY`], no
/// duplicate key and no number but integers of at most 64 bits (YAML
/// reads floats and larger integers its own way). `None` otherwise.
fn plain_json(body: &[u8]) -> Option<Value> {
    if !body
        .iter()
        .all(|&b| (0x20..=0x7e).contains(&b) || b == b'\n' || b == b'\r')
    {
        return None;
    }
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    // `\u` escapes of surrogates (pairs included) and of NUL: YAML refuses
    // or reads them otherwise
    let mut i = 0;
    while i < body.len() {
        if body[i] != b'\\' {
            i += 1;
            continue;
        }
        if body.get(i + 1) == Some(&b'u') {
            let code = body
                .get(i + 2..i + 6)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u16::from_str_radix(h, 16).ok())?;
            if code == 0 || (0xd800..=0xdfff).contains(&code) {
                return None;
            }
        }
        i += 2;
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let v = serde::de::DeserializeSeed::deserialize(PlainJson { depth: 0 }, &mut de).ok()?;
    de.end().ok()?;
    Some(v)
}

/// A JSON value under [`plain_json`]'s rules.
#[derive(Clone, Copy)]
struct PlainJson {
    depth: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for PlainJson {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> std::result::Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for PlainJson {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("plain JSON")
    }

    fn visit_bool<E>(self, v: bool) -> std::result::Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> std::result::Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> std::result::Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(inner)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key.len() > PLAIN_JSON_KEY {
                return Err(serde::de::Error::custom("not plain JSON"));
            }
            match out.entry(key) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(inner)?);
                }
                serde_json::map::Entry::Occupied(_) => {
                    return Err(serde::de::Error::custom("not plain JSON"));
                }
            }
        }
        Ok(Value::Object(out))
    }
}

impl PlainJson {
    fn nested<E: serde::de::Error>(self) -> std::result::Result<Self, E> {
        if self.depth >= PLAIN_JSON_DEPTH {
            return Err(E::custom("not plain JSON"));
        }
        Ok(Self {
            depth: self.depth + 1,
        })
    }
}

/// Decodes an object body by its Content-Type: JSON, YAML, or protobuf for
/// the few kinds [`proto`] knows; anything else is 415.
pub(crate) fn decode_body(headers: &HeaderMap, body: &[u8]) -> Result<Value> {
    {
        let ct = headers
            .get(header::CONTENT_TYPE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("application/json");
        let media = ct.split(';').next().unwrap_or_default().trim();
        match media {
            "" | "application/json" | "*/*" => parse_json(body),
            "application/yaml" => {
                let v: Value = serde_yaml::from_slice(body).map_err(|e| {
                    ApiError::BadRequest(format!(
                        "the object provided is unrecognized or malformed: yaml parse error: {e}"
                    ))
                })?;
                if v.is_object() {
                    Ok(v)
                } else {
                    Err(ApiError::BadRequest(
                        "the object provided is unrecognized or malformed: expected an object".into(),
                    ))
                }
            }
            proto::MEDIA_TYPE => proto::decode(body).map_err(|e| match e {
                proto::ProtoError::Unsupported(_) => ApiError::UnsupportedMediaType(e.to_string()),
                proto::ProtoError::Malformed(_) => ApiError::BadRequest(e.to_string()),
            }),
            other => Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {other})"
            ))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        "[".repeat(depth) + &"]".repeat(depth)
    }

    #[test]
    fn the_limit_is_what_the_decoders_take() {
        let at = nested(MAX_NESTING_DEPTH);
        let over = nested(MAX_NESTING_DEPTH + 1);
        assert!(serde_json::from_str::<Value>(&at).is_ok());
        assert!(serde_json::from_str::<Value>(&over).is_err());
        // The YAML decoder takes one level more: the JSON one sets the limit.
        assert!(serde_yaml::from_str::<Value>(&at).is_ok());
        assert!(check_depth(at.as_bytes(), MAX_NESTING_DEPTH).is_ok());
        assert!(check_depth(over.as_bytes(), MAX_NESTING_DEPTH).is_err());
    }

    #[test]
    fn nesting_up_to_the_limit_passes_and_one_more_fails() {
        assert!(check_depth(nested(10).as_bytes(), 10).is_ok());
        let err = check_depth(nested(11).as_bytes(), 10).unwrap_err();
        assert_eq!(err.code(), 400);
        assert!(
            err.to_string().contains("exceeded max depth of 10"),
            "{err}"
        );
        // Mixed objects and arrays, JSON and YAML flow style.
        let doc = r#"{"a": [{"b": [1]}]}"#;
        assert!(check_depth(doc.as_bytes(), 4).is_ok());
        assert!(check_depth(doc.as_bytes(), 3).is_err());
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_refused_with_413() {
        let req = |body: Vec<u8>| {
            axum::http::Request::builder()
                .body(axum::body::Body::from(body))
                .unwrap()
        };
        assert_eq!(read(req(vec![b'x'; 16]), 16).await.unwrap().len(), 16);
        let err = read(req(vec![b'x'; 17]), 16).await.unwrap_err();
        assert_eq!((err.code(), err.reason()), (413, "RequestEntityTooLarge"));
        assert_eq!(err.to_string(), "Request entity too large: limit is 16");
    }

    /// A body [`plain_json`] takes is read as the YAML decoder reads it.
    fn same_as_yaml(body: &str) {
        let yaml: std::result::Result<Value, _> = serde_yaml::from_str(body);
        if let Some(v) = plain_json(body.as_bytes()) {
            assert_eq!(Some(&v), yaml.as_ref().ok(), "{body}");
        }
        assert_eq!(
            parse_apply(body.as_bytes()).map_err(|e| e.to_string()),
            yaml.map_err(|e| e.to_string()),
            "{body}"
        );
    }

    #[test]
    fn apply_bodies_parsed_as_json_read_as_yaml_reads_them() {
        let taken = [
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1","b":""}}"#,
            r#"{"a":[1,-2,0,true,false,null,"x",[],{}],"b":{"c":{"d":[{"e":"f"}]}}}"#,
            r#"{ "a" : "b" , "c":[ 1 , 2 ] }"#,
            "{\n  \"a\": {\n    \"b\": \"c\"\n  }\r\n}\n",
            r#"{"s":"\"\\\/\b\f\n\r\t\u0041\u00e9\u20ac\u0001\\u0000 # : - ? ' {[,]} & * ! | > % @ `"}"#,
            r#"{"n":18446744073709551615,"m":-9223372036854775808}"#,
            r#"{"yes":"no","on":"off","~":"null","<<":{"a":1},"0x1":"0o7"}"#,
            r##"{"":"","a b":"c d","#":"#x"}"##,
        ];
        for body in taken {
            assert!(plain_json(body.as_bytes()).is_some(), "{body}");
            same_as_yaml(body);
        }
        let declined = [
            r#"{"a":1.5}"#,
            r#"{"a":1e3}"#,
            r#"{"a":-0}"#,
            r#"{"a":18446744073709551616}"#,
            r#"{"a":1,"a":2}"#,
            "{\"a\":\t1}",
            "{\"a\":\"\u{e9}\"}",
            "{\"a\":\"\u{2028}\"}",
            "{\"a\":\"\u{7f}\"}",
            r#"["a"]"#,
            r#"{"a":1} {"b":2}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\ud83d\ude00"}"#,
            r#"{"a":"\u0000"}"#,
            "a: 1",
            "",
        ];
        for body in declined {
            assert!(plain_json(body.as_bytes()).is_none(), "{body}");
            same_as_yaml(body);
        }
        let long_key = format!(r#"{{"{}":1}}"#, "k".repeat(2000));
        assert!(plain_json(long_key.as_bytes()).is_none());
        same_as_yaml(&long_key);
        let deep = format!(
            "{}{}",
            r#"{"a":"#.repeat(100),
            "1".to_owned() + &"}".repeat(100)
        );
        assert!(plain_json(deep.as_bytes()).is_none());
        same_as_yaml(&deep);
    }

    proptest::proptest! {
        #[test]
        fn generated_json_bodies_read_as_yaml_reads_them(v in json_value(), pretty in proptest::bool::ANY) {
            let body = if pretty {
                serde_json::to_string_pretty(&serde_json::json!({"v": v})).unwrap()
            } else {
                serde_json::json!({"v": v}).to_string()
            };
            same_as_yaml(&body);
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            "[ -~]{0,12}".prop_map(Value::String),
            "[a\\\"#:'{}\\[\\],\n\t\r\u{1}\u{7f}\u{e9}-]{0,6}".prop_map(Value::String),
            prop::sample::select(vec![
                "true", "null", "~", "1", "0x1", "1.0", "-", "? a", "a: b", "*x", "&y", "!t", "%",
                "@", "`"
            ])
            .prop_map(|s| Value::String(s.to_owned())),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[ -~]{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
