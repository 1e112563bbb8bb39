//! The object store: one global resourceVersion counter, one sorted map per
//! resource holding each object as serialized JSON plus its selectable
//! attributes, a history ring for watch resumption bounded by changes and
//! by bytes, and a broadcast
//! of every committed change. The store enforces optimistic concurrency
//! (expected resourceVersion) and nothing else: defaulting, validation,
//! authorization and patching happen before a write reaches it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::selector::{extract_attrs, Attrs};

/// `(namespace, name)`; namespace is "" for cluster-scoped objects.
pub type ObjKey = (String, String);

/// One stored object version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// resourceVersion of this version.
    pub rv: u64,
    /// The object serialized as JSON (metadata.resourceVersion included).
    pub json: Arc<[u8]>,
    /// Labels and selectable fields.
    pub attrs: Arc<Attrs>,
}

impl Stored {
    /// Parses the stored JSON.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }
}

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed; the payload is its last state with a new resourceVersion.
    Deleted,
}

impl EventType {
    /// Wire name (`ADDED`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change, as kept in history and broadcast to watchers.
#[derive(Debug, Clone)]
pub struct Record {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Storage key of the resource (`pods`, `leases.coordination.k8s.io`).
    pub resource: Arc<str>,
    /// Namespace of the object ("" for cluster-scoped).
    pub namespace: String,
    /// Name of the object.
    pub name: String,
    /// What happened.
    pub event: EventType,
    /// Object after the change (for deletes: last state).
    pub json: Arc<[u8]>,
    /// Attributes after the change.
    pub attrs: Arc<Attrs>,
    /// Attributes before the change (None for creates), for selector transitions.
    pub prev_attrs: Option<Arc<Attrs>>,
    /// Object before the change (None for creates), so a list can be served
    /// as of any retained resourceVersion.
    pub prev_json: Option<Arc<[u8]>>,
}

impl Record {
    /// Bytes of object JSON this change holds (new and previous state).
    pub fn bytes(&self) -> usize {
        self.json.len() + self.prev_json.as_ref().map_or(0, |p| p.len())
    }
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No object under that key.
    #[error("not found")]
    NotFound,
    /// Create of an existing key.
    #[error("already exists")]
    AlreadyExists,
    /// The expected resourceVersion is not the current one.
    #[error("conflict")]
    Conflict,
    /// The requested version is older than the retained history; carries the oldest usable resourceVersion.
    #[error("too old resource version")]
    TooOld(u64),
    /// The object could not be serialized.
    #[error("serialize: {0}")]
    Serialize(String),
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// resourceVersion the page was read at.
    pub rv: u64,
    /// Matching objects in key order.
    pub items: Vec<Arc<[u8]>>,
    /// Key of the last item when more matching items may follow (for `continue`).
    pub continue_after: Option<ObjKey>,
}

/// What a new watch starts with.
#[derive(Debug)]
pub struct Subscription {
    /// Current objects (only when subscribing without a resourceVersion).
    pub initial: Vec<(ObjKey, Stored)>,
    /// Retained changes after the requested resourceVersion.
    pub replay: Vec<Arc<Record>>,
    /// Changes committed after the subscription.
    pub live: broadcast::Receiver<Arc<Record>>,
    /// resourceVersion the subscription was taken at.
    pub rv: u64,
}

/// Told of every committed change to one resource, under the store's
/// lock (so in commit order, before any reader sees the change): the
/// object's key and its JSON as now stored, `None` once deleted. It must
/// be quick and must never call the store.
pub type Observer = Arc<dyn Fn(&ObjKey, Option<&[u8]>) + Send + Sync>;

/// The observers of each resource (see [`Store::observe`]).
#[derive(Default)]
struct Observers(Vec<(String, Observer)>);

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(resource, _)| resource))
            .finish()
    }
}

#[derive(Debug)]
struct Inner {
    rv: u64,
    buckets: HashMap<String, BTreeMap<ObjKey, Stored>>,
    history: VecDeque<Arc<Record>>,
    history_cap: usize,
    /// Bytes of object JSON held by `history` (see [`Record::bytes`]).
    history_bytes: usize,
    history_bytes_cap: usize,
    /// Changes with rv <= this are gone from history.
    compacted_through: u64,
    observers: Observers,
}

