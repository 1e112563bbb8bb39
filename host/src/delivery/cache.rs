//! The on-disk cache of pulled guests: manifests and layers stored by
//! their own `sha256` digest under `DIR/oci/sha256/HEX`, in the same
//! directory as the compiled-guest cache (`--guest-cache-dir`). Every
//! entry is written to a temporary file in that directory and renamed into
//! place, so a reader sees a whole entry or none; every read is hashed
//! again, so a damaged entry is a miss, never a wrong guest. It never
//! talks to a registry.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A cache entry that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("guest cache {}: cannot write {digest}: {source} (the guest still runs from memory; give --guest-cache-dir a writable directory with room)", dir.display())]
pub struct CacheError {
    /// The cache directory.
    pub dir: PathBuf,
    /// The entry's digest.
    pub digest: String,
    /// The I/O error (read-only file system, no space, ...).
    #[source]
    pub source: std::io::Error,
}

/// Content-addressed storage by `sha256:` digest.
#[derive(Debug, Clone)]
pub struct BlobCache {
    dir: PathBuf,
}

/// `sha256:HEX` → `HEX`, when it is one.
fn hex_of(digest: &str) -> Option<&str> {
    digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `sha256:HEX` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

impl BlobCache {
    /// The cache under `dir` (created on the first write).
    pub fn new(dir: &Path) -> Self {
        BlobCache {
            dir: dir.join("oci").join("sha256"),
        }
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        hex_of(digest).map(|h| self.dir.join(h))
    }

    /// The bytes stored under `digest`, when present and intact.
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.path(digest)?).ok()?;
        if sha256_digest(&bytes) == digest {
            Some(bytes)
        } else {
            tracing::warn!(digest, dir = %self.dir.display(), "ignoring a damaged guest cache entry");
            None
        }
    }

    /// Stores `bytes` under their digest (which must be `digest`):
    /// written beside, synced, renamed into place.
    pub fn put(&self, digest: &str, bytes: &[u8]) -> Result<(), CacheError> {
        let err = |source| CacheError {
            dir: self.dir.clone(),
            digest: digest.to_string(),
            source,
        };
        let Some(path) = self.path(digest).filter(|_| sha256_digest(bytes) == digest) else {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "content does not match its digest",
            )));
        };
        std::fs::create_dir_all(&self.dir).map_err(err)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(err)?;
        tmp.write_all(bytes).map_err(err)?;
        tmp.as_file().sync_all().map_err(err)?;
        // On failure the temporary file is removed when `tmp` drops.
        tmp.persist(&path).map_err(|e| err(e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_only_while_intact() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(dir.path());
        let d = sha256_digest(b"guest");
        assert!(cache.get(&d).is_none());
        cache.put(&d, b"guest").unwrap();
        assert_eq!(cache.get(&d).unwrap(), b"guest");
        std::fs::write(cache.path(&d).unwrap(), b"gues").unwrap();
        assert!(cache.get(&d).is_none(), "a truncated entry is a miss");
        assert!(
            cache.put(&d, b"other").is_err(),
            "content must match its name"
        );
    }

    #[test]
    fn a_cache_that_cannot_be_written_is_an_error_naming_it_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"").unwrap();
        let cache = BlobCache::new(&file);
        let e = cache
            .put(&sha256_digest(b"x"), b"x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not-a-dir") && e.contains("cannot write"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
