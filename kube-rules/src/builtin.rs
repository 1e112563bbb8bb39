//! The built-in kinds' schemas, as a real 1.32 server's OpenAPI v3
//! documents give them ([`OPENAPI_LISTS`], an extract made by
//! `data/k8s-1.32/extract_list_types.py`), and what the server's typed
//! round trip (decode into the Go type, encode back) changes in an object
//! of a built-in kind, which a client must predict to compare what it
//! wrote with what it reads back ([`store_form`], [`compare_form`]):
//! - a resource quantity is stored in its canonical form (`1000m` → `1`,
//!   `0.5` → `500m`, `1024Mi` → `1Gi`, the number `2` → `"2"`);
//! - a field Go leaves out at its zero value (`omitempty` on a bool, number
//!   or string: a Deployment's `paused: false`, `minReadySeconds: 0`, a
//!   pod's `hostNetwork: false`) is not stored at that value
//!   ([`GO_OMITEMPTY`], made by `data/k8s-1.32/extract_omitempty.py` from
//!   the Go types of `k8s.io/api`).
//!
//! - a Secret's `stringData` is merged into its `data`, base64-encoded, and
//!   never stored ([`merge_string_data`]).
//!
//! The server uses the extract for apply and patch semantics too. It never
//! knows custom resources (the server keeps their values as written) and
//! never validates: a value that is no quantity is left as it is, for the
//! server's validation to name.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use serde_json::Value;

use crate::quantity::GoQuantity;

/// The extract of the `/openapi/v3` documents: per kind (`group/version/Kind`)
/// its root schema; per schema, each field's list type, list-map keys, map
/// type, patch strategy, merge key and the schema it refers to (`ref`, a
/// list's `items`, a map's `values`).
pub const OPENAPI_LISTS: &str = include_str!("../data/k8s-1.32/openapi-lists.json");

/// Per schema (by its OpenAPI name), the fields Go's `encoding/json` leaves
/// out at their zero value.
pub const GO_OMITEMPTY: &str = include_str!("../data/k8s-1.32/go-omitempty.json");

/// apimachinery's `resource.Quantity`, as the documents name it.
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// Where a field's value leads: the schema of the field itself, of each
/// item of a list, or of each value of a map.
#[derive(Clone, Debug)]
enum Leads {
    Field(String),
    Items(String),
    Values(String),
}

impl Leads {
    fn schema(&self) -> &str {
        match self {
            Leads::Field(s) | Leads::Items(s) | Leads::Values(s) => s,
        }
    }
}

/// What the walk needs of one schema.
#[derive(Debug, Default)]
struct Schema {
    /// Its fields that lead to a schema with something to rewrite.
    leads: HashMap<String, Leads>,
    /// Its fields left out at their zero value.
    omitted: HashSet<String>,
}

/// The part of the extracts the walk reads: only the schemas from which
/// something the round trip rewrites can be reached.
#[derive(Debug, Default)]
struct Rewrites {
    /// `group/version/Kind` → root schema, for the kinds with a rewrite.
    kinds: HashMap<String, String>,
    schemas: HashMap<String, Schema>,
}

fn rewrites() -> &'static Rewrites {
    static TABLE: OnceLock<Rewrites> = OnceLock::new();
    TABLE.get_or_init(|| {
        // Embedded and checked by this crate's tests: they parse.
        let (Ok(extract), Ok(omitempty)) = (
            serde_json::from_str::<Value>(OPENAPI_LISTS),
            serde_json::from_str::<HashMap<String, Vec<String>>>(GO_OMITEMPTY),
        ) else {
            return Rewrites::default();
        };
        let empty = serde_json::Map::new();
        let schemas = extract
            .get("schemas")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        // Every field's lead, then the schemas reaching a rewrite, to a
        // fixed point.
        let mut all: HashMap<&str, Vec<(&str, Leads)>> = HashMap::new();
        for (name, schema) in schemas {
            let props = schema.get("props").and_then(Value::as_object);
            for (field, p) in props.into_iter().flatten() {
                let at = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
                let lead = match (at("ref"), at("items"), at("values")) {
                    (Some(r), _, _) => Leads::Field(r),
                    (None, Some(i), _) => Leads::Items(i),
                    (None, None, Some(v)) => Leads::Values(v),
                    _ => continue,
                };
                all.entry(name.as_str()).or_default().push((field, lead));
            }
        }
        let mut reaching: HashSet<&str> = omitempty.keys().map(String::as_str).collect();
        reaching.insert(QUANTITY);
        loop {
            let before = reaching.len();
            for (name, fields) in &all {
                if fields.iter().any(|(_, l)| reaching.contains(l.schema())) {
                    reaching.insert(name);
                }
            }
            if reaching.len() == before {
                break;
            }
        }
        let mut table = Rewrites::default();
        for name in &reaching {
            let leads = all
                .get(name)
                .into_iter()
                .flatten()
                .filter(|(_, l)| reaching.contains(l.schema()))
                .map(|(f, l)| (f.to_string(), l.clone()))
                .collect();
            let omitted = omitempty
                .get(*name)
                .into_iter()
                .flatten()
                .cloned()
                .collect();
            table
                .schemas
                .insert(name.to_string(), Schema { leads, omitted });
        }
        let kinds = extract.get("kinds").and_then(Value::as_object);
        for (gvk, root) in kinds.into_iter().flatten() {
            if let Some(root) = root.as_str().filter(|r| table.schemas.contains_key(*r)) {
                table.kinds.insert(gvk.clone(), root.to_string());
            }
        }
        table
    })
}

