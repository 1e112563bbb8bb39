//! `wasmctrl guest`: a guest packaged for a cluster. `configmap` prints
//! the ConfigMap that carries a `.wasm` (as `binaryData`) to be mounted
//! into the host's pod, as YAML — compressed (`.wasm.gz` or `.wasm.zst`,
//! whichever is smaller) when the component does not fit as it is; `push`
//! and `pull` move a guest to and from an OCI registry in the Wasm
//! artifact layout ([`wasmctrl::delivery`]).
//!
//! Owns the flags, the ConfigMap's shape and its size check (naming the
//! delivery that fits when none does), and checking a guest before it is
//! pushed. It never talks to the cluster; `kubectl apply` does.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use base64::Engine;
use clap::{Args, Subcommand};
use serde_json::{json, Value as Json};
use wasmctrl::supervisor::compressed::Compression;

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
    /// The key (file name in the mounted volume); default: the file's
    /// name. `.gz` or `.zst` is added when the guest is compressed.
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
    let packed = pack(&key, &bytes)?;
    if let Some(c) = packed.compression {
        eprintln!(
            "{key} is {} bytes, too large for a ConfigMap as it is: carried as {} ({} bytes, {})",
            bytes.len(),
            packed.key,
            packed.bytes.len(),
            c.name()
        );
    }
    let cm = guest_configmap(
        &args.name,
        args.namespace.as_deref(),
        &packed.key,
        &packed.bytes,
    )?;
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

/// What a ConfigMap holds around its data: room kept for the object's
/// other fields.
const CONFIGMAP_OVERHEAD: usize = 1024;

/// Why a guest cannot be packaged.
#[derive(Debug, thiserror::Error)]
pub enum PackagingError {
    /// Neither the guest nor its compressed forms fit a ConfigMap.
    #[error("{file} is {size} bytes ({}) — a ConfigMap holds at most {CONFIGMAP_LIMIT} bytes, base64-encoded: deliver it from an OCI registry instead (see \"Delivering guests\" in the book)", compressed_sizes(.compressed))]
    TooLarge {
        /// The file name.
        file: String,
        /// Raw size.
        size: usize,
        /// The size compressed with each format tried.
        compressed: Vec<(Compression, usize)>,
    },
    /// A format could not compress the guest.
    #[error("compressing {file} with {}: {source}", .format.name())]
    Compress {
        /// The file name.
        file: String,
        /// The format.
        format: Compression,
        /// The encoder's error.
        #[source]
        source: std::io::Error,
    },
}

fn compressed_sizes(sizes: &[(Compression, usize)]) -> String {
    if sizes.is_empty() {
        return "not compressed further".into();
    }
    let each: Vec<String> = sizes
        .iter()
        .map(|(c, n)| format!("{n} bytes with {}", c.name()))
        .collect();
    each.join(", ")
}

/// Whether `bytes` fit a ConfigMap's `binaryData` (base64-encoded).
fn fits(bytes: &[u8]) -> bool {
    base64::encoded_len(bytes.len(), true)
        .is_some_and(|n| n + CONFIGMAP_OVERHEAD <= CONFIGMAP_LIMIT)
}

/// A guest as a ConfigMap carries it.
#[derive(Debug)]
pub struct Packed {
    /// The key: `file_name`, with `.gz` or `.zst` when compressed.
    pub key: String,
    /// The bytes carried.
    pub bytes: Vec<u8>,
    /// How they are compressed, if they are.
    pub compression: Option<Compression>,
}

/// `bytes` under the key `file_name` as they are when they fit a
/// ConfigMap, else compressed with the format that makes them smallest
/// (each at its highest level) when that fits; otherwise an error giving
/// every size measured.
pub fn pack(file_name: &str, bytes: &[u8]) -> Result<Packed, PackagingError> {
    let as_is = || Packed {
        key: file_name.to_string(),
        bytes: bytes.to_vec(),
        compression: None,
    };
    let already = Compression::of_file_name(file_name).is_some_and(|(_, c)| c.is_some());
    if fits(bytes) {
        return Ok(as_is());
    }
    let mut compressed = Vec::new();
    let mut best: Option<(Compression, Vec<u8>)> = None;
    for format in Compression::ALL.into_iter().filter(|_| !already) {
        let packed = format
            .compress_best(bytes)
            .map_err(|source| PackagingError::Compress {
                file: file_name.to_string(),
                format,
                source,
            })?;
        compressed.push((format, packed.len()));
        if best.as_ref().is_none_or(|(_, b)| packed.len() < b.len()) {
            best = Some((format, packed));
        }
    }
    match best {
        Some((format, packed)) if fits(&packed) => Ok(Packed {
            key: format!("{file_name}{}", format.suffix()),
            bytes: packed,
            compression: Some(format),
        }),
        _ => Err(PackagingError::TooLarge {
            file: file_name.to_string(),
            size: bytes.len(),
            compressed,
        }),
    }
}

/// A ConfigMap carrying `bytes` under the key `file_name` (see [`pack`]
/// for what fits).
pub fn guest_configmap(
    name: &str,
    namespace: Option<&str>,
    file_name: &str,
    bytes: &[u8],
) -> Result<Json, PackagingError> {
    if !fits(bytes) {
        return Err(PackagingError::TooLarge {
            file: file_name.to_string(),
            size: bytes.len(),
            compressed: Vec::new(),
        });
    }
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
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

    #[test]
    fn a_guest_that_fits_as_it_is_is_carried_as_it_is() {
        let bytes = wasmctrl_test_support::component::code_like_bytes(700_000);
        let packed = pack("g.wasm", &bytes).unwrap();
        assert_eq!((packed.key.as_str(), packed.compression), ("g.wasm", None));
        assert_eq!(packed.bytes, bytes);
    }

    #[test]
    fn a_guest_too_large_as_it_is_is_carried_in_the_smaller_compressed_form() {
        let bytes = wasmctrl_test_support::component::code_like_bytes(1_300_000);
        let packed = pack("g.wasm", &bytes).unwrap();
        let format = packed.compression.expect("compressed");
        let other = Compression::ALL.into_iter().find(|c| *c != format).unwrap();
        assert_eq!(packed.key, format!("g.wasm{}", format.suffix()));
        assert!(packed.bytes.len() <= other.compress_best(&bytes).unwrap().len());
        assert_eq!(format.decompress(&packed.bytes, 1 << 30).unwrap(), bytes);
        let cm = guest_configmap("g", None, &packed.key, &packed.bytes).unwrap();
        assert!(cm["binaryData"][&packed.key].is_string());
    }

    #[test]
    fn a_guest_too_large_even_compressed_is_refused_with_every_size_and_the_delivery_that_fits() {
        let mut rng = fastrand::Rng::with_seed(7);
        let noise: Vec<u8> = (0..1_200_000).map(|_| rng.u8(..)).collect();
        let e = pack("big.wasm", &noise).unwrap_err().to_string();
        assert!(e.starts_with("big.wasm is 1200000 bytes ("), "{e}");
        assert!(
            e.contains("bytes with gzip") && e.contains("bytes with zstd"),
            "{e}"
        );
        assert!(e.contains("OCI registry"), "{e}");
        // An already compressed file is not compressed again.
        let e = pack("big.wasm.gz", &noise).unwrap_err().to_string();
        assert!(e.contains("(not compressed further)"), "{e}");
    }
}