/// The in-memory store shared by all requests.
#[derive(Debug)]
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Record>>,
    /// The decoded form of the last few large objects written, by their
    /// stored JSON (see [`Store::decoded`]).
    recent: Mutex<Vec<(Arc<[u8]>, Value)>>,
}

/// How many decoded objects [`Store::keep_decoded`] keeps.
const RECENT: usize = 2;

/// Smallest stored JSON [`Store::keep_decoded`] keeps the decoded form of:
/// decoding a smaller object costs little.
const RECENT_MIN_BYTES: usize = 64 * 1024;

/// Capacity of the live-event broadcast; a watcher further behind than this is disconnected and resumes from history.
const BROADCAST_CAPACITY: usize = 16_384;

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

fn encode(obj: &Value) -> Result<Arc<[u8]>, StoreError> {
    serde_json::to_vec(obj)
        .map(Arc::from)
        .map_err(|e| StoreError::Serialize(e.to_string()))
}

/// The JSON of a `metadata.resourceVersion` of `rv`.
fn rv_json(rv: u64) -> String {
    format!("\"{rv}\"")
}

/// `obj` (an object whose `metadata` is an object with a
/// `resourceVersion`) encoded as [`encode`] does but without the value of
/// `metadata.resourceVersion`, and where that value goes: the encoding
/// with any resourceVersion is the bytes before, its JSON, the bytes
/// after. `None` for any other `obj`.
fn encode_around_rv(obj: &Value) -> Result<Option<(Vec<u8>, usize)>, StoreError> {
    let Value::Object(root) = obj else {
        return Ok(None);
    };
    let Some(Value::Object(meta)) = root.get("metadata") else {
        return Ok(None);
    };
    if !meta.contains_key("resourceVersion") {
        return Ok(None);
    }
    let write = |out: &mut Vec<u8>, v: &dyn erased::Json| {
        v.write(out)
            .map_err(|e| StoreError::Serialize(e.to_string()))
    };
    let mut out = Vec::new();
    let mut at = 0;
    out.push(b'{');
    for (i, (k, v)) in root.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(&mut out, k)?;
        out.push(b':');
        if k != "metadata" {
            write(&mut out, v)?;
            continue;
        }
        out.push(b'{');
        for (j, (mk, mv)) in meta.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            write(&mut out, mk)?;
            out.push(b':');
            if mk == "resourceVersion" {
                at = out.len();
            } else {
                write(&mut out, mv)?;
            }
        }
        out.push(b'}');
    }
    out.push(b'}');
    Ok(Some((out, at)))
}

/// Keys and values written as `serde_json` writes them.
mod erased {
    pub(super) trait Json {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    }

    impl<T: serde::Serialize> Json for T {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
            serde_json::to_writer(out, self)
        }
    }
}

/// Before-images of the objects of `resource` changed after `at`: for each
/// key, its state before its first later change (`None`: it did not exist
/// at `at`). The caller guarantees every change after `at` is still in the
/// history ring.
type Before<'a> = BTreeMap<ObjKey, Option<(&'a Arc<[u8]>, &'a Arc<Attrs>)>>;

fn before_images<'a>(inner: &'a Inner, resource: &str, at: u64) -> Before<'a> {
    let first_later = inner.history.partition_point(|r| r.rv <= at);
    let mut before = Before::new();
    for r in inner.history.range(first_later..) {
        if &*r.resource != resource {
            continue;
        }
        before
            .entry((r.namespace.clone(), r.name.clone()))
            .or_insert_with(|| r.prev_json.as_ref().zip(r.prev_attrs.as_ref()));
    }
    before
}

