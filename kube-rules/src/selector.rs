//! Label and field selectors: parsing the query-string syntax and matching
//! against the few attributes ([`Attrs`]) the store extracts per object.
//! Selectors never look at full objects; the store decides what is extracted.

use serde_json::Value;

/// Selectable attributes of one stored object: its labels and the field
/// values the resource supports in field selectors (missing fields are "").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attrs {
    /// Labels, sorted by key.
    pub labels: Box<[(Box<str>, Box<str>)]>,
    /// `(field label, value)` for every supported field label.
    pub fields: Box<[(&'static str, Box<str>)]>,
}

impl Attrs {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.labels[i].1)
    }

    fn field(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| &**v)
    }
}

/// Field labels usable in field selectors for a resource (by storage key).
pub fn supported_fields(storage_key: &str) -> &'static [&'static str] {
    match storage_key {
        "pods" => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "namespaces" => &["metadata.name", "status.phase"],
        "nodes" => &["metadata.name", "spec.unschedulable"],
        "secrets" => &["metadata.name", "metadata.namespace", "type"],
        "events" => &[
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |cur, seg| cur.get(seg))
}

fn scalar(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// Extracts the selectable attributes of `obj` for the resource `storage_key`.
pub fn extract_attrs(storage_key: &str, obj: &Value) -> Attrs {
    let mut labels: Vec<(Box<str>, Box<str>)> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str().into(), v.as_str().unwrap_or_default().into()))
                .collect()
        })
        .unwrap_or_default();
    labels.sort();
    let fields = supported_fields(storage_key)
        .iter()
        .map(|f| {
            let value = match *f {
                // events.source is the component, not the whole struct
                "source" => scalar(lookup(obj, "source.component")),
                "spec.hostNetwork" | "spec.unschedulable" => {
                    let s = scalar(lookup(obj, f));
                    if s.is_empty() {
                        "false".to_string()
                    } else {
                        s
                    }
                }
                _ => scalar(lookup(obj, f)),
            };
            (*f, value.into_boxed_str())
        })
        .collect();
    Attrs {
        labels: labels.into_boxed_slice(),
        fields,
    }
}

/// Error from parsing a selector; its text is the message the client sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The selector string is malformed.
    #[error("unable to parse requirement: {0}")]
    Syntax(String),
    /// The field label is not supported for this resource (real server's wording).
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<Req>,
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self { reqs });
        }
        for raw in split_top_level(s) {
            let part = raw.trim();
            let err = || SelectorError::Syntax(part.to_string());
            if let Some(key) = part.strip_prefix('!') {
                let key = key.trim();
                if !valid_key(key) {
                    return Err(err());
                }
                reqs.push(Req::NotExists(key.into()));
            } else if let Some(open) = part.find('(') {
                let close = part.rfind(')').ok_or_else(err)?;
                if close < open || !part[close + 1..].trim().is_empty() {
                    return Err(err());
                }
                let head: Vec<&str> = part[..open].split_whitespace().collect();
                let values: Vec<String> = part[open + 1..close]
                    .split(',')
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .collect();
                match head.as_slice() {
                    [k, "in"] if valid_key(k) => reqs.push(Req::In((*k).into(), values)),
                    [k, "notin"] if valid_key(k) => reqs.push(Req::NotIn((*k).into(), values)),
                    _ => return Err(err()),
                }
            } else if let Some((k, v)) = part.split_once("!=") {
                reqs.push(Req::NotEq(checked(k, part)?, v.trim().into()));
            } else if let Some((k, v)) = part.split_once("==") {
                reqs.push(Req::Eq(checked(k, part)?, v.trim().into()));
            } else if let Some((k, v)) = part.split_once('=') {
                reqs.push(Req::Eq(checked(k, part)?, v.trim().into()));
            } else if let Some((k, v)) = part.split_once('>') {
                let n = v.trim().parse().map_err(|_| err())?;
                reqs.push(Req::Gt(checked(k, part)?, n));
            } else if let Some((k, v)) = part.split_once('<') {
                let n = v.trim().parse().map_err(|_| err())?;
                reqs.push(Req::Lt(checked(k, part)?, n));
            } else {
                if !valid_key(part) {
                    return Err(err());
                }
                reqs.push(Req::Exists(part.into()));
            }
        }
        Ok(Self { reqs })
    }

    /// True if the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// True if `attrs` satisfies every requirement.
    pub fn matches(&self, attrs: &Attrs) -> bool {
        self.reqs.iter().all(|r| match r {
            Req::Eq(k, v) => attrs.label(k) == Some(v.as_str()),
            Req::NotEq(k, v) => attrs.label(k) != Some(v.as_str()),
            Req::In(k, vs) => attrs.label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Req::NotIn(k, vs) => !attrs.label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Req::Exists(k) => attrs.label(k).is_some(),
            Req::NotExists(k) => attrs.label(k).is_none(),
            Req::Gt(k, n) => attrs
                .label(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l > *n),
            Req::Lt(k, n) => attrs
                .label(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l < *n),
        })
    }
}

