//! Owner references: `metav1.OwnerReference` built from an object of the
//! snapshot ([`owner_ref`], [`controller_ref`]), so a child document names
//! exactly the owner incarnation the guest saw (its uid), and read back
//! from a projected object ([`Object::controller_owner`]). Put one on a
//! document with [`crate::plan::Document::owned_by`]. This module never
//! checks the Kubernetes rule that an owner is cluster-scoped or in the
//! child's namespace: the API server's garbage collector enforces it.

use serde::{Deserialize, Serialize};

use crate::snapshot::{Object, SchemaError};

/// The path [`Object::controller_owner`] reads: add it to the watch's
/// `fields` (`Watch::fields([OWNER_REFERENCES])`).
pub const OWNER_REFERENCES: &str = "metadata.ownerReferences";

/// `metav1.OwnerReference`, in its field order; `controller` and
/// `blockOwnerDeletion` are left out when unset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// The owner's `apiVersion` (`group/version`, or `v1`).
    pub api_version: String,
    /// The owner's `kind`.
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The owner's uid: the reference is to this incarnation only.
    pub uid: String,
    /// Whether the owner is the managing controller (at most one per
    /// object); the host's `owner` key mapping follows only this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Whether a foreground deletion of the owner waits for this object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

/// A plain owner reference to `owner` (its watch's apiVersion and kind, its
/// name and uid): the child is garbage-collected with it, but `owner` is
/// not its controller.
pub fn owner_ref(owner: &Object<'_>) -> OwnerReference {
    let target = owner.object_ref();
    OwnerReference {
        api_version: target.api_version,
        kind: target.kind,
        name: target.name,
        uid: owner.uid().to_string(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// The controller reference to `owner`, as apimachinery's
/// `NewControllerRef` makes it: [`owner_ref`] with `controller: true` and
/// `blockOwnerDeletion: true`. Changes to a child carrying it wake `owner`
/// through a watch with the `owner` key mapping.
pub fn controller_ref(owner: &Object<'_>) -> OwnerReference {
    OwnerReference {
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..owner_ref(owner)
    }
}

impl Object<'_> {
    /// Its controller owner: the entry of `metadata.ownerReferences` with
    /// `controller: true` (Kubernetes allows at most one), the one the
    /// host's `owner` key mapping follows. `Ok(None)` when it has none; an
    /// error naming the path and the watch's fields when the watch does
    /// not project [`OWNER_REFERENCES`] (then nothing can be said).
    pub fn controller_owner(&self) -> Result<Option<OwnerReference>, SchemaError> {
        let field = self.field(OWNER_REFERENCES)?;
        let references: Vec<OwnerReference> = self
            .text(field)
            .and_then(|list| serde_json::from_str(list).ok())
            .unwrap_or_default();
        Ok(references.into_iter().find(|r| r.controller == Some(true)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Obj, World};
    use crate::{GroupVersionKind, Manifest, Schema, Snapshot, Watch};

    fn app() -> GroupVersionKind {
        GroupVersionKind::new("apps.example.com", "v1", "App")
    }

    #[test]
    fn the_controller_owner_is_read_from_the_projected_references() {
        let m = Manifest::new("t")
            .watch(Watch::new("apps", app()).per_object())
            .watch(
                Watch::new("children", GroupVersionKind::core("ConfigMap"))
                    .fields([OWNER_REFERENCES])
                    .owner("apps"),
            )
            .watch(Watch::new("bare", GroupVersionKind::core("Secret")));
        let owner = Obj::new("apps", "a", "web").uid("u1");
        let plain = OwnerReference {
            controller: None,
            ..controller_ref_of(&owner)
        };
        let data = World::new(&m)
            .with(owner.clone())
            .with(
                Obj::new("children", "a", "c")
                    .owner_reference(plain.clone())
                    .controlled_by(&app(), &owner),
            )
            .with(Obj::new("children", "a", "orphan").owner_reference(plain))
            .with(Obj::new("bare", "a", "s").controlled_by(&app(), &owner))
            .snapshot()
            .expect("declared names");
        let schema = Schema::new(&m).expect("unique names");
        let snap = Snapshot::new(&schema, &data).expect("valid");
        let children = schema.watch("children").expect("declared").id();
        let child = snap.get(children, "a", "c").expect("present");
        assert_eq!(
            child.controller_owner().expect("projected"),
            Some(controller_ref_of(&owner))
        );
        let orphan = snap.get(children, "a", "orphan").expect("present");
        assert_eq!(orphan.controller_owner().expect("projected"), None);
        let bare = schema.watch("bare").expect("declared").id();
        let err = snap
            .get(bare, "a", "s")
            .expect("present")
            .controller_owner()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"bare\" does not project field \"metadata.ownerReferences\""),
            "{err}"
        );
    }

    /// What `Obj::controlled_by(&app(), owner)` puts on a child.
    fn controller_ref_of(owner: &Obj) -> OwnerReference {
        let key = owner.key();
        let (_, name) = key.split_once('/').unwrap_or(("", &key));
        OwnerReference {
            api_version: app().api_version(),
            kind: app().kind,
            name: name.to_string(),
            uid: "u1".to_string(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn manifest() -> Manifest {
        Manifest::new("t")
            .watch(
                Watch::new(
                    "apps",
                    GroupVersionKind::new("apps.example.com", "v1", "App"),
                )
                .per_object(),
            )
            .watch(Watch::new("nodes", GroupVersionKind::core("Node")))
    }

    #[test]
    fn references_name_the_owner_s_type_name_and_uid() {
        let m = manifest();
        let data = World::new(&m)
            .with(Obj::new("apps", "team-a", "web").uid("u1"))
            .with(Obj::new("nodes", "", "n1").uid("u2"))
            .snapshot()
            .expect("declared watches");
        let schema = Schema::new(&m).expect("unique names");
        let snap = Snapshot::new(&schema, &data).expect("valid");
        let apps = schema.watch("apps").expect("declared").id();
        let app = snap.get(apps, "team-a", "web").expect("present");
        assert_eq!(
            serde_json::to_string(&controller_ref(&app)).expect("serialisable"),
            r#"{"apiVersion":"apps.example.com/v1","kind":"App","name":"web","uid":"u1","controller":true,"blockOwnerDeletion":true}"#
        );
        let nodes = schema.watch("nodes").expect("declared").id();
        let node = snap.get(nodes, "", "n1").expect("present");
        assert_eq!(
            serde_json::to_string(&owner_ref(&node)).expect("serialisable"),
            r#"{"apiVersion":"v1","kind":"Node","name":"n1","uid":"u2"}"#
        );
    }
}
