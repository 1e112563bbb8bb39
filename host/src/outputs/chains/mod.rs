//! Entry-wise writes: an entry-wise aggregate's document (a summary
//! ConfigMap's `data`, one entry per group) written as a merge patch of
//! only the entries that changed, decided without reading the live object.
//! Owns, per such object, its *chain* (the live entries and who owns them
//! as of one resourceVersion) and the entries changed in plans not yet
//! written. It never sends anything itself and never retries.
//!
//! # The chain
//! A chain is learned once from the parsed live object when the
//! actuator's whole-document path skipped or merge-patched it, and carried
//! forward by our own patches, each sent with that resourceVersion as a
//! precondition (so the server refuses it with 409 if anyone else wrote in
//! between). Any change of the object by someone else ends the chain (the
//! outputs handler calls [`Chains::forget`]), and so does a failed patch.
//!
//! # How a patch is decided
//! On the changed entries alone, exactly as
//! [`crate::compare::merge_patch_for`] would decide it on the live object:
//! - set an entry whose value differs;
//! - remove (`null`) an entry this manager alone owns and the plan dropped;
//! - leave another manager's entry;
//! - hand over to the whole-document path when an entry this manager
//!   shares with another is dropped, when the frame (the document without
//!   its entries) changed, when the plan is the aggregate's first, or when
//!   the cache shows a version the chain does not know.
//!
//! # Where
//! Only where the field is known to be a granular map of strings: a core
//! ConfigMap's `data` and `binaryData`, a core Secret's `data`. Elsewhere
//! no chain starts and every write takes the whole-document path.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use serde_json::{Map, Value as Json};

use crate::guest::{EntryWrite, ObjectKey};
use crate::sync::lock;

/// What is known of one object's entries at one resourceVersion.
#[derive(Debug, Clone, PartialEq)]
struct Chain {
    /// The version this knowledge is of.
    rv: String,
    /// The entry field.
    field: String,
    /// The desired document without its entries, as last written.
    frame: Json,
    /// The field's live entries.
    live: BTreeMap<String, String>,
    /// Live entries owned by this manager and no other.
    ours_only: BTreeSet<String>,
    /// Live entries owned by this manager and another.
    shared: BTreeSet<String>,
}

/// Entries changed in plans not yet written.
#[derive(Debug)]
enum Dirty {
    /// These entries (None: dropped).
    Some(BTreeMap<String, Option<String>>),
    /// Any entry may have changed.
    All,
}

/// How the next write of an entry-wise document goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The live object already agrees.
    Noop,
    /// A merge patch of these entries, with `rv` as its precondition.
    Patch {
        /// The version the patch applies to.
        rv: String,
        /// Entry → value, or `null` to remove it.
        entries: Map<String, Json>,
    },
    /// The whole document, decided on the live object.
    Whole,
}

/// Whether `field` of `target`'s kind is a granular map of strings the
/// server merges entry by entry and records ownership of per entry.
fn granular(target: &ObjectKey, field: &str) -> bool {
    matches!(
        (target.gvk.group.as_str(), target.gvk.kind.as_str(), field),
        ("", "ConfigMap", "data" | "binaryData") | ("", "Secret", "data")
    )
}

/// The chains of one guest's entry-wise objects.
#[derive(Debug, Default)]
pub struct Chains {
    chains: Mutex<HashMap<ObjectKey, Chain>>,
    dirty: Mutex<HashMap<ObjectKey, Dirty>>,
}

impl Chains {
    /// Someone else changed (or deleted) `target`, or a write of ours went
    /// wrong: what we knew of it is no longer known.
    pub fn forget(&self, target: &ObjectKey) {
        lock(&self.chains).remove(target);
    }

    /// Whether `target`'s entries are known (its writes need no parsed
    /// live object).
    pub fn holds(&self, target: &ObjectKey) -> bool {
        lock(&self.chains).contains_key(target)
    }

    /// Records the entries `write` changed, until a write of `target`
    /// succeeds.
    pub fn note(&self, target: &ObjectKey, write: &EntryWrite) {
        let mut dirty = lock(&self.dirty);
        let d = dirty
            .entry(target.clone())
            .or_insert_with(|| Dirty::Some(BTreeMap::new()));
        match d {
            _ if write.complete => *d = Dirty::All,
            Dirty::All => {}
            Dirty::Some(m) => m.extend(write.changed.iter().cloned()),
        }
    }