/// Whether the server's round trip can store an object of this built-in
/// kind other than as written (a Pod, a Deployment, a ResourceQuota, a
/// Service; not a ConfigMap, nor a custom resource).
pub fn rewrites_kind(group: &str, version: &str, kind: &str) -> bool {
    rewrites()
        .kinds
        .contains_key(&format!("{group}/{version}/{kind}"))
}

/// What a field Go leaves out at its zero value becomes.
#[derive(Clone, Copy)]
enum Zero {
    /// Left out, as the server stores it.
    Dropped,
    /// `null`: "absent, or its zero value", for a comparison.
    Null,
}

/// Rewrites `obj`, an object of the built-in kind `group/version/kind`, as
/// a real API server stores it: a Secret's `stringData` merged into its
/// `data` ([`merge_string_data`]), every resource quantity in canonical
/// form (`String()` of the parsed `Quantity`; a number is read as its text,
/// as `UnmarshalJSON` does), and every field Go leaves out at its zero
/// value (`false`, `0`, `""`) left out. Returns whether anything changed.
/// A kind that is not built-in, or has nothing to rewrite, is left
/// untouched.
pub fn store_form(group: &str, version: &str, kind: &str, obj: &mut Value) -> bool {
    let merged = merge_string_data(group, version, kind, obj);
    rewrite(group, version, kind, obj, Zero::Dropped) | merged
}

/// Merges the `stringData` of `obj`, when it is a core v1 Secret, into its
/// `data`, each value base64-encoded, a `stringData` key replacing the
/// `data` key of the same name — what the server's conversion does on
/// every write (it never returns `stringData`). A client that sends the
/// merged `data` instead owns those keys under server-side apply, which
/// `stringData` does not give cleanly. Returns whether anything changed;
/// a `stringData` that is not a map of strings is left for the server's
/// validation.
pub fn merge_string_data(group: &str, version: &str, kind: &str, obj: &mut Value) -> bool {
    use base64::Engine as _;
    if (group, version, kind) != ("", "v1", "Secret") {
        return false;
    }
    let Some(map) = obj.as_object_mut() else {
        return false;
    };
    let strings = match map.get("stringData") {
        Some(Value::Null) => {
            map.remove("stringData");
            return true;
        }
        Some(Value::Object(strings)) if strings.values().all(Value::is_string) => strings.clone(),
        _ => return false,
    };
    map.remove("stringData");
    if strings.is_empty() {
        return true;
    }
    if !map.get("data").is_some_and(Value::is_object) {
        map.insert("data".into(), Value::Object(serde_json::Map::new()));
    }
    if let Some(Value::Object(data)) = map.get_mut("data") {
        for (k, v) in strings {
            let text = v.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(k, Value::String(encoded));
        }
    }
    true
}

/// `obj`, a document a client writes, rewritten to be compared with the
/// object the server stores from it ([`store_form`]): its quantities in
/// canonical form, and a field Go leaves out at its zero value set to
/// `null` — absent from the live object, or at its zero value, it agrees;
/// at another value it differs. (The document sent stays as written: a
/// field left out of an apply is not set.)
pub fn compare_form(group: &str, version: &str, kind: &str, obj: &mut Value) -> bool {
    rewrite(group, version, kind, obj, Zero::Null)
}

