//! What a cache keeps of one object ([`Kept`]): its projection, shared
//! with the changes handed out, or, keeping identities (the store's
//! "Retention"), an [`Identity`] of its own: no projection fields, the
//! uid and resourceVersion packed ([`Ids`]), the metadata most objects
//! leave empty behind one pointer, and namespace and name left to the
//! cache's key. Owns turning a projection into an identity, an identity
//! back into the [`ProjectedObject`] readers are given (equal to
//! [`ProjectedObject::identity`]), and telling two identities' content
//! apart. It never decides which is kept (the writer does) and never
//! indexes.

use std::sync::Arc;

use super::ids::Ids;
use super::StoreKey;
use crate::projection::{Fingerprint, OwnerRef, ProjectedObject};

/// One cached object.
#[derive(Debug)]
pub(super) enum Kept {
    /// The whole projection.
    Projection(Arc<ProjectedObject>),
    /// Its identity only (boxed: the map's entries stay small for caches
    /// keeping projections).
    Identity(Box<Identity>),
}

/// What a cache keeps of an object's identity: everything
/// [`ProjectedObject::identity`] holds but its key (72 bytes; the
/// object's strings are the interned namespace, owner and finalizers and
/// the key's name, none of them its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Identity {
    ids: Ids,
    fingerprint: Fingerprint,
    generation: i64,
    owner: Option<Arc<OwnerRef>>,
    /// Set only while the object is being deleted or has finalizers.
    rare: Option<Box<Rare>>,
}

/// The identity parts most objects leave empty.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rare {
    deletion_timestamp: Option<Arc<str>>,
    finalizers: Box<[Arc<str>]>,
}

impl Identity {
    /// The identity of `object`.
    pub(super) fn of(object: &ProjectedObject) -> Self {
        let rare =
            (object.deletion_timestamp.is_some() || !object.finalizers.is_empty()).then(|| {
                Box::new(Rare {
                    deletion_timestamp: object.deletion_timestamp.clone(),
                    finalizers: object.finalizers.clone(),
                })
            });
        Identity {
            ids: Ids::new(&object.uid, &object.resource_version),
            fingerprint: object.fingerprint(),
            generation: object.generation,
            owner: object.owner.clone(),
            rare,
        }
    }

    /// Whether both carry the same content, resourceVersion aside: what
    /// [`ProjectedObject::same_content`] says of the objects they are the
    /// identities of (under one key).
    pub(super) fn same_content(&self, other: &Identity) -> bool {
        self.ids.same_uid(&other.ids)
            && self.fingerprint == other.fingerprint
            && self.generation == other.generation
            && self.owner == other.owner
            && self.rare == other.rare
    }

    /// The identity as readers are given it.
    fn projected(&self, (namespace, name): &StoreKey) -> ProjectedObject {
        let mut object = ProjectedObject::without_fields(
            namespace.clone(),
            name.clone(),
            self.ids.uid(),
            self.ids.resource_version(),
            self.fingerprint,
        );
        object.generation = self.generation;
        object.owner = self.owner.clone();
        if let Some(rare) = &self.rare {
            object.deletion_timestamp = rare.deletion_timestamp.clone();
            object.finalizers = rare.finalizers.clone();
        }
        object
    }
}

impl Kept {
    /// What a cache keeping `identities` keeps of `object`.
    pub(super) fn of(object: &Arc<ProjectedObject>, identities: bool) -> Self {
        match identities {
            true => Kept::Identity(Box::new(Identity::of(object))),
            false => Kept::Projection(object.clone()),
        }
    }

    /// Whether it holds its projected fields.
    pub(super) fn holds_fields(&self) -> bool {
        match self {
            Kept::Projection(object) => object.holds_fields(),
            Kept::Identity(_) => false,
        }
    }

    /// Whether `new`, kept in its place, carries the same content
    /// (resourceVersion aside) and holds fields as it does: then applying
    /// it is no change. `object` is the projection `new` was made of.
    pub(super) fn same_content(&self, new: &Kept, object: &ProjectedObject) -> bool {
        match (self, new) {
            (Kept::Identity(old), Kept::Identity(new)) => old.same_content(new),
            (Kept::Projection(old), Kept::Projection(_)) => old.same_content(object),
            _ => false,
        }
    }

    /// The object as readers are given it, stored under `key`.
    pub(super) fn projected(&self, key: &StoreKey) -> Arc<ProjectedObject> {
        match self {
            Kept::Projection(object) => object.clone(),
            Kept::Identity(identity) => Arc::new(identity.projected(key)),
        }
    }