    /// How to write `write` to `target` when the outputs cache holds
    /// `cached_rv` and `awaiting` says whether an echo of ours is still on
    /// its way (the cache may then be behind the chain).
    pub fn decide(
        &self,
        target: &ObjectKey,
        write: &EntryWrite,
        cached_rv: Option<&str>,
        awaiting: bool,
    ) -> Decision {
        let mut chains = lock(&self.chains);
        let Some(chain) = chains.get(target) else {
            return Decision::Whole;
        };
        if !awaiting && cached_rv != Some(chain.rv.as_str()) {
            // A version we did not write, and no echo of ours to come.
            chains.remove(target);
            return Decision::Whole;
        }
        if chain.field != write.field || chain.frame != write.frame {
            return Decision::Whole;
        }
        let dirty = lock(&self.dirty);
        let changed = match dirty.get(target) {
            None => return Decision::Noop,
            Some(Dirty::All) => return Decision::Whole,
            Some(Dirty::Some(m)) => m,
        };
        let mut entries = Map::new();
        for (k, want) in changed {
            let have = chain.live.get(k);
            match want {
                Some(v) if have != Some(v) => {
                    entries.insert(k.clone(), Json::String(v.clone()));
                }
                Some(_) => {}
                None if have.is_none() => {}
                None if chain.ours_only.contains(k) => {
                    entries.insert(k.clone(), Json::Null);
                }
                // Shared: the apply would drop only our claim.
                None if chain.shared.contains(k) => return Decision::Whole,
                // Another manager's entry: the apply leaves it.
                None => {}
            }
        }
        if entries.is_empty() {
            return Decision::Noop;
        }
        Decision::Patch {
            rv: chain.rv.clone(),
            entries,
        }
    }

    /// The patch `entries` of `target` was accepted at `rv`: the chain
    /// moves to `rv`, and the noted changes are written.
    pub fn patched(&self, target: &ObjectKey, rv: &str, entries: &Map<String, Json>) {
        if let Some(chain) = lock(&self.chains).get_mut(target) {
            chain.rv = rv.to_string();
            patch_chain(chain, entries);
        }
        lock(&self.dirty).remove(target);
    }

    /// The noted changes needed no write.
    pub fn settled(&self, target: &ObjectKey) {
        lock(&self.dirty).remove(target);
    }

    /// The whole-document path wrote (or skipped) `write` on `live`: a
    /// chain starts at `rv` from `live` with `merge` (the merge patch that
    /// was sent, if one was) applied; `None` for `live` or `rv` (a full
    /// apply, whose result is not known here) ends it.
    pub fn restart(
        &self,
        target: &ObjectKey,
        write: &EntryWrite,
        manager: &str,
        known: Option<(&Json, &str)>,
        merge: Option<&Json>,
    ) {
        lock(&self.dirty).remove(target);
        let chain = known
            .filter(|_| granular(target, &write.field))
            .and_then(|(live, rv)| start(live, rv, write, manager))
            .map(|mut chain| {
                if let Some(m) = merge
                    .and_then(|m| m.get(&write.field))
                    .and_then(Json::as_object)
                {
                    patch_chain(&mut chain, m);
                }
                chain
            });
        match chain {
            Some(c) => lock(&self.chains).insert(target.clone(), c),
            None => lock(&self.chains).remove(target),
        };
    }
}

/// Our accepted patch of `entries`: values set are ours alone (the server
/// moves a changed field to the manager that changed it), entries removed
/// are gone.
fn patch_chain(chain: &mut Chain, entries: &Map<String, Json>) {
    for (k, v) in entries {
        match v {
            Json::String(s) => {
                chain.live.insert(k.clone(), s.clone());
                chain.shared.remove(k);
                chain.ours_only.insert(k.clone());
            }
            _ => {
                chain.live.remove(k);
                chain.shared.remove(k);
                chain.ours_only.remove(k);
            }
        }
    }
}

/// The chain of `live` at `rv`: its entries and their owners from
/// `managedFields`. None when the field is not a map of strings or nobody's
/// claims are known (no `managedFields`).
fn start(live: &Json, rv: &str, write: &EntryWrite, manager: &str) -> Option<Chain> {
    let field = write.field.as_str();
    let entries = match live.get(field) {
        None | Some(Json::Null) => BTreeMap::new(),
        Some(Json::Object(m)) => m
            .iter()
            .map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect::<Option<_>>()?,
        Some(_) => return None,
    };
    let managed = live
        .pointer("/metadata/managedFields")
        .and_then(Json::as_array)
        .filter(|m| !m.is_empty())?;
    let (mut ours, mut others) = (BTreeSet::new(), BTreeSet::new());
    for e in managed {
        if e.get("subresource").and_then(Json::as_str).is_some() {
            continue;
        }
        let mine = e.get("manager").and_then(Json::as_str) == Some(manager);
        let owned = e
            .pointer("/fieldsV1")
            .and_then(|f| f.get(format!("f:{field}")))
            .and_then(Json::as_object);
        for k in owned.into_iter().flat_map(|o| o.keys()) {
            if let Some(k) = k.strip_prefix("f:") {
                if mine { &mut ours } else { &mut others }.insert(k.to_string());
            }
        }
    }
    let ours_only = entries
        .keys()
        .filter(|k| ours.contains(*k) && !others.contains(*k))
        .cloned()
        .collect();
    let shared = entries
        .keys()
        .filter(|k| ours.contains(*k) && others.contains(*k))
        .cloned()
        .collect();
    Some(Chain {
        rv: rv.to_string(),
        field: field.to_string(),
        frame: write.frame.clone(),
        live: entries,
        ours_only,
        shared,
    })
}

#[cfg(test)]
mod tests;
