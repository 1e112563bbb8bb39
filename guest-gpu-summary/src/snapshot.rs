//! Read-only, allocation-light access to a wasmctrl snapshot.
//!
//! Owns decoding of the interned, columnar snapshot the host sends (string
//! blob + offsets, per-object columns, slot ends, value kinds and payloads;
//! the layout is documented on the WIT `snapshot` record). It never panics
//! on a malformed snapshot: [`SnapshotView::new`] checks the tables once,
//! and every accessor treats an out-of-range index as "absent".

use std::collections::BTreeMap;

use crate::Snapshot;

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

/// A checked view over a [`Snapshot`].
pub struct SnapshotView<'a> {
    s: &'a Snapshot,
    objects: usize,
    /// Numbers rendered as text, by value index, so numeric fields (e.g. an
    /// unquoted quantity in a raw manifest) read like strings.
    numbers: BTreeMap<usize, String>,
}

impl<'a> SnapshotView<'a> {
    /// Validates the tables (monotonic string offsets on UTF-8 boundaries,
    /// per-object columns of equal length, one payload per value kind).
    pub fn new(s: &'a Snapshot) -> Result<Self, String> {
        let blob = s.strings.as_str();
        let mut prev = 0usize;
        for (i, &end) in s.string_ends.iter().enumerate() {
            let end = end as usize;
            if end < prev || end > blob.len() || !blob.is_char_boundary(end) {
                return Err(format!(
                    "malformed snapshot: string {i} ends at {end} (previous end {prev}, blob {} bytes)",
                    blob.len()
                ));
            }
            prev = end;
        }
        let objects = s.object_watch.len();
        if s.object_namespace.len() != objects
            || s.object_name.len() != objects
            || s.object_first_slot.len() != objects
        {
            return Err("malformed snapshot: object columns differ in length".to_string());
        }
        if s.value_kinds.len() != s.value_data.len() {
            return Err(
                "malformed snapshot: value kinds and payloads differ in length".to_string(),
            );
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
        Ok(SnapshotView {
            s,
            objects,
            numbers,
        })
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects
    }

    /// Whether the snapshot holds no objects.
    pub fn is_empty(&self) -> bool {
        self.objects == 0
    }

    /// String `i` of the table; "" when out of range.
    pub fn string(&self, i: u32) -> &'a str {
        let ends = &self.s.string_ends;
        let i = i as usize;
        let Some(&end) = ends.get(i) else { return "" };
        let start = if i == 0 { 0 } else { ends[i - 1] as usize };
        self.s.strings.get(start..end as usize).unwrap_or("")
    }

    /// The watch (index into the manifest's watches) of object `o`.
    pub fn watch(&self, o: usize) -> u32 {
        self.s.object_watch.get(o).copied().unwrap_or(u32::MAX)
    }

    /// Namespace of object `o`.
    pub fn namespace(&self, o: usize) -> &'a str {
        self.s
            .object_namespace
            .get(o)
            .map_or("", |&i| self.string(i))
    }

    /// Name of object `o`.
    pub fn name(&self, o: usize) -> &'a str {
        self.s.object_name.get(o).map_or("", |&i| self.string(i))
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
        let start = if slot == 0 {
            0
        } else {
            ends[slot - 1] as usize
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

    /// Value `i` of field `field` of object `o` as text: strings as they
    /// are, numbers rendered, booleans as `true`/`false`, objects and lists
    /// as JSON; `None` when absent.
    pub fn text(&self, o: usize, field: usize, i: usize) -> Option<&str> {
        let r = self.range(o, field);
        let at = r.start.checked_add(i).filter(|&at| at < r.end)?;
        let data = *self.s.value_data.get(at)?;
        match *self.s.value_kinds.get(at)? {
            kind::STR | kind::JSON => Some(self.string(u32::try_from(data).unwrap_or(u32::MAX))),
            kind::INT | kind::FLOAT => self.numbers.get(&at).map(String::as_str),
            kind::BOOL => Some(if data != 0 { "true" } else { "false" }),
            _ => None,
        }
    }

    /// The first value of a field, as text.
    pub fn first(&self, o: usize, field: usize) -> Option<&str> {
        self.text(o, field, 0)
    }
}