    /// The projection, if it is kept.
    pub(super) fn projection(&self) -> Option<&Arc<ProjectedObject>> {
        match self {
            Kept::Projection(object) => Some(object),
            Kept::Identity(_) => None,
        }
    }

    /// The resourceVersion.
    pub(super) fn resource_version(&self) -> Arc<str> {
        match self {
            Kept::Projection(object) => object.resource_version.clone(),
            Kept::Identity(identity) => identity.ids.resource_version(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::projection::{FieldPath, Interner, Projection};
    use serde_json::{json, Value};

    fn project(metadata: Value, node: &str) -> Arc<ProjectedObject> {
        let projection = Projection::new(vec![FieldPath::parse("spec.nodeName").unwrap()], vec![]);
        let mut object = json!({"metadata": metadata, "spec": {"nodeName": node}});
        object["metadata"]["namespace"] = json!("ml");
        object["metadata"]["name"] = json!("p");
        Arc::new(projection.project(&object, &mut Interner::default()))
    }

    fn key() -> StoreKey {
        (Arc::from("ml"), Arc::from("p"))
    }

    fn identity(object: &Arc<ProjectedObject>) -> Kept {
        Kept::of(object, true)
    }

    const UID: &str = "5f0c2b1e-8d3a-4c6f-9b2e-1a7d3e5f9c01";

    fn metadatas() -> Vec<Value> {
        let owner = |uid: &str, controller: bool| {
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                    "uid": uid, "controller": controller}])
        };
        vec![
            json!({"uid": UID, "resourceVersion": "41"}),
            json!({"uid": UID, "resourceVersion": "42"}),
            json!({"uid": "not-a-uuid", "resourceVersion": "41"}),
            json!({}),
            json!({"uid": UID, "resourceVersion": "41", "generation": 3}),
            json!({"uid": UID, "resourceVersion": "41", "ownerReferences": owner("o1", true)}),
            json!({"uid": UID, "resourceVersion": "41", "ownerReferences": owner("o2", true)}),
            json!({"uid": UID, "resourceVersion": "41", "ownerReferences": owner("o1", false)}),
            json!({"uid": UID, "resourceVersion": "41", "finalizers": ["a/b"]}),
            json!({"uid": UID, "resourceVersion": "41", "finalizers": ["a/b", "c"]}),
            json!({"uid": UID, "resourceVersion": "41",
                   "deletionTimestamp": "2026-01-01T00:00:00Z"}),
            json!({"uid": UID, "resourceVersion": "41", "finalizers": ["a/b"],
                   "deletionTimestamp": "2026-01-01T00:00:00Z"}),
        ]
    }

    #[test]
    fn an_identity_reads_back_as_the_projections_identity() {
        for metadata in metadatas() {
            for node in ["n1", "n2"] {
                let object = project(metadata.clone(), node);
                let kept = identity(&object);
                assert!(!kept.holds_fields());
                assert_eq!(*kept.projected(&key()), object.identity(), "{metadata}");
                assert_eq!(kept.resource_version(), object.resource_version);
                assert!(kept.projection().is_none());
            }
        }
    }

    #[test]
    fn identities_compare_as_the_projections_they_were_made_of() {
        let objects: Vec<_> = metadatas()
            .into_iter()
            .flat_map(|m| [project(m.clone(), "n1"), project(m, "n2")])
            .collect();
        for a in &objects {
            for b in &objects {
                assert_eq!(
                    identity(a).same_content(&identity(b), b),
                    a.same_content(b),
                    "{a:?} against {b:?}"
                );
                assert_eq!(
                    Kept::of(a, false).same_content(&Kept::of(b, false), b),
                    a.same_content(b)
                );
                assert!(
                    !identity(a).same_content(&Kept::of(b, false), b)
                        && !Kept::of(a, false).same_content(&identity(b), b),
                    "an identity replaced by a projection (or back) is a change"
                );
            }
        }
    }

    #[test]
    fn a_projection_is_kept_shared_and_an_identity_small() {
        let object = project(json!({"uid": UID, "resourceVersion": "41"}), "n1");
        let kept = Kept::of(&object, false);
        assert!(Arc::ptr_eq(&kept.projected(&key()), &object));
        assert!(kept.holds_fields());
        assert_eq!(std::mem::size_of::<Identity>(), 72);
        assert_eq!(std::mem::size_of::<Kept>(), 16);
    }
}
