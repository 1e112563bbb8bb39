//! Moving a snapshot between [`SnapshotData`](crate::SnapshotData) and the
//! WIT `snapshot` record of a generated binding: wasmtime's `bindgen!` on
//! the host, wit-bindgen's `generate!` in the guest SDK. The two bindings
//! are different types with the same fields, so the field list is written
//! once here, as macros that expand against whichever binding the caller
//! names. Every column moves (no copy). It never converts anything else.

/// The WIT `snapshot` record `$record` from a [`SnapshotData`](crate::SnapshotData)
/// `$data`, moving every column: `into_record!(data, wit::Snapshot,
/// wit::Index, wit::Bucket)` names the binding's three records.
#[macro_export]
macro_rules! into_record {
    ($data:expr, $($record:ident)::+, $($index:ident)::+, $($bucket:ident)::+) => {{
        let s: $crate::SnapshotData = $data;
        $crate::__columns!(s, [$($record)::+], {
            s.indexes
                .into_iter()
                .map(|i| $($index)::+ {
                    watch: i.watch,
                    name: i.name,
                    buckets: i
                        .buckets
                        .into_iter()
                        .map(|(key, objects)| $($bucket)::+ { key, objects })
                        .collect(),
                })
                .collect()
        })
    }};
}

/// A [`SnapshotData`](crate::SnapshotData) from a WIT `snapshot` record
/// `$record` of any binding, moving every column.
#[macro_export]
macro_rules! from_record {
    ($record:expr) => {{
        let s = $record;
        $crate::__columns!(s, [$crate::SnapshotData], {
            s.indexes
                .into_iter()
                .map(|i| $crate::IndexData {
                    watch: i.watch,
                    name: i.name,
                    buckets: i.buckets.into_iter().map(|b| (b.key, b.objects)).collect(),
                })
                .collect()
        })
    }};
}

/// The record's columns, moved from `$s` into a `$to` literal with
/// `$indexes` (not part of the API: used by [`into_record!`] and
/// [`from_record!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __columns {
    ($s:ident, [$($to:tt)+], $indexes:block) => {
        $($to)+ {
            strings: $s.strings,
            string_ends: $s.string_ends,
            object_watch: $s.object_watch,
            object_namespace: $s.object_namespace,
            object_name: $s.object_name,
            object_uid: $s.object_uid,
            object_generation: $s.object_generation,
            object_deletion_timestamp: $s.object_deletion_timestamp,
            object_first_slot: $s.object_first_slot,
            slot_ends: $s.slot_ends,
            value_kinds: $s.value_kinds,
            value_data: $s.value_data,
            indexes: $indexes,
        }
    };
}

#[cfg(test)]
mod tests {
    use crate::{Builder, SnapshotData};

    /// A binding's records, as `bindgen!` and `generate!` both shape them.
    mod wit {
        #[derive(Debug, PartialEq)]
        pub struct Bucket {
            pub key: u32,
            pub objects: Vec<u32>,
        }
        #[derive(Debug, PartialEq)]
        pub struct Index {
            pub watch: u32,
            pub name: String,
            pub buckets: Vec<Bucket>,
        }
        #[derive(Debug, PartialEq)]
        pub struct Snapshot {
            pub strings: String,
            pub string_ends: Vec<u32>,
            pub object_watch: Vec<u32>,
            pub object_namespace: Vec<u32>,
            pub object_name: Vec<u32>,
            pub object_uid: Vec<u32>,
            pub object_generation: Vec<i64>,
            pub object_deletion_timestamp: Vec<u32>,
            pub object_first_slot: Vec<u32>,
            pub slot_ends: Vec<u32>,
            pub value_kinds: Vec<u8>,
            pub value_data: Vec<u64>,
            pub indexes: Vec<Index>,
        }
    }

    #[test]
    fn a_snapshot_survives_the_trip_through_a_record_unchanged() {
        let mut b = Builder::with_capacity(2, 16);
        for (name, team) in [("a", "red"), ("b", "blue")] {
            let (ns, name, uid) = (
                b.shared_string("ns"),
                b.unique_string(name),
                b.unique_string(name),
            );
            b.object(0, ns, name, uid, 1, 0);
            let team = b.shared_string(team);
            b.push_raw(crate::kind::STR, u64::from(team));
            b.end_slot();
        }
        b.index(0, "by-team", [("red", 0), ("blue", 1)].into_iter());
        let data = b.finish();
        assert_eq!(data.indexes[0].buckets.len(), 2);
        let record = into_record!(data.clone(), wit::Snapshot, wit::Index, wit::Bucket);
        assert_eq!(
            record.indexes[0].buckets[0].objects,
            data.indexes[0].buckets[0].1
        );
        let back: SnapshotData = from_record!(record);
        assert_eq!(back, data);
    }
}
