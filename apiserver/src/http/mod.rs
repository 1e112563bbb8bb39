//! The HTTP face of the server: the HTTPS listener, routing, authentication
//! and authorization, request bodies and their encodings, discovery and
//! OpenAPI documents, Table printing, fault injection and `Status` errors.
//! It owns what goes over the wire and which verb runs; it never keeps
//! objects itself (`storage` does) and never decides what a kind's objects
//! may hold (`rules` does).
//!
//! # Layout
//! - `server`: the listener, certificates, kubeconfigs and clients.
//! - `handlers`: routing, shared request checks, and the verbs (`reads`, `writes`,
//!   `patches`, `deletes`, `scale`).
//! - `body`: reading, depth-checking and decoding request bodies; `proto`: the protobuf encoding.
//! - `access`: self access reviews (`can-i`, `whoami`) under the crate's `auth` rules.
//! - `discovery`: `/api`, `/apis` and `/version`; `openapi`: `/openapi/v2`.
//! - `table`: server-side printing; `printer_columns`: a CRD's `additionalPrinterColumns`;
//!   `printers`: the built-in kinds' columns, as the real server prints them.
//! - `convert`: conversion between served versions sharing one storage bucket.
//! - `watch`: watch streams with filters, bookmarks, timeouts and cut-offs;
//!   `outbox`: the byte-counted buffer between a watch and its response body.
//! - `faults`: fault injection; `response`: JSON responses, and errors as
//!   their `meta/v1 Status` (the error type is the crate's `status`).

mod access;
pub mod body;
pub mod convert;
pub mod discovery;
pub mod faults;
pub(crate) mod handlers;
pub mod openapi;
mod outbox;
mod printer_columns;
mod printers;
pub mod proto;
mod response;
pub mod server;
pub mod table;
pub mod watch;
pub mod write_log;
