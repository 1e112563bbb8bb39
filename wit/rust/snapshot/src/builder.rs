//! [`Builder`]: the one place a snapshot is laid out.
//!
//! Owns string interning into one blob, the per-object columns, slots and
//! values, and index buckets. It never reorders anything: callers add
//! objects in snapshot order (by watch, then namespace, then name) and each
//! object's slots in its watch's field order.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use crate::{idx, kind, IndexData, SnapshotData, Value};

/// A small, fast, non-cryptographic hasher (the `FxHash` mix): interning
/// keys are addresses and short texts the host produced itself.
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// Lays out a [`SnapshotData`]: add objects in order, each followed by its
/// slots' values, then the indexes; [`Builder::finish`] hands the record
/// over.
///
/// ```
/// use wasmctrl_snapshot::{Builder, SnapshotView, Value};
/// let mut b = Builder::new();
/// let (ns, name, uid) = (b.string("ml"), b.string("train"), b.string("u-1"));
/// b.object(0, ns, name, uid, 3, 0);
/// b.push(Value::Str("node-1"));
/// b.end_slot();
/// let data = b.finish();
/// let view = SnapshotView::new(&data).unwrap();
/// assert_eq!(view.text(0, 0, 0), Some("node-1"));
/// assert_eq!(view.generation(0), 3);
/// ```
pub struct Builder {
    data: SnapshotData,
    by_text: FxMap<u64, u32>,
    by_address: FxMap<(usize, usize), u32>,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// An empty snapshot (string 0, the empty string, already present).
    pub fn new() -> Self {
        Self::with_capacity(0, 0)
    }

    /// An empty snapshot with room for `objects` objects and `values`
    /// values.
    pub fn with_capacity(objects: usize, values: usize) -> Self {
        let data = SnapshotData {
            strings: String::with_capacity(objects * 16),
            string_ends: Vec::with_capacity(objects + 64),
            object_watch: Vec::with_capacity(objects),
            object_namespace: Vec::with_capacity(objects),
            object_name: Vec::with_capacity(objects),
            object_uid: Vec::with_capacity(objects),
            object_generation: Vec::with_capacity(objects),
            object_deletion_timestamp: Vec::with_capacity(objects),
            object_first_slot: Vec::with_capacity(objects),
            slot_ends: Vec::with_capacity(values),
            value_kinds: Vec::with_capacity(values),
            value_data: Vec::with_capacity(values),
            indexes: Vec::new(),
        };
        let mut b = Builder {
            data,
            by_text: FxMap::default(),
            by_address: FxMap::default(),
        };
        b.unique_string("");
        b
    }

    /// Appends `s` without looking for an earlier copy (object names and
    /// uids, which never repeat).
    pub fn unique_string(&mut self, s: &str) -> u32 {
        let id = idx(self.data.string_ends.len());
        self.data.strings.push_str(s);
        self.data.string_ends.push(idx(self.data.strings.len()));
        id
    }

    /// The index of `s`, interned by content: equal texts share one entry.
    pub fn string(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let mut h = Fx::default();
        h.write(s.as_bytes());
        let hash = h.finish();
        if let Some(&id) = self.by_text.get(&hash) {
            if self.text(id) == s {
                return id;
            }
            // A hash collision: the string merely appears twice.
            return self.unique_string(s);
        }
        let id = self.unique_string(s);
        self.by_text.insert(hash, id);
        id
    }

    /// The index of `s`, interned by address: for strings the caller
    /// already shares (the host's cache interns repeated values), hashing a
    /// pointer is far cheaper than hashing text. Equal texts at different
    /// addresses merely appear twice.
    pub fn shared_string(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let key = (s.as_ptr() as usize, s.len());
        if let Some(&id) = self.by_address.get(&key) {
            return id;
        }
        let id = self.unique_string(s);
        self.by_address.insert(key, id);
        id
    }

    fn text(&self, id: u32) -> &str {
        let ends = &self.data.string_ends;
        let i = id as usize;
        let start = if i == 0 { 0 } else { ends[i - 1] as usize };
        &self.data.strings[start..ends[i] as usize]
    }

    /// Starts object number `len()` with its identity (string indices from
    /// the methods above; `deletion_timestamp` 0 when not being deleted).
    /// Its slots follow: values with [`Builder::push`] or
    /// [`Builder::push_raw`], each slot closed by [`Builder::end_slot`].
    /// Returns the object's index.
    pub fn object(
        &mut self,
        watch: u32,
        namespace: u32,
        name: u32,
        uid: u32,
        generation: i64,
        deletion_timestamp: u32,
    ) -> u32 {
        let d = &mut self.data;
        let o = idx(d.object_watch.len());
        d.object_watch.push(watch);
        d.object_namespace.push(namespace);
        d.object_name.push(name);
        d.object_uid.push(uid);
        d.object_generation.push(generation);
        d.object_deletion_timestamp.push(deletion_timestamp);
        d.object_first_slot.push(idx(d.slot_ends.len()));
        o
    }

    /// Appends a value whose strings are interned by content.
    pub fn push(&mut self, v: Value<'_>) {
        let (k, data) = match v {
            Value::Absent => (kind::ABSENT, 0),
            Value::Str(s) => (kind::STR, u64::from(self.string(s))),
            Value::Int(i) => (kind::INT, i as u64),
            Value::Float(x) => (kind::FLOAT, x.to_bits()),
            Value::Bool(b) => (kind::BOOL, u64::from(b)),
            Value::Json(s) => (kind::JSON, u64::from(self.string(s))),
        };
        self.push_raw(k, data);
    }

    /// Appends a value as its kind and payload (string payloads are string
    /// indices the caller interned).
    pub fn push_raw(&mut self, kind: u8, data: u64) {
        self.data.value_kinds.push(kind);
        self.data.value_data.push(data);
    }

    /// Closes the current slot (the values pushed since the previous one).
    pub fn end_slot(&mut self) {
        let end = idx(self.data.value_kinds.len());
        self.data.slot_ends.push(end);
    }

    /// Adds index `name` of `watch` from `(key, object)` pairs in any
    /// order; buckets come out sorted by key, objects in the order given.
    pub fn index<'k>(
        &mut self,
        watch: u32,
        name: &str,
        entries: impl IntoIterator<Item = (&'k str, u32)>,
    ) {
        let mut buckets: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for (key, o) in entries {
            buckets.entry(key).or_default().push(o);
        }
        let buckets = buckets
            .into_iter()
            .map(|(key, objects)| (self.string(key), objects))
            .collect();
        self.data.indexes.push(IndexData {
            watch,
            name: name.to_string(),
            buckets,
        });
    }

    /// Number of objects added so far.
    pub fn len(&self) -> usize {
        self.data.object_watch.len()
    }

    /// Whether no object was added yet.
    pub fn is_empty(&self) -> bool {
        self.data.object_watch.is_empty()
    }

    /// The finished snapshot.
    pub fn finish(self) -> SnapshotData {
        self.data
    }
}
