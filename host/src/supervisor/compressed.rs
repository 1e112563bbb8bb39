//! Compressed guest components: `NAME.wasm.gz` (gzip) and `NAME.wasm.zst`
//! (zstd), so that a guest too large for a ConfigMap as it is fits once
//! compressed.
//!
//! Owns the two formats, decompressing under a cap and compressing at each
//! format's highest level (for `wasmctrl guest configmap`). A
//! decompression bomb costs no more than the cap: the decompressed stream
//! is read through `take(cap + 1)` into a buffer that never grows past the
//! cap, and the zstd decoder's window is bounded by it. It never reads
//! files or loads guests.

use std::io::Read;

/// The default of `--guest-decompressed-max-mib`: well above the largest
/// guest measured (a Python guest, 18.5 MB).
pub const DEFAULT_DECOMPRESSED_MAX: u64 = 64 << 20;

/// A compression format a guest file may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// gzip (RFC 1952), `.gz`.
    Gzip,
    /// Zstandard (RFC 8878), `.zst`.
    Zstd,
}

/// Why a compressed component could not be decompressed.
#[derive(Debug, thiserror::Error)]
pub enum DecompressError {
    /// The bytes are not a valid stream of the format.
    #[error("not valid {format} data: {source}")]
    Corrupt {
        /// The format (`gzip`, `zstd`).
        format: &'static str,
        /// The decoder's error.
        #[source]
        source: std::io::Error,
    },
    /// The component would be larger than the cap.
    #[error("decompresses to more than {cap} bytes (--guest-decompressed-max-mib): refused without reading further")]
    TooLarge {
        /// The cap, in bytes.
        cap: u64,
    },
}

impl Compression {
    /// Every format, in the order `wasmctrl guest configmap` tries them.
    pub const ALL: [Compression; 2] = [Compression::Gzip, Compression::Zstd];

    /// The format's name (`gzip`, `zstd`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// The file name suffix after `.wasm` (`.gz`, `.zst`).
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::Gzip => ".gz",
            Compression::Zstd => ".zst",
        }
    }

    /// A guest file's key and compression, when its name is `KEY.wasm`,
    /// `KEY.wasm.gz` or `KEY.wasm.zst`.
    pub fn of_file_name(name: &str) -> Option<(&str, Option<Compression>)> {
        if let Some(key) = name.strip_suffix(".wasm") {
            return Some((key, None));
        }
        Compression::ALL.into_iter().find_map(|c| {
            name.strip_suffix(c.suffix())
                .and_then(|n| n.strip_suffix(".wasm"))
                .map(|key| (key, Some(c)))
        })
    }

    /// The decompressed `bytes`, refused once they exceed `cap` bytes
    /// (having decompressed at most a read buffer more than that).
    pub fn decompress(self, bytes: &[u8], cap: u64) -> Result<Vec<u8>, DecompressError> {
        let corrupt = |source| DecompressError::Corrupt {
            format: self.name(),
            source,
        };
        let decoder: Box<dyn Read + '_> = match self {
            // Several gzip members in a row are one stream (`cat a.gz b.gz`).
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(bytes)),
            Compression::Zstd => {
                // A frame that says it is larger is refused unread.
                if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(bytes) {
                    if size > cap {
                        return Err(DecompressError::TooLarge { cap });
                    }
                }
                let mut d = zstd::stream::read::Decoder::new(bytes).map_err(corrupt)?;
                // A frame may ask for a window of up to 2 GiB; none needs
                // one larger than the component it may decompress to.
                d.window_log_max(window_log(cap)).map_err(corrupt)?;
                Box::new(d)
            }
        };
        read_capped(decoder.take(cap.saturating_add(1)), cap).map_err(|e| match e {
            Capped::TooLarge => DecompressError::TooLarge { cap },
            Capped::Io(e) => corrupt(e),
        })
    }

    /// `bytes` compressed at the format's highest level.
    pub fn compress_best(self, bytes: &[u8]) -> std::io::Result<Vec<u8>> {
        match self {
            Compression::Gzip => {
                use std::io::Write;
                let mut e = flate2::write::GzEncoder::new(
                    Vec::with_capacity(bytes.len() / 2),
                    flate2::Compression::best(),
                );
                e.write_all(bytes)?;
                e.finish()
            }
            Compression::Zstd => {
                zstd::bulk::compress(bytes, *zstd::compression_level_range().end())
            }
        }
    }
}

