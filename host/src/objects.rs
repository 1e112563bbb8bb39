//! Reading Kubernetes objects from files: what `kubectl get -o json` prints
//! (a `List`), single objects, and multi-document YAML.
//!
//! Owns parsing and the errors that name the file and the problem. It never
//! evaluates selectors or projections (see `offline`).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

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
    let file = path.display().to_string();
    let text = if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|source| ObjectsError::Read {
                file: file.clone(),
                source,
            })?;
        s
    } else {
        std::fs::read_to_string(path).map_err(|source| ObjectsError::Read {
            file: file.clone(),
            source,
        })?
    };
    parse_objects(&file, &text)
}

/// Parses JSON (one object or a List) or multi-document YAML.
pub fn parse_objects(file: &str, text: &str) -> Result<Vec<Json>, ObjectsError> {
    let trimmed = text.trim_start();
    let docs: Vec<Json> = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        // A JSON stream: one or more values (kubectl -o json prints one).
        let mut docs = Vec::new();
        for doc in serde_json::Deserializer::from_str(text).into_iter::<Json>() {
            docs.push(doc.map_err(|e| ObjectsError::Syntax {
                file: file.to_string(),
                problem: e.to_string(),
            })?);
        }
        docs
    } else {
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
