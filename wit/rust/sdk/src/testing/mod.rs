//! Native test helpers: environments, requests, and snapshots described by
//! watch and field *name* ([`World`]), laid out by `wasmctrl-snapshot`'s
//! `Builder` — the code the host builds its snapshots with, so a guest's
//! unit tests see exactly what the host would send. Run the guest with
//! [`run::describe`](crate::run::describe) and
//! [`run::reconcile`](crate::run::reconcile), the same path as its
//! component exports. For tests only: unknown names are errors, never
//! silently absent. Which keys a change wakes and which objects a key's
//! snapshot holds, by the manifest's key mappings: [`relations`]; held to
//! the host's answers by the relation agreement table ([`agreement`]).

pub mod agreement;
pub mod relations;

use wasmctrl_kube_rules::selector::{Attrs, LabelSelector};
use wasmctrl_snapshot::{Builder, SnapshotData, Value};

use crate::owner::OwnerReference;
use crate::snapshot::SchemaError;
use crate::{Environment, GroupVersionKind, Manifest, Request, Schema};

impl Environment {
    /// An environment for tests: the host runs in `namespace`, no
    /// configuration, clock at 0.
    pub fn test(namespace: &str) -> Self {
        Environment {
            namespace: namespace.to_string(),
            config: Vec::new(),
            now_ms: 0,
        }
    }

    /// With one more configuration entry.
    #[must_use]
    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.config.push((key.to_string(), value.to_string()));
        self
    }

    /// With the clock at `ms` milliseconds since the epoch.
    #[must_use]
    pub fn now_ms(mut self, ms: u64) -> Self {
        self.now_ms = ms;
        self
    }
}

impl Request {
    /// The request for an aggregate key.
    pub fn aggregate(key: &str) -> Self {
        Request {
            key: key.to_string(),
            watch: None,
            presence: None,
        }
    }

    /// The request for the primary object `key` (`namespace/name`) of
    /// `watch`, present. [`World::request`] tells where it stands in a
    /// world.
    pub fn object(watch: &str, key: &str) -> Self {
        Request {
            key: key.to_string(),
            watch: Some(watch.to_string()),
            presence: Some(crate::Presence::Present),
        }
    }

    /// This request with `presence`.
    #[must_use]
    pub fn presence(mut self, presence: crate::Presence) -> Self {
        self.presence = Some(presence);
        self
    }
}

/// One value of a field, as a test writes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    /// Missing or null.
    Absent,
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// Another number.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// An object or list, as JSON text.
    Json(String),
}

impl From<&str> for Val {
    fn from(s: &str) -> Self {
        Val::Str(s.to_string())
    }
}

impl From<String> for Val {
    fn from(s: String) -> Self {
        Val::Str(s)
    }
}

impl From<i64> for Val {
    fn from(n: i64) -> Self {
        Val::Int(n)
    }
}

impl From<bool> for Val {
    fn from(b: bool) -> Self {
        Val::Bool(b)
    }
}

impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Self {
        v.map_or(Val::Absent, Into::into)
    }
}

/// One object of a [`World`].
#[derive(Clone, Debug, PartialEq)]
pub struct Obj {
    watch: String,
    namespace: String,
    name: String,
    uid: String,
    generation: i64,
    deletion_timestamp: String,
    fields: Vec<(String, Vec<Val>)>,
    labels: Vec<(String, String)>,
    owner_references: Vec<OwnerReference>,
}

impl Obj {
    /// The object `namespace/name` of the watch named `watch`, with uid
    /// `uid-<namespace>-<name>`, generation 1, not being deleted, and every
    /// projected field absent.
    pub fn new(watch: &str, namespace: &str, name: &str) -> Self {
        Obj {
            watch: watch.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: format!("uid-{namespace}-{name}"),
            generation: 1,
            deletion_timestamp: String::new(),
            fields: Vec::new(),
            labels: Vec::new(),
            owner_references: Vec::new(),
        }
    }

    /// The values `path` yields: as set, else for a `metadata.` path what
    /// the host projects from the object's metadata ([`Obj::metadata`]);
    /// `None` for any other path not set.
    fn values(&self, path: &str) -> Option<Vec<Val>> {
        if let Some((_, values)) = self.fields.iter().find(|(p, _)| p == path) {
            return Some(values.clone());
        }
        let rest = path.strip_prefix("metadata")?;
        Some(project(&self.metadata(), rest))
    }

