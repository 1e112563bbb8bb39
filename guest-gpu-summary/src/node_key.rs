//! Which node names can be summary keys: a node's name becomes a key of the
//! summary ConfigMap's `data`, and the API server refuses the whole write
//! (422) if one key is not a valid ConfigMap key. A pod's `spec.nodeName` is
//! whatever its author wrote (`../../etc`, a megabyte, a NUL), so such pods
//! are skipped and logged rather than sinking every other node's count.
//! Pure, except for the warning it logs through the host.

/// Whether `key` is a valid ConfigMap key, as `IsConfigMapKey` in
/// k8s.io/apimachinery `pkg/util/validation/validation.go` decides:
/// `[-._a-zA-Z0-9]+`, at most 253 bytes, not `.`, `..` or starting with `..`.
pub fn is_config_map_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && key != "."
        && !key.starts_with("..")
}

/// Logs that pod `namespace/name` was left out because its node name is
/// not a ConfigMap key (the name is cut to 64 characters, debug-quoted).
pub fn skipped(namespace: &str, name: &str, node: &str) {
    let shown: String = node.chars().take(64).collect();
    let cut = if shown.len() < node.len() { "…" } else { "" };
    wasmctrl_guest_sdk::warn!(
        "pod {namespace}/{name} not counted: its node name {shown:?}{cut} is not a valid ConfigMap key"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_that_are_not_config_map_keys_are_recognised() {
        for ok in ["node-1", "gpu-node-01.example.com", "N_1", "-"] {
            assert!(is_config_map_key(ok), "{ok}");
        }
        let long = "a".repeat(254);
        let huge = "a".repeat(1 << 20);
        for bad in [
            "",
            ".",
            "..",
            "../../etc",
            "a/b",
            "nul\0",
            "é",
            &long,
            &huge,
        ] {
            assert!(!is_config_map_key(bad), "{:.20?}", bad);
        }
    }
}