fn rewrite(group: &str, version: &str, kind: &str, obj: &mut Value, zero: Zero) -> bool {
    let table = rewrites();
    let Some(root) = table.kinds.get(&format!("{group}/{version}/{kind}")) else {
        return false;
    };
    walk(table, root, obj, zero)
}

fn walk(table: &Rewrites, schema: &str, value: &mut Value, zero: Zero) -> bool {
    if schema == QUANTITY {
        return canonical_quantity(value);
    }
    let (Some(s), Value::Object(map)) = (table.schemas.get(schema), value) else {
        return false;
    };
    let mut changed = false;
    if !s.omitted.is_empty() {
        let zeroes: Vec<String> = map
            .iter()
            .filter(|(f, v)| is_zero(v) && s.omitted.contains(f.as_str()))
            .map(|(f, _)| f.clone())
            .collect();
        for f in zeroes {
            changed = true;
            match zero {
                Zero::Dropped => {
                    map.remove(&f);
                }
                Zero::Null => {
                    map.insert(f, Value::Null);
                }
            }
        }
    }
    for (field, v) in map.iter_mut() {
        changed |= match s.leads.get(field) {
            Some(Leads::Field(s)) => walk(table, s, v, zero),
            Some(Leads::Items(s)) => match v {
                Value::Array(items) => items
                    .iter_mut()
                    .fold(false, |c, i| walk(table, s, i, zero) | c),
                _ => false,
            },
            Some(Leads::Values(s)) => match v {
                Value::Object(values) => values
                    .values_mut()
                    .fold(false, |c, i| walk(table, s, i, zero) | c),
                _ => false,
            },
            None => false,
        };
    }
    changed
}

