//! Reading Kubernetes objects from files: what `kubectl get -o json` prints
//! (a `List`), single objects, and multi-document YAML.
//!
//! Owns parsing and the errors that name the file and the problem. It never
//! evaluates selectors or projections (its parent, `offline`, does); which fields a
//! selector can read comes from `wasmctrl_kube_rules::selector`.

use std::io::Read;
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::projection::Keep;

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file ("-" for stdin).
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Neither valid JSON nor valid YAML.
    #[error("{file}: not valid JSON or YAML: {problem}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message (line and column included).
        problem: String,
    },
    /// The input is larger than the cap (`--max-input-bytes`).
    #[error("{file}: larger than the input limit of {max} bytes (--max-input-bytes)")]
    TooLarge {
        /// The file.
        file: String,
        /// The cap.
        max: u64,
    },
    /// The input holds no document at all.
    #[error("{file}: no objects: the input is empty (a List with no items is fine; nothing at all is not)")]
    Empty {
        /// The file.
        file: String,
    },
    /// The same object (group, kind, namespace, name) more than once.
    #[error("the same object appears more than once in the input, which a cluster cannot hold: {}", .0.join("; "))]
    Duplicates(Vec<String>),
    /// An object without `kind` or `apiVersion`, or not an object at all.
    #[error("{file}: object {index}{name}: {problem}")]
    Object {
        /// The file.
        file: String,
        /// Position of the object in the file (after flattening lists).
        index: usize,
        /// " (name)" when the object has one.
        name: String,
        /// What is wrong.
        problem: String,
    },
}

/// Reads `path` ("-" = stdin) into a flat list of objects.
pub fn read_objects(path: &Path) -> Result<Vec<Json>, ObjectsError> {
    read_objects_keeping(path, &Keep::everything())
}

/// Like [`read_objects`], keeping only what `keep` asks for (JSON input;
/// YAML is read whole).
pub fn read_objects_keeping(path: &Path, keep: &Keep) -> Result<Vec<Json>, ObjectsError> {
    read_objects_limited(path, keep, DEFAULT_MAX_INPUT_BYTES)
}

/// The default cap on one input file (`--max-input-bytes`): 1 GiB, about
/// a `kubectl get pods -A -o json` of 100,000 pods with room to spare.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 1 << 30;

/// Like [`read_objects_keeping`], refusing input over `max_bytes` (read no
/// further than that, so `/dev/zero` is an error, not an out-of-memory).
pub fn read_objects_limited(
    path: &Path,
    keep: &Keep,
    max_bytes: u64,
) -> Result<Vec<Json>, ObjectsError> {
    let file = path.display().to_string();
    let read_err = |source| ObjectsError::Read {
        file: file.clone(),
        source,
    };
    let reader: Box<dyn Read> = if path == Path::new("-") {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(path).map_err(read_err)?)
    };
    let mut bytes = Vec::new();
    reader
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ObjectsError::TooLarge {
            file,
            max: max_bytes,
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        read_err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8: {e}"),
        ))
    })?;
    parse_objects_keeping(&file, &text, keep)
}

/// Every object that appears more than once (same API group, kind,
/// namespace and name), described; empty when there are none.
pub fn duplicates(objects: &[Json]) -> Vec<String> {
    let mut seen: BTreeMap<(String, String, String, String), usize> = BTreeMap::new();
    for o in objects {
        let text = |p: &str| o.pointer(p).and_then(Json::as_str).unwrap_or("");
        let group = text("/apiVersion")
            .split_once('/')
            .map_or("", |(g, _)| g)
            .to_string();
        *seen
            .entry((
                group,
                text("/kind").to_string(),
                text("/metadata/namespace").to_string(),
                text("/metadata/name").to_string(),
            ))
            .or_default() += 1;
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((group, kind, ns, name), n)| {
            let kind = if group.is_empty() {
                kind
            } else {
                format!("{kind}.{group}")
            };
            let at = if ns.is_empty() {
                name
            } else {
                format!("{ns}/{name}")
            };
            format!("{kind} {at} ({n} times)")
        })
        .collect()
}

/// Parses JSON (one object or a List) or multi-document YAML.
pub fn parse_objects(file: &str, text: &str) -> Result<Vec<Json>, ObjectsError> {
    parse_objects_keeping(file, text, &Keep::everything())
}

/// Deepest flow nesting a YAML input may have: the YAML decoder's own
/// recursion limit.
const YAML_MAX_DEPTH: usize = 128;

