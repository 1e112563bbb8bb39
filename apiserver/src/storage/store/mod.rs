//! The object store: one global resourceVersion counter, one sorted map per
//! resource holding each object as serialized JSON plus its selectable
//! attributes, a history ring for watch resumption bounded by changes and
//! by bytes, and a broadcast
//! of every committed change. The store enforces optimistic concurrency
//! (expected resourceVersion) and nothing else: defaulting, validation,
//! authorization and patching happen before a write reaches it.
//!
//! # Layout
//! - this file: [`Store`], its locked state, writes, watches and observers.
//! - `record`: the keys, versions, changes, pages and errors it hands out.
//! - `encode`: an object's stored JSON, split around its resourceVersion.
//! - `list`: lists now and as of a retained resourceVersion.
//! - `decoded`: the decoded form of the last large objects written.

mod decoded;
mod encode;
mod list;
mod record;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::selector::{extract_attrs, Attrs};
use decoded::Decoded;
use encode::{encode, encode_around_rv, rv_json, set_rv};
use list::{list_page, Objects};
pub use record::{EventType, ListPage, ObjKey, Observer, Record, StoreError, Stored, Subscription};

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

impl Inner {
    /// What a list of `resource` reads.
    fn objects(&self, resource: &str) -> Objects<'_> {
        Objects {
            rv: self.rv,
            bucket: self.buckets.get(resource),
            history: &self.history,
        }
    }

    /// The current version of `resource`'s `key`, if its resourceVersion
    /// is `expected_rv` (any, when None).
    fn current(
        &self,
        resource: &str,
        key: &ObjKey,
        expected_rv: Option<u64>,
    ) -> Result<Stored, StoreError> {
        let current = self
            .buckets
            .get(resource)
            .and_then(|b| b.get(key))
            .ok_or(StoreError::NotFound)?
            .clone();
        if expected_rv.is_some_and(|e| e != current.rv) {
            return Err(StoreError::Conflict);
        }
        Ok(current)
    }
}

/// A new version of `resource`'s object `obj` at `rv` (its resourceVersion
/// already set): its JSON and its selectable attributes.
fn version(resource: &str, rv: u64, obj: &Value) -> Result<Stored, StoreError> {
    Ok(Stored {
        rv,
        json: encode(obj)?,
        attrs: Arc::new(extract_attrs(resource, obj)),
    })
}

/// The in-memory store shared by all requests.
#[derive(Debug)]
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Record>>,
    /// The decoded form of the last few large objects written, by their
    /// stored JSON (see [`Store::decoded`]).
    recent: Decoded,
}

/// Capacity of the live-event broadcast; a watcher further behind than this is disconnected and resumes from history.
const BROADCAST_CAPACITY: usize = 16_384;

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
            recent: Decoded::default(),
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
        self.recent.take(stored)
    }

    /// Keeps `value`, which must be what `json` (a stored object's JSON)
    /// decodes to, for [`Store::decoded`] (only when `json` is large; the
    /// oldest kept one goes).
    pub fn keep_decoded(&self, json: &Arc<[u8]>, value: Value) {
        self.recent.keep(json, value);
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
        list_page(
            inner.objects(resource),
            resource,
            namespace,
            after,
            limit,
            None,
            pred,
        )
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
            inner.objects(resource),
            resource,
            namespace,
            after,
            limit,
            at,
            pred,
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
        let stored = version(resource, rv, &obj)?;
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
        let current = inner.current(resource, key, expected_rv)?;
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
        let current = inner.current(resource, key, expected_rv)?;
        let rv = inner.rv + 1;
        let mut obj = final_state.unwrap_or_else(|| current.value());
        set_rv(&mut obj, rv);
        let stored = version(resource, rv, &obj)?;
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
