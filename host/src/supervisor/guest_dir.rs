//! A directory of guests, as a ConfigMap volume presents it.
//!
//! Owns reading `DIR/*.wasm` — or `*.wasm.gz`, `*.wasm.zst`, decompressed
//! when loaded (see [`super::compressed`]), or `*.oci` holding an OCI
//! reference (`oci://REGISTRY/REPO@sha256:…`, fetched by the supervisor)
//! — each with an optional
//! `NAME.config.json` beside it (a JSON object of string values), into a
//! consistent set, and
//! noticing when that set may have changed. The kubelet updates a ConfigMap
//! volume by writing a new timestamped directory and atomically swapping the
//! `..data` symlink, so every visible file changes at once and per-file
//! mtimes are useless: this module watches the directory itself and, on any
//! event (debounced) or on a periodic rescan, re-reads the whole set and
//! compares **content digests**. It never loads or runs a guest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::compressed::{Compression, DecompressError};

/// Why a guest directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GuestDirError {
    /// The directory itself is unreadable.
    #[error("cannot read guest directory {dir}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The watch could not be set up.
    #[error("cannot watch guest directory {dir}: {source}")]
    Watch {
        /// The directory.
        dir: PathBuf,
        /// The notify error.
        #[source]
        source: notify::Error,
    },
}

/// A guest's `NAME.config.json` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct ConfigFileError {
    /// The configuration file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: String,
}

/// Why a guest's file cannot give its component.
#[derive(Debug, thiserror::Error)]
pub enum GuestFileError {
    /// Several files give the same guest (`g.wasm` and `g.wasm.gz`).
    #[error("{key} is given by {} files ({}): keep one", files.len(), files.join(", "))]
    Ambiguous {
        /// The guest's key.
        key: String,
        /// The files' names.
        files: Vec<String>,
    },
    /// A compressed file does not decompress (within the cap).
    #[error("{file}: {source}")]
    Decompress {
        /// The file's name.
        file: String,
        /// What went wrong.
        #[source]
        source: DecompressError,
    },
}

impl GuestFileError {
    /// Why, as a metric label (`ambiguous`, `too_large`, `decompress`).
    pub fn reason(&self) -> &'static str {
        match self {
            GuestFileError::Ambiguous { .. } => "ambiguous",
            GuestFileError::Decompress {
                source: DecompressError::TooLarge { .. },
                ..
            } => "too_large",
            GuestFileError::Decompress { .. } => "decompress",
        }
    }
}

/// One guest as found in the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestFile {
    /// The file stem (`gpu-summary` for `gpu-summary.wasm` or
    /// `gpu-summary.wasm.gz`): the guest's key.
    pub key: String,
    /// The file's path as seen in the directory.
    pub path: PathBuf,
    /// The file's bytes (compressed, if it is).
    pub bytes: Vec<u8>,
    /// How `bytes` are compressed (None: a plain `.wasm`); the names of
    /// the files when several give this guest (then `bytes` is empty).
    pub compression: Result<Option<Compression>, Vec<String>>,
    /// Configuration from `KEY.config.json`, or an error naming the problem.
    pub config: Result<BTreeMap<String, String>, ConfigFileError>,
    /// Digest of module and configuration: equal digests mean "unchanged".
    pub digest: String,
    /// The reference a `NAME.oci` file holds (its trimmed text): the
    /// component is fetched from it, not read from `bytes`.
    pub oci: Option<String>,
}

impl GuestFile {
    /// The file's name: the key of the ConfigMap mounted as the directory.
    pub fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The component: the file's bytes, decompressed when the file is
    /// compressed — refused once larger than `cap` bytes.
    pub fn component(&self, cap: u64) -> Result<std::borrow::Cow<'_, [u8]>, GuestFileError> {
        match &self.compression {
            Ok(None) => Ok(std::borrow::Cow::Borrowed(&self.bytes)),
            Ok(Some(c)) => c
                .decompress(&self.bytes, cap)
                .map(std::borrow::Cow::Owned)
                .map_err(|source| GuestFileError::Decompress {
                    file: self.file_name(),
                    source,
                }),
            Err(files) => Err(GuestFileError::Ambiguous {
                key: self.key.clone(),
                files: files.clone(),
            }),
        }
    }
}

/// The suffix of a file naming a guest by OCI reference.
pub const OCI_SUFFIX: &str = ".oci";

/// What a guest file's key ends with when it is the shadow of another
/// guest (`gpu-summary.shadow.wasm` shadows `gpu-summary`).
pub const SHADOW_SUFFIX: &str = ".shadow";

/// The guest a key names as its target, when the key is a shadow's.
pub fn shadow_target(key: &str) -> Option<&str> {
    key.strip_suffix(SHADOW_SUFFIX).filter(|t| !t.is_empty())
}

