//! The stand-ins for the control plane's controllers that a client of the
//! API can observe: garbage collection of dependents, the kubelet finishing
//! graceful pod deletions, the namespace controller emptying a
//! terminating namespace, and (opt-in) simulated nodes whose scheduler and
//! kubelets bind and start pods, with a Deployment → ReplicaSet → Pod
//! controller beside them. They act on the store as any other deleter does;
//! they never serve requests and never run a real workload.
//!
//! # Layout
//! - `gc`: the garbage collector, its ownership graph and deletion policies.
//! - `kubelet`: graceful pod deletion and its finish.
//! - `namespaces`: namespace termination and its sweep.
//! - `nodes`: simulated nodes, their scheduler and kubelets (off by default).
//! - `workloads`: Deployments' ReplicaSets, ReplicaSets' pods and both
//!   kinds' status (on with simulated nodes).

pub(crate) mod gc;
pub(crate) mod kubelet;
pub(crate) mod namespaces;
pub(crate) mod nodes;
pub(crate) mod workloads;
