//! Guests the guest directory names by OCI reference (`NAME.oci`):
//! fetching their bytes through [`crate::delivery`] before they are
//! loaded or swapped exactly as a file is, resolving tags (when allowed)
//! on their interval, and the guests waiting for an unreachable registry
//! (retried with backoff, named by `/readyz` while no version of them
//! runs). It never compiles a guest and never decides a swap.

use sha2::Digest;
use tokio::time::Instant;

use super::*;
use crate::delivery::{DeliveryError, OciReference};

impl Supervisor {
    /// The reference of an OCI entry, pinned to what its tag resolved to
    /// when it names a tag.
    fn pinned_reference(&self, text: &str) -> Result<OciReference, DeliveryError> {
        let reference = OciReference::parse(text)?;
        reference.check_pinned(self.delivery.config().allow_tags)?;
        Ok(match lock(&self.resolved_tags).get(text) {
            Some((digest, _)) if reference.digest().is_none() => reference.pinned(digest),
            _ => reference,
        })
    }

    /// Folds into the digest of each entry naming a tag what the tag
    /// resolves to (again after `--guest-tag-interval`), so a tag that
    /// moved is a changed entry and swaps like one. A tag that cannot be
    /// resolved keeps its last digest (and the guest its version).
    pub(super) async fn resolve_tags(&self, files: &mut BTreeMap<String, GuestFile>) {
        let interval = self.delivery.config().tag_interval;
        for file in files.values_mut() {
            let Some(text) = file.oci.clone() else {
                continue;
            };
            let Ok(reference) = OciReference::parse(&text) else {
                continue;
            };
            if reference.digest().is_some() || !self.delivery.config().allow_tags {
                continue;
            }
            let fresh = lock(&self.resolved_tags)
                .get(&text)
                .filter(|(_, at)| at.elapsed() < interval)
                .map(|(d, _)| d.clone());
            let digest = match fresh {
                Some(d) => Some(d),
                None => match self.delivery.resolve(&reference).await {
                    Ok(d) => {
                        let before = lock(&self.resolved_tags)
                            .insert(text.clone(), (d.clone(), Instant::now()));
                        if before.as_ref().map(|(b, _)| b) != Some(&d) {
                            tracing::info!(guest = %file.key, reference = %reference, digest = %d, "guest tag resolved to {d}");
                        }
                        Some(d)
                    }
                    Err(e) => {
                        tracing::warn!(guest = %file.key, "cannot resolve the guest's tag: {e}");
                        lock(&self.resolved_tags).get(&text).map(|(d, _)| d.clone())
                    }
                },
            };
            if let Some(d) = digest {
                file.digest = hex::encode(sha2::Sha256::digest(format!("{}{d}", file.digest)));
            }
        }
    }

    /// Keeps `key` waiting for its registry: retried with backoff, named
    /// by `/readyz` while no version of it runs, shown as waiting in
    /// `/guests` (with a `GuestWaiting` Event when it starts waiting).
    pub(super) async fn wait_for_registry(
        &self,
        key: &str,
        file: &GuestFile,
        runs: bool,
        e: &DeliveryError,
    ) {
        self.pending_pulls.failed(key, &file.digest, runs, e);
        let state = LoadState::Waiting {
            reason: e.reason().to_string(),
            message: format!("waiting for its registry: {e}"),
        };
        let name = lock(&self.guests)
            .get(key)
            .map_or_else(|| key.to_string(), |g| g.controller.name().to_string());
        let version = Version::new(GuestSource::of_file(file), state);
        self.announce(key, &name, version).await;
    }

    /// Whether some entry names a tag (then the run loop looks again every
    /// `--guest-tag-interval`).
    pub(super) fn has_tags(&self) -> bool {
        !lock(&self.resolved_tags).is_empty()
    }

    /// The component a `NAME.oci` entry names, pulled and verified (from
    /// the cache when there); its failure a [`SupervisorError`] naming the
    /// guest.
    pub(super) async fn fetch(&self, file: &GuestFile) -> Result<Vec<u8>, SupervisorError> {
        let fetched = async {
            let text = file.oci.as_deref().unwrap_or_default();
            let reference = self.pinned_reference(text)?;
            let pulled = self.delivery.pull(&reference).await?;
            tracing::info!(guest = %file.key, reference = %reference, digest = %pulled.digest, from_cache = pulled.from_cache, bytes = pulled.bytes.len(), "guest fetched");
            Ok(pulled.bytes)
        };
        fetched.await.map_err(|source| SupervisorError::Delivery {
            key: file.key.clone(),
            source,
        })
    }
}