/// Reads the directory's current set of guests (files that vanish while
/// reading are skipped; they are gone from the set).
pub fn scan(dir: &Path) -> Result<BTreeMap<String, GuestFile>, GuestDirError> {
    let entries = std::fs::read_dir(dir).map_err(|source| GuestDirError::Dir {
        dir: dir.to_path_buf(),
        source,
    })?;
    // Every file giving each key: one is the guest; more is ambiguous.
    let mut names: BTreeMap<String, Vec<(String, Option<Compression>)>> = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // `..data`, `..2026_11_29_...`: the kubelet's own bookkeeping.
        if name.starts_with('.') {
            continue;
        }
        if let Some((key, compression)) = Compression::of_file_name(&name) {
            let key = key.to_string();
            names.entry(key).or_default().push((name, compression));
        } else if let Some(key) = name.strip_suffix(OCI_SUFFIX) {
            names.entry(key.to_string()).or_default().push((name, None));
        }
    }
    let mut out = BTreeMap::new();
    for (key, mut files) in names {
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let (name, compression) = files[0].clone();
        let path = dir.join(&name);
        let (bytes, compression) = if files.len() > 1 {
            let names: Vec<String> = files.into_iter().map(|(n, _)| n).collect();
            (Vec::new(), Err(names))
        } else {
            // Follows the `name -> ..data/name` symlink; a swap in between
            // reads either the old or the new file, and the next event
            // rescans.
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            (bytes, Ok(compression))
        };
        let config_path = dir.join(format!("{key}.config.json"));
        let (config, config_raw) = match std::fs::read(&config_path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Ok(BTreeMap::new()), Vec::new()),
            Err(e) => {
                let problem = format!("cannot read: {e}");
                let path = config_path.clone();
                (Err(ConfigFileError { path, problem }), Vec::new())
            }
            Ok(raw) => (parse_config(&config_path, &raw), raw),
        };
        let mut h = Sha256::new();
        match &compression {
            Ok(_) => h.update(name.as_bytes()),
            Err(names) => h.update(names.join("\0").as_bytes()),
        }
        h.update([0u8]);
        h.update(&bytes);
        h.update([0u8]);
        h.update(&config_raw);
        let oci = (name.ends_with(OCI_SUFFIX) && compression.is_ok())
            .then(|| String::from_utf8_lossy(&bytes).trim().to_string());
        out.insert(
            key.clone(),
            GuestFile {
                key,
                path,
                bytes,
                compression,
                config,
                digest: hex::encode(h.finalize()),
                oci,
            },
        );
    }
    Ok(out)
}

fn parse_config(path: &Path, raw: &[u8]) -> Result<BTreeMap<String, String>, ConfigFileError> {
    let err = |problem: String| ConfigFileError {
        path: path.to_path_buf(),
        problem,
    };
    let v: serde_json::Value =
        serde_json::from_slice(raw).map_err(|e| err(format!("not valid JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| err("must be a JSON object of strings".into()))?;
    obj.iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k.clone(), s.clone())),
            serde_json::Value::Number(n) => Ok((k.clone(), n.to_string())),
            serde_json::Value::Bool(b) => Ok((k.clone(), b.to_string())),
            _ => Err(err(format!("value of {k:?} must be a string"))),
        })
        .collect()
}

/// Updates `dir` exactly as the kubelet updates a ConfigMap volume: the
/// files go into a new timestamped directory, `..data` is swapped to it
/// atomically (rename over the old symlink), and each key is a symlink
/// through `..data`. Used by tests and benches to reproduce the real layout.
pub fn write_like_kubelet(
    dir: &Path,
    generation: u32,
    files: &[(&str, &[u8])],
) -> std::io::Result<()> {
    let ts_name = format!("..2026_11_29_00_00_{generation:02}.000000000");
    let ts = dir.join(&ts_name);
    std::fs::create_dir(&ts)?;
    for (name, bytes) in files {
        std::fs::write(ts.join(name), bytes)?;
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&ts_name, &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))?;
    // Keys that disappeared lose their symlink; new keys get one.
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && !files.iter().any(|(f, _)| *f == name) {
            std::fs::remove_file(entry.path())?;
        }
    }
    for (name, _) in files {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(name), &link)?;
        }
    }
    Ok(())
}

/// Watches a directory; [`DirWatch::changed`] resolves when the set may
/// have changed (debounced), or after the rescan interval.
pub struct DirWatch {
    _watcher: notify::RecommendedWatcher,
    events: mpsc::Receiver<()>,
    debounce: Duration,
    rescan: Duration,
}

