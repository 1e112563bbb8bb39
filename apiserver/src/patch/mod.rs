//! Patch semantics of the embedded API server: JSON merge patch (RFC 7386),
//! JSON patch (RFC 6902), strategic merge patch and server-side apply with
//! `metadata.managedFields` bookkeeping, as pure functions over
//! [`serde_json::Value`].
//!
//! This module owns *what an object looks like after a write* and *who owns
//! which field*. It never touches storage, never assigns or checks
//! `resourceVersion`, `uid`, `generation` or timestamps other than the
//! managed-fields `time` it is handed, never resets fields on behalf of a
//! registry strategy beyond the ignored fields it is told about, and never
//! builds HTTP `Status` objects: callers map [`PatchError`] to 422 (400 for
//! [`PatchError::InvalidPatch`], a malformed document) and [`ApplyError`]
//! to 409 `Conflict` with one `FieldManagerConflict` cause per
//! [`FieldConflict`] (`message` and `field` as given) or to 400
//! `BadRequest` for [`ApplyError::Invalid`].
//!
//! Callers pick the variant that matches the request: [`record_update`] and
//! [`server_side_apply`] for the main resource of kinds without a status
//! subresource; the `_with` variants and [`ApplyOptions`] for `/status`
//! writes ([`ApplyOptions::status_subresource`]) and for main-resource
//! writes of kinds whose strategy resets `status`
//! ([`ApplyOptions::main_resource_with_status`]), so that the reset fields
//! are never owned, as the real server's `ResetFieldsStrategy` ensures.
//! Custom resources whose CRD declares `x-kubernetes-list-type` or
//! `x-kubernetes-map-type` pass [`SchemaOverrides::from_openapi_v3`] in
//! [`ApplyOptions::schema`]; without it their lists are atomic. Built-in
//! kinds' list and map semantics come from the real server's OpenAPI.

mod apply;
mod builtin_schema;
mod fields;
mod json_patch;
mod merge;
mod schema;
mod strategic;

pub use apply::{
    record_update, record_update_with, server_side_apply, server_side_apply_with, ApplyOptions,
    ANCIENT_CHANGES_MANAGER, BEFORE_FIRST_APPLY_MANAGER, MAX_UPDATE_MANAGERS,
};
pub use fields::{path_string, FieldPath, FieldSet, PathElement};
pub use json_patch::json_patch;
pub use merge::json_merge_patch;
pub use schema::{
    is_atomic_map, list_type, patch_strategy, ListType, PatchStrategy, SchemaOverrides,
};
pub use strategic::strategic_merge_patch;

/// The group, version and kind of the object a patch applies to; it selects
/// the merge keys and list types used by strategic merge patch and
/// server-side apply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectKind {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
}

impl ObjectKind {
    /// Builds an [`ObjectKind`] from its parts.
    #[must_use]
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// The `apiVersion` string: `version` for the core group,
    /// `group/version` otherwise.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Why a JSON patch, merge patch or strategic merge patch could not be
/// applied. Messages name the operation, path or field that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document itself has the wrong shape (e.g. a JSON patch that
    /// is not an array of operation objects, an unknown `op`, a missing
    /// `path`/`from`/`value` member).
    #[error("invalid patch: {0}")]
    InvalidPatch(String),
    /// A JSON pointer is malformed (does not start with `/`, bad `~` escape,
    /// bad array index).
    #[error("invalid JSON pointer {pointer:?}: {reason}")]
    InvalidPointer {
        /// The pointer as written in the patch.
        pointer: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A JSON patch operation could not be applied to the document (missing
    /// key, index out of range, parent is not a container, ...).
    #[error("{op} operation does not apply: {reason} (path {path:?})")]
    OperationFailed {
        /// The operation name (`add`, `remove`, ...), with its index in the
        /// patch, e.g. `replace (op 2)`.
        op: String,
        /// The JSON pointer the operation targeted.
        path: String,
        /// Why it failed.
        reason: String,
    },
    /// A JSON patch `test` operation found a different value.
    #[error("testing value {path:?} failed: {reason}")]
    TestFailed {
        /// The JSON pointer that was tested.
        path: String,
        /// What differed.
        reason: String,
    },
    /// A strategic merge patch list item lacks the list's merge key.
    #[error("map: {item} does not contain declared merge key: {key} (field {field})")]
    MissingMergeKey {
        /// The dotted path of the list, e.g. `spec.containers`.
        field: String,
        /// The merge key, e.g. `name`.
        key: String,
        /// The offending item, JSON-encoded.
        item: String,
    },
    /// A strategic merge patch directive (`$patch`, `$deleteFromPrimitiveList`,
    /// ...) is unknown or used where it is not allowed.
    #[error("invalid strategic merge patch directive at {field}: {reason}")]
    InvalidDirective {
        /// The dotted path where the directive appeared.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Result alias for the patch functions.
pub type Result<T, E = PatchError> = std::result::Result<T, E>;

/// One field that an apply would take from another manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    /// The manager that owns the field (its `manager` name).
    pub manager: String,
    /// The field in structured-merge-diff path notation, e.g. `.data.key`
    /// or `.spec.containers[name="app"].image`; this is the `field` of the
    /// `FieldManagerConflict` status cause.
    pub field: String,
    /// The status cause message, exactly as the real server writes it, e.g.
    /// `conflict with "kubectl-edit" using v1`.
    pub message: String,
}

/// Why a server-side apply was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// Other managers own fields the apply would change; answer 409 with
    /// reason `Conflict`, `message` as the status message and one
    /// `FieldManagerConflict` cause per entry of `conflicts`.
    #[error("{message}")]
    Conflict {
        /// One entry per conflicting (manager, field).
        conflicts: Vec<FieldConflict>,
        /// The exact message the real server uses, e.g.
        /// `Apply failed with 1 conflict: conflict with "mgr" using v1: .data.key`.
        message: String,
    },
    /// The applied configuration is not acceptable (managedFields set,
    /// wrong apiVersion/kind, duplicate or missing list keys, not an
    /// object); answer 400/422 with this message.
    #[error("{0}")]
    Invalid(String),
}
