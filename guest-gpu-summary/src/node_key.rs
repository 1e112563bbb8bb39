//! Which node names can be summary keys: a node's name becomes a key of the
//! summary ConfigMap's `data`, and the API server refuses the whole write
//! (422) if one key is not a valid ConfigMap key. A pod's `spec.nodeName` is
//! whatever its author wrote (`../../etc`, a megabyte, a NUL), so such pods
//! are skipped and logged rather than sinking every other node's count.
//! Pure, except for the warning it logs through the host.

/// Whether `key` is a valid ConfigMap key (`IsConfigMapKey`; the rule and
/// its tests live in `wasmctrl_kube_rules::configmap_key`).
pub use wasmctrl_kube_rules::configmap_key::is_config_map_key;

/// Logs that pod `namespace/name` was left out because its node name is
/// not a ConfigMap key (the name is cut to 64 characters, debug-quoted).
pub fn skipped(namespace: &str, name: &str, node: &str) {
    let shown: String = node.chars().take(64).collect();
    let cut = if shown.len() < node.len() { "…" } else { "" };
    wasmctrl_guest_sdk::warn!(
        "pod {namespace}/{name} not counted: its node name {shown:?}{cut} is not a valid ConfigMap key"
    );
}
