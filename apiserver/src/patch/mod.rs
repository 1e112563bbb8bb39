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
mod error;
mod fields;
mod json_patch;
mod kind;
mod merge;
mod schema;
mod strategic;

pub use apply::{
    record_update, record_update_with, server_side_apply, server_side_apply_with, ApplyOptions,
    ANCIENT_CHANGES_MANAGER, BEFORE_FIRST_APPLY_MANAGER, MAX_UPDATE_MANAGERS,
};
pub use error::{ApplyError, FieldConflict, PatchError, Result};
pub use fields::{path_string, FieldPath, FieldSet, PathElement};
pub use json_patch::json_patch;
pub use kind::{ListType, ObjectKind, PatchStrategy};
pub use merge::json_merge_patch;
pub use schema::{is_atomic_map, list_type, patch_strategy, SchemaOverrides};
pub use strategic::strategic_merge_patch;