    /// `metadata` as the API server sends it and the host reads it: name,
    /// namespace, uid, generation (when not 0), deletionTimestamp (when
    /// set), labels (sorted, as Go encodes a map) and ownerReferences (in
    /// the order added).
    fn metadata(&self) -> serde_json::Value {
        let mut meta = serde_json::Map::new();
        let mut put = |key: &str, value: serde_json::Value| {
            meta.insert(key.to_string(), value);
        };
        put("name", self.name.clone().into());
        if !self.namespace.is_empty() {
            put("namespace", self.namespace.clone().into());
        }
        put("uid", self.uid.clone().into());
        if self.generation != 0 {
            put("generation", self.generation.into());
        }
        if !self.deletion_timestamp.is_empty() {
            put("deletionTimestamp", self.deletion_timestamp.clone().into());
        }
        if !self.labels.is_empty() {
            let mut labels = self.labels.clone();
            labels.sort();
            let labels = labels.into_iter().map(|(k, v)| (k, v.into())).collect();
            put("labels", serde_json::Value::Object(labels));
        }
        if !self.owner_references.is_empty() {
            put(
                "ownerReferences",
                serde_json::to_value(&self.owner_references).unwrap_or_default(),
            );
        }
        serde_json::Value::Object(meta)
    }

    /// The distinct string values `path` yields, sorted (what the host's
    /// indexes and `by-index` mappings compare).
    fn strings(&self, path: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .values(path)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| match v {
                Val::Str(s) => Some(s),
                _ => None,
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Its labels as a selector sees them.
    fn attrs(&self) -> Attrs {
        let mut labels: Vec<(Box<str>, Box<str>)> = self
            .labels
            .iter()
            .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
            .collect();
        labels.sort();
        Attrs {
            labels: labels.into_boxed_slice(),
            fields: Box::default(),
        }
    }

    /// Its watch's name.
    pub fn watch(&self) -> &str {
        &self.watch
    }

    /// Its key, `namespace/name` (`name` when cluster-scoped), as a
    /// per-object request names it.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }

    /// With the label `key` = `value` (`metadata.labels`): in the snapshot
    /// and the relations wherever the watch projects `metadata.labels` or a
    /// path below it (`metadata.labels.KEY`, `metadata.labels['KEY']`),
    /// unless that path is set.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.retain(|(k, _)| k != key);
        self.labels.push((key.to_string(), value.to_string()));
        self
    }

    /// With one more entry in `metadata.ownerReferences` (the first with
    /// `controller: true` is the controller owner the host's `owner` key
    /// mapping follows).
    #[must_use]
    pub fn owner_reference(mut self, reference: OwnerReference) -> Self {
        self.owner_references.push(reference);
        self
    }

    /// Controlled by `owner`, an object of type `gvk`: the reference
    /// [`controller_ref`](crate::controller_ref) puts on a child (owner's
    /// name and uid, `controller` and `blockOwnerDeletion` true). Like every
    /// [`Obj::owner_reference`], it relates the object to its owner in
    /// [`World::wakes`] and [`World::objects_for`], and it is in the
    /// snapshot wherever the watch projects `metadata.ownerReferences` (or a
    /// path below it) exactly as the host projects it from the API server's
    /// object (read it with [`Object::controller_owner`](crate::Object::controller_owner)).
    #[must_use]
    pub fn controlled_by(self, gvk: &GroupVersionKind, owner: &Obj) -> Self {
        self.owner_reference(OwnerReference {
            api_version: gvk.api_version(),
            kind: gvk.kind.clone(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        })
    }

    /// With `metadata.uid` = `uid`.
    #[must_use]
    pub fn uid(mut self, uid: &str) -> Self {
        self.uid = uid.to_string();
        self
    }

    /// With `metadata.generation` = `generation`.
    #[must_use]
    pub fn generation(mut self, generation: i64) -> Self {
        self.generation = generation;
        self
    }

    /// Being deleted since `timestamp` (RFC 3339).
    #[must_use]
    pub fn deleting(mut self, timestamp: &str) -> Self {
        self.deletion_timestamp = timestamp.to_string();
        self
    }

    /// The field `path` (as written in the watch's `fields`) yields `value`.
    #[must_use]
    pub fn set(self, path: &str, value: impl Into<Val>) -> Self {
        self.set_list(path, [value])
    }

    /// The field `path` (a `[*]` path) yields `values`, one per element.
    #[must_use]
    pub fn set_list<V: Into<Val>>(
        mut self,
        path: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        let values = values.into_iter().map(Into::into).collect();
        match self.fields.iter_mut().find(|(p, _)| p == path) {
            Some((_, old)) => *old = values,
            None => self.fields.push((path.to_string(), values)),
        }
        self
    }
}

/// A set of objects for one manifest, turned into a snapshot by the host's
/// layout code. Like the API server, it evaluates each watch's label
/// selector: an object whose labels do not match is on the server but not
/// in its watch (its key reconciles `unselected`); objects added with
/// [`World::gone`] were deleted (their keys reconcile `gone`). Field
/// selectors are not evaluated: add only objects they would admit.
#[derive(Clone, Debug)]
pub struct World {
    manifest: Manifest,
    objects: Vec<Obj>,
    /// Deleted objects, as the host last saw them.
    gone: Vec<Obj>,
    /// Each watch's label selector, parsed (`None`: none declared).
    selectors: Vec<Result<Option<LabelSelector>, String>>,
}

impl World {
    /// An empty world seen through `manifest`.
    pub fn new(manifest: &Manifest) -> Self {
        let selectors = manifest
            .watches
            .iter()
            .map(|w| {
                w.label_selector
                    .as_deref()
                    .map(LabelSelector::parse)
                    .transpose()
                    .map_err(|e| e.to_string())
            })
            .collect();
        World {
            manifest: manifest.clone(),
            objects: Vec::new(),
            gone: Vec::new(),
            selectors,
        }
    }

    /// An object the server no longer has (deleted), as the host last saw
    /// it: a request for its key is `gone`, and its snapshot still holds
    /// the objects related to it by this last state.
    #[must_use]
    pub fn gone(mut self, object: Obj) -> Self {
        self.gone.push(object);
        self
    }

    /// The request for the object `key` (`namespace/name`) of the primary
    /// watch `watch`, with its presence as this world has it: `present`
    /// when its watch holds it, `unselected` when it exists but its labels
    /// do not match the watch's label selector, `gone` otherwise.
    pub fn request(&self, watch: &str, key: &str) -> Result<crate::Request, SchemaError> {
        let p = self.watch_index(watch)?;
        let presence = if self.held(p, key).is_some() {
            crate::Presence::Present
        } else if self.on_server(p, key).is_some() {
            crate::Presence::Unselected
        } else {
            crate::Presence::Gone
        };
        Ok(crate::Request::object(watch, key).presence(presence))
    }

    /// The objects its watches hold, in insertion order: those their label
    /// selectors admit.
    fn watched(&self) -> Result<Vec<&Obj>, SchemaError> {
        self.check_selectors()?;
        let mut out = Vec::with_capacity(self.objects.len());
        for o in &self.objects {
            if self.selected(self.watch_index(&o.watch)?, o) {
                out.push(o);
            }
        }
        Ok(out)
    }

    /// An error naming the first watch whose label selector does not parse.
    pub(super) fn check_selectors(&self) -> Result<(), SchemaError> {
        for (spec, selector) in self.manifest.watches.iter().zip(&self.selectors) {
            if let Err(problem) = selector {
                return Err(SchemaError::BadSelector {
                    watch: spec.name.clone(),
                    problem: problem.clone(),
                });
            }
        }
        Ok(())
    }

    /// Whether watch `w`'s label selector admits `object` (an invalid one
    /// admits nothing; [`World::check_selectors`] reports it).
    pub(super) fn selected(&self, w: usize, object: &Obj) -> bool {
        match self.selectors.get(w) {
            Some(Ok(None)) => true,
            Some(Ok(Some(selector))) => selector.matches(&object.attrs()),
            _ => false,
        }
    }

    /// Adds an object (order does not matter: the snapshot sorts).
    #[must_use]
    pub fn with(mut self, object: Obj) -> Self {
        self.objects.push(object);
        self
    }

    /// Adds objects.
    #[must_use]
    pub fn with_all(mut self, objects: impl IntoIterator<Item = Obj>) -> Self {
        self.objects.extend(objects);
        self
    }

    /// The snapshot the host would send: objects sorted by watch, namespace
    /// and name; each projected field in the watch's order, absent unless
    /// set (a `[*]` path yields no values unless set); each declared index
    /// filled from the values set on its field's path. A watch or field
    /// the manifest does not declare is an error.
    pub fn snapshot(&self) -> Result<SnapshotData, SchemaError> {
        self.build(self.watched()?.into_iter())
    }

    /// The snapshot holding `objects` (see [`World::snapshot`]).
    fn build<'o>(
        &self,
        objects: impl Iterator<Item = &'o Obj>,
    ) -> Result<SnapshotData, SchemaError> {
        let schema = Schema::new(&self.manifest)?;
        let mut rows = Vec::with_capacity(self.objects.len());
        for o in objects {
            let watch = schema.watch(&o.watch)?;
            for (path, _) in &o.fields {
                let declared = self.manifest.watches[watch.id().index()]
                    .indexes
                    .iter()
                    .any(|i| &i.field == path);
                if !declared {
                    watch.field(path)?;
                }
            }
            rows.push((watch.id().index(), o));
        }
        rows.sort_by(|a, b| {
            (a.0, &a.1.namespace, &a.1.name).cmp(&(b.0, &b.1.namespace, &b.1.name))
        });

        let mut b = Builder::with_capacity(rows.len(), rows.len() * 8);
        for &(watch, o) in &rows {
            let (ns, name, uid) = (b.string(&o.namespace), b.string(&o.name), b.string(&o.uid));
            let deleting = b.string(&o.deletion_timestamp);
            b.object(watch as u32, ns, name, uid, o.generation, deleting);
            for path in &self.manifest.watches[watch].fields {
                match o.values(path) {
                    Some(values) => values.iter().for_each(|v| b.push(layout_value(v))),
                    None if path.contains("[*]") => {}
                    None => b.push(Value::Absent),
                }
                b.end_slot();
            }
        }
        for (w, spec) in self.manifest.watches.iter().enumerate() {
            for index in &spec.indexes {
                let entries: Vec<(String, u32)> = rows
                    .iter()
                    .enumerate()
                    .filter(|(_, (rw, _))| *rw == w)
                    .flat_map(|(at, (_, o))| {
                        o.strings(&index.field)
                            .into_iter()
                            .map(move |key| (key, at as u32))
                    })
                    .collect();
                let entries = entries.iter().map(|(key, at)| (key.as_str(), *at));
                b.index(w as u32, &index.name, entries);
            }
        }
        Ok(b.finish())
    }
}

/// The values the path `rest` yields in `node`, the path's first segment
/// (`rest` is the tail after it: `.labels`, `.ownerReferences[*].uid`,
/// `['a.b/c']`, or nothing), as the host's projection extracts them: one
/// value for a path without `[*]` (absent when missing), one per element
/// reached for a path with `[*]`. A tail that does not parse yields one
/// absent value.
fn project(node: &serde_json::Value, rest: &str) -> Vec<Val> {
    let Some(steps) = steps(rest) else {
        return vec![Val::Absent];
    };
    let mut nodes = vec![Some(node)];
    for step in &steps {
        nodes = match step {
            None => nodes
                .into_iter()
                .flat_map(|n| {
                    n.and_then(serde_json::Value::as_array)
                        .into_iter()
                        .flatten()
                })
                .map(Some)
                .collect(),
            Some(key) => nodes
                .into_iter()
                .map(|n| n.and_then(|n| n.get(key.as_str())))
                .collect(),
        };
    }
    nodes.into_iter().map(value_of).collect()
}

/// The steps of a path's tail: `Some(key)` for `.key` or `['key']`, `None`
/// for `[*]`; `None` when it does not parse.
fn steps(mut rest: &str) -> Option<Vec<Option<String>>> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix("[*]") {
            out.push(None);
            rest = tail;
        } else if let Some(tail) = rest.strip_prefix("['").or_else(|| rest.strip_prefix("[\"")) {
            let end = tail.find(['\'', '"'])?;
            out.push(Some(tail[..end].to_string()));
            rest = tail[end + 1..].strip_prefix(']')?;
        } else {
            let tail = rest.strip_prefix('.')?;
            let end = tail.find(['.', '[']).unwrap_or(tail.len());
            out.push(Some(tail[..end].to_string()));
            rest = &tail[end..];
        }
    }
    Some(out)
}

