//! [`SnapshotView`]: read-only, allocation-light, panic-free access to a
//! [`SnapshotData`].
//!
//! Owns decoding the layout: string offsets, per-object columns, slot
//! ranges, value kinds, and index lookups. [`SnapshotView::new`] checks the
//! tables once; afterwards every accessor treats an out-of-range index as
//! absent. It never allocates per access and never panics on a malformed
//! snapshot.

use std::collections::BTreeMap;

use crate::{kind, IndexData, SnapshotData};

/// One projected value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// Missing or null.
    Absent,
    /// A string.
    Str(&'a str),
    /// An integer.
    Int(i64),
    /// Another number.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// An object or list, as compact JSON text.
    Json(&'a str),
}

/// Why a snapshot's tables are unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotError(pub String);

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed snapshot: {}", self.0)
    }
}

impl std::error::Error for SnapshotError {}

/// A checked view over a [`SnapshotData`].
#[derive(Debug)]
pub struct SnapshotView<'a> {
    s: &'a SnapshotData,
    /// Numbers rendered as text, by value index, so numeric fields (an
    /// unquoted quantity, say) read like strings through [`SnapshotView::text`].
    numbers: BTreeMap<usize, String>,
}

impl<'a> SnapshotView<'a> {
    /// Validates the tables: monotonic string offsets on UTF-8 boundaries,
    /// per-object columns of equal length, one payload per value kind.
    pub fn new(s: &'a SnapshotData) -> Result<Self, SnapshotError> {
        let blob = s.strings.as_str();
        let mut prev = 0usize;
        for (i, &end) in s.string_ends.iter().enumerate() {
            let end = end as usize;
            if end < prev || end > blob.len() || !blob.is_char_boundary(end) {
                return Err(SnapshotError(format!(
                    "string {i} ends at {end} (previous end {prev}, blob {} bytes)",
                    blob.len()
                )));
            }
            prev = end;
        }
        let n = s.object_watch.len();
        let columns = [
            s.object_namespace.len(),
            s.object_name.len(),
            s.object_uid.len(),
            s.object_generation.len(),
            s.object_deletion_timestamp.len(),
            s.object_first_slot.len(),
        ];
        if columns.iter().any(|&c| c != n) {
            return Err(SnapshotError("object columns differ in length".into()));
        }
        if s.value_kinds.len() != s.value_data.len() {
            return Err(SnapshotError(
                "value kinds and payloads differ in length".into(),
            ));
        }
        let mut numbers = BTreeMap::new();
        for (i, (&k, &d)) in s.value_kinds.iter().zip(&s.value_data).enumerate() {
            match k {
                kind::INT => {
                    numbers.insert(i, (d as i64).to_string());
                }
                kind::FLOAT => {
                    numbers.insert(i, f64::from_bits(d).to_string());
                }
                _ => {}
            }
        }
        Ok(SnapshotView { s, numbers })
    }

