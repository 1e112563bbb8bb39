//! The state of the simulated cluster that the verbs and the control-plane
//! stand-ins share: the object store, the registry of served resources,
//! the cluster IPs and node ports Services hold, and whether the kubelet
//! stand-in finishes graceful pod deletions. It holds state only; it never
//! serves requests, authenticates or injects faults (`http` owns those,
//! beside one shared `Cluster`).

use std::sync::Arc;

use crate::rules::services::Allocator;
use crate::storage::registry::Registry;
use crate::storage::store::Store;

/// The cluster's objects and served resources, shared by every request
/// and every controller; the controllers end when it is dropped.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub store: Arc<Store>,
    pub registry: Registry,
    /// The cluster IPs and node ports Services hold (see `services`).
    pub services: Arc<Allocator>,
    /// Finish graceful pod deletions (see `kubelet`).
    pub kubelet: bool,
}
