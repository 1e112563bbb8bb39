//! Kubernetes label and field selectors: parsing and matching.
//!
//! Owns the selector grammar (`a=b`, `a==b`, `a!=b`, `a in (x,y)`,
//! `a notin (x)`, `a`, `!a` for labels; `path=value`, `path!=value` for
//! fields) and evaluation against a JSON object. It never decides which
//! field paths a resource supports; callers pass a resolver.

use std::collections::BTreeSet;

use serde_json::Value as Json;

/// A selector that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {which} selector {selector:?}: {problem}")]
pub struct SelectorError {
    /// "label" or "field".
    pub which: &'static str,
    /// The selector text.
    pub selector: String,
    /// What is wrong.
    pub problem: String,
}

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelRequirement {
    /// `key=value` / `key==value` / `key in (a,b)`.
    In(String, BTreeSet<String>),
    /// `key!=value` / `key notin (a,b)` (also matches when the key is absent).
    NotIn(String, BTreeSet<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// The requirements, ANDed.
    pub requirements: Vec<LabelRequirement>,
}

fn valid_label_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && name
            .as_bytes()
            .first()
            .is_some_and(u8::is_ascii_alphanumeric)
        && name
            .as_bytes()
            .last()
            .is_some_and(u8::is_ascii_alphanumeric);
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    });
    name_ok && prefix_ok
}

fn valid_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            && v.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
            && v.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric))
}

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