    /// The underlying record.
    pub fn data(&self) -> &'a SnapshotData {
        self.s
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.s.object_watch.len()
    }

    /// Whether the snapshot holds no objects.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// String `i` of the table; "" when out of range.
    pub fn string(&self, i: u32) -> &'a str {
        let ends = &self.s.string_ends;
        let i = i as usize;
        let Some(&end) = ends.get(i) else { return "" };
        let start = match i.checked_sub(1) {
            Some(p) => ends.get(p).copied().unwrap_or(0) as usize,
            None => 0,
        };
        self.s.strings.get(start..end as usize).unwrap_or("")
    }

    fn column_str(&self, column: &[u32], o: usize) -> &'a str {
        column.get(o).map_or("", |&i| self.string(i))
    }

    /// The watch (index into the manifest's watches) of object `o`;
    /// `u32::MAX` when out of range.
    pub fn watch(&self, o: usize) -> u32 {
        self.s.object_watch.get(o).copied().unwrap_or(u32::MAX)
    }

    /// Namespace of object `o` ("" when cluster-scoped).
    pub fn namespace(&self, o: usize) -> &'a str {
        self.column_str(&self.s.object_namespace, o)
    }

    /// Name of object `o`.
    pub fn name(&self, o: usize) -> &'a str {
        self.column_str(&self.s.object_name, o)
    }

    /// `metadata.uid` of object `o`.
    pub fn uid(&self, o: usize) -> &'a str {
        self.column_str(&self.s.object_uid, o)
    }

    /// `metadata.generation` of object `o` (0 when the type has none).
    pub fn generation(&self, o: usize) -> i64 {
        self.s.object_generation.get(o).copied().unwrap_or(0)
    }

    /// `metadata.deletionTimestamp` of object `o`, when it is being deleted.
    pub fn deletion_timestamp(&self, o: usize) -> Option<&'a str> {
        Some(self.column_str(&self.s.object_deletion_timestamp, o)).filter(|t| !t.is_empty())
    }

    /// The objects of watch `w`, in snapshot order.
    pub fn objects_of(&self, w: u32) -> impl Iterator<Item = usize> + 'a {
        let column = &self.s.object_watch;
        (0..column.len()).filter(move |&o| column.get(o) == Some(&w))
    }

    /// The object of watch `w` named `namespace`/`name`, if present
    /// (objects are sorted by watch, namespace, name: a binary search).
    pub fn find(&self, w: u32, namespace: &str, name: &str) -> Option<usize> {
        let n = self.len();
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let here = (self.watch(mid), self.namespace(mid), self.name(mid));
            if here < (w, namespace, name) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < n && (self.watch(lo), self.namespace(lo), self.name(lo)) == (w, namespace, name))
            .then_some(lo)
    }

    /// Value indices of field `field` of object `o`.
    fn range(&self, o: usize, field: usize) -> std::ops::Range<usize> {
        let Some(slot) = self
            .s
            .object_first_slot
            .get(o)
            .and_then(|&first| (first as usize).checked_add(field))
        else {
            return 0..0;
        };
        let ends = &self.s.slot_ends;
        let Some(&end) = ends.get(slot) else {
            return 0..0;
        };
        let start = match slot.checked_sub(1) {
            Some(p) => ends.get(p).copied().unwrap_or(0) as usize,
            None => 0,
        };
        let end = end as usize;
        if start > end || end > self.s.value_kinds.len() {
            return 0..0;
        }
        start..end
    }

    /// How many values field `field` of object `o` yielded.
    pub fn field_len(&self, o: usize, field: usize) -> usize {
        self.range(o, field).len()
    }

    /// Value `i` of field `field` of object `o` (absent when out of range).
    pub fn value(&self, o: usize, field: usize, i: usize) -> Value<'a> {
        let r = self.range(o, field);
        let Some(at) = r.start.checked_add(i).filter(|&at| at < r.end) else {
            return Value::Absent;
        };
        let (Some(&k), Some(&d)) = (self.s.value_kinds.get(at), self.s.value_data.get(at)) else {
            return Value::Absent;
        };
        let string = |d: u64| self.string(u32::try_from(d).unwrap_or(u32::MAX));
        match k {
            kind::STR => Value::Str(string(d)),
            kind::JSON => Value::Json(string(d)),
            kind::INT => Value::Int(d as i64),
            kind::FLOAT => Value::Float(f64::from_bits(d)),
            kind::BOOL => Value::Bool(d != 0),
            _ => Value::Absent,
        }
    }

    /// Value `i` of field `field` of object `o` as text: strings as they
    /// are, numbers rendered, booleans as `true`/`false`, objects and lists
    /// as JSON; `None` when absent.
    pub fn text(&self, o: usize, field: usize, i: usize) -> Option<&str> {
        let r = self.range(o, field);
        let at = r.start.checked_add(i).filter(|&at| at < r.end)?;
        match self.value(o, field, i) {
            Value::Str(s) | Value::Json(s) => Some(s),
            Value::Int(_) | Value::Float(_) => self.numbers.get(&at).map(String::as_str),
            Value::Bool(b) => Some(if b { "true" } else { "false" }),
            Value::Absent => None,
        }
    }

    /// The first value of a field, as text.
    pub fn first(&self, o: usize, field: usize) -> Option<&str> {
        self.text(o, field, 0)
    }

    /// Index `name` of watch `w`, if the snapshot carries it.
    pub fn index(&self, w: u32, name: &str) -> Option<&'a IndexData> {
        self.s
            .indexes
            .iter()
            .find(|i| i.watch == w && i.name == name)
    }

    /// The objects under `key` in index `name` of watch `w` (empty when the
    /// index or key is unknown).
    pub fn lookup(&self, w: u32, name: &str, key: &str) -> &'a [u32] {
        let Some(index) = self.index(w, name) else {
            return &[];
        };
        match index
            .buckets
            .binary_search_by(|(k, _)| self.string(*k).cmp(key))
        {
            Ok(at) => index.buckets.get(at).map_or(&[], |(_, o)| o.as_slice()),
            Err(_) => &[],
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Builder;

    fn two_pods() -> SnapshotData {
        let mut b = Builder::new();
        for (name, node, gpus) in [("a", "n1", 2), ("b", "n2", 1)] {
            let (ns, n, uid) = (b.string("ml"), b.unique_string(name), b.unique_string("u"));
            let o = b.object(0, ns, n, uid, 1, 0);
            b.push(Value::Str(node));
            b.end_slot();
            b.push(Value::Int(gpus));
            b.push(Value::Absent);
            b.end_slot();
            assert_eq!(o as usize + 1, b.len());
        }
        b.index(0, "node", [("n2", 1), ("n1", 0)]);
        b.finish()
    }

    #[test]
    fn reads_back_what_the_builder_laid_out() {
        let data = two_pods();
        let v = SnapshotView::new(&data).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!((v.namespace(1), v.name(1), v.uid(1)), ("ml", "b", "u"));
        assert_eq!(v.generation(0), 1);
        assert_eq!(v.deletion_timestamp(0), None);
        assert_eq!(v.first(0, 0), Some("n1"));
        assert_eq!(v.text(1, 1, 0), Some("1"));
        assert_eq!(v.value(1, 1, 1), Value::Absent);
        assert_eq!(v.field_len(0, 1), 2);
        assert_eq!(v.find(0, "ml", "b"), Some(1));
        assert_eq!(v.find(0, "ml", "c"), None);
        assert_eq!(v.lookup(0, "node", "n2"), &[1]);
        assert_eq!(v.lookup(0, "node", "n9"), &[] as &[u32]);
        assert_eq!(v.objects_of(0).count(), 2);
        assert_eq!(data.strings.matches("ml").count(), 1, "interned once");
    }

    #[test]
    fn out_of_range_reads_are_absent_not_panics() {
        let data = two_pods();
        let v = SnapshotView::new(&data).unwrap();
        assert_eq!(v.name(9), "");
        assert_eq!(v.watch(9), u32::MAX);
        assert_eq!(v.text(0, 7, 0), None);
        assert_eq!(v.text(0, 0, 3), None);
        assert_eq!(v.string(999), "");
    }

    #[test]
    fn malformed_tables_are_an_error() {
        let mut data = two_pods();
        data.object_uid.pop();
        assert!(SnapshotView::new(&data).is_err());
        let mut data = two_pods();
        data.string_ends[1] = 999;
        assert!(SnapshotView::new(&data).is_err());
        let mut data = two_pods();
        data.value_data.pop();
        assert!(SnapshotView::new(&data).is_err());
    }
}
