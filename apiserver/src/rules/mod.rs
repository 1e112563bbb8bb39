//! The Kubernetes semantics of objects per kind, as the real server's
//! registry strategies and validation apply them before storage: names and
//! system metadata, defaulting, metadata and data limits, unknown and
//! duplicate fields, pod rules and bindings, and CustomResourceDefinitions
//! with their schemas. Mostly pure functions over JSON; only `crd` reads
//! and updates the registry and store when a CRD comes and goes, and
//! `services`' allocator follows the store's Services (it never writes
//! them). Nothing here serves requests or runs in the background.
//!
//! # Layout
//! - `objects`: names, `generateName`, system metadata, pod defaulting, status/spec separation;
//!   `meta`: reading metadata and timestamps.
//! - `go_words`: Go's quoting and float wording, and the field path problems name.
//! - `defaults`: workload, pod template and Service defaults; `services`: the allocator of cluster IPs and node ports.
//! - `object_rules`: label, annotation and ConfigMap/Secret size validation.
//! - `spec_rules`: Service node ports and selectors, Deployment selectors.
//! - `validation`: unknown- and duplicate-field checks (`fieldValidation`).
//! - `pods`: pod spec validation and the `pods/binding` subresource.
//! - `crd`: CRDs, and pruning, defaulting and validating custom objects.

pub mod crd;
pub(crate) mod defaults;
pub(crate) mod go_words;
pub(crate) mod meta;
pub(crate) mod object_rules;
pub mod objects;
pub(crate) mod pods;
pub(crate) mod services;
pub(crate) mod spec_rules;
pub mod validation;
