//! `wasmctrl guest configmap`: a guest packaged for a cluster, the
//! ConfigMap that carries a `.wasm` (as `binaryData`) to be mounted into
//! the host's pod, printed as YAML.
//!
//! Owns the flags, the ConfigMap's shape and its size check. It never
//! talks to the cluster; `kubectl apply` does.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use base64::Engine;
use clap::{Args, Subcommand};
use serde_json::{json, Value as Json};

#[derive(Subcommand)]
pub enum GuestCommand {
    /// Print a ConfigMap (YAML) carrying a guest as binaryData, for
    /// `kubectl apply -f -`.
    Configmap(ConfigmapArgs),
}

#[derive(Args)]
pub struct ConfigmapArgs {
    /// The guest component.
    path: PathBuf,
    /// The ConfigMap's name.
    #[arg(long)]
    name: String,
    /// The ConfigMap's namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// The key (file name in the mounted volume); default: the file's name.
    #[arg(long)]
    key: Option<String>,
}

impl GuestCommand {
    /// Runs the command.
    pub fn execute(self) -> anyhow::Result<()> {
        match self {
            GuestCommand::Configmap(args) => configmap(args),
        }
    }
}

/// Prints the ConfigMap carrying the guest at `args.path`.
fn configmap(args: ConfigmapArgs) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(&args.path).with_context(|| format!("reading {}", args.path.display()))?;
    let key = match args.key {
        Some(k) => k,
        None => args
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .context("the guest path has no file name")?,
    };
    let cm = guest_configmap(&args.name, args.namespace.as_deref(), &key, &bytes)?;
    let yaml = serde_yaml::to_string(&cm).context("encoding YAML")?;
    // A closed pipe (`| head`) is the reader's choice, not an error.
    match std::io::stdout().lock().write_all(yaml.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("writing the ConfigMap")
        }
        _ => Ok(()),
    }
}

/// The API server rejects ConfigMaps over 1 MiB (the whole object).
pub const CONFIGMAP_LIMIT: usize = 1 << 20;

/// Why a guest cannot be packaged.
#[derive(Debug, thiserror::Error)]
pub enum PackagingError {
    /// The encoded guest would exceed the ConfigMap size limit.
    #[error("{file} is {size} bytes ({encoded} base64-encoded): a ConfigMap holds at most {CONFIGMAP_LIMIT} bytes; strip the guest (profile `guest`)")]
    TooLarge {
        /// The file name.
        file: String,
        /// Raw size.
        size: usize,
        /// Encoded size.
        encoded: usize,
    },
}

/// A ConfigMap carrying `bytes` under the key `file_name`.
pub fn guest_configmap(
    name: &str,
    namespace: Option<&str>,
    file_name: &str,
    bytes: &[u8],
) -> Result<Json, PackagingError> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    if encoded.len() + 1024 > CONFIGMAP_LIMIT {
        return Err(PackagingError::TooLarge {
            file: file_name.to_string(),
            size: bytes.len(),
            encoded: encoded.len(),
        });
    }
    let mut metadata = json!({
        "name": name,
        "labels": {"app.kubernetes.io/part-of": "wasmctrl", "wasmctrl.io/guest": "true"},
    });
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    Ok(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "binaryData": { file_name: encoded },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_is_carried_as_binary_data_under_its_file_name() {
        let cm = guest_configmap(
            "guests",
            Some("wasmctrl-system"),
            "gpu-summary.wasm",
            b"\0asm",
        )
        .unwrap();
        assert_eq!(cm["binaryData"]["gpu-summary.wasm"], "AGFzbQ==");
        assert_eq!(cm["metadata"]["namespace"], "wasmctrl-system");
    }

    #[test]
    fn oversized_guest_is_refused_with_the_limit() {
        let e = guest_configmap("g", None, "big.wasm", &vec![0u8; 900_000]).unwrap_err();
        assert!(e.to_string().contains("big.wasm"), "{e}");
    }
}