impl DirWatch {
    /// Starts watching `dir` (non-recursively: the `..data` swap is an event
    /// on the directory itself).
    pub fn new(dir: &Path, debounce: Duration, rescan: Duration) -> Result<Self, GuestDirError> {
        let (tx, events) = mpsc::channel(64);
        let mut watcher =
            notify::recommended_watcher(move |_event: notify::Result<notify::Event>| {
                // A full channel already means "rescan"; dropping is fine.
                let _ = tx.try_send(());
            })
            .map_err(|source| GuestDirError::Watch {
                dir: dir.to_path_buf(),
                source,
            })?;
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|source| GuestDirError::Watch {
                dir: dir.to_path_buf(),
                source,
            })?;
        Ok(DirWatch {
            _watcher: watcher,
            events,
            debounce,
            rescan,
        })
    }

    /// Waits for a change (then for `debounce` of quiet) or the rescan tick.
    pub async fn changed(&mut self) {
        tokio::select! {
            Some(()) = self.events.recv() => {
                // Let a burst (the kubelet writes files, then swaps) settle.
                while let Ok(Some(())) = tokio::time::timeout(self.debounce, self.events.recv()).await {}
            }
            () = tokio::time::sleep(self.rescan) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubelet_update(dir: &Path, generation: u32, files: &[(&str, &[u8])]) {
        write_like_kubelet(dir, generation, files).unwrap();
    }

    #[test]
    fn kubelet_symlink_swap_changes_every_file_at_once() {
        let dir = tempfile::tempdir().unwrap();
        kubelet_update(
            dir.path(),
            1,
            &[("a.wasm", b"one"), ("a.config.json", br#"{"name": "x"}"#)],
        );
        let first = scan(dir.path()).unwrap();
        assert_eq!(first.len(), 1, "only *.wasm are guests; ..data is skipped");
        assert_eq!(first["a"].config.as_ref().unwrap()["name"], "x");

        kubelet_update(
            dir.path(),
            2,
            &[("a.wasm", b"two"), ("a.config.json", br#"{"name": "x"}"#)],
        );
        let second = scan(dir.path()).unwrap();
        assert_ne!(first["a"].digest, second["a"].digest);
        assert_eq!(second["a"].bytes, b"two");

        // Same content rewritten: same digest, so no swap.
        kubelet_update(
            dir.path(),
            3,
            &[("a.wasm", b"two"), ("a.config.json", br#"{"name": "x"}"#)],
        );
        assert_eq!(scan(dir.path()).unwrap()["a"].digest, second["a"].digest);

        // A configuration change alone is a change.
        kubelet_update(
            dir.path(),
            4,
            &[("a.wasm", b"two"), ("a.config.json", br#"{"name": "y"}"#)],
        );
        assert_ne!(scan(dir.path()).unwrap()["a"].digest, second["a"].digest);
    }

    #[test]
    fn plain_directories_and_bad_configuration_are_reported_per_guest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"x").unwrap();
        std::fs::write(dir.path().join("g.config.json"), b"[1]").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"ignored").unwrap();
        let set = scan(dir.path()).unwrap();
        let err = set["g"].config.as_ref().unwrap_err().to_string();
        assert!(
            err.contains("g.config.json") && err.contains("object"),
            "{err}"
        );
        assert!(scan(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn a_compressed_file_gives_its_guest_decompressed_and_two_files_for_one_guest_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let component = b"\0asm\x0d\0\x01\0 a component, say".repeat(100);
        let gz = Compression::Gzip.compress_best(&component).unwrap();
        let zst = Compression::Zstd.compress_best(&component).unwrap();
        kubelet_update(
            dir.path(),
            1,
            &[
                ("a.wasm.gz", &gz),
                ("b.wasm.zst", &zst),
                ("c.wasm", &component),
            ],
        );
        let set = scan(dir.path()).unwrap();
        assert_eq!(set.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(set["a"].compression, Ok(Some(Compression::Gzip)));
        assert_eq!(set["a"].file_name(), "a.wasm.gz");
        for key in ["a", "b", "c"] {
            assert_eq!(
                &*set[key].component(1 << 20).unwrap(),
                &component[..],
                "{key}"
            );
        }
        let e = set["a"].component(100).unwrap_err();
        assert_eq!(e.reason(), "too_large");
        assert!(
            e.to_string()
                .starts_with("a.wasm.gz: decompresses to more than 100 bytes"),
            "{e}"
        );

        // The same guest twice: refused by name, whatever the files hold.
        kubelet_update(
            dir.path(),
            2,
            &[
                ("a.wasm.gz", &gz),
                ("a.wasm", &component),
                ("b.wasm.gz", b"not gzip"),
            ],
        );
        let set = scan(dir.path()).unwrap();
        let e = set["a"].component(1 << 20).unwrap_err();
        assert_eq!(e.reason(), "ambiguous");
        assert_eq!(
            e.to_string(),
            "a is given by 2 files (a.wasm, a.wasm.gz): keep one"
        );
        let e = set["b"].component(1 << 20).unwrap_err();
        assert_eq!(e.reason(), "decompress");
        assert!(
            e.to_string().starts_with("b.wasm.gz: not valid gzip data"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_symlink_swap_wakes_the_watcher() {
        let dir = tempfile::tempdir().unwrap();
        kubelet_update(dir.path(), 1, &[("a.wasm", b"one")]);
        let mut watch = DirWatch::new(
            dir.path(),
            Duration::from_millis(50),
            Duration::from_secs(3600),
        )
        .unwrap();
        let d = dir.path().to_path_buf();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            kubelet_update(&d, 2, &[("a.wasm", b"two")]);
        });
        tokio::time::timeout(Duration::from_secs(20), watch.changed())
            .await
            .expect("the swap is noticed without waiting for the rescan");
    }
}
