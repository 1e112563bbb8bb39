//! Building the interned, columnar snapshot a guest reconciles over.
//!
//! Owns the translation from cached [`ProjectedObject`]s to the WIT
//! `snapshot` record: one string blob with every distinct string once,
//! objects and values as plain integers, indexes as buckets. It never reads
//! from the cluster and never reorders objects (callers pass them sorted).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::bindings::wasmctrl::controller::types as wit;
use super::manifest::GuestManifest;
use crate::projection::{Projected, ProjectedObject};

/// Accumulates strings into one blob. Strings are keyed by address: the
/// cache interns repeated values (phases, quantities, node names), so one
/// address per distinct value is the common case, and hashing a pointer is
/// far cheaper than hashing text. Two equal strings at different addresses
/// merely appear twice in the blob.
#[derive(Default)]
struct Strings {
    blob: String,
    ends: Vec<u32>,
    ids: FxHashMap<(usize, usize), u32>,
}

impl Strings {
    fn with_capacity(strings: usize) -> Self {
        let mut s = Strings {
            blob: String::with_capacity(strings * 16),
            ends: Vec::with_capacity(strings),
            ids: FxHashMap::with_capacity_and_hasher(strings, Default::default()),
        };
        s.id("");
        s
    }

    fn id(&mut self, s: &str) -> u32 {
        let key = (s.as_ptr() as usize, s.len());
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = u32::try_from(self.ends.len()).unwrap_or(u32::MAX);
        self.blob.push_str(s);
        self.ends
            .push(u32::try_from(self.blob.len()).unwrap_or(u32::MAX));
        self.ids.insert(key, id);
        id
    }

    /// Appends a string known to be unique (object names), skipping the
    /// lookup that could never hit.
    fn push_unique(&mut self, s: &str) -> u32 {
        let id = u32::try_from(self.ends.len()).unwrap_or(u32::MAX);
        self.blob.push_str(s);
        self.ends
            .push(u32::try_from(self.blob.len()).unwrap_or(u32::MAX));
        id
    }
}

/// One watch's objects as the snapshot builder reads them.
pub struct WatchView<'a> {
    /// The objects, sorted by namespace, then name.
    pub objects: Vec<&'a ProjectedObject>,
    /// Where each of the guest's paths (visible fields, then index fields)
    /// sits in the cached objects, which may hold a shared, wider projection.
    pub positions: Vec<usize>,
}

impl<'a> WatchView<'a> {
    /// Objects projected with exactly the guest's own paths.
    pub fn identity(objects: Vec<&'a ProjectedObject>, paths: usize) -> Self {
        WatchView {
            objects,
            positions: (0..paths).collect(),
        }
    }
}

/// Value kinds, as documented on the WIT `snapshot` record.
pub mod kind {
    /// Missing or null.
    pub const ABSENT: u8 = 0;
    /// A string (payload: string index).
    pub const STR: u8 = 1;
    /// An integer (payload: s64 bits).
    pub const INT: u8 = 2;
    /// Another number (payload: f64 bits).
    pub const FLOAT: u8 = 3;
    /// A boolean (payload: 0 or 1).
    pub const BOOL: u8 = 4;
    /// An object or list as JSON text (payload: string index).
    pub const JSON: u8 = 5;
}

fn idx(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Builds the snapshot for `manifest` from each watch's objects (indexed
/// like `manifest.watches`).
pub fn build(manifest: &GuestManifest, per_watch: &[WatchView<'_>]) -> wit::Snapshot {
    let total: usize = per_watch.iter().map(|w| w.objects.len()).sum();
    let mut strings = Strings::with_capacity(total + 1024);
    let mut object_watch = Vec::with_capacity(total);
    let mut object_namespace = Vec::with_capacity(total);
    let mut object_name = Vec::with_capacity(total);
    let mut object_first_slot = Vec::with_capacity(total);
    let mut slot_ends = Vec::with_capacity(total * 8);
    let mut value_kinds = Vec::with_capacity(total * 8);
    let mut value_data = Vec::with_capacity(total * 8);
    let mut indexes = Vec::new();
    let mut base = 0u32;
    for (w, (spec, view)) in manifest.watches.iter().zip(per_watch).enumerate() {
        let w = idx(w);
        let visible = spec.projection.visible();
        let objs = &view.objects;
        let at = |i: usize| view.positions.get(i).copied().unwrap_or(usize::MAX);
        for obj in objs {
            object_watch.push(w);
            object_namespace.push(strings.id(&obj.namespace));
            object_name.push(strings.push_unique(&obj.name));
            object_first_slot.push(idx(slot_ends.len()));
            for f in 0..visible {
                for v in obj.field(at(f)) {
                    let (k, d) = match v {
                        Projected::Absent => (kind::ABSENT, 0),
                        Projected::Str(s) => (kind::STR, u64::from(strings.id(s))),
                        Projected::Int(i) => (kind::INT, *i as u64),
                        Projected::Float(x) => (kind::FLOAT, x.to_bits()),
                        Projected::Bool(b) => (kind::BOOL, u64::from(*b)),
                        Projected::Json(s) => (kind::JSON, u64::from(strings.id(s))),
                    };
                    value_kinds.push(k);
                    value_data.push(d);
                }
                slot_ends.push(idx(value_kinds.len()));
            }
        }
        for (i, name) in spec.indexes.iter().enumerate() {
            let mut buckets: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
            for (n, obj) in objs.iter().enumerate() {
                for v in obj.field(at(visible + i)) {
                    if let Some(key) = v.as_str() {
                        buckets.entry(key).or_default().push(base + idx(n));
                    }
                }
            }
            indexes.push(wit::Index {
                watch: w,
                name: name.clone(),
                buckets: buckets
                    .into_iter()
                    .map(|(key, objects)| wit::Bucket {
                        key: strings.id(key),
                        objects,
                    })
                    .collect(),
            });
        }
        base += idx(objs.len());
    }
    wit::Snapshot {
        strings: strings.blob,
        string_ends: strings.ends,
        object_watch,
        object_namespace,
        object_name,
        object_first_slot,
        slot_ends,
        value_kinds,
        value_data,
        indexes,
    }
}
