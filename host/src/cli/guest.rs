//! `wasmctrl guest`: a guest packaged for a cluster. `configmap` prints
//! the ConfigMap that carries a `.wasm` (as `binaryData`) to be mounted
//! into the host's pod, as YAML; `push` and `pull` move a guest to and
//! from an OCI registry in the Wasm artifact layout
//! ([`wasmctrl::delivery`]).
//!
//! Owns the flags, the ConfigMap's shape and its size check, and checking
//! a guest before it is pushed. It never talks to the cluster; `kubectl
//! apply` does.

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
    /// Push a guest component to an OCI registry (Wasm artifact layout:
    /// config application/vnd.wasm.config.v0+json, one application/wasm
    /// layer) and print its digest, `sha256:…`: name it in the host's
    /// guest directory as `oci://REGISTRY/REPO@sha256:…`.
    Push(PushArgs),
    /// Pull a guest component from an OCI registry into a file (verified
    /// against its digests) and print its digest.
    Pull(PullArgs),
}

/// How the CLI reaches a registry (the host's `run` takes the same flags).
#[derive(Args)]
pub struct RegistryArgs {
    /// Registry credentials: a `.dockerconfigjson` file (the format of a
    /// `kubernetes.io/dockerconfigjson` Secret and of skopeo's auth.json).
    #[arg(long, env = "REGISTRY_AUTH_FILE", value_name = "FILE")]
    registry_auth: Option<PathBuf>,
    /// A PEM CA bundle to trust besides the system roots.
    #[arg(long, value_name = "FILE")]
    registry_ca: Option<PathBuf>,
    /// A registry (HOST or HOST:PORT) reached over plain HTTP. Repeatable.
    #[arg(long = "allow-insecure-registry", value_name = "HOST")]
    insecure_registries: Vec<String>,
}

impl RegistryArgs {
    /// The delivery configuration these flags ask for (tags allowed: the
    /// CLI names what it pushes and pulls by tag too).
    pub fn delivery_config(&self) -> wasmctrl::delivery::DeliveryConfig {
        wasmctrl::delivery::DeliveryConfig {
            auth_file: self.registry_auth.clone(),
            ca_file: self.registry_ca.clone(),
            insecure_registries: self.insecure_registries.clone(),
            allow_tags: true,
            ..Default::default()
        }
    }
}

#[derive(Args)]
pub struct PushArgs {
    /// The guest component.
    file: PathBuf,
    /// Where to push it: `[oci://]REGISTRY/REPO:TAG`.
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(Args)]
pub struct PullArgs {
    /// What to pull: `[oci://]REGISTRY/REPO@sha256:…` or `…:TAG`.
    reference: String,
    /// The file to write (atomically: a whole guest or nothing).
    #[arg(short, long)]
    output: PathBuf,
    /// The largest guest accepted, in bytes.
    #[arg(long, default_value_t = wasmctrl::delivery::DEFAULT_MAX_GUEST_BYTES)]
    max_guest_bytes: u64,
    #[command(flatten)]
    registry: RegistryArgs,
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
    pub fn execute(self, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
        match self {
            GuestCommand::Configmap(args) => configmap(args),
            GuestCommand::Push(args) => runtime.block_on(push(args)),
            GuestCommand::Pull(args) => runtime.block_on(pull(args)),
        }
    }
}

/// Checks that `bytes` are a guest this host runs (a component of our
/// contract, importing nothing the host lacks, that compiles), so a
/// registry never holds a guest every host would refuse.
fn check_guest(label: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let runtime = wasmctrl::guest::GuestRuntime::new(
        wasmctrl::guest::RuntimeConfig::default().cache_dir(None),
    )?;
    runtime
        .load_bytes(label, bytes)
        .with_context(|| format!("{label} is not a guest this host runs; not pushed"))?;
    Ok(())
}

/// Pushes `args.file` and prints its digest.
async fn push(args: PushArgs) -> anyhow::Result<()> {
    use wasmctrl::delivery::{Delivery, OciReference};
    let bytes =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let label = args.file.display().to_string();
    let reference = OciReference::parse(&args.reference)?;
    let (l, b) = (label.clone(), bytes.clone());
    tokio::task::spawn_blocking(move || check_guest(&l, &b)).await??;
    let delivery = Delivery::new(args.registry.delivery_config())?;
    let digest = delivery.push(&bytes, &reference).await?;
    println!("{digest}");
    eprintln!(
        "pushed {label} ({} bytes); name it in the guest directory as {}",
        bytes.len(),
        reference.pinned(&digest)
    );
    Ok(())
}

/// Pulls `args.reference` into `args.output` and prints its digest.
async fn pull(args: PullArgs) -> anyhow::Result<()> {
    use wasmctrl::delivery::{Delivery, DeliveryConfig, OciReference};
    let reference = OciReference::parse(&args.reference)?;
    let config = DeliveryConfig {
        max_bytes: args.max_guest_bytes,
        ..args.registry.delivery_config()
    };
    let pulled = Delivery::new(config)?.pull(&reference).await?;
    let dir = match args.output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let write = || -> std::io::Result<()> {
        let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
        tmp.write_all(&pulled.bytes)?;
        tmp.persist(&args.output).map_err(|e| e.error)?;
        Ok(())
    };
    write().with_context(|| format!("writing {}", args.output.display()))?;
    println!("{}", pulled.digest);
    Ok(())
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