/// One projected value, as the host makes it of a JSON node.
fn value_of(node: Option<&serde_json::Value>) -> Val {
    use serde_json::Value as J;
    match node {
        None | Some(J::Null) => Val::Absent,
        Some(J::String(s)) => Val::Str(s.clone()),
        Some(J::Bool(b)) => Val::Bool(*b),
        Some(J::Number(n)) => n
            .as_i64()
            .map_or_else(|| Val::Float(n.as_f64().unwrap_or(f64::NAN)), Val::Int),
        Some(other) => Val::Json(other.to_string()),
    }
}

fn layout_value(v: &Val) -> Value<'_> {
    match v {
        Val::Absent => Value::Absent,
        Val::Str(s) => Value::Str(s),
        Val::Int(n) => Value::Int(*n),
        Val::Float(f) => Value::Float(*f),
        Val::Bool(b) => Value::Bool(*b),
        Val::Json(s) => Value::Json(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GroupVersionKind, Watch};

    #[test]
    fn fixtures_naming_undeclared_watches_or_fields_are_errors() {
        let m = Manifest::new("t").watch(
            Watch::new("pods", GroupVersionKind::core("Pod"))
                .fields(["spec.nodeName"])
                .index("by-node", "spec.nodeName"),
        );
        let ok = World::new(&m).with(Obj::new("pods", "a", "p").set("spec.nodeName", "n1"));
        let data = ok.snapshot().expect("declared names");
        assert_eq!(data.indexes.len(), 1);
        assert_eq!(data.indexes[0].buckets.len(), 1);
        let err = World::new(&m)
            .with(Obj::new("pods", "a", "p").set("spec.nodename", "n1"))
            .snapshot()
            .unwrap_err();
        assert!(err.to_string().contains("\"spec.nodename\""), "{err}");
        let err = World::new(&m)
            .with(Obj::new("pod", "a", "p"))
            .snapshot()
            .unwrap_err();
        assert!(err.to_string().contains("no watch named \"pod\""), "{err}");
    }
}
