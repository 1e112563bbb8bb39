//! Pod rules of the real API server beyond decoding and defaulting: the
//! validation of a pod's spec on every write (`validation`, whose quantity
//! arithmetic and Go printing is `wasmctrl_kube_rules::quantity`), and the `pods/binding`
//! subresource a scheduler binds pods with (`binding`). Pure functions
//! over JSON; nothing here touches the store or the network.

pub(crate) mod binding;
pub(crate) mod validation;
