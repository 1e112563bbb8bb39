//! Guests delivered by OCI registries: `oci://REGISTRY/REPO@sha256:…`
//! references, pushed and pulled in the Wasm OCI artifact layout through
//! `oci-client`, verified by digest, kept in an on-disk cache by digest.
//!
//! Owns the registry client (rustls with the ring provider, an operator's
//! CA bundle, plain HTTP only for hosts named by
//! `--allow-insecure-registry`), credentials from a `.dockerconfigjson`
//! file, the size cap, the checks of what a registry sends, and sorting
//! failures into retryable ones (the registry is unreachable) and refusals.
//! It never compiles or runs a guest: the supervisor hands the verified
//! bytes to the guest runtime as it does a file's.
//!
//! # Layout
//! - [`mod@reference`]: parsing references and the tag policy.
//! - `auth`: `.dockerconfigjson` credentials.
//! - `artifact`: the manifest layout, built and checked.
//! - `cache`: the digest-addressed cache, written atomically.

mod artifact;
mod auth;
mod cache;
pub mod reference;

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OCI_IMAGE_MEDIA_TYPE;
use oci_client::secrets::RegistryAuth;
use oci_client::RegistryOperation;

pub use artifact::{WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE};
pub use auth::{AuthError, DockerConfig};
pub use cache::{sha256_digest, BlobCache, CacheError};
pub use reference::{OciReference, ReferenceError};

/// The largest guest pulled by default (a Python guest is ~20 MB).
pub const DEFAULT_MAX_GUEST_BYTES: u64 = 64 << 20;

/// How to reach registries and where to keep what was pulled.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    /// `.dockerconfigjson` credentials (a mounted
    /// `kubernetes.io/dockerconfigjson` Secret).
    pub auth_file: Option<PathBuf>,
    /// PEM CA bundle trusted besides the system roots.
    pub ca_file: Option<PathBuf>,
    /// Registry hosts reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// The cache directory (pulled guests under `DIR/oci/`); none: no cache.
    pub cache_dir: Option<PathBuf>,
    /// References by tag are accepted (resolved to a digest).
    pub allow_tags: bool,
    /// How often a tag is resolved again.
    pub tag_interval: Duration,
    /// The largest layer accepted, in bytes.
    pub max_bytes: u64,
    /// Connect and read timeout of registry requests.
    pub timeout: Duration,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            auth_file: None,
            ca_file: None,
            insecure_registries: Vec::new(),
            cache_dir: None,
            allow_tags: false,
            tag_interval: Duration::from_secs(300),
            max_bytes: DEFAULT_MAX_GUEST_BYTES,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Why a guest could not be pushed or pulled; every message names the
/// reference.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// The reference is malformed or names a tag that is not allowed.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// The credentials file is unusable.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The CA bundle is unusable.
    #[error("registry CA bundle {}: {problem}", path.display())]
    Ca {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The registry could not be reached or answered 5xx: worth retrying.
    #[error("{reference}: registry unreachable: {detail}")]
    Unreachable {
        /// The reference.
        reference: String,
        /// The transport's error.
        detail: String,
    },
    /// The registry has no such manifest or blob.
    #[error("{reference}: not found in the registry (wrong repository or digest?)")]
    NotFound {
        /// The reference.
        reference: String,
    },
    /// The registry refused the credentials (401/403).
    #[error("{reference}: the registry refused access (401/403): check --registry-auth: {detail}")]
    Denied {
        /// The reference.
        reference: String,
        /// The registry's answer.
        detail: String,
    },
    /// What arrived does not hash to the digest that names it.
    #[error("{reference}: {what} digest mismatch: expected {expected}, got {found}")]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// `manifest` or `layer`.
        what: &'static str,
        /// The digest asked for.
        expected: String,
        /// The digest of what arrived.
        found: String,
    },
    /// The artifact is not a Wasm component artifact.
    #[error("{reference}: not a Wasm component artifact: {detail}")]
    NotWasm {
        /// The reference.
        reference: String,
        /// What it is instead.
        detail: String,
    },
    /// The layer exceeds the size cap.
    #[error(
        "{reference}: the guest is {size} bytes, over the limit of {limit} (--max-guest-bytes)"
    )]
    TooLarge {
        /// The reference.
        reference: String,
        /// Its size, declared or counted so far.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// The download ended before the declared size.
    #[error("{reference}: download truncated: {got} of {expected} bytes")]
    Truncated {
        /// The reference.
        reference: String,
        /// Bytes received.
        got: u64,
        /// Bytes declared.
        expected: u64,
    },
    /// Any other registry failure.
    #[error("{reference}: {detail}")]
    Registry {
        /// The reference.
        reference: String,
        /// The error.
        detail: String,
    },
}

