//! Owner references: `metav1.OwnerReference` built from an object of the
//! snapshot ([`owner_ref`], [`controller_ref`]), so a child document names
//! exactly the owner incarnation the guest saw (its uid). Put one on a
//! document with [`crate::plan::Document::owned_by`]. This module never
//! checks the Kubernetes rule that an owner is cluster-scoped or in the
//! child's namespace: the API server's garbage collector enforces it.

use serde::Serialize;

use crate::snapshot::Object;

/// `metav1.OwnerReference`, in its field order; `controller` and
/// `blockOwnerDeletion` are left out when unset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Obj, World};
    use crate::{GroupVersionKind, Manifest, Schema, Snapshot, Watch};

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
