//! Why a patch or an apply fails: [`PatchError`] (a malformed or
//! inapplicable patch), [`ApplyError`] (conflicts, invalid apply
//! configurations) with its [`FieldConflict`]s. It only describes
//! failures; callers word them as HTTP `Status` objects.

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
