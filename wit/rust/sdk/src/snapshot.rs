//! Snapshot access by name: a [`Schema`] built from the guest's own manifest
//! resolves watch and field names into [`WatchSchema`]s and [`Field`]
//! handles once (an unknown name is a [`SchemaError`], reported at
//! `describe`), and a [`Snapshot`] hands out [`Object`]s whose accessors take
//! those handles. The layout itself — validation, string table, slots,
//! value kinds — is `wasmctrl-snapshot`'s [`SnapshotView`], the same code
//! the host builds snapshots with; this module adds names, lookups by
//! namespace and name, and typed values. Nothing here panics on a malformed
//! snapshot: out-of-range indices read as absent.

pub use wasmctrl_snapshot::{kind, SnapshotData, SnapshotView, Value};

use crate::{wit, GroupVersionKind, Manifest, ObjectRef, Request};

/// A name the guest's code reads that its manifest does not declare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// Two watches share a name, so names cannot identify them.
    #[error("two watches are named {0:?}")]
    DuplicateWatch(String),
    /// No watch has this name.
    #[error("no watch named {name:?} (watches: {known})")]
    UnknownWatch {
        /// The name asked for.
        name: String,
        /// The manifest's watch names.
        known: String,
    },
    /// The watch does not project this field path.
    #[error("watch {watch:?} does not project field {field:?} (its fields: {known})")]
    UnknownField {
        /// The watch's name.
        watch: String,
        /// The path asked for.
        field: String,
        /// The watch's `fields`.
        known: String,
    },
    /// The watch declares no index of this name.
    #[error("watch {watch:?} has no index named {index:?} (its indexes: {known})")]
    UnknownIndex {
        /// The watch's name.
        watch: String,
        /// The index asked for.
        index: String,
        /// The watch's index names.
        known: String,
    },
    /// The watch's label selector does not parse.
    #[error("watch {watch:?} has an invalid label selector: {problem}")]
    BadSelector {
        /// The watch's name.
        watch: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl From<SchemaError> for String {
    fn from(e: SchemaError) -> String {
        e.to_string()
    }
}

/// The names a manifest declares, for resolving them into handles.
#[derive(Debug, Clone)]
pub struct Schema {
    watches: Vec<wit::Watch>,
}

fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.map(|n| format!("{n:?}")).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

impl Schema {
    /// The schema of `manifest`; watch names must be unique.
    pub fn new(manifest: &Manifest) -> Result<Self, SchemaError> {
        for (i, w) in manifest.watches.iter().enumerate() {
            if manifest.watches[..i].iter().any(|o| o.name == w.name) {
                return Err(SchemaError::DuplicateWatch(w.name.clone()));
            }
        }
        Ok(Schema {
            watches: manifest.watches.clone(),
        })
    }

    /// The watch named `name`.
    pub fn watch(&self, name: &str) -> Result<WatchSchema<'_>, SchemaError> {
        let index = self
            .watches
            .iter()
            .position(|w| w.name == name)
            .ok_or_else(|| SchemaError::UnknownWatch {
                name: name.to_string(),
                known: list(self.watches.iter().map(|w| w.name.as_str())),
            })?;
        Ok(WatchSchema {
            watch: &self.watches[index],
            id: WatchId(index as u32),
        })
    }

    fn by_id(&self, id: u32) -> Option<&wit::Watch> {
        self.watches.get(id as usize)
    }

    /// The watch `id` names.
    fn watch_at(&self, id: WatchId) -> Result<WatchSchema<'_>, SchemaError> {
        match self.by_id(id.0) {
            Some(watch) => Ok(WatchSchema { watch, id }),
            None => Err(SchemaError::UnknownWatch {
                name: format!("#{}", id.0),
                known: list(self.watches.iter().map(|w| w.name.as_str())),
            }),
        }
    }
}

/// Identifies a watch of the manifest (its position).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchId(u32);

impl WatchId {
    /// Its position in the manifest's `watches`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One watch of a [`Schema`].
#[derive(Clone, Copy, Debug)]
pub struct WatchSchema<'a> {
    watch: &'a wit::Watch,
    id: WatchId,
}