/// Like [`parse_objects`], keeping only what `keep` asks for.
pub fn parse_objects_keeping(
    file: &str,
    text: &str,
    keep: &Keep,
) -> Result<Vec<Json>, ObjectsError> {
    let trimmed = text.trim_start();
    let docs: Vec<Json> = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        // A JSON stream: one or more values (kubectl -o json prints one).
        let syntax = |e: serde_json::Error| ObjectsError::Syntax {
            file: file.to_string(),
            problem: e.to_string(),
        };
        let mut docs = Vec::new();
        let mut de = serde_json::Deserializer::from_str(text);
        loop {
            docs.push(serde::de::DeserializeSeed::deserialize(keep, &mut de).map_err(syntax)?);
            if de.end().is_ok() {
                break;
            }
        }
        docs
    } else {
        // The YAML decoder refuses this depth anyway, but only after its
        // scanner has gone through the document in time quadratic in the
        // depth (100,000 levels took 22 s): refuse it first.
        if wasmctrl_kube_rules::nesting::deeper_than(text.as_bytes(), YAML_MAX_DEPTH) {
            return Err(ObjectsError::Syntax {
                file: file.to_string(),
                problem: format!(
                    "arrays and objects nested deeper than {YAML_MAX_DEPTH} (the YAML decoder's limit)"
                ),
            });
        }
        let mut docs = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(text) {
            let v: Json =
                serde::Deserialize::deserialize(doc).map_err(|e| ObjectsError::Syntax {
                    file: file.to_string(),
                    problem: e.to_string(),
                })?;
            if !v.is_null() {
                docs.push(v);
            }
        }
        docs
    };
    if docs.is_empty() {
        // Only blank lines, comments and `---`: empty. Anything else that
        // yielded no document was a null (`null`, `~`).
        let blank = trimmed.lines().all(|l| {
            let l = l.trim();
            l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
        });
        if blank {
            return Err(ObjectsError::Empty {
                file: file.to_string(),
            });
        }
        return Err(ObjectsError::Object {
            file: file.to_string(),
            index: 0,
            name: String::new(),
            problem: "not an object (null)".into(),
        });
    }
    let mut out = Vec::new();
    for doc in docs {
        flatten(doc, &mut out);
    }
    for (index, obj) in out.iter().enumerate() {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Json::as_str)
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        let problem = if !obj.is_object() {
            Some("not an object".to_string())
        } else if obj
            .get("kind")
            .and_then(Json::as_str)
            .is_none_or(str::is_empty)
        {
            Some("has no kind".to_string())
        } else if obj
            .get("apiVersion")
            .and_then(Json::as_str)
            .is_none_or(str::is_empty)
        {
            Some("has no apiVersion".to_string())
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(ObjectsError::Object {
                file: file.to_string(),
                index,
                name,
                problem,
            });
        }
    }
    Ok(out)
}

/// Expands `List`/`*List` documents (and bare JSON arrays) into their items.
fn flatten(doc: Json, out: &mut Vec<Json>) {
    match doc {
        Json::Array(items) => items.into_iter().for_each(|i| flatten(i, out)),
        Json::Object(mut map)
            if map
                .get("kind")
                .and_then(Json::as_str)
                .is_some_and(|k| k == "List" || k.ends_with("List"))
                && map.get("items").is_some_and(Json::is_array) =>
        {
            if let Some(Json::Array(items)) = map.remove("items") {
                items.into_iter().for_each(|i| flatten(i, out));
            }
        }
        other => out.push(other),
    }
}

