//! Moving a snapshot between [`SnapshotData`](crate::SnapshotData) and the
//! WIT `snapshot` record of a generated binding: wasmtime's `bindgen!` on
//! the host, wit-bindgen's `generate!` in the guest SDK. The two bindings
//! are different types with the same fields, so the field list is written
//! once here, as macros that expand against whichever binding the caller
//! names. Every column moves (no copy); the host's tests of
//! `guest::snapshot` take a snapshot through its binding's record and back.
//! It never converts anything else.

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