/// A `Result` with a [`DeliveryError`].
pub type Result<T, E = DeliveryError> = std::result::Result<T, E>;

impl DeliveryError {
    /// Whether the failure may pass by itself (the registry is down or
    /// overloaded): the guest waits and is retried with backoff. Every
    /// other failure is a refusal until the reference changes.
    pub fn is_transient(&self) -> bool {
        matches!(self, DeliveryError::Unreachable { .. })
    }

    /// The failure as a metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            DeliveryError::Reference(_) => "oci_reference",
            DeliveryError::Auth(_) | DeliveryError::Ca { .. } => "oci_config",
            DeliveryError::Unreachable { .. } => "oci_unreachable",
            DeliveryError::NotFound { .. } => "oci_not_found",
            DeliveryError::Denied { .. } => "oci_denied",
            DeliveryError::DigestMismatch { .. } => "oci_digest",
            DeliveryError::NotWasm { .. } => "oci_not_wasm",
            DeliveryError::TooLarge { .. } => "oci_too_large",
            DeliveryError::Truncated { .. } => "oci_truncated",
            DeliveryError::Registry { .. } => "oci_registry",
        }
    }

    fn from_client(reference: &OciReference, e: OciDistributionError) -> Self {
        let reference = reference.to_string();
        let detail = e.to_string();
        match e {
            OciDistributionError::RequestError(r)
                if r.is_connect() || r.is_timeout() || r.is_request() =>
            {
                DeliveryError::Unreachable {
                    reference,
                    detail: chain(&r),
                }
            }
            OciDistributionError::ServerError { code, .. } if code >= 500 => {
                DeliveryError::Unreachable { reference, detail }
            }
            OciDistributionError::ServerError { code: 404, .. }
            | OciDistributionError::ImageManifestNotFoundError(_) => {
                DeliveryError::NotFound { reference }
            }
            OciDistributionError::ServerError {
                code: 401 | 403, ..
            }
            | OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_) => {
                DeliveryError::Denied { reference, detail }
            }
            OciDistributionError::RegistryError { ref envelope, .. } => {
                let codes: Vec<String> = envelope
                    .errors
                    .iter()
                    .map(|e| format!("{:?}", e.code))
                    .collect();
                let has = |c: &str| codes.iter().any(|x| x.eq_ignore_ascii_case(c));
                if has("ManifestUnknown") || has("BlobUnknown") || has("NameUnknown") {
                    DeliveryError::NotFound { reference }
                } else if has("Unauthorized") || has("Denied") {
                    DeliveryError::Denied { reference, detail }
                } else {
                    DeliveryError::Registry { reference, detail }
                }
            }
            _ => DeliveryError::Registry { reference, detail },
        }
    }
}

/// An error with its causes (reqwest hides the TLS or connect reason in
/// its sources).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

/// A guest pulled and verified.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The component's bytes.
    pub bytes: Vec<u8>,
    /// The manifest digest (`sha256:…`) that names it.
    pub digest: String,
    /// Whether it came from the cache (no registry request).
    pub from_cache: bool,
}