/// Convenience for callers holding several paths.
pub fn read_all(paths: &[PathBuf]) -> Result<Vec<Json>, ObjectsError> {
    let mut all = Vec::new();
    for p in paths {
        all.extend(read_objects(p)?);
    }
    Ok(all)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::projection::FieldPath;

    #[test]
    fn kubectl_list_is_flattened_into_items() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"}}]}"#;
        let objs = parse_objects("dump.json", text).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[1]["metadata"]["name"], "b");
    }

    #[test]
    fn typed_lists_and_multi_document_yaml_are_read() {
        let text = "apiVersion: v1\nkind: PodList\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n---\n---\napiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n";
        let objs = parse_objects("x.yaml", text).unwrap();
        let kinds: Vec<_> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Pod", "Node"]);
    }

    #[test]
    fn keeping_only_declared_fields_drops_the_rest_but_keeps_identity_and_lists() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod",
            "metadata":{"name":"a","namespace":"ns","labels":{"x":"y"},"annotations":{"big":"…"},"managedFields":[{}]},
            "spec":{"nodeName":"n1","containers":[{"name":"c","image":"i","resources":{"limits":{"g":"1"}}}]},
            "status":{"phase":"Running","conditions":[{"type":"Ready"}]}}]}"#;
        let mut keep = Keep::default();
        for leaf in [
            "apiVersion",
            "kind",
            "metadata.name",
            "metadata.labels",
            "spec.nodeName",
            "status.phase",
        ] {
            keep.add(FieldPath::parse(leaf).unwrap().segments());
        }
        keep.add(
            FieldPath::parse("spec.containers[*].resources.limits['g']")
                .unwrap()
                .segments(),
        );
        let mut root = keep.clone();
        root.fields.entry("items".into()).or_default().each = Some(Box::new(keep));
        let objs = parse_objects_keeping("dump.json", text, &root).unwrap();
        assert_eq!(
            objs,
            vec![serde_json::json!({"apiVersion":"v1","kind":"Pod",
                "metadata":{"name":"a","labels":{"x":"y"}},
                "spec":{"nodeName":"n1","containers":[{"resources":{"limits":{"g":"1"}}}]},
                "status":{"phase":"Running"}})]
        );
        // Malformed JSON is still reported, pruned or not.
        let e = parse_objects_keeping("bad.json", "{\"items\": [", &root).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("bad.json: not valid JSON or YAML"),
            "{e}"
        );
    }

    fn pod(name: &str) -> String {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ns"}},"spec":{{"nodeName":"n1","hostname":"dropped"}}}}"#
        )
    }

    fn pruned() -> Keep {
        let mut object = Keep::for_paths([&FieldPath::parse("spec.nodeName").unwrap()]);
        object.doc = true;
        object
    }

    #[test]
    fn a_json_array_of_objects_reads_like_a_yaml_one_pruned_or_not() {
        let text = format!("[{}, {}]", pod("a"), pod("b"));
        for keep in [Keep::everything(), pruned()] {
            let objs = parse_objects_keeping("pods.json", &text, &keep).unwrap();
            let names: Vec<_> = objs.iter().map(|o| o["metadata"]["name"].clone()).collect();
            assert_eq!(names, ["a", "b"]);
        }
        let pruned = parse_objects_keeping("pods.json", &text, &pruned()).unwrap();
        assert_eq!(pruned[0]["spec"], serde_json::json!({"nodeName": "n1"}));
    }

    #[test]
    fn a_list_inside_a_list_is_flattened_when_pruning() {
        let text = format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[{{"apiVersion":"v1","kind":"PodList","items":[{}, {}]}}, {}]}}"#,
            pod("a"),
            pod("b"),
            pod("c")
        );
        let objs = parse_objects_keeping("nested.json", &text, &pruned()).unwrap();
        assert_eq!(objs.len(), 3, "{objs:?}");
    }

    #[test]
    fn empty_null_and_non_object_input_is_an_error_naming_the_position() {
        for (text, want) in [
            ("", "e.json: no objects: the input is empty"),
            ("\n---\n# nothing\n", "e.json: no objects"),
            ("null", "e.json: object 0: not an object (null)"),
            ("[1,2,3]", "e.json: object 0: not an object"),
        ] {
            let e = parse_objects_keeping("e.json", text, &pruned()).unwrap_err();
            assert!(e.to_string().starts_with(want), "{text:?}: {e}");
        }
        let text = format!("[{}, 7]", pod("a"));
        let e = parse_objects_keeping("e.json", &text, &pruned()).unwrap_err();
        assert_eq!(e.to_string(), "e.json: object 1: not an object");
        // An empty List is a cluster with nothing in it: fine.
        let objs = parse_objects("e.json", r#"{"apiVersion":"v1","kind":"List","items":[]}"#);
        assert_eq!(objs.unwrap().len(), 0);
    }

    #[test]
    fn input_over_the_cap_is_refused_without_reading_it_all() {
        let e =
            read_objects_limited(Path::new("/dev/zero"), &Keep::everything(), 1 << 20).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero: larger than the input limit of 1048576 bytes (--max-input-bytes)"
        );
    }

    #[test]
    fn duplicates_are_named_with_their_count() {
        let objs = parse_objects(
            "d.json",
            &format!("[{}, {}, {}, {}]", pod("a"), pod("b"), pod("a"), pod("a")),
        )
        .unwrap();
        assert_eq!(duplicates(&objs), ["Pod ns/a (3 times)"]);
        assert!(duplicates(&objs[..2]).is_empty());
    }

    #[test]
    fn deeply_nested_yaml_is_refused_before_the_decoder_runs() {
        for open in ["[", "{a: "] {
            let close = if open == "[" { "]" } else { "}" };
            let yaml = |depth: usize| {
                format!(
                    "apiVersion: v1\nkind: Pod\nx: {}1{}\n",
                    open.repeat(depth),
                    close.repeat(depth)
                )
            };
            let err = parse_objects("deep.yaml", &yaml(100_000))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(
                    "deep.yaml: not valid JSON or YAML: arrays and objects nested deeper than 128"
                ),
                "{err}"
            );
            assert!(parse_objects("ok.yaml", &yaml(100)).is_ok());
        }
    }

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let e = parse_objects("bad.json", "{\"kind\": ")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.json: not valid JSON or YAML"), "{e}");
        let e = parse_objects("bad.yaml", "a: [1, 2\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.yaml: not valid JSON or YAML"), "{e}");
        let e = parse_objects("nokind.yaml", "apiVersion: v1\nmetadata: {name: p}\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "nokind.yaml: object 0 (p): has no kind");
        let e = parse_objects("s.json", "[\"x\"]").unwrap_err().to_string();
        assert_eq!(e, "s.json: object 0: not an object");
        let e = read_objects(Path::new("/nonexistent/file.json"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/file.json: cannot read"), "{e}");
    }
}

#[cfg(test)]
mod proptests;