impl<'a> WatchSchema<'a> {
    /// Its handle, for [`Snapshot::objects`] and friends.
    pub fn id(&self) -> WatchId {
        self.id
    }

    /// Its name.
    pub fn name(&self) -> &'a str {
        &self.watch.name
    }

    /// The type it watches.
    pub fn gvk(&self) -> &'a GroupVersionKind {
        &self.watch.gvk
    }

    /// The finalizer the host holds on its objects, if it declares one.
    pub fn finalizer(&self) -> Option<&'a str> {
        self.watch.finalizer.as_deref()
    }

    /// The field `path`, exactly as written in the watch's `fields`.
    pub fn field(&self, path: &str) -> Result<Field, SchemaError> {
        let slot = self
            .watch
            .fields
            .iter()
            .position(|f| f == path)
            .ok_or_else(|| SchemaError::UnknownField {
                watch: self.watch.name.clone(),
                field: path.to_string(),
                known: list(self.watch.fields.iter().map(String::as_str)),
            })?;
        Ok(Field {
            watch: self.id,
            slot: slot as u32,
        })
    }

    /// Checks that the watch declares the index `name` (for
    /// [`Snapshot::indexed`]).
    pub fn index(&self, name: &str) -> Result<IndexName, SchemaError> {
        if self.watch.indexes.iter().any(|i| i.name == name) {
            Ok(IndexName {
                watch: self.id,
                name: name.to_string(),
            })
        } else {
            Err(SchemaError::UnknownIndex {
                watch: self.watch.name.clone(),
                index: name.to_string(),
                known: list(self.watch.indexes.iter().map(|i| i.name.as_str())),
            })
        }
    }
}

/// A projected field of one watch, resolved: read it with [`Object`]'s
/// accessors. Copy it freely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    watch: WatchId,
    slot: u32,
}

/// A declared index of one watch, resolved.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IndexName {
    watch: WatchId,
    name: String,
}

/// The contract's snapshot record as the layout crate's data, moving the
/// columns (no copy).
pub fn from_wit(s: wit::Snapshot) -> SnapshotData {
    wasmctrl_snapshot::from_record!(s)
}

/// A validated snapshot, read through a [`Schema`].
pub struct Snapshot<'a> {
    schema: &'a Schema,
    view: SnapshotView<'a>,
}

impl<'a> Snapshot<'a> {
    /// Validates `data`'s tables (see [`SnapshotView::new`]).
    pub fn new(schema: &'a Schema, data: &'a SnapshotData) -> Result<Self, String> {
        let view = SnapshotView::new(data).map_err(|e| e.to_string())?;
        Ok(Snapshot { schema, view })
    }

    /// The schema it is read through.
    pub fn schema(&self) -> &'a Schema {
        self.schema
    }

    /// Number of objects, over all watches.
    pub fn len(&self) -> usize {
        self.view.len()
    }

    /// Whether it holds no objects.
    pub fn is_empty(&self) -> bool {
        self.view.is_empty()
    }

    fn object(&self, index: usize) -> Object<'_> {
        Object { snap: self, index }
    }

    /// The objects of `watch`'s range (objects are sorted by watch, then
    /// namespace, then name).
    fn range(&self, watch: WatchId) -> std::ops::Range<usize> {
        let column = &self.view.data().object_watch;
        let start = column.partition_point(|&w| w < watch.0);
        let end = column.partition_point(|&w| w <= watch.0);
        start..end.max(start)
    }

    /// Every object, of every watch, in snapshot order (watch, then
    /// namespace, then name).
    pub fn all(&self) -> impl Iterator<Item = Object<'_>> + '_ {
        (0..self.len()).map(|o| self.object(o))
    }

    /// Every object of `watch`, in namespace/name order.
    pub fn objects(&self, watch: WatchId) -> impl Iterator<Item = Object<'_>> + '_ {
        self.range(watch).map(|o| self.object(o))
    }

    /// The objects of `watch` in `namespace`.
    pub fn in_namespace<'s>(
        &'s self,
        watch: WatchId,
        namespace: &'s str,
    ) -> impl Iterator<Item = Object<'s>> + 's {
        let r = self.range(watch);
        let slice = |pred: &dyn Fn(usize) -> bool| {
            r.start + partition_point(r.len(), |i| pred(r.start + i))
        };
        let start = slice(&|o| self.view.namespace(o) < namespace);
        let end = slice(&|o| self.view.namespace(o) <= namespace);
        (start..end.max(start)).map(|o| self.object(o))
    }

    /// The object `namespace/name` of `watch` ("" namespace for
    /// cluster-scoped objects).
    pub fn get(&self, watch: WatchId, namespace: &str, name: &str) -> Option<Object<'_>> {
        self.view
            .find(watch.0, namespace, name)
            .map(|o| self.object(o))
    }

    /// The primary object a per-object request is about: the key
    /// (`namespace/name`, or `name`) in the request's watch. `None` for an
    /// aggregate request or an object that is gone (a request naming a
    /// watch the manifest lacks never reaches the guest: the SDK rejects
    /// it first).
    pub fn primary(&self, request: &Request) -> Option<Object<'_>> {
        let watch = self.schema.watch(request.watch.as_deref()?).ok()?.id();
        let (namespace, name) = split_key(&request.key);
        self.get(watch, namespace, name)
    }

    /// The objects of `index`'s bucket `key`.
    pub fn indexed(&self, index: &IndexName, key: &str) -> Vec<Object<'_>> {
        self.view
            .lookup(index.watch.0, &index.name, key)
            .iter()
            .map(|&o| self.object(o as usize))
            .filter(|o| o.index < self.view.len())
            .collect()
    }
}