impl LabelSelector {
    /// Parses a label selector; "" selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let err = |problem: String| SelectorError {
            which: "label",
            selector: s.to_string(),
            problem,
        };
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        for term in split_terms(s) {
            let term = term.trim();
            if term.is_empty() {
                return Err(err("empty requirement".into()));
            }
            let req = if let Some(key) = term.strip_prefix('!') {
                LabelRequirement::DoesNotExist(key.trim().to_string())
            } else if let Some((k, v)) = term.split_once("!=") {
                LabelRequirement::NotIn(k.trim().to_string(), [v.trim().to_string()].into())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                LabelRequirement::In(k.trim().to_string(), [v.trim().to_string()].into())
            } else if let Some((k, rest)) = split_set_op(term) {
                let (op, set) = rest;
                let inner = set
                    .trim()
                    .strip_prefix('(')
                    .and_then(|x| x.strip_suffix(')'))
                    .ok_or_else(|| {
                        err(format!("{term:?}: expected a parenthesised set after {op}"))
                    })?;
                let values: BTreeSet<String> = inner
                    .split(',')
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .collect();
                if values.is_empty() {
                    return Err(err(format!(
                        "{term:?}: for 'in', 'notin' operators, values set can't be empty"
                    )));
                }
                if op == "in" {
                    LabelRequirement::In(k.to_string(), values)
                } else {
                    LabelRequirement::NotIn(k.to_string(), values)
                }
            } else {
                LabelRequirement::Exists(term.to_string())
            };
            let (key, values) = match &req {
                LabelRequirement::In(k, v) | LabelRequirement::NotIn(k, v) => (k, Some(v)),
                LabelRequirement::Exists(k) | LabelRequirement::DoesNotExist(k) => (k, None),
            };
            if !valid_label_key(key) {
                return Err(err(format!("invalid label key {key:?}")));
            }
            if let Some(bad) = values.and_then(|vs| vs.iter().find(|v| !valid_label_value(v))) {
                return Err(err(format!("invalid label value {bad:?}")));
            }
            requirements.push(req);
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether `labels` (a JSON map, or None) satisfies every requirement.
    pub fn matches(&self, labels: Option<&Json>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Json::as_str);
        self.requirements.iter().all(|r| match r {
            LabelRequirement::In(k, vs) => get(k).is_some_and(|v| vs.contains(v)),
            LabelRequirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.contains(v)),
            LabelRequirement::Exists(k) => get(k).is_some(),
            LabelRequirement::DoesNotExist(k) => get(k).is_none(),
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

fn split_set_op(term: &str) -> Option<(&str, (&'static str, &str))> {
    for op in ["notin", "in"] {
        let mut search = 0;
        while let Some(pos) = term[search..].find(op) {
            let at = search + pos;
            let before = &term[..at];
            let after = &term[at + op.len()..];
            if before.ends_with(char::is_whitespace) && after.trim_start().starts_with('(') {
                return Some((before.trim(), (op, after)));
            }
            search = at + op.len();
        }
    }
    None
}

/// One field requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field label, e.g. `spec.nodeName`.
    pub field: String,
    /// `=`/`==` (true) or `!=` (false).
    pub equals: bool,
    /// The value compared with.
    pub value: String,
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// The requirements, ANDed.
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses a field selector; "" selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector { requirements });
        }
        for term in s.split(',') {
            let (field, equals, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(SelectorError {
                    which: "field",
                    selector: s.to_string(),
                    problem: format!("invalid selector: '{term}'; can't understand '{term}'"),
                });
            };
            requirements.push(FieldRequirement {
                field: field.trim().to_string(),
                equals,
                value: value.trim().to_string(),
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// Whether `obj` satisfies every requirement, reading field labels with
    /// `resolve` (which returns None for an unsupported label).
    pub fn matches_with<'a>(
        &self,
        obj: &'a Json,
        resolve: impl Fn(&'a Json, &str) -> Option<String>,
    ) -> bool {
        self.requirements.iter().all(|r| {
            let v = resolve(obj, &r.field).unwrap_or_default();
            (v == r.value) == r.equals
        })
    }
}

/// The field labels every resource supports plus the pod ones the real API
/// server supports; `None` for anything else.
pub fn default_field_value(obj: &Json, label: &str) -> Option<String> {
    let text = |p: &str| {
        obj.pointer(p)
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string()
    };
    match label {
        "metadata.name" => Some(text("/metadata/name")),
        "metadata.namespace" => Some(text("/metadata/namespace")),
        "spec.nodeName" => Some(text("/spec/nodeName")),
        "status.phase" => Some(text("/status/phase")),
        "spec.restartPolicy" => Some(text("/spec/restartPolicy")),
        "spec.schedulerName" => Some(text("/spec/schedulerName")),
        "spec.serviceAccountName" => Some(text("/spec/serviceAccountName")),
        "status.podIP" => Some(text("/status/podIP")),
        "status.nominatedNodeName" => Some(text("/status/nominatedNodeName")),
        "type" => Some(text("/type")),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_operators_match_like_the_api_server() {
        let labels = json!({"app": "web", "tier": "front"});
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("tier in (front,back)", true),
            ("tier notin (front)", false),
            ("tier notin (back)", true),
            ("missing notin (x)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app=web,tier in (back)", false),
            ("app=web, !missing", true),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap();
            assert_eq!(s.matches(Some(&labels)), want, "{sel}");
        }
        assert!(LabelSelector::parse("!app").unwrap().matches(None));
    }

    #[test]
    fn malformed_label_selectors_are_rejected_with_the_reason() {
        for bad in [
            "app=web,",
            "tier in ()",
            "tier in front",
            "bad key=x",
            "a=in valid",
        ] {
            let e = LabelSelector::parse(bad).unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    #[test]
    fn field_selectors_compare_missing_fields_as_empty() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {}, "status": {"phase": "Running"}});
        let cases = [
            ("spec.nodeName!=", false),
            ("spec.nodeName=", true),
            ("status.phase!=Succeeded,status.phase!=Failed", true),
            ("status.phase==Running,metadata.namespace=ns", true),
            ("metadata.name=q", false),
        ];
        for (sel, want) in cases {
            let s = FieldSelector::parse(sel).unwrap();
            assert_eq!(s.matches_with(&pod, default_field_value), want, "{sel}");
        }
        assert!(FieldSelector::parse("spec.nodeName").is_err());
    }
}