fn checked(k: &str, part: &str) -> Result<String, SelectorError> {
    let k = k.trim();
    if valid_key(k) {
        Ok(k.into())
    } else {
        Err(SelectorError::Syntax(part.to_string()))
    }
}

/// A parsed field selector (`=`, `==`, `!=` on supported field labels).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses a field selector, rejecting field labels `storage_key` does not support.
    pub fn parse(s: &str, storage_key: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self { reqs });
        }
        let supported = supported_fields(storage_key);
        for raw in s.split(',') {
            let part = raw.trim();
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(SelectorError::Syntax(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let k = k.trim();
            if !supported.contains(&k) {
                return Err(SelectorError::UnsupportedField(k.to_string()));
            }
            reqs.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(Self { reqs })
    }

    /// True if the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// True if `attrs` satisfies every requirement.
    pub fn matches(&self, attrs: &Attrs) -> bool {
        self.reqs.iter().all(|(k, eq, v)| {
            let actual = attrs.field(k).unwrap_or_default();
            (actual == v) == *eq
        })
    }
}

/// Label plus field selector of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// Label part.
    pub labels: LabelSelector,
    /// Field part.
    pub fields: FieldSelector,
}

impl Selector {
    /// True if both parts match.
    pub fn matches(&self, attrs: &Attrs) -> bool {
        self.labels.matches(attrs) && self.fields.matches(attrs)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(labels: Value, node: &str) -> Attrs {
        extract_attrs(
            "pods",
            &json!({"metadata": {"name": "p", "namespace": "d", "labels": labels}, "spec": {"nodeName": node}, "status": {"phase": "Running"}}),
        )
    }

    #[test]
    fn label_operators_follow_kubernetes_semantics() {
        let a = pod(json!({"app": "web", "tier": "fe"}), "");
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&a);
        assert!(m("app=web"));
        assert!(m("app==web"));
        assert!(!m("app!=web"));
        assert!(m("missing!=x"), "!= matches objects without the label");
        assert!(m("app in (web, db)"));
        assert!(!m("app notin (web,db)"));
        assert!(m("missing notin (x)"));
        assert!(m("tier"));
        assert!(!m("!tier"));
        assert!(m("!missing"));
        assert!(m("app in (web),tier=fe"));
        assert!(m(""));
    }

    #[test]
    fn malformed_label_selector_is_rejected() {
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }

    #[test]
    fn field_selector_matches_pod_fields_and_rejects_unknown_labels() {
        let a = pod(json!({}), "node-1");
        let f = |s: &str| FieldSelector::parse(s, "pods").unwrap().matches(&a);
        assert!(f("spec.nodeName=node-1"));
        assert!(f("spec.nodeName!=node-2,status.phase==Running"));
        assert!(f("metadata.name=p,metadata.namespace=d"));
        let unscheduled = pod(json!({}), "");
        assert!(FieldSelector::parse("spec.nodeName=", "pods")
            .unwrap()
            .matches(&unscheduled));
        let err = FieldSelector::parse("spec.foo=x", "pods").unwrap_err();
        assert_eq!(err.to_string(), "field label not supported: spec.foo");
        assert!(FieldSelector::parse("spec.nodeName=x", "configmaps").is_err());
    }
}

#[cfg(test)]
mod proptests;
