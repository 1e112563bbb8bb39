//! `oci://REGISTRY/REPO@sha256:DIGEST` references: parsing and the tag
//! policy. It never talks to a registry.

use oci_client::Reference;

/// The scheme that marks a guest delivered by a registry.
pub const SCHEME: &str = "oci://";

/// Why a reference cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// Not `oci://REGISTRY/REPO(:TAG|@sha256:DIGEST)`.
    #[error(
        "{reference:?} is not an OCI reference (oci://REGISTRY/REPO@sha256:DIGEST): {problem}"
    )]
    Malformed {
        /// What was given.
        reference: String,
        /// What is wrong.
        problem: String,
    },
    /// A tag without a digest, and tags are not allowed.
    #[error("{reference} names a tag, not a digest: pin it (oci://REGISTRY/REPO@sha256:DIGEST; `wasmctrl guest push` prints the digest) or start the host with --allow-guest-tags")]
    TagNotAllowed {
        /// The reference.
        reference: String,
    },
}

/// A parsed guest reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciReference {
    inner: Reference,
}

impl OciReference {
    /// Parses `oci://REGISTRY/REPO@sha256:…` (or `:TAG`); the `oci://`
    /// prefix is optional (the CLI takes plain `REGISTRY/REPO:TAG` too).
    /// The registry must be named: no implicit Docker Hub.
    pub fn parse(text: &str) -> Result<Self, ReferenceError> {
        let text = text.trim();
        let bare = text.strip_prefix(SCHEME).unwrap_or(text);
        let malformed = |problem: String| ReferenceError::Malformed {
            reference: text.to_string(),
            problem,
        };
        let registry = bare.split('/').next().unwrap_or_default();
        if !bare.contains('/')
            || !(registry.contains('.') || registry.contains(':') || registry == "localhost")
        {
            return Err(malformed(
                "name the registry host (REGISTRY/REPO), e.g. ghcr.io/org/guest".into(),
            ));
        }
        let inner: Reference = bare.parse().map_err(|e| malformed(format!("{e}")))?;
        if let Some(digest) = inner.digest() {
            let hex = digest.strip_prefix("sha256:").unwrap_or_default();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(malformed(format!(
                    "digest {digest} is not sha256:<64 hex digits>"
                )));
            }
        }
        Ok(OciReference { inner })
    }

    /// Refuses a reference without a digest unless `allow_tags`.
    pub fn check_pinned(&self, allow_tags: bool) -> Result<(), ReferenceError> {
        if self.digest().is_none() && !allow_tags {
            return Err(ReferenceError::TagNotAllowed {
                reference: self.to_string(),
            });
        }
        Ok(())
    }

    /// The registry host (`ghcr.io`, `127.0.0.1:5000`).
    pub fn registry(&self) -> &str {
        self.inner.registry()
    }

    /// The pinned manifest digest (`sha256:…`), if any.
    pub fn digest(&self) -> Option<&str> {
        self.inner.digest()
    }

    /// The same repository pinned at `digest`.
    #[must_use]
    pub fn pinned(&self, digest: &str) -> Self {
        OciReference {
            inner: Reference::with_digest(
                self.inner.registry().to_string(),
                self.inner.repository().to_string(),
                digest.to_string(),
            ),
        }
    }

    /// The reference as `oci-client` takes it.
    pub(super) fn as_client(&self) -> &Reference {
        &self.inner
    }

    /// Whether the registry is on the loopback interface.
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(self.registry())
    }
}

/// Whether `host` (`HOST` or `HOST:PORT`) is a loopback address or
/// `localhost`.
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl std::fmt::Display for OciReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SCHEME}{}", self.inner.whole())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_pinned_reference_keeps_registry_repository_and_digest() {
        let r = OciReference::parse(&format!("oci://127.0.0.1:5000/guests/app@{D}")).unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.digest(), Some(D));
        assert_eq!(
            r.to_string(),
            format!("oci://127.0.0.1:5000/guests/app@{D}")
        );
        assert!(r.check_pinned(false).is_ok());
        assert!(r.is_loopback());
    }

    #[test]
    fn a_tag_is_refused_unless_tags_are_allowed() {
        let r = OciReference::parse("oci://ghcr.io/org/app:v1").unwrap();
        let e = r.check_pinned(false).unwrap_err().to_string();
        assert!(
            e.contains("ghcr.io/org/app:v1") && e.contains("--allow-guest-tags"),
            "{e}"
        );
        assert!(r.check_pinned(true).is_ok());
        assert_eq!(r.pinned(D).digest(), Some(D));
        assert!(!r.is_loopback());
    }

    #[test]
    fn references_without_a_registry_or_with_a_bad_digest_are_malformed() {
        for bad in [
            "oci://app",
            "oci://org/app:v1",
            "oci://ghcr.io/org/app@sha256:12",
            "",
        ] {
            assert!(OciReference::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(is_loopback_host("localhost:5000") && is_loopback_host("[::1]:5000"));
        assert!(!is_loopback_host("10.0.0.1:5000"));
    }
}
