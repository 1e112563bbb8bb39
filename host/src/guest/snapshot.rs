//! Building the snapshot a guest reconciles over from cached objects.
//!
//! Owns feeding [`ProjectedObject`]s (each watch's objects, in the order
//! the caller chose) through the shared layout code
//! ([`wasmctrl_snapshot::Builder`]: one string blob, columns of integers,
//! index buckets) and moving the result into and out of the WIT record
//! without copying its vectors. It never reads from the cluster, never
//! decides which objects a snapshot holds (the controller does: all of
//! them for an aggregate key, the related ones for a per-object key) and
//! never reorders objects (callers pass them sorted).

use wasmctrl_snapshot::{kind, Builder, SnapshotData};

use super::bindings::wasmctrl::controller::types as wit;
use super::manifest::GuestManifest;
use crate::projection::{Projected, ProjectedObject};

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

fn idx(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Builds the snapshot for `manifest` from each watch's objects (indexed
/// like `manifest.watches`).
pub fn build(manifest: &GuestManifest, per_watch: &[WatchView<'_>]) -> SnapshotData {
    let total: usize = per_watch.iter().map(|w| w.objects.len()).sum();
    let mut b = Builder::with_capacity(total, total * 8);
    let mut base = 0u32;
    for (w, (spec, view)) in manifest.watches.iter().zip(per_watch).enumerate() {
        let w = idx(w);
        let visible = spec.projection.visible();
        let objs = &view.objects;
        let at = |i: usize| view.positions.get(i).copied().unwrap_or(usize::MAX);
        for obj in objs {
            // The cache interns namespaces and repeated values: key them by
            // address. Names and uids never repeat.
            let ns = b.shared_string(&obj.namespace);
            let name = b.unique_string(&obj.name);
            let uid = b.unique_string(&obj.uid);
            let deleting = obj
                .deletion_timestamp
                .as_deref()
                .map_or(0, |t| b.shared_string(t));
            b.object(w, ns, name, uid, obj.generation, deleting);
            for f in 0..visible {
                for v in obj.field(at(f)) {
                    match v {
                        Projected::Absent => b.push_raw(kind::ABSENT, 0),
                        Projected::Str(s) => {
                            let id = b.shared_string(s);
                            b.push_raw(kind::STR, u64::from(id));
                        }
                        Projected::Int(i) => b.push_raw(kind::INT, *i as u64),
                        Projected::Float(x) => b.push_raw(kind::FLOAT, x.to_bits()),
                        Projected::Bool(x) => b.push_raw(kind::BOOL, u64::from(*x)),
                        Projected::Json(s) => {
                            let id = b.shared_string(s);
                            b.push_raw(kind::JSON, u64::from(id));
                        }
                    }
                }
                b.end_slot();
            }
        }
        for (i, name) in spec.indexes.iter().enumerate() {
            let entries = objs.iter().enumerate().flat_map(|(n, obj)| {
                obj.field(at(visible + i))
                    .iter()
                    .filter_map(Projected::as_str)
                    .map(move |key| (key, base + idx(n)))
            });
            b.index(w, name, entries);
        }
        base += idx(objs.len());
    }
    b.finish()
}

/// The WIT record, moving every vector (no copy of the bulk columns).
pub fn to_wit(s: SnapshotData) -> wit::Snapshot {
    wasmctrl_snapshot::into_record!(s, wit::Snapshot, wit::Index, wit::Bucket)
}

/// Back from the WIT record (after the call), moving every vector.
pub fn from_wit(s: wit::Snapshot) -> SnapshotData {
    wasmctrl_snapshot::from_record!(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_survives_the_trip_through_the_wit_record_unchanged() {
        let mut b = Builder::with_capacity(2, 2);
        for (name, team) in [("a", "red"), ("b", "blue")] {
            let ns = b.string("ns");
            let (name, uid) = (b.unique_string(name), b.unique_string(name));
            b.object(0, ns, name, uid, 1, 0);
            let team = b.string(team);
            b.push_raw(kind::STR, u64::from(team));
            b.end_slot();
        }
        b.index(0, "by-team", [("red", 0), ("blue", 1)]);
        let data = b.finish();
        let record = to_wit(data.clone());
        assert_eq!(record.indexes[0].buckets.len(), 2);
        assert_eq!(record.object_name, data.object_name);
        assert_eq!(from_wit(record), data);
    }
}