/// Go's zero value of a bool, number or string.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// `value` as the server stores a quantity; unchanged when it is none.
fn canonical_quantity(value: &mut Value) -> bool {
    let text = match value {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return false,
    };
    let Ok(q) = GoQuantity::parse(&text) else {
        return false;
    };
    let canonical = Value::String(q.canonical());
    if *value == canonical {
        return false;
    }
    *value = canonical;
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_extracts_parse_and_know_the_kinds_stored_otherwise_than_written() {
        assert!(serde_json::from_str::<Value>(OPENAPI_LISTS).is_ok());
        assert!(serde_json::from_str::<HashMap<String, Vec<String>>>(GO_OMITEMPTY).is_ok());
        for (g, v, k) in [
            ("", "v1", "Pod"),
            ("apps", "v1", "Deployment"),
            ("apps", "v1", "StatefulSet"),
            ("batch", "v1", "CronJob"),
            ("", "v1", "ResourceQuota"),
            ("", "v1", "LimitRange"),
            ("", "v1", "PersistentVolumeClaim"),
            ("autoscaling", "v2", "HorizontalPodAutoscaler"),
            ("", "v1", "Service"),
            ("", "v1", "Secret"),
            ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        ] {
            assert!(rewrites_kind(g, v, k), "{g}/{v}/{k}");
        }
        for (g, v, k) in [("", "v1", "ConfigMap"), ("example.com", "v1", "Widget")] {
            assert!(!rewrites_kind(g, v, k), "{g}/{v}/{k}");
        }
    }

    #[test]
    fn fields_go_leaves_out_at_their_zero_value_are_not_stored() {
        let doc = json!({"spec": {"paused": false, "minReadySeconds": 0, "replicas": 0,
            "template": {"spec": {"hostNetwork": false, "restartPolicy": "",
                "containers": [{"name": "web", "image": "nginx", "tty": false, "stdin": true,
                    "ports": [{"containerPort": 80, "hostPort": 0, "name": ""}]}]}}}});
        let mut stored = doc.clone();
        assert!(store_form("apps", "v1", "Deployment", &mut stored));
        // `replicas` is a pointer and `containerPort` has no omitempty: kept at 0.
        assert_eq!(
            stored,
            json!({"spec": {"replicas": 0, "template": {"spec": {
                "containers": [{"name": "web", "image": "nginx", "stdin": true,
                    "ports": [{"containerPort": 80}]}]}}}})
        );
        let mut compared = doc;
        assert!(compare_form("apps", "v1", "Deployment", &mut compared));
        assert_eq!(compared["spec"]["paused"], Value::Null);
        assert_eq!(compared["spec"]["replicas"], 0);
        assert_eq!(
            compared["spec"]["template"]["spec"]["containers"][0]["ports"][0],
            json!({"containerPort": 80, "hostPort": null, "name": null})
        );
        // A ConfigMap keeps what it was given: `immutable` is a pointer.
        let mut cm = json!({"immutable": false, "data": {"a": ""}});
        assert!(!store_form("", "v1", "ConfigMap", &mut cm));
        assert_eq!(cm, json!({"immutable": false, "data": {"a": ""}}));
    }

    #[test]
    fn quantities_in_a_pod_template_come_back_canonical() {
        let mut d = json!({"spec": {"template": {"spec": {
            "containers": [{"name": "web", "image": "nginx", "resources": {
                "requests": {"cpu": "0.5", "memory": "1024Mi", "nvidia.com/gpu": 1},
                "limits": {"cpu": "1000m", "memory": " 1.5Gi", "ephemeral-storage": "1e3"}}}],
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "2048Mi"}}],
            "overhead": {"cpu": "0.25"}}}}});
        assert!(store_form("apps", "v1", "Deployment", &mut d));
        let spec = &d["spec"]["template"]["spec"];
        let r = &spec["containers"][0]["resources"];
        assert_eq!(
            r["requests"],
            json!({"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"})
        );
        assert_eq!(
            r["limits"],
            json!({"cpu": "1", "memory": "1536Mi", "ephemeral-storage": "1e3"})
        );
        assert_eq!(spec["volumes"][0]["emptyDir"]["sizeLimit"], "2Gi");
        assert_eq!(spec["overhead"]["cpu"], "250m");
        // Canonical already: nothing to change.
        assert!(!store_form("apps", "v1", "Deployment", &mut d));
    }

    #[test]
    fn only_quantity_fields_are_rewritten() {
        let mut q = json!({"spec": {"hard": {"cpu": "1000m", "pods": "10", "requests.memory": "2048Mi"}},
            "metadata": {"labels": {"cpu": "1000m"}, "annotations": {"m": "1024Mi"}}});
        assert!(store_form("", "v1", "ResourceQuota", &mut q));
        assert_eq!(
            q["spec"]["hard"],
            json!({"cpu": "1", "pods": "10", "requests.memory": "2Gi"})
        );
        assert_eq!(q["metadata"]["labels"]["cpu"], "1000m");
        assert_eq!(q["metadata"]["annotations"]["m"], "1024Mi");
        // A ConfigMap's data, a custom resource: as written.
        let mut cm = json!({"data": {"cpu": "1000m"}});
        assert!(!store_form("", "v1", "ConfigMap", &mut cm));
        assert_eq!(cm["data"]["cpu"], "1000m");
        let mut cr = json!({"spec": {"resources": {"requests": {"cpu": "1000m"}}}});
        assert!(!store_form("example.com", "v1", "Widget", &mut cr));
        assert_eq!(cr["spec"]["resources"]["requests"]["cpu"], "1000m");
    }

    #[test]
    fn a_secrets_string_data_is_stored_as_data() {
        let mut s = json!({"type": "Opaque", "data": {"a": "YQ==", "b": "Yg=="},
            "stringData": {"b": "bee", "c": "sea"}});
        assert!(store_form("", "v1", "Secret", &mut s));
        assert_eq!(
            s,
            json!({"type": "Opaque", "data": {"a": "YQ==", "b": "YmVl", "c": "c2Vh"}})
        );
        assert!(!store_form("", "v1", "Secret", &mut s));
        let mut only = json!({"stringData": {"k": ""}});
        assert!(merge_string_data("", "v1", "Secret", &mut only));
        assert_eq!(only, json!({"data": {"k": ""}}));
        // Not a map of strings: the server's validation names it.
        let mut bad = json!({"stringData": {"k": 1}});
        assert!(!merge_string_data("", "v1", "Secret", &mut bad));
        assert_eq!(bad, json!({"stringData": {"k": 1}}));
        // A ConfigMap has no such field to merge.
        let mut cm = json!({"stringData": {"k": "v"}});
        assert!(!merge_string_data("", "v1", "ConfigMap", &mut cm));
    }

    #[test]
    fn a_value_that_is_no_quantity_is_left_for_validation() {
        let mut q = json!({"spec": {"hard": {"cpu": "lots", "memory": true, "pods": null}}});
        assert!(!store_form("", "v1", "ResourceQuota", &mut q));
        assert_eq!(
            q["spec"]["hard"],
            json!({"cpu": "lots", "memory": true, "pods": null})
        );
        // A field of the wrong shape is no path to a quantity.
        let mut d = json!({"spec": {"template": {"spec": {"containers": {"cpu": "1000m"}}}}});
        assert!(!store_form("apps", "v1", "Deployment", &mut d));
    }
}