/// The smallest zstd window log that holds `cap` bytes (zstd accepts 10
/// to 31).
fn window_log(cap: u64) -> u32 {
    (64 - cap.saturating_sub(1).leading_zeros()).clamp(10, 31)
}

enum Capped {
    TooLarge,
    Io(std::io::Error),
}

/// Everything `reader` gives, in a buffer whose capacity never exceeds
/// `cap`; more than `cap` bytes is [`Capped::TooLarge`].
fn read_capped(mut reader: impl Read, cap: u64) -> Result<Vec<u8>, Capped> {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Capped::Io(e)),
        };
        let len = out.len() + n;
        if len > cap {
            return Err(Capped::TooLarge);
        }
        if len > out.capacity() {
            // Doubling, as `Vec` does, but never past the cap.
            let want = (out.capacity() * 2).max(len).min(cap);
            out.reserve_exact(want - out.len());
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_give_the_key_and_the_format() {
        assert_eq!(Compression::of_file_name("g.wasm"), Some(("g", None)));
        assert_eq!(
            Compression::of_file_name("g.shadow.wasm.gz"),
            Some(("g.shadow", Some(Compression::Gzip)))
        );
        assert_eq!(
            Compression::of_file_name("g.wasm.zst"),
            Some(("g", Some(Compression::Zstd)))
        );
        assert_eq!(Compression::of_file_name("g.gz"), None);
        assert_eq!(Compression::of_file_name("g.config.json"), None);
    }

    #[test]
    fn each_format_gives_back_what_it_compressed() {
        let bytes: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for c in Compression::ALL {
            let packed = c.compress_best(&bytes).unwrap();
            assert!(packed.len() < bytes.len() / 4, "{}", c.name());
            assert_eq!(c.decompress(&packed, bytes.len() as u64).unwrap(), bytes);
        }
    }

    #[test]
    fn a_bomb_is_refused_at_the_cap_without_a_larger_buffer() {
        // 64 MiB of zeros packs into a few KiB.
        let zeros = vec![0u8; 64 << 20];
        let cap = 1 << 20;
        for c in Compression::ALL {
            let bomb = c.compress_best(&zeros).unwrap();
            assert!(bomb.len() < 256 << 10, "{}: {}", c.name(), bomb.len());
            let e = c.decompress(&bomb, cap).unwrap_err();
            assert!(
                matches!(e, DecompressError::TooLarge { cap: 1_048_576 }),
                "{e}"
            );
            assert!(e.to_string().contains("1048576"), "{e}");
        }
        // A zstd stream that does not say its size is cut at the cap too
        // (level 1: a window the cap allows).
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        e.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut e, &zeros[..4 << 20]).unwrap();
        let unsized_bomb = e.finish().unwrap();
        assert!(matches!(
            Compression::Zstd.decompress(&unsized_bomb, cap),
            Err(DecompressError::TooLarge { .. })
        ));
        // Exactly the cap is allowed.
        let exact = vec![7u8; 4096];
        for c in Compression::ALL {
            let packed = c.compress_best(&exact).unwrap();
            assert_eq!(c.decompress(&packed, 4096).unwrap().len(), 4096);
            assert!(c.decompress(&packed, 4095).is_err());
        }
    }

    #[test]
    fn the_buffer_never_grows_past_the_cap() {
        let data = vec![1u8; 1_000_000];
        let out = read_capped(&data[..], 1_000_000).ok().unwrap();
        assert!(out.capacity() <= 1_000_000, "{}", out.capacity());
        assert!(matches!(
            read_capped(&data[..], 999_999),
            Err(Capped::TooLarge)
        ));
    }

    #[test]
    fn bytes_of_another_format_are_named_corrupt() {
        for c in Compression::ALL {
            let e = c.decompress(b"\0asm\x0d\0\x01\0", 1 << 20).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with(&format!("not valid {}", c.name())),
                "{e}"
            );
        }
        // A stream cut short is corrupt too, not a shorter component.
        let packed = Compression::Gzip.compress_best(&[5u8; 10_000]).unwrap();
        assert!(Compression::Gzip
            .decompress(&packed[..packed.len() / 2], 1 << 20)
            .is_err());
    }

    #[test]
    fn the_zstd_window_is_bounded_by_the_cap() {
        assert_eq!(window_log(64 << 20), 26);
        assert_eq!(window_log((64 << 20) + 1), 27);
        assert_eq!(window_log(1), 10);
        assert_eq!(window_log(u64::MAX), 31);
    }
}
