//! The Wasm OCI artifact layout of the CNCF TAG Runtime (what `oci-wasm`
//! and `wkg` write): an image manifest whose config has the media type
//! [`WASM_CONFIG_MEDIA_TYPE`] and whose one layer is the component,
//! [`WASM_LAYER_MEDIA_TYPE`]. Owns building that manifest and checking a
//! pulled one; it never talks to a registry.

use oci_client::manifest::{OciDescriptor, OciImageManifest, OCI_IMAGE_MEDIA_TYPE};

use super::cache::sha256_digest;

/// The config blob's media type.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The layer's media type: the component's bytes.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";

/// The first eight bytes of a component binary: `\0asm`, version 13,
/// layer 1 (a core module has layer 0).
const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

/// An artifact ready to push: the three blobs and their digests.
pub struct Artifact {
    /// The config blob (JSON).
    pub config: Vec<u8>,
    /// The manifest (JSON), as pushed: its digest names the artifact.
    pub manifest: Vec<u8>,
    /// The manifest's digest.
    pub digest: String,
}

/// The artifact carrying the component `wasm` (whose layer digest is
/// `layer_digest`).
pub fn build(wasm: &[u8], layer_digest: &str) -> Artifact {
    // The fields oci-wasm's `WasmConfig` requires (`created`,
    // `architecture`, `os`, `layerDigests`).
    let config = serde_json::json!({
        "created": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    });
    let config = serde_json::to_vec(&config).unwrap_or_default();
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_string()),
        config: OciDescriptor {
            media_type: WASM_CONFIG_MEDIA_TYPE.to_string(),
            digest: sha256_digest(&config),
            size: config.len() as i64,
            ..OciDescriptor::default()
        },
        layers: vec![OciDescriptor {
            media_type: WASM_LAYER_MEDIA_TYPE.to_string(),
            digest: layer_digest.to_string(),
            size: wasm.len() as i64,
            ..OciDescriptor::default()
        }],
        ..OciImageManifest::default()
    };
    let manifest = serde_json::to_vec(&manifest).unwrap_or_default();
    Artifact {
        digest: sha256_digest(&manifest),
        config,
        manifest,
    }
}

/// The one component layer of a pulled manifest, or what is wrong with it.
pub fn component_layer(manifest: &[u8]) -> Result<OciDescriptor, String> {
    let m: OciImageManifest = serde_json::from_slice(manifest)
        .map_err(|e| format!("the manifest is not an OCI image manifest: {e}"))?;
    if m.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(format!(
            "its config is {}, not a Wasm artifact's {WASM_CONFIG_MEDIA_TYPE} (a container image?)",
            m.config.media_type
        ));
    }
    match m.layers.as_slice() {
        [layer] if layer.media_type == WASM_LAYER_MEDIA_TYPE => Ok(layer.clone()),
        [layer] => Err(format!(
            "its layer is {}, not {WASM_LAYER_MEDIA_TYPE}",
            layer.media_type
        )),
        layers => Err(format!(
            "it has {} layers; a Wasm artifact has exactly one",
            layers.len()
        )),
    }
}

/// Checks that `bytes` are a component binary (not a core module, not
/// something else).
pub fn check_component(bytes: &[u8]) -> Result<(), String> {
    match bytes.get(..8) {
        Some(h) if h == COMPONENT_HEADER => Ok(()),
        Some(h) if h[..4] == COMPONENT_HEADER[..4] => {
            Err("the layer is a core wasm module, not a component".into())
        }
        _ => Err("the layer is not WebAssembly".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_artifact_passes_its_own_check_and_others_do_not() {
        let wasm = [COMPONENT_HEADER.as_slice(), b"rest"].concat();
        let a = build(&wasm, &sha256_digest(&wasm));
        assert_eq!(a.digest, sha256_digest(&a.manifest));
        let layer = component_layer(&a.manifest).unwrap();
        assert_eq!(layer.size, wasm.len() as i64);
        assert!(check_component(&wasm).is_ok());

        let image = String::from_utf8(a.manifest.clone()).unwrap().replace(
            WASM_CONFIG_MEDIA_TYPE,
            "application/vnd.oci.image.config.v1+json",
        );
        let e = component_layer(image.as_bytes()).unwrap_err();
        assert!(e.contains("not a Wasm artifact"), "{e}");
        assert!(check_component(b"\0asm\x01\0\0\0")
            .unwrap_err()
            .contains("core"));
        assert!(check_component(b"#!/bin/sh").is_err());
    }
}
