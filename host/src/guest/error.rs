//! Every way loading or calling a guest can fail, named after the guest
//! and classified (a metric label; whether a retry can help).

use super::*;

/// A failure while loading or running a guest, naming the guest.
#[derive(Debug, thiserror::Error)]
#[error("guest {guest}{}{} {kind}", .kind.file().map(|f| format!(" ({f})")).unwrap_or_default(), if matches!(.kind, GuestErrorKind::Version { .. }) { "" } else { ":" })]
pub struct GuestError {
    /// The guest's name: its declared (manifest) name when known, else
    /// the file it came from.
    pub guest: String,
    /// What went wrong.
    pub kind: GuestErrorKind,
}

impl GuestError {
    /// The file the guest came from, when `guest` is its declared name and
    /// the error is about what it declares (its manifest or configuration).
    pub fn file(&self) -> Option<&str> {
        self.kind.file()
    }

    /// Short, stable label for metrics (`reason="deadline"`, ...).
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
    }

    /// Whether retrying the same input may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            GuestErrorKind::Failed {
                retryable: true,
                ..
            }
        )
    }
}

/// The ways a guest can fail.
#[derive(Debug, thiserror::Error)]
pub enum GuestErrorKind {
    /// The module could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid component for this engine.
    #[error("not a valid WebAssembly component: {0}")]
    Compile(String),
    /// The component was built against another contract version.
    #[error("was built against wasmctrl:controller@{found}; this host speaks @{}: rebuild it with the wasmctrl guest SDK (see wit/README.md)", CONTRACT_VERSION.trim_start_matches("wasmctrl:controller@"))]
    Version {
        /// The version its reconciler export names.
        found: String,
    },
    /// The component does not implement the world this host speaks, or
    /// instantiation failed.
    #[error("cannot instantiate (does it implement {CONTRACT_VERSION}?): {0}")]
    Instantiate(String),
    /// The guest trapped (unreachable, out-of-bounds, a call to a WASI
    /// function it has no access to, ...).
    #[error("trapped: {0}")]
    Trap(String),
    /// The guest panicked: Rust's panic message (what `std` printed to
    /// stderr just before the trap) and its location.
    #[error("panicked: {0}")]
    Panicked(String),
    /// An uncaught Python or JavaScript exception: its type and message
    /// and the stack, as the guest's runtime printed them to stderr
    /// before it trapped.
    #[error("raised {message}{}", if .stack.is_empty() { String::new() } else { format!("\n{stack}") })]
    Exception {
        /// `ValueError: told to fail`, `Error: ...`.
        message: String,
        /// The traceback's frames or the JavaScript stack.
        stack: String,
    },
    /// The per-call deadline passed.
    #[error("exceeded its deadline of {0:?}")]
    Deadline(Duration),
    /// The guest tried to grow memory past its cap.
    #[error("exceeded its memory limit of {0} bytes")]
    OutOfMemory(usize),
    /// The guest ran out of fuel.
    #[error("ran out of fuel ({0} units)")]
    OutOfFuel(u64),
    /// The component imports interfaces the host never provides
    /// (`wasi:http`).
    #[error("{}", imports::describe(.0))]
    Unsupported(Vec<String>),
    /// The component is larger than the host loads.
    #[error("is {size} bytes, over the {max}-byte limit for a component")]
    TooLarge {
        /// Its size.
        size: usize,
        /// [`imports::MAX_COMPONENT_BYTES`].
        max: usize,
    },
    /// The component does not export the contract's reconciler: it
    /// implements another world.
    #[error("does not export wasmctrl:controller/reconciler (a component of another world; it exports: {}): build it for the world `controller` of {CONTRACT_VERSION}", if .0.is_empty() { "nothing".to_string() } else { .0.join(", ") })]
    World(Vec<String>),
    /// The component uses the component model's async ABI, which the host
    /// does not run.
    #[error("uses the component model's async ABI, which this host does not run: build it synchronous (componentize-qjs `--sync`, jco componentize `--backend-qjs-disable-async`)")]
    Async,
    /// The manifest is unusable (or the guest rejected its configuration).
    #[error("invalid manifest: {error}")]
    Manifest {
        /// What is wrong.
        error: ManifestError,
        /// The file the guest came from, when the error names the guest by
        /// its declared name.
        file: Option<std::sync::Arc<str>>,
    },
    /// The manifest asks for more than the operator's policy grants.
    #[error("{0}")]
    Policy(#[from] crate::guest::policy::PolicyDenied),
    /// The plan is malformed or writes outside the allowlist.
    #[error("invalid plan: {0}")]
    Plan(#[from] PlanError),
    /// The `aggregator` export returned something unusable (a spec naming
    /// no aggregate key, a contribution naming no object of its snapshot).
    #[error("invalid aggregate: {0}")]
    Aggregate(String),
    /// The guest returned an error from `reconcile`.
    #[error("reconcile failed ({}): {message}", if *retryable { "retryable" } else { "terminal" })]
    Failed {
        /// Whether the guest asked for a retry.
        retryable: bool,
        /// The guest's message.
        message: String,
    },
}

impl GuestErrorKind {
    /// The file a manifest error's guest came from (see
    /// [`GuestError::file`]).
    pub fn file(&self) -> Option<&str> {
        match self {
            GuestErrorKind::Manifest { file, .. } => file.as_deref(),
            _ => None,
        }
    }

    /// Short, stable label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            GuestErrorKind::Read { .. } => "read",
            GuestErrorKind::Compile(_) => "compile",
            GuestErrorKind::Version { .. } => "version",
            GuestErrorKind::Instantiate(_) => "instantiate",
            GuestErrorKind::Trap(_) => "trap",
            GuestErrorKind::Panicked(_) => "guest_panic",
            GuestErrorKind::Exception { .. } => "guest_exception",
            GuestErrorKind::Deadline(_) => "deadline",
            GuestErrorKind::OutOfMemory(_) => "memory",
            GuestErrorKind::OutOfFuel(_) => "fuel",
            GuestErrorKind::Unsupported(_) => "unsupported_import",
            GuestErrorKind::TooLarge { .. } => "too_large",
            GuestErrorKind::World(_) => "world",
            GuestErrorKind::Async => "async",
            GuestErrorKind::Manifest { .. } => "manifest",
            GuestErrorKind::Policy(_) => "policy",
            GuestErrorKind::Plan(PlanError::TooLarge { .. } | PlanError::OverCopyBudget { .. }) => {
                "plan_too_large"
            }
            GuestErrorKind::Aggregate(_) => "malformed_aggregate",
            GuestErrorKind::Plan(PlanError::NotAllowed { .. }) => "forbidden_write",
            GuestErrorKind::Plan(_) => "malformed_plan",
            GuestErrorKind::Failed {
                retryable: true, ..
            } => "retryable",
            GuestErrorKind::Failed {
                retryable: false, ..
            } => "terminal",
        }
    }
}
