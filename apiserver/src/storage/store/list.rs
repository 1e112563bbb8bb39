//! Lists, now or as of a retained resourceVersion: the current objects of
//! a resource merged in key order with the before-images the history ring
//! holds for every key changed since, the way etcd serves every page of a
//! paged list from the first page's revision. It only reads; it never
//! changes the store's state.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use super::record::{ListPage, ObjKey, Record, Stored};
use crate::selector::Attrs;

/// What a list reads: one resource's current objects and the history ring
/// at the store's resourceVersion `rv`.
#[derive(Clone, Copy)]
pub(super) struct Objects<'a> {
    /// The store's latest resourceVersion.
    pub rv: u64,
    /// The resource's current objects, if it has any.
    pub bucket: Option<&'a BTreeMap<ObjKey, Stored>>,
    /// The retained changes, oldest first.
    pub history: &'a VecDeque<Arc<Record>>,
}

/// Before-images of the objects of `resource` changed after `at`: for each
/// key, its state before its first later change (`None`: it did not exist
/// at `at`). The caller guarantees every change after `at` is still in the
/// history ring.
type Before<'a> = BTreeMap<ObjKey, Option<(&'a Arc<[u8]>, &'a Arc<Attrs>)>>;

fn before_images<'a>(history: &'a VecDeque<Arc<Record>>, resource: &str, at: u64) -> Before<'a> {
    let first_later = history.partition_point(|r| r.rv <= at);
    let mut before = Before::new();
    for r in history.range(first_later..) {
        if &*r.resource != resource {
            continue;
        }
        before
            .entry((r.namespace.clone(), r.name.clone()))
            .or_insert_with(|| r.prev_json.as_ref().zip(r.prev_attrs.as_ref()));
    }
    before
}

/// One page of `resource` as of `at` (None: now): the current objects with
/// every key changed after `at` replaced by its before-image, merged in
/// key order.
pub(super) fn list_page(
    objects: Objects<'_>,
    resource: &str,
    namespace: Option<&str>,
    after: Option<&ObjKey>,
    limit: usize,
    at: Option<u64>,
    pred: impl Fn(&Attrs) -> bool,
) -> ListPage {
    let mut page = ListPage {
        rv: at.unwrap_or(objects.rv),
        items: Vec::new(),
        continue_after: None,
    };
    let before = at
        .map(|at| before_images(objects.history, resource, at))
        .unwrap_or_default();
    let start: Bound<ObjKey> = match (after, namespace) {
        (Some(k), _) => Bound::Excluded(k.clone()),
        (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
        (None, None) => Bound::Unbounded,
    };
    let from = start.clone();
    let mut now = objects
        .bucket
        .into_iter()
        .flat_map(move |b| b.range((from.clone(), Bound::Unbounded)))
        .map(|(k, o)| (k, Some((&o.json, &o.attrs))))
        .peekable();
    let mut then = before
        .range((start, Bound::Unbounded))
        .map(|(k, o)| (k, *o))
        .peekable();
    let mut last: Option<&ObjKey> = None;
    loop {
        let next = match (now.peek(), then.peek()) {
            (None, None) => break,
            (Some((n, _)), Some((t, _))) if n == t => {
                now.next();
                then.next()
            }
            (Some((n, _)), Some((t, _))) if t < n => then.next(),
            (Some(_), _) => now.next(),
            (None, Some(_)) => then.next(),
        };
        let Some((key, Some((json, attrs)))) = next else {
            continue;
        };
        if let Some(ns) = namespace {
            if key.0 != ns {
                break;
            }
        }
        if !pred(attrs) {
            continue;
        }
        if limit > 0 && page.items.len() == limit {
            page.continue_after = last.cloned();
            break;
        }
        page.items.push(json.clone());
        last = Some(key);
    }
    page
}
