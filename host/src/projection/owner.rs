//! The controller owner reference an object's identity keeps
//! ([`OwnerRef`]). It never reads JSON (the identity does) and never
//! interns (the interner does).

use std::sync::Arc;

/// The controller owner of an object: its `ownerReferences` entry with
/// `controller: true` (Kubernetes allows at most one).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnerRef {
    /// The owner's `apiVersion`; interned.
    pub api_version: Arc<str>,
    /// The owner's kind; interned.
    pub kind: Arc<str>,
    /// The owner's name (in the owned object's namespace); interned (the
    /// pods of one ReplicaSet share it).
    pub name: Arc<str>,
    /// The owner's uid; interned, like the name.
    pub uid: Arc<str>,
}

impl OwnerRef {
    /// The owner's API group ("" for core).
    pub fn group(&self) -> &str {
        self.api_version
            .split_once('/')
            .map_or("", |(group, _)| group)
    }
}
