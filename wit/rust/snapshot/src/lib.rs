//! The wasmctrl snapshot layout, written once.
//!
//! Owns the columnar, interned representation of a snapshot that the WIT
//! `snapshot` record carries (`wit/controller.wit`): [`SnapshotData`] (the
//! record as plain Rust vectors, so the host and the SDK convert to and
//! from their generated bindings by moving them), [`Builder`] (the only
//! code that lays a snapshot out — the host builds every reconcile's
//! snapshot with it, the SDK's native test helpers build fixtures with it)
//! and [`SnapshotView`] (a panic-free reader for guests), and the moves
//! between [`SnapshotData`] and a generated binding's record
//! ([`into_record!`], [`from_record!`]). It never decides
//! *which* objects a snapshot holds, never talks to a cluster, and has no
//! dependencies, so it links into a guest at almost no cost.

mod builder;
mod record;
mod view;

pub use builder::Builder;
pub use view::{SnapshotError, SnapshotView, Value};

/// Value kinds, as documented on the WIT `snapshot` record.
pub mod kind {
    /// Missing or null (payload 0).
    pub const ABSENT: u8 = 0;
    /// A string (payload: string index).
    pub const STR: u8 = 1;
    /// An integer (payload: the s64, as bits).
    pub const INT: u8 = 2;
    /// Another number (payload: the f64, as bits).
    pub const FLOAT: u8 = 3;
    /// A boolean (payload: 0 or 1).
    pub const BOOL: u8 = 4;
    /// An object or list as compact JSON (payload: string index).
    pub const JSON: u8 = 5;
}

/// One declared index, filled in: the WIT `index` record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexData {
    /// Index into the manifest's watches.
    pub watch: u32,
    /// The index's name (`index-spec.name`).
    pub name: String,
    /// `(key string index, object indices in snapshot order)`, sorted by
    /// the key's text.
    pub buckets: Vec<(u32, Vec<u32>)>,
}

/// A snapshot: the WIT `snapshot` record, field for field (see the table of
/// value kinds in [`kind`] and the layout on the record's documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotData {
    /// Every string, concatenated; string 0 is "".
    pub strings: String,
    /// End offset (bytes) of each string in `strings`.
    pub string_ends: Vec<u32>,
    /// Per object: its watch (index into the manifest's watches).
    pub object_watch: Vec<u32>,
    /// Per object: namespace (string index; 0 when cluster-scoped).
    pub object_namespace: Vec<u32>,
    /// Per object: name (string index).
    pub object_name: Vec<u32>,
    /// Per object: `metadata.uid` (string index).
    pub object_uid: Vec<u32>,
    /// Per object: `metadata.generation` (0 when the type has none).
    pub object_generation: Vec<i64>,
    /// Per object: `metadata.deletionTimestamp` (string index; 0 when not
    /// being deleted).
    pub object_deletion_timestamp: Vec<u32>,
    /// Per object: its first slot.
    pub object_first_slot: Vec<u32>,
    /// Per slot: end offset of its values.
    pub slot_ends: Vec<u32>,
    /// Per value: its kind ([`kind`]).
    pub value_kinds: Vec<u8>,
    /// Per value: its payload.
    pub value_data: Vec<u64>,
    /// The declared indexes.
    pub indexes: Vec<IndexData>,
}

impl SnapshotData {
    /// Number of objects.
    pub fn len(&self) -> usize {
        self.object_watch.len()
    }

    /// Whether the snapshot holds no objects.
    pub fn is_empty(&self) -> bool {
        self.object_watch.is_empty()
    }
}

/// Saturating conversion of a length or offset to the layout's `u32`.
fn idx(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