/// `namespace/name` split at the first `/`; a key without one is a
/// cluster-scoped name.
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

/// The first `i` in `0..n` for which `pred` is false, assuming `pred` is
/// true then false over the range (binary search over object indices, for
/// orderings that are not a column of the data).
fn partition_point(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// One object of a [`Snapshot`].
#[derive(Clone, Copy)]
pub struct Object<'a> {
    snap: &'a Snapshot<'a>,
    index: usize,
}

impl<'a> Object<'a> {
    /// Its index in the snapshot (what an aggregator's contributions name).
    pub fn position(&self) -> usize {
        self.index
    }

    /// Its watch.
    pub fn watch(&self) -> WatchId {
        WatchId(self.snap.view.watch(self.index))
    }

    /// `metadata.namespace` ("" when cluster-scoped).
    pub fn namespace(&self) -> &'a str {
        self.snap.view.namespace(self.index)
    }

    /// `metadata.name`.
    pub fn name(&self) -> &'a str {
        self.snap.view.name(self.index)
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &'a str {
        self.snap.view.uid(self.index)
    }

    /// `metadata.generation` (0 when the type has none).
    pub fn generation(&self) -> i64 {
        self.snap.view.generation(self.index)
    }

    /// `metadata.deletionTimestamp`, when it is being deleted.
    pub fn deletion_timestamp(&self) -> Option<&'a str> {
        self.snap.view.deletion_timestamp(self.index)
    }

    /// Whether it is being deleted (finalizers are holding it).
    pub fn is_deleting(&self) -> bool {
        self.deletion_timestamp().is_some()
    }

    /// A reference to it, with its watch's apiVersion and kind.
    pub fn object_ref(&self) -> ObjectRef {
        match self.snap.schema.by_id(self.watch().0) {
            Some(w) => w.gvk.object(self.namespace(), self.name()),
            None => ObjectRef {
                api_version: String::new(),
                kind: String::new(),
                namespace: (!self.namespace().is_empty()).then(|| self.namespace().to_string()),
                name: self.name().to_string(),
            },
        }
    }

    /// The field `path` of its watch, resolved as
    /// [`WatchSchema::field`] does: an error when the watch does not
    /// project it. For a reader that learns only here which watch an
    /// object comes from; resolve once in `Guest::fields` where you can.
    pub fn field(&self, path: &str) -> Result<Field, SchemaError> {
        self.snap.schema.watch_at(self.watch())?.field(path)
    }

    /// The slot of `field`, if it is a field of this object's watch.
    fn slot(&self, field: Field) -> Option<usize> {
        (field.watch == self.watch()).then_some(field.slot as usize)
    }

    /// How many values `field` yielded (one per list element for `[*]`
    /// paths; 1 otherwise). 0 for a field of another watch.
    pub fn len(&self, field: Field) -> usize {
        self.slot(field)
            .map_or(0, |s| self.snap.view.field_len(self.index, s))
    }

    /// Value `i` of `field`, typed.
    pub fn value_at(&self, field: Field, i: usize) -> Value<'a> {
        match self.slot(field) {
            Some(slot) => self.snap.view.value(self.index, slot, i),
            None => Value::Absent,
        }
    }

    /// Value `i` of `field` as text: strings as they are, numbers rendered,
    /// booleans as `true`/`false`, objects and lists as JSON; `None` when
    /// absent.
    pub fn text_at(&self, field: Field, i: usize) -> Option<&'a str> {
        let slot = self.slot(field)?;
        // Strings (nearly every value) straight from the typed read; only
        // numbers need the view's rendered copies.
        match self.snap.view.value(self.index, slot, i) {
            Value::Str(s) | Value::Json(s) => Some(s),
            Value::Absent => None,
            _ => self.snap.view.text(self.index, slot, i),
        }
    }

    /// The first value of `field` as text.
    pub fn text(&self, field: Field) -> Option<&'a str> {
        self.text_at(field, 0)
    }

    /// Every value of `field` as text, in order.
    pub fn texts(&self, field: Field) -> impl Iterator<Item = Option<&'a str>> + '_ {
        (0..self.len(field)).map(move |i| self.text_at(field, i))
    }

    /// Value `i` of `field` as an integer (also a float with no fraction,
    /// or a string holding a decimal integer).
    pub fn int_at(&self, field: Field, i: usize) -> Option<i64> {
        match self.value_at(field, i) {
            Value::Int(n) => Some(n),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(f as i64),
            Value::Str(s) => s.parse().ok(),
            _ => None,
        }
    }

    /// The first value of `field` as an integer.
    pub fn int(&self, field: Field) -> Option<i64> {
        self.int_at(field, 0)
    }

    /// The first value of `field` as a boolean.
    pub fn bool(&self, field: Field) -> Option<bool> {
        match self.value_at(field, 0) {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Obj, World};
    use crate::Watch;

    fn manifest() -> Manifest {
        Manifest::new("t")
            .watch(
                Watch::new(
                    "quotas",
                    GroupVersionKind::new("example.com", "v1", "GpuQuota"),
                )
                .fields(["spec.limit", "spec.tags[*]", "spec.on"])
                .index("by-team", "metadata.labels.team")
                .per_object(),
            )
            .watch(
                Watch::new("pods", GroupVersionKind::core("Pod"))
                    .fields(["spec.nodeName"])
                    .same_namespace("quotas"),
            )
    }

    fn world() -> SnapshotData {
        World::new(&manifest())
            .with(Obj::new("pods", "b", "p2").set("spec.nodeName", "n2"))
            .with(Obj::new("pods", "a", "p1").set("spec.nodeName", "n1"))
            .with(Obj::new("pods", "b", "p1"))
            .with(
                Obj::new("quotas", "a", "q")
                    .generation(4)
                    .set("spec.limit", 3)
                    .set_list("spec.tags[*]", ["x", "y"])
                    .set("spec.on", true)
                    .set("metadata.labels.team", "ml"),
            )
            .with(Obj::new("quotas", "b", "q").deleting("2026-12-01T00:00:00Z"))
            .snapshot()
            .expect("names are declared")
    }

    #[test]
    fn unknown_names_are_errors_that_name_what_exists() {
        let schema = Schema::new(&manifest()).expect("unique names");
        let err = schema.watch("pod").unwrap_err().to_string();
        assert!(err.contains("\"pod\"") && err.contains("\"pods\""), "{err}");
        let quotas = schema.watch("quotas").expect("declared");
        let err = quotas.field("spec.limits").unwrap_err().to_string();
        assert!(
            err.contains("\"spec.limits\"") && err.contains("\"spec.limit\""),
            "{err}"
        );
        assert!(quotas.index("by-owner").is_err());
        assert!(quotas.index("by-team").is_ok());
        let twice = manifest().watch(Watch::new("pods", GroupVersionKind::core("Pod")));
        assert_eq!(
            Schema::new(&twice).unwrap_err(),
            SchemaError::DuplicateWatch("pods".into())
        );
    }

    #[test]
    fn objects_are_found_by_watch_namespace_and_name() {
        let schema = Schema::new(&manifest()).expect("unique names");
        let data = world();
        let snap = Snapshot::new(&schema, &data).expect("valid");
        let (quotas, pods) = (
            schema.watch("quotas").expect("declared").id(),
            schema.watch("pods").expect("declared").id(),
        );
        let names = |it: &mut dyn Iterator<Item = Object<'_>>| {
            it.map(|o| format!("{}/{}", o.namespace(), o.name()))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&mut snap.objects(pods)), ["a/p1", "b/p1", "b/p2"]);
        assert_eq!(names(&mut snap.in_namespace(pods, "b")), ["b/p1", "b/p2"]);
        assert!(snap.in_namespace(pods, "c").next().is_none());
        assert_eq!(snap.get(pods, "b", "p2").map(|o| o.name()), Some("p2"));
        assert!(snap.get(quotas, "b", "p2").is_none());
        let q = snap
            .primary(&Request::object("quotas", "a/q"))
            .expect("present");
        assert_eq!((q.generation(), q.is_deleting()), (4, false));
        assert_eq!(q.uid(), "uid-a-q");
        assert_eq!(q.object_ref().kind, "GpuQuota");
        assert!(snap.primary(&Request::aggregate("a/q")).is_none());
        assert!(snap.primary(&Request::object("nope", "a/q")).is_none());
        let deleting = snap.get(quotas, "b", "q").expect("present");
        assert_eq!(deleting.deletion_timestamp(), Some("2026-12-01T00:00:00Z"));
        let team = schema
            .watch("quotas")
            .and_then(|w| w.index("by-team"))
            .expect("declared");
        assert_eq!(names(&mut snap.indexed(&team, "ml").into_iter()), ["a/q"]);
        assert!(snap.indexed(&team, "web").is_empty());
    }

    #[test]
    fn values_read_typed_and_as_text_and_other_watches_fields_read_absent() {
        let schema = Schema::new(&manifest()).expect("unique names");
        let data = world();
        let snap = Snapshot::new(&schema, &data).expect("valid");
        let quotas = schema.watch("quotas").expect("declared");
        let [limit, tags, on] =
            ["spec.limit", "spec.tags[*]", "spec.on"].map(|f| quotas.field(f).expect("declared"));
        let q = snap.get(quotas.id(), "a", "q").expect("present");
        assert_eq!((q.int(limit), q.text(limit)), (Some(3), Some("3")));
        assert_eq!(q.texts(tags).collect::<Vec<_>>(), [Some("x"), Some("y")]);
        assert_eq!(
            (q.len(tags), q.bool(on), q.text(on)),
            (2, Some(true), Some("true"))
        );
        assert_eq!(q.value_at(tags, 2), Value::Absent);
        let empty = snap.get(quotas.id(), "b", "q").expect("present");
        assert_eq!(
            (empty.len(tags), empty.len(limit), empty.int(limit)),
            (0, 1, None)
        );
        let node = schema
            .watch("pods")
            .and_then(|w| w.field("spec.nodeName"))
            .expect("declared");
        assert_eq!(q.text(node), None, "a pod field on a quota");
    }

    #[test]
    fn malformed_tables_are_errors_and_bad_indices_read_as_absent() {
        let schema = Schema::new(&manifest()).expect("unique names");
        let mut data = world();
        data.object_uid.pop();
        assert!(Snapshot::new(&schema, &data).is_err());
        let mut data = world();
        data.object_first_slot
            .iter_mut()
            .for_each(|s| *s = u32::MAX);
        data.object_name[0] = u32::MAX;
        let snap = Snapshot::new(&schema, &data).expect("tables line up");
        let quotas = schema.watch("quotas").expect("declared");
        let limit = quotas.field("spec.limit").expect("declared");
        let all: Vec<_> = snap.objects(quotas.id()).collect();
        assert!(all.iter().all(|o| o.int(limit).is_none()));
        assert!(snap.objects(WatchId(7)).next().is_none());
    }
}
