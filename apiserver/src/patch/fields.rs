//! Field paths and field sets as structured-merge-diff models them, with
//! the `FieldsV1` encoding stored in `metadata.managedFields` and the path
//! notation used in apply conflict messages.
//! These are plain values: this module never looks at an object (which
//! fields a value has is the apply walk's business) and never decides
//! ownership.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// One step of a [`FieldPath`]. The variant order is structured-merge-diff's
/// sort order (fields, then keys, then values, then indices).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A map field (`f:name`, `.name`).
    Field(String),
    /// An associative-list item, by its key fields sorted by name; each
    /// value is JSON-encoded (`k:{"name":"app"}`, `[name="app"]`).
    Key(Vec<(String, String)>),
    /// A set item, JSON-encoded (`v:"value"`, `[="value"]`).
    Value(String),
    /// A list item by position (`i:0`, `[0]`); only for lists that are
    /// neither sets nor associative, which the apply code owns atomically.
    Index(usize),
}

/// A path from the object root to a field.
pub type FieldPath = Vec<PathElement>;

impl PathElement {
    /// The `FieldsV1` key of this element (`f:data`, `k:{...}`, `v:...`, `i:0`).
    #[must_use]
    pub fn to_fields_v1_key(&self) -> String {
        match self {
            Self::Field(name) => format!("f:{name}"),
            Self::Key(fields) => {
                let mut obj = Map::new();
                for (name, json) in fields {
                    let v = serde_json::from_str(json).unwrap_or(Value::Null);
                    obj.insert(name.clone(), v);
                }
                format!("k:{}", Value::Object(obj))
            }
            Self::Value(json) => format!("v:{json}"),
            Self::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key; `None` for `.` or anything malformed.
    #[must_use]
    pub fn from_fields_v1_key(key: &str) -> Option<Self> {
        let (prefix, rest) = key.split_at_checked(2)?;
        match prefix {
            "f:" => Some(Self::Field(rest.to_owned())),
            "k:" => {
                let Value::Object(obj) = serde_json::from_str::<Value>(rest).ok()? else {
                    return None;
                };
                let mut fields: Vec<(String, String)> = obj
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_string()))
                    .collect();
                fields.sort();
                Some(Self::Key(fields))
            }
            "v:" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                Some(Self::Value(v.to_string()))
            }
            "i:" => rest.parse().ok().map(Self::Index),
            _ => None,
        }
    }
}

impl fmt::Display for PathElement {
    /// structured-merge-diff's `PathElement.String()`: `.name`,
    /// `[name="app"]`, `[="value"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Field(name) => write!(f, ".{name}"),
            Self::Key(fields) => {
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            Self::Value(json) => write!(f, "[={json}]"),
            Self::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// Renders a path as structured-merge-diff does in conflict messages, e.g.
/// `.spec.containers[name="app"].image`.
#[must_use]
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of field paths, stored as a tree: `members` are the paths that
/// end at this node, `children` the subtrees below it. A path's ancestors
/// are *not* implied members.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// True when the set holds no path.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(FieldSet::is_empty)
    }

    /// Adds `path` (not its ancestors); the empty path is ignored.
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Adds `pe` as a member of this node (the path to this node plus `pe`).
    pub fn insert_member(&mut self, pe: PathElement) {
        self.members.insert(pe);
    }

    /// Adds `child`'s paths below `pe` of this node.
    pub fn insert_child(&mut self, pe: PathElement, child: FieldSet) {
        if child.is_empty() {
            return;
        }
        match self.children.get_mut(&pe) {
            Some(mine) => *mine = mine.union(&child),
            None => {
                self.children.insert(pe, child);
            }
        }
    }