/// A registry client with its credentials, trust and cache.
pub struct Delivery {
    config: DeliveryConfig,
    client: oci_client::Client,
    auth: DockerConfig,
    cache: Option<BlobCache>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The PEM certificates of a bundle, one by one (the client takes one
/// certificate per entry).
fn pem_certificates(path: &Path) -> Result<Vec<Certificate>> {
    let ca_err = |problem: String| DeliveryError::Ca {
        path: path.to_path_buf(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|e| ca_err(format!("cannot read: {e}")))?;
    const END: &str = "-----END CERTIFICATE-----";
    let certs: Vec<Certificate> = text
        .split_inclusive(END)
        .filter(|block| block.contains("-----BEGIN CERTIFICATE-----"))
        .map(|block| Certificate {
            encoding: CertificateEncoding::Pem,
            data: block.trim().as_bytes().to_vec(),
        })
        .collect();
    if certs.is_empty() {
        return Err(ca_err("holds no PEM certificate".into()));
    }
    Ok(certs)
}

impl Delivery {
    /// A client for `config` (credentials and CA bundle read now).
    pub fn new(config: DeliveryConfig) -> Result<Self> {
        // reqwest without a built-in provider takes the process default;
        // the host uses ring everywhere. Already installed is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let auth = match &config.auth_file {
            Some(path) => DockerConfig::load(path)?,
            None => DockerConfig::default(),
        };
        let extra_root_certificates = match &config.ca_file {
            Some(path) => pem_certificates(path)?,
            None => Vec::new(),
        };
        for host in &config.insecure_registries {
            if !reference::is_loopback_host(host) {
                tracing::warn!(registry = %host, "guests from {host} travel over plain HTTP (--allow-insecure-registry): anyone on the path can read or replace them; digests still verify what a pinned reference names");
            }
        }
        let protocol = if config.insecure_registries.is_empty() {
            ClientProtocol::Https
        } else {
            ClientProtocol::HttpsExcept(config.insecure_registries.clone())
        };
        let client = oci_client::Client::new(ClientConfig {
            protocol,
            extra_root_certificates,
            connect_timeout: Some(config.timeout),
            read_timeout: Some(config.timeout),
            user_agent: concat!("wasmctrl/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        });
        let cache = config.cache_dir.as_deref().map(BlobCache::new);
        Ok(Delivery {
            config,
            client,
            auth,
            cache,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &DeliveryConfig {
        &self.config
    }

    fn credentials(&self, reference: &OciReference) -> RegistryAuth {
        self.auth.for_registry(reference.registry())
    }

    /// Pushes the component `wasm` to `reference` (its tag, if any) and
    /// returns the manifest digest that names it.
    pub async fn push(&self, wasm: &[u8], reference: &OciReference) -> Result<String> {
        let image = reference.as_client();
        let fail = |e| DeliveryError::from_client(reference, e);
        let layer_digest = sha256_digest(wasm);
        let artifact = artifact::build(wasm, &layer_digest);
        self.client
            .auth(image, &self.credentials(reference), RegistryOperation::Push)
            .await
            .map_err(fail)?;
        self.client
            .push_blob(image, wasm.to_vec(), &layer_digest)
            .await
            .map_err(fail)?;
        self.client
            .push_blob(
                image,
                artifact.config.clone(),
                &sha256_digest(&artifact.config),
            )
            .await
            .map_err(fail)?;
        let content_type = http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE);
        self.client
            .push_manifest_raw(image, artifact.manifest, content_type)
            .await
            .map_err(fail)?;
        Ok(artifact.digest)
    }

    /// The digest `reference` names now: its own when pinned, else the
    /// registry's answer for its tag (refused unless tags are allowed).
    pub async fn resolve(&self, reference: &OciReference) -> Result<String> {
        reference.check_pinned(self.config.allow_tags)?;
        if let Some(d) = reference.digest() {
            return Ok(d.to_string());
        }
        self.client
            .fetch_manifest_digest(reference.as_client(), &self.credentials(reference))
            .await
            .map_err(|e| DeliveryError::from_client(reference, e))
    }

    /// The component `reference` names, verified: from the cache when a
    /// pinned digest is there, else pulled (manifest and layer checked
    /// against their digests, the layout, the size cap and the component
    /// header) and cached. A cache that cannot be written is logged; the
    /// verified guest is returned all the same.
    pub async fn pull(&self, reference: &OciReference) -> Result<Pulled> {
        reference.check_pinned(self.config.allow_tags)?;
        if let Some(bytes) = reference.digest().and_then(|d| self.cached(reference, d)) {
            let digest = reference.digest().unwrap_or_default().to_string();
            return Ok(Pulled {
                bytes,
                digest,
                from_cache: true,
            });
        }
        let image = reference.as_client();
        let fail = |e| DeliveryError::from_client(reference, e);
        let (manifest, _) = self
            .client
            .pull_manifest_raw(image, &self.credentials(reference), &[OCI_IMAGE_MEDIA_TYPE])
            .await
            .map_err(fail)?;
        let digest = sha256_digest(&manifest);
        if let Some(expected) = reference.digest().filter(|e| *e != digest) {
            return Err(DeliveryError::DigestMismatch {
                reference: reference.to_string(),
                what: "manifest",
                expected: expected.to_string(),
                found: digest,
            });
        }
        let not_wasm = |detail: String| DeliveryError::NotWasm {
            reference: reference.to_string(),
            detail,
        };
        let layer = artifact::component_layer(&manifest).map_err(not_wasm)?;
        let declared = u64::try_from(layer.size).unwrap_or(0);
        self.check_size(reference, declared)?;
        let mut stream = self
            .client
            .pull_blob_stream(image, &layer)
            .await
            .map_err(fail)?
            .stream;
        let mut bytes = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                // The stream checks the digest at its end; a cut connection
                // shows as a short body.
                Err(e) if bytes.len() as u64 >= declared => {
                    return Err(DeliveryError::Registry {
                        reference: reference.to_string(),
                        detail: format!("layer: {}", chain(&e)),
                    })
                }
                Err(_) => break,
            };
            bytes.extend_from_slice(&chunk);
            self.check_size(reference, bytes.len() as u64)?;
        }
        if (bytes.len() as u64) != declared {
            return Err(DeliveryError::Truncated {
                reference: reference.to_string(),
                got: bytes.len() as u64,
                expected: declared,
            });
        }
        let found = sha256_digest(&bytes);
        if found != layer.digest {
            return Err(DeliveryError::DigestMismatch {
                reference: reference.to_string(),
                what: "layer",
                expected: layer.digest,
                found,
            });
        }
        artifact::check_component(&bytes).map_err(not_wasm)?;
        if let Some(cache) = &self.cache {
            // The layer first: a manifest in the cache always has its layer.
            let stored = cache
                .put(&layer.digest, &bytes)
                .and_then(|()| cache.put(&digest, &manifest));
            if let Err(e) = stored {
                tracing::warn!(reference = %reference, "{e}");
            }
        }
        Ok(Pulled {
            bytes,
            digest,
            from_cache: false,
        })
    }

    fn check_size(&self, reference: &OciReference, size: u64) -> Result<()> {
        if size > self.config.max_bytes {
            return Err(DeliveryError::TooLarge {
                reference: reference.to_string(),
                size,
                limit: self.config.max_bytes,
            });
        }
        Ok(())
    }

    /// The cached component of the manifest `digest`, checked as a pull is.
    fn cached(&self, reference: &OciReference, digest: &str) -> Option<Vec<u8>> {
        let cache = self.cache.as_ref()?;
        let manifest = cache.get(digest)?;
        let layer = artifact::component_layer(&manifest).ok()?;
        let bytes = cache.get(&layer.digest)?;
        if self.check_size(reference, bytes.len() as u64).is_err() {
            return None;
        }
        artifact::check_component(&bytes).ok()?;
        Some(bytes)
    }
}