/// One page of `resource` as of `at` (None: now): the current objects with
/// every key changed after `at` replaced by its before-image, merged in
/// key order.
fn list_page(
    inner: &Inner,
    resource: &str,
    namespace: Option<&str>,
    after: Option<&ObjKey>,
    limit: usize,
    at: Option<u64>,
    pred: impl Fn(&Attrs) -> bool,
) -> ListPage {
    let mut page = ListPage {
        rv: at.unwrap_or(inner.rv),
        items: Vec::new(),
        continue_after: None,
    };
    let before = at
        .map(|at| before_images(inner, resource, at))
        .unwrap_or_default();
    let start: Bound<ObjKey> = match (after, namespace) {
        (Some(k), _) => Bound::Excluded(k.clone()),
        (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
        (None, None) => Bound::Unbounded,
    };
    let from = start.clone();
    let mut now = inner
        .buckets
        .get(resource)
        .into_iter()
        .flat_map(move |b| b.range((from.clone(), Bound::Unbounded)))
        .map(|(k, o)| (k, Some((&o.json, &o.attrs))))
        .peekable();
    let mut then = before
        .range((start, Bound::Unbounded))
        .map(|(k, o)| (k, *o))
        .peekable();
    let mut last: Option<&ObjKey> = None;
    loop {
        let next = match (now.peek(), then.peek()) {
            (None, None) => break,
            (Some((n, _)), Some((t, _))) if n == t => {
                now.next();
                then.next()
            }
            (Some((n, _)), Some((t, _))) if t < n => then.next(),
            (Some(_), _) => now.next(),
            (None, Some(_)) => then.next(),
        };
        let Some((key, Some((json, attrs)))) = next else {
            continue;
        };
        if let Some(ns) = namespace {
            if key.0 != ns {
                break;
            }
        }
        if !pred(attrs) {
            continue;
        }
        if limit > 0 && page.items.len() == limit {
            page.continue_after = last.cloned();
            break;
        }
        page.items.push(json.clone());
        last = Some(key);
    }
    page
}

impl Store {
    /// Empty store keeping at most `history` changes for watch resumption.
    pub fn new(history: usize) -> Self {
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        Store {
            inner: Mutex::new(Inner {
                rv: 1,
                buckets: HashMap::new(),
                history: VecDeque::new(),
                history_cap: history.max(1),
                history_bytes: 0,
                history_bytes_cap: usize::MAX,
                compacted_through: 0,
                observers: Observers::default(),
            }),
            tx,
            recent: Mutex::new(Vec::new()),
        }
    }

    /// Also bounds the history by the bytes of object JSON it holds: the
    /// oldest changes leave until the rest fit (the newest is always kept).
    #[must_use]
    pub fn with_history_bytes(self, bytes: usize) -> Self {
        self.lock().history_bytes_cap = bytes;
        self
    }

    /// Bytes of object JSON the history ring holds now.
    pub fn history_bytes(&self) -> usize {
        self.lock().history_bytes
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `stored`'s object decoded: taken from the objects
    /// [`Store::keep_decoded`] kept when it is one of them (the same JSON,
    /// not only an equal one), decoded from its JSON otherwise.
    pub fn decoded(&self, stored: &Stored) -> Value {
        if stored.json.len() >= RECENT_MIN_BYTES {
            let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = recent
                .iter()
                .position(|(json, _)| Arc::ptr_eq(json, &stored.json))
            {
                return recent.remove(i).1;
            }
        }
        stored.value()
    }

    /// Keeps `value`, which must be what `json` (a stored object's JSON)
    /// decodes to, for [`Store::decoded`] (only when `json` is large; the
    /// oldest kept one goes).
    pub fn keep_decoded(&self, json: &Arc<[u8]>, value: Value) {
        if json.len() < RECENT_MIN_BYTES {
            return;
        }
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|(kept, _)| !Arc::ptr_eq(kept, json));
        if recent.len() >= RECENT {
            recent.remove(0);
        }
        recent.push((json.clone(), value));
    }

    /// The latest committed resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Oldest resourceVersion a watch may start from.
    pub fn oldest_rv(&self) -> u64 {
        self.lock().compacted_through
    }

    /// Reads one object.
    pub fn get(&self, resource: &str, key: &ObjKey) -> Option<Stored> {
        self.lock().buckets.get(resource)?.get(key).cloned()
    }

    /// Bytes of serialized JSON held for the current objects of a resource.
    pub fn stored_bytes(&self, resource: &str) -> usize {
        self.lock()
            .buckets
            .get(resource)
            .map_or(0, |b| b.values().map(|o| o.json.len()).sum())
    }

    /// Number of objects of a resource.
    pub fn count(&self, resource: &str) -> usize {
        self.lock().buckets.get(resource).map_or(0, BTreeMap::len)
    }

    /// Lists the current objects of `resource` (optionally in one
    /// namespace) after key `after`, keeping those `pred` accepts, at most
    /// `limit` (0 = all).
    pub fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        after: Option<&ObjKey>,
        limit: usize,
        pred: impl Fn(&Attrs) -> bool,
    ) -> ListPage {
        let inner = self.lock();
        list_page(&inner, resource, namespace, after, limit, None, pred)
    }

    /// Like [`Store::list`], but as the objects were at resourceVersion `at`
    /// (the page reports `at`), the way etcd serves every page of a paged
    /// list from the first page's revision. `at` at or above the current
    /// resourceVersion reads the current objects.
    ///
    /// # Errors
    ///
    /// [`StoreError::TooOld`] when changes after `at` have left the history
    /// ring, so the objects as of `at` can no longer be reconstructed.
    pub fn list_at(
        &self,
        resource: &str,
        namespace: Option<&str>,
        after: Option<&ObjKey>,
        limit: usize,
        at: u64,
        pred: impl Fn(&Attrs) -> bool,
    ) -> Result<ListPage, StoreError> {
        let inner = self.lock();
        if at < inner.compacted_through {
            return Err(StoreError::TooOld(inner.compacted_through));
        }
        let at = (at < inner.rv).then_some(at);
        Ok(list_page(
            &inner, resource, namespace, after, limit, at, pred,
        ))
    }

    fn commit(
        &self,
        inner: &mut Inner,
        resource: &str,
        key: &ObjKey,
        event: EventType,
        stored: &Stored,
        prev: Option<Stored>,
    ) {
        let record = Arc::new(Record {
            rv: stored.rv,
            resource: Arc::from(resource),
            namespace: key.0.clone(),
            name: key.1.clone(),
            event,
            json: stored.json.clone(),
            attrs: stored.attrs.clone(),
            prev_attrs: prev.as_ref().map(|p| p.attrs.clone()),
            prev_json: prev.map(|p| p.json),
        });
        let now = (event != EventType::Deleted).then_some(&*stored.json);
        for (_, observer) in inner.observers.0.iter().filter(|(r, _)| r == resource) {
            observer(key, now);
        }
        inner.history_bytes += record.bytes();
        inner.history.push_back(record.clone());
        while inner.history.len() > 1
            && (inner.history.len() > inner.history_cap
                || inner.history_bytes > inner.history_bytes_cap)
        {
            let Some(old) = inner.history.pop_front() else {
                break;
            };
            inner.history_bytes -= old.bytes();
            inner.compacted_through = old.rv;
        }
        // No receivers is fine: nobody watches.
        let _ = self.tx.send(record);
    }

    /// Creates an object, assigning the next resourceVersion.
    pub fn create(
        &self,
        resource: &str,
        key: ObjKey,
        mut obj: Value,
    ) -> Result<Stored, StoreError> {
        let mut inner = self.lock();
        if inner
            .buckets
            .get(resource)
            .is_some_and(|b| b.contains_key(&key))
        {
            return Err(StoreError::AlreadyExists);
        }
        let rv = inner.rv + 1;
        set_rv(&mut obj, rv);
        let stored = Stored {
            rv,
            json: encode(&obj)?,
            attrs: Arc::new(extract_attrs(resource, &obj)),
        };
        inner.rv = rv;
        inner
            .buckets
            .entry(resource.to_string())
            .or_default()
            .insert(key.clone(), stored.clone());
        self.commit(&mut inner, resource, &key, EventType::Added, &stored, None);
        Ok(stored)
    }

    /// Replaces an object if its current resourceVersion is `expected_rv`
    /// (or unconditionally when None). An unchanged object is not rewritten
    /// and keeps its resourceVersion, as the real server does.
    pub fn update(
        &self,
        resource: &str,
        key: &ObjKey,
        expected_rv: Option<u64>,
        obj: Value,
    ) -> Result<Stored, StoreError> {
        self.update_value(resource, key, expected_rv, obj)
            .map(|(stored, _)| stored)
    }

    /// [`Store::update`], also handing back the object as stored (its
    /// resourceVersion set), so the caller need not decode it again.
    pub fn update_value(
        &self,
        resource: &str,
        key: &ObjKey,
        expected_rv: Option<u64>,
        mut obj: Value,
    ) -> Result<(Stored, Value), StoreError> {
        let mut inner = self.lock();
        let next = inner.rv + 1;
        let current = inner
            .buckets
            .get(resource)
            .and_then(|b| b.get(key))
            .ok_or(StoreError::NotFound)?
            .clone();
        if expected_rv.is_some_and(|e| e != current.rv) {
            return Err(StoreError::Conflict);
        }
        set_rv(&mut obj, current.rv);
        let json = match encode_around_rv(&obj)? {
            // one encoding serves both the no-op check and the new version
            Some((rest, at)) => {
                let same = |json: &[u8], rv: &[u8]| {
                    json.len() == rest.len() + rv.len()
                        && json[..at] == rest[..at]
                        && json[at..at + rv.len()] == *rv
                        && json[at + rv.len()..] == rest[at..]
                };
                if same(&current.json, rv_json(current.rv).as_bytes()) {
                    return Ok((current, obj));
                }
                set_rv(&mut obj, next);
                let rv = rv_json(next);
                let mut json = Vec::with_capacity(rest.len() + rv.len());
                json.extend_from_slice(&rest[..at]);
                json.extend_from_slice(rv.as_bytes());
                json.extend_from_slice(&rest[at..]);
                Arc::from(json)
            }
            None => {
                if encode(&obj)? == current.json {
                    return Ok((current, obj));
                }
                set_rv(&mut obj, next);
                encode(&obj)?
            }
        };
        let stored = Stored {
            rv: next,
            json,
            attrs: Arc::new(extract_attrs(resource, &obj)),
        };
        inner.rv = next;
        if let Some(b) = inner.buckets.get_mut(resource) {
            b.insert(key.clone(), stored.clone());
        }
        self.commit(
            &mut inner,
            resource,
            key,
            EventType::Modified,
            &stored,
            Some(current),
        );
        Ok((stored, obj))
    }

    /// Removes an object if its resourceVersion is `expected_rv` (or
    /// unconditionally). The DELETED event and the returned state carry
    /// `final_state` (default: the stored state) with the deletion's new resourceVersion.
    pub fn delete(
        &self,
        resource: &str,
        key: &ObjKey,
        expected_rv: Option<u64>,
        final_state: Option<Value>,
    ) -> Result<Stored, StoreError> {
        let mut inner = self.lock();
        let current = inner
            .buckets
            .get(resource)
            .and_then(|b| b.get(key))
            .ok_or(StoreError::NotFound)?
            .clone();
        if expected_rv.is_some_and(|e| e != current.rv) {
            return Err(StoreError::Conflict);
        }
        let rv = inner.rv + 1;
        let mut obj = final_state.unwrap_or_else(|| current.value());
        set_rv(&mut obj, rv);
        let stored = Stored {
            rv,
            json: encode(&obj)?,
            attrs: Arc::new(extract_attrs(resource, &obj)),
        };
        inner.rv = rv;
        if let Some(b) = inner.buckets.get_mut(resource) {
            b.remove(key);
        }
        self.commit(
            &mut inner,
            resource,
            key,
            EventType::Deleted,
            &stored,
            Some(current),
        );
        Ok(stored)
    }

    /// Keeps `observer` told of every committed change to `resource` from
    /// now on; it is first told of every current object, under the same
    /// lock, so it misses no change and sees none twice.
    pub fn observe(&self, resource: &str, observer: Observer) {
        let mut inner = self.lock();
        for (key, stored) in inner.buckets.get(resource).into_iter().flatten() {
            observer(key, Some(&stored.json));
        }
        inner.observers.0.push((resource.to_string(), observer));
    }

    /// Keys of every object of `resource` in `namespace`.
    pub fn keys_in(&self, resource: &str, namespace: &str) -> Vec<ObjKey> {
        let inner = self.lock();
        inner
            .buckets
            .get(resource)
            .map(|b| {
                b.range((namespace.to_string(), String::new())..)
                    .take_while(|(k, _)| k.0 == namespace)
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Storage keys of every non-empty resource.
    pub fn resources(&self) -> Vec<String> {
        self.lock().buckets.keys().cloned().collect()
    }

    /// Starts a watch of `resource`. With `from = None` the subscription
    /// carries the current objects; with `Some(rv)` it carries the retained
    /// changes after `rv`, or fails with [`StoreError::TooOld`] if they were compacted.
    pub fn subscribe(&self, resource: &str, from: Option<u64>) -> Result<Subscription, StoreError> {
        let inner = self.lock();
        let live = self.tx.subscribe();
        match from {
            None => Ok(Subscription {
                initial: inner
                    .buckets
                    .get(resource)
                    .map(|b| b.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .unwrap_or_default(),
                replay: Vec::new(),
                live,
                rv: inner.rv,
            }),
            Some(rv) => {
                if rv < inner.compacted_through {
                    return Err(StoreError::TooOld(inner.compacted_through));
                }
                let replay = inner
                    .history
                    .iter()
                    .filter(|r| r.rv > rv && &*r.resource == resource)
                    .cloned()
                    .collect();
                Ok(Subscription {
                    initial: Vec::new(),
                    replay,
                    live,
                    rv: inner.rv,
                })
            }
        }
    }

    /// Every change committed from now on, for in-process consumers (the
    /// garbage collector); lagging behind `BROADCAST_CAPACITY` changes
    /// loses some, which the receiver reports.
    pub fn changes(&self) -> broadcast::Receiver<Arc<Record>> {
        self.tx.subscribe()
    }

    /// Receivers of the change broadcast: one per open watch plus in-process
    /// consumers. Each holds every change it has not read yet.
    pub fn change_subscribers(&self) -> usize {
        self.tx.receiver_count()
    }

    /// Forgets all retained history, as an etcd compaction at the current
    /// revision does: watches from any older resourceVersion get 410 Gone.
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.history_bytes = 0;
        inner.compacted_through = inner.rv;
    }

    /// True if a list or continue at `rv` can no longer be served.
    pub fn is_compacted(&self, rv: u64) -> bool {
        rv < self.lock().compacted_through
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(ns: &str, n: &str) -> ObjKey {
        (ns.into(), n.into())
    }

    fn cm(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "d"}, "data": {"a": name}})
    }

    #[test]
    fn the_encoding_around_the_resource_version_is_the_encoding() {
        let objs = [
            json!({"metadata": {"resourceVersion": "1"}}),
            json!({"a": 1, "metadata": {"a\"\\\u{1}é": [1, {"b": null}], "resourceVersion": "x", "z": {}}, "z": "\n"}),
            json!({"metadata": {"name": "n", "resourceVersion": "", "uid": "u"}, "data": {"k": "v", "resourceVersion": "5"}}),
        ];
        for obj in objs {
            let (rest, at) = encode_around_rv(&obj).unwrap().unwrap();
            for rv in [0, 7, 123_456_789] {
                let mut with = obj.clone();
                set_rv(&mut with, rv);
                let mut joined = rest[..at].to_vec();
                joined.extend_from_slice(rv_json(rv).as_bytes());
                joined.extend_from_slice(&rest[at..]);
                assert_eq!(joined, serde_json::to_vec(&with).unwrap(), "{obj}");
            }
        }
        for other in [
            json!([1]),
            json!({"metadata": 1}),
            json!({"metadata": {}}),
            json!({}),
        ] {
            assert!(encode_around_rv(&other).unwrap().is_none(), "{other}");
        }
    }

    #[test]
    fn a_kept_decoded_object_is_only_given_for_its_own_stored_json() {
        let store = Store::new(16);
        let big: serde_json::Map<String, Value> = (0..5_000)
            .map(|i| (format!("node-{i:05}"), json!(i.to_string())))
            .collect();
        let obj = json!({"metadata": {"name": "s", "namespace": "d"}, "data": big});
        let s1 = store.create("configmaps", key("d", "s"), obj).unwrap();
        let v1 = s1.value();
        // a marker shows where a value came from
        let mut marked = v1.clone();
        marked["marker"] = json!(1);
        store.keep_decoded(&s1.json, marked.clone());
        let copy = Stored {
            json: Arc::from(s1.json.to_vec()),
            ..s1.clone()
        };
        assert_eq!(store.decoded(&copy), v1, "equal bytes, other JSON: decoded");
        assert_eq!(store.decoded(&s1), marked, "its own JSON: the kept value");
        assert_eq!(store.decoded(&s1), v1, "taken once");
        // small objects are not kept
        let small = store.create("configmaps", key("d", "t"), cm("t")).unwrap();
        let mut marked = small.value();
        marked["marker"] = json!(1);
        store.keep_decoded(&small.json, marked);
        assert_eq!(store.decoded(&small), small.value());
    }

    #[test]
    fn every_write_takes_the_next_global_resource_version() {
        let s = Store::new(10);
        let a = s.create("configmaps", key("d", "a"), cm("a")).unwrap();
        let b = s.create("secrets", key("d", "b"), cm("b")).unwrap();
        assert_eq!(b.rv, a.rv + 1);
        assert_eq!(a.value()["metadata"]["resourceVersion"], a.rv.to_string());
        let mut changed = cm("a");
        changed["data"]["a"] = json!("z");
        assert_eq!(
            s.update(
                "configmaps",
                &key("d", "a"),
                Some(a.rv - 1),
                changed.clone()
            ),
            Err(StoreError::Conflict)
        );
        let c = s
            .update("configmaps", &key("d", "a"), Some(a.rv), changed)
            .unwrap();
        assert_eq!(c.rv, b.rv + 1);
    }

    #[test]
    fn no_op_update_keeps_resource_version() {
        let s = Store::new(10);
        let a = s.create("configmaps", key("d", "a"), cm("a")).unwrap();
        let same = s
            .update("configmaps", &key("d", "a"), None, cm("a"))
            .unwrap();
        assert_eq!(same.rv, a.rv);
        assert_eq!(s.current_rv(), a.rv);
    }

    #[test]
    fn list_pages_resume_after_last_key_within_namespace() {
        let s = Store::new(10);
        for n in ["a", "b", "c"] {
            s.create("configmaps", key("d", n), cm(n)).unwrap();
        }
        s.create("configmaps", key("e", "x"), cm("x")).unwrap();
        let p1 = s.list("configmaps", Some("d"), None, 2, |_| true);
        assert_eq!(p1.items.len(), 2);
        let after = p1.continue_after.unwrap();
        assert_eq!(after, key("d", "b"));
        let p2 = s.list("configmaps", Some("d"), Some(&after), 2, |_| true);
        assert_eq!(p2.items.len(), 1);
        assert!(p2.continue_after.is_none());
        assert_eq!(s.list("configmaps", None, None, 0, |_| true).items.len(), 4);
    }

    #[test]
    fn list_at_serves_later_pages_as_of_the_first_pages_version() {
        let s = Store::new(10);
        for n in ["a", "b", "c"] {
            s.create("configmaps", key("d", n), cm(n)).unwrap();
        }
        let first = s.list("configmaps", Some("d"), None, 2, |_| true);
        let after = first.continue_after.unwrap();
        let original_c = s.get("configmaps", &key("d", "c")).unwrap().json;
        // After the first page: a new key past the cursor, a change then a
        // delete of the unread key, and a delete before the cursor.
        s.create("configmaps", key("d", "ba"), cm("ba")).unwrap();
        let mut changed = cm("c");
        changed["data"]["a"] = json!("z");
        s.update("configmaps", &key("d", "c"), None, changed)
            .unwrap();
        s.delete("configmaps", &key("d", "c"), None, None).unwrap();
        s.delete("configmaps", &key("d", "a"), None, None).unwrap();
        let second = s
            .list_at("configmaps", Some("d"), Some(&after), 2, first.rv, |_| true)
            .unwrap();
        assert_eq!(second.rv, first.rv);
        assert_eq!(second.items, vec![original_c]);
        assert!(second.continue_after.is_none());
        // The latest state is what a fresh list sees.
        let now = s.list("configmaps", Some("d"), Some(&after), 2, |_| true);
        assert_eq!(now.items.len(), 1);
        assert_eq!(
            serde_json::from_slice::<Value>(&now.items[0]).unwrap()["metadata"]["name"],
            "ba"
        );
        // Once the changes after the snapshot leave the ring, it is gone.
        s.compact();
        assert!(matches!(
            s.list_at("configmaps", Some("d"), Some(&after), 2, first.rv, |_| true),
            Err(StoreError::TooOld(_))
        ));
    }

    #[test]
    fn history_is_bounded_by_bytes_and_keeps_the_newest_change() {
        let big = |name: &str, fill: usize| json!({"metadata": {"name": name, "namespace": "d"}, "data": {"a": "x".repeat(fill)}});
        let s = Store::new(1000).with_history_bytes(10_000);
        let start = s.current_rv();
        for i in 0..20 {
            s.create("configmaps", key("d", &format!("c{i}")), big("c", 1_000))
                .unwrap();
            assert!(s.history_bytes() <= 10_000, "{}", s.history_bytes());
        }
        // The oldest changes left: a watch from before them gets 410.
        assert!(matches!(
            s.subscribe("configmaps", Some(start)),
            Err(StoreError::TooOld(_))
        ));
        let kept = s.subscribe("configmaps", Some(s.oldest_rv())).unwrap();
        assert!(kept.replay.len() >= 8 && kept.replay.len() < 20);
        // One change over the bound on its own is still kept.
        s.create("configmaps", key("d", "huge"), big("huge", 50_000))
            .unwrap();
        assert_eq!(
            s.subscribe("configmaps", Some(s.current_rv() - 1))
                .unwrap()
                .replay
                .len(),
            1
        );
        s.compact();
        assert_eq!(s.history_bytes(), 0);
    }

    #[test]
    fn an_observer_sees_the_current_objects_then_every_change_in_commit_order() {
        let s = Store::new(10);
        s.create("configmaps", key("d", "old"), cm("old")).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        s.observe(
            "configmaps",
            Arc::new(move |k: &ObjKey, json: Option<&[u8]>| {
                log.lock().unwrap().push((k.1.clone(), json.is_some()));
            }),
        );
        s.create("configmaps", key("d", "new"), cm("new")).unwrap();
        s.create("secrets", key("d", "other"), cm("other")).unwrap();
        s.delete("configmaps", &key("d", "old"), None, None)
            .unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            [
                ("old".to_string(), true),
                ("new".to_string(), true),
                ("old".to_string(), false)
            ]
        );
    }

    #[test]
    fn history_ring_evicts_and_reports_too_old() {
        let s = Store::new(2);
        let start = s.current_rv();
        for n in ["a", "b", "c"] {
            s.create("configmaps", key("d", n), cm(n)).unwrap();
        }
        assert!(matches!(
            s.subscribe("configmaps", Some(start)),
            Err(StoreError::TooOld(_))
        ));
        let sub = s.subscribe("configmaps", Some(start + 1)).unwrap();
        assert_eq!(sub.replay.len(), 2);
        s.compact();
        assert!(s.subscribe("configmaps", Some(start + 2)).is_err());
        assert!(s.subscribe("configmaps", Some(s.current_rv())).is_ok());
    }
}