    /// Removes the member `path` (not its descendants), as
    /// `difference` with it would; true when it was a member.
    pub fn remove(&mut self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.remove(last),
            [first, rest @ ..] => {
                let Some(child) = self.children.get_mut(first) else {
                    return false;
                };
                let removed = child.remove(rest);
                if child.is_empty() {
                    self.children.remove(first);
                }
                removed
            }
        }
    }

    /// Whether [`FieldSet::to_fields_v1`] gives exactly `fields_v1` (an
    /// object's members), found without encoding the set.
    #[must_use]
    pub fn encodes_as(&self, fields_v1: &Map<String, Value>) -> bool {
        self.encodes_as_with(fields_v1, false)
    }

    /// [`FieldSet::encodes_as`] of `fields_v1` that also holds `"."` when
    /// `dot` (the node is a member with children).
    fn encodes_as_with(&self, fields_v1: &Map<String, Value>, dot: bool) -> bool {
        if fields_v1.contains_key(".") != dot
            || (dot
                && !fields_v1
                    .get(".")
                    .is_some_and(|v| v.as_object().is_some_and(Map::is_empty)))
        {
            return false;
        }
        let mut count = usize::from(dot);
        let mut key = String::new();
        let mut node_of = |pe: &PathElement| {
            match pe {
                PathElement::Field(name) => {
                    key.clear();
                    key.push_str("f:");
                    key.push_str(name);
                }
                _ => {
                    key = pe.to_fields_v1_key();
                    // distinct elements must have distinct keys for this count
                    if PathElement::from_fields_v1_key(&key).as_ref() != Some(pe) {
                        return None;
                    }
                }
            }
            count += 1;
            fields_v1.get(key.as_str()).and_then(Value::as_object)
        };
        for pe in &self.members {
            let Some(node) = node_of(pe) else {
                return false;
            };
            let matches = match self.child(pe) {
                Some(child) => child.encodes_as_with(node, true),
                None => node.is_empty(),
            };
            if !matches {
                return false;
            }
        }
        for (pe, child) in &self.children {
            if self.members.contains(pe) || child.is_empty() {
                continue;
            }
            let Some(node) = node_of(pe) else {
                return false;
            };
            if !child.encodes_as_with(node, false) {
                return false;
            }
        }
        count == fields_v1.len()
    }

    /// Takes the subtree below `pe` out of this node.
    pub fn take_child(&mut self, pe: &PathElement) -> FieldSet {
        self.children.remove(pe).unwrap_or_default()
    }

    /// True when `path` itself is in the set.
    #[must_use]
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// True when `pe` is a member of this node.
    #[must_use]
    pub fn has_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    /// The subtree below `pe`, if any path goes through it.
    #[must_use]
    pub fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe).filter(|c| !c.is_empty())
    }

    /// Every path in the set, in structured-merge-diff iteration order
    /// (a node's members, then its children).
    #[must_use]
    pub fn paths(&self) -> Vec<FieldPath> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut FieldPath, out: &mut Vec<FieldPath>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(p);
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    /// Paths in either set.
    #[must_use]
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Paths in both sets.
    #[must_use]
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, child)| {
                let both = child.intersection(other.children.get(pe)?);
                (!both.is_empty()).then(|| (pe.clone(), both))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Paths of `self` that are not in `other` (exact paths: removing a
    /// path does not remove its descendants).
    #[must_use]
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, child)| {
                let rest = match other.children.get(pe) {
                    Some(o) => child.difference(o),
                    None => child.clone(),
                };
                (!rest.is_empty()).then(|| (pe.clone(), rest))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Paths of `self` that are neither in `other` nor below a member of
    /// `other` (removing a path removes its whole subtree).
    #[must_use]
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(pe, _)| !other.members.contains(pe))
            .filter_map(|(pe, child)| {
                let rest = match other.children.get(pe) {
                    Some(o) => child.recursive_difference(o),
                    None => child.clone(),
                };
                (!rest.is_empty()).then(|| (pe.clone(), rest))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Encodes the set as a `FieldsV1` object: `{"f:data":{"f:key":{}}}`,
    /// with `".": {}` when a node is itself a member and has children.
    #[must_use]
    pub fn to_fields_v1(&self) -> Value {
        let mut keys: BTreeSet<&PathElement> = self.members.iter().collect();
        keys.extend(
            self.children
                .iter()
                .filter(|(_, c)| !c.is_empty())
                .map(|(pe, _)| pe),
        );
        let mut obj = Map::new();
        for pe in keys {
            let value = match self.child(pe) {
                Some(child) => {
                    let mut inner = Map::new();
                    if self.members.contains(pe) {
                        inner.insert(".".to_owned(), Value::Object(Map::new()));
                    }
                    if let Value::Object(rest) = child.to_fields_v1() {
                        inner.extend(rest);
                    }
                    Value::Object(inner)
                }
                None => Value::Object(Map::new()),
            };
            obj.insert(pe.to_fields_v1_key(), value);
        }
        Value::Object(obj)
    }

    /// Decodes a `FieldsV1` object; a malformed key or non-object value is
    /// an error naming it.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, String> {
        let Value::Object(obj) = v else {
            return Err(format!("FieldsV1 must be an object, got {v}"));
        };
        Self::from_fields_v1_map(obj)
    }

    /// [`FieldSet::from_fields_v1`] of an object's members.
    pub fn from_fields_v1_map(obj: &Map<String, Value>) -> Result<FieldSet, String> {
        let mut set = FieldSet::new();
        for (key, inner) in obj {
            if key == "." {
                continue;
            }
            let pe = PathElement::from_fields_v1_key(key)
                .ok_or_else(|| format!("invalid FieldsV1 key {key:?}"))?;
            let Value::Object(inner_obj) = inner else {
                return Err(format!("FieldsV1 value of {key:?} must be an object"));
            };
            let child = FieldSet::from_fields_v1(inner)?;
            if inner_obj.is_empty() || inner_obj.contains_key(".") {
                set.members.insert(pe.clone());
            }
            if !child.is_empty() {
                set.children.insert(pe, child);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str) -> PathElement {
        PathElement::Field(name.to_owned())
    }

    #[test]
    fn fields_v1_round_trips_real_encodings() {
        let cases = [
            json!({"f:data":{".":{},"f:key":{}}}),
            json!({"f:metadata":{"f:labels":{"f:app":{}}},"f:data":{"f:a":{},"f:b":{}}}),
            json!({"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}),
            json!({"f:metadata":{"f:finalizers":{".":{},"v:\"example.com/x\"":{}}}}),
            json!({"f:spec":{"f:list":{"i:0":{}}}}),
        ];
        for fields in cases {
            let set = FieldSet::from_fields_v1(&fields).expect("decodes");
            assert_eq!(set.to_fields_v1(), fields);
        }
    }

    #[test]
    fn path_strings_match_structured_merge_diff() {
        let key = PathElement::from_fields_v1_key("k:{\"protocol\":\"TCP\",\"containerPort\":80}")
            .expect("key");
        let cases = [
            (vec![f("data"), f("key")], ".data.key"),
            (
                vec![
                    f("spec"),
                    f("containers"),
                    PathElement::Key(vec![("name".into(), "\"app\"".into())]),
                    f("image"),
                ],
                ".spec.containers[name=\"app\"].image",
            ),
            (
                vec![f("ports"), key],
                ".ports[containerPort=80,protocol=\"TCP\"]",
            ),
            (
                vec![f("finalizers"), PathElement::Value("\"a\"".into())],
                ".finalizers[=\"a\"]",
            ),
            (vec![f("args"), PathElement::Index(2)], ".args[2]"),
        ];
        for (path, want) in cases {
            assert_eq!(path_string(&path), want);
        }
    }

    #[test]
    fn set_algebra_follows_exact_and_recursive_difference() {
        let mut a = FieldSet::new();
        a.insert(&[f("data"), f("x")]);
        a.insert(&[f("data"), f("y")]);
        a.insert(&[f("spec")]);
        a.insert(&[f("spec"), f("z")]);
        let mut b = FieldSet::new();
        b.insert(&[f("data"), f("x")]);
        b.insert(&[f("spec")]);

        let diff = a.difference(&b);
        assert!(diff.has(&[f("data"), f("y")]) && !diff.has(&[f("data"), f("x")]));
        assert!(!diff.has(&[f("spec")]) && diff.has(&[f("spec"), f("z")]));

        let rdiff = a.recursive_difference(&b);
        assert!(!rdiff.has(&[f("spec"), f("z")]));
        assert!(rdiff.has(&[f("data"), f("y")]));

        let both = a.intersection(&b);
        assert_eq!(both.paths().len(), 2);
        assert_eq!(a.union(&b), a);
        assert!(FieldSet::new().is_empty() && a.difference(&a).is_empty());
    }

    #[test]
    fn fields_v1_rejects_malformed_keys() {
        for bad in [
            json!({"x:y":{}}),
            json!({"f:a":1}),
            json!([1]),
            json!({"k:notjson":{}}),
        ] {
            assert!(FieldSet::from_fields_v1(&bad).is_err(), "{bad}");
        }
    }
}
