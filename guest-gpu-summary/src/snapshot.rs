//! Read-only, allocation-light access to a wasmctrl snapshot.
//!
//! Owns decoding of the interned, columnar snapshot the host sends (string
//! blob + offsets, slots, values). It never panics on a malformed snapshot:
//! [`SnapshotView::new`] checks the string table once, and every accessor
//! treats an out-of-range index as "absent".

use std::collections::BTreeMap;

use crate::{Object, Snapshot, Value};

/// A checked view over a [`Snapshot`].
pub struct SnapshotView<'a> {
    snapshot: &'a Snapshot,
    /// Numbers rendered as text, by absolute value index, so numeric fields
    /// (e.g. an unquoted quantity in a raw manifest) read like strings.
    numbers: BTreeMap<usize, String>,
}

impl<'a> SnapshotView<'a> {
    /// Validates the string table (monotonic offsets on UTF-8 boundaries).
    pub fn new(snapshot: &'a Snapshot) -> Result<Self, String> {
        let blob = snapshot.strings.as_str();
        let mut prev = 0usize;
        for (i, &end) in snapshot.string_ends.iter().enumerate() {
            let end = end as usize;
            if end < prev || end > blob.len() || !blob.is_char_boundary(end) {
                return Err(format!(
                    "malformed snapshot: string {i} ends at {end} (previous end {prev}, blob {} bytes)",
                    blob.len()
                ));
            }
            prev = end;
        }
        let mut numbers = BTreeMap::new();
        for (i, v) in snapshot.values.iter().enumerate() {
            match v {
                Value::Int(n) => {
                    numbers.insert(i, n.to_string());
                }
                Value::Float(f) => {
                    numbers.insert(i, f.to_string());
                }
                _ => {}
            }
        }
        Ok(SnapshotView { snapshot, numbers })
    }

    /// All objects.
    pub fn objects(&self) -> &'a [Object] {
        &self.snapshot.objects
    }

    /// String `i` of the table; "" when out of range.
    pub fn string(&self, i: u32) -> &'a str {
        let ends = &self.snapshot.string_ends;
        let i = i as usize;
        let Some(&end) = ends.get(i) else { return "" };
        let start = if i == 0 { 0 } else { ends[i - 1] as usize };
        self.snapshot.strings.get(start..end as usize).unwrap_or("")
    }

    /// Absolute value indices of field `field` of `obj`.
    fn range(&self, obj: &Object, field: usize) -> std::ops::Range<usize> {
        let Some(span) = (obj.slots as usize)
            .checked_add(field)
            .and_then(|i| self.snapshot.slots.get(i))
        else {
            return 0..0;
        };
        let start = span.start as usize;
        let end = start.saturating_add(span.len as usize);
        if end > self.snapshot.values.len() {
            return 0..0;
        }
        start..end
    }

    /// How many values field `field` of `obj` yielded.
    pub fn len(&self, obj: &Object, field: usize) -> usize {
        self.range(obj, field).len()
    }

    /// Value `i` of field `field` of `obj` as text: strings as they are,
    /// numbers rendered, booleans as `true`/`false`; `None` when absent.
    pub fn text(&self, obj: &Object, field: usize, i: usize) -> Option<&str> {
        let r = self.range(obj, field);
        let at = r.start.checked_add(i).filter(|&at| at < r.end)?;
        match self.snapshot.values.get(at)? {
            Value::Absent => None,
            Value::Str(s) | Value::Json(s) => Some(self.string(*s)),
            Value::Int(_) | Value::Float(_) => self.numbers.get(&at).map(String::as_str),
            Value::Boolean(true) => Some("true"),
            Value::Boolean(false) => Some("false"),
        }
    }

    /// The first value of a field, as text.
    pub fn first(&self, obj: &Object, field: usize) -> Option<&str> {
        self.text(obj, field, 0)
    }
}
