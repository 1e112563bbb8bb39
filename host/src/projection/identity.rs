//! An object's identity as a projection keeps it: the metadata fields
//! every [`ProjectedObject`] holds whatever the guest projects (name,
//! namespace, uid, resourceVersion, generation, deletionTimestamp,
//! finalizers, the controller owner reference), read part by part from
//! parsed JSON or set as a decoder reaches them. It never reads the
//! projected fields.

use std::sync::Arc;

use serde_json::Value as Json;

use super::interner::Interner;
use super::owner::OwnerRef;

/// One identity field, under `metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Name,
    Namespace,
    Uid,
    ResourceVersion,
    Generation,
    DeletionTimestamp,
    Finalizers,
    OwnerReferences,
}

impl Part {
    /// Every part.
    pub(super) const ALL: [Part; 8] = [
        Part::Name,
        Part::Namespace,
        Part::Uid,
        Part::ResourceVersion,
        Part::Generation,
        Part::DeletionTimestamp,
        Part::Finalizers,
        Part::OwnerReferences,
    ];

    /// Its key under `metadata`.
    pub(super) fn key(self) -> &'static str {
        match self {
            Part::Name => "name",
            Part::Namespace => "namespace",
            Part::Uid => "uid",
            Part::ResourceVersion => "resourceVersion",
            Part::Generation => "generation",
            Part::DeletionTimestamp => "deletionTimestamp",
            Part::Finalizers => "finalizers",
            Part::OwnerReferences => "ownerReferences",
        }
    }

    /// Its bit in a set of parts.
    pub(super) fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// An identity being read: each part as its value gives it (a part whose
/// value is missing or of another type reads as empty).
#[derive(Debug, Default)]
pub(super) struct Identity {
    pub(super) name: Option<Arc<str>>,
    pub(super) namespace: Option<Arc<str>>,
    pub(super) uid: Option<Arc<str>>,
    pub(super) resource_version: Option<Arc<str>>,
    pub(super) generation: i64,
    pub(super) deletion_timestamp: Option<Arc<str>>,
    pub(super) finalizers: Vec<Arc<str>>,
    pub(super) owner: Option<OwnerRef>,
}

impl Identity {
    /// The identity of `obj` (parsed JSON).
    pub(super) fn of(obj: &Json, interner: &mut Interner) -> Self {
        let meta = obj.get("metadata");
        let mut identity = Identity::default();
        for part in Part::ALL {
            identity.set_json(part, meta.and_then(|m| m.get(part.key())), interner);
        }
        identity
    }

    /// Sets `part` from its parsed `value` (None: missing).
    pub(super) fn set_json(&mut self, part: Part, value: Option<&Json>, interner: &mut Interner) {
        match part {
            Part::Finalizers => {
                self.finalizers = value
                    .and_then(Json::as_array)
                    .map(|list| {
                        list.iter()
                            .filter_map(Json::as_str)
                            .map(|f| interner.intern(f))
                            .collect()
                    })
                    .unwrap_or_default();
            }
            Part::OwnerReferences => {
                self.owner = value
                    .and_then(Json::as_array)
                    .and_then(|list| controller_of(list, interner));
            }
            Part::Generation => self.generation = value.and_then(Json::as_i64).unwrap_or(0),
            _ => self.set_text(part, value.and_then(Json::as_str), interner),
        }
    }

    /// Sets a part read as text (name, namespace, uid, resourceVersion,
    /// deletionTimestamp) from `text` (None: missing or not a string).
    pub(super) fn set_text(&mut self, part: Part, text: Option<&str>, interner: &mut Interner) {
        match part {
            Part::Name => self.name = text.map(Arc::from),
            Part::Namespace => self.namespace = text.map(|t| interner.intern(t)),
            Part::Uid => self.uid = text.map(Arc::from),
            Part::ResourceVersion => self.resource_version = text.map(Arc::from),
            Part::DeletionTimestamp => {
                self.deletion_timestamp =
                    text.filter(|t| !t.is_empty()).map(|t| interner.intern(t));
            }
            // Not text: read as missing.
            Part::Generation | Part::Finalizers | Part::OwnerReferences => {
                self.set_json(part, None, interner);
            }
        }
    }

    /// Empties the parts in `parts` (a set of [`Part::bit`]s).
    pub(super) fn reset(&mut self, parts: u8, interner: &mut Interner) {
        for part in Part::ALL {
            if parts & part.bit() != 0 {
                self.set_json(part, None, interner);
            }
        }
    }
}

/// The controller entry of `ownerReferences` (parsed), if any.
fn controller_of(references: &[Json], interner: &mut Interner) -> Option<OwnerRef> {
    let entry = references
        .iter()
        .find(|r| r.get("controller").and_then(Json::as_bool) == Some(true))?;
    let text = |k: &str| entry.get(k).and_then(Json::as_str).unwrap_or("");
    Some(OwnerRef {
        api_version: interner.intern(text("apiVersion")),
        kind: interner.intern(text("kind")),
        name: interner.intern(text("name")),
        uid: interner.intern(text("uid")),
    })
}
