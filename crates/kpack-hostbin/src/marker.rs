//! The HIPK metadata stored in `.rocm_kpack_ref` (spec §2.2): a msgpack map
//! `{"kpack_search_paths": [str, ...], "kernel_name": str}` that the rewritten fat-binary wrapper
//! points at. kpack starts the map with `xxh3`, a `bin 8` digest of the map but for its own 8
//! bytes (`digest_except`): the reference's readers ignore keys they do not know, and
//! without it one flipped bit can turn `kernel_name` into another binary's name in the same
//! archive. A marker may end with `host_entry_id`, the host entry id of the binary's
//! bundles, which only `kpack restore` reads (docs/archive-v2.md §7).

use std::hash::Hasher;

use kpack_msgpack::{
    Cursor, EncodeError, Encoder, FieldError, KeySet, MetadataError, Path, Source, once, required,
};
use twox_hash::XxHash3_64;

/// The key of the marker's digest, its map's first key.
const MARKER_KEY: &str = "xxh3";

/// The key of the recorded host entry id, the map's last key when present.
const HOST_ENTRY_KEY: &str = "host_entry_id";

/// Where the runtime looks for a binary's kernels, and under which name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerMetadata {
    /// TOC binary key without the `#N` suffix.
    pub kernel_name: String,
    /// Archive paths relative to the binary's directory; may contain `@GFXARCH@`.
    /// The runtime needs at least one.
    pub search_paths: Vec<String>,
    /// The id of the host entry of the binary's bundles (`host-x86_64-unknown-linux`), when
    /// a restore must write it back: it is not the one restore writes for the machine.
    pub host_entry_id: Option<String>,
}

impl MarkerMetadata {
    /// The bytes of Python `msgpack.packb({"xxh3": ..., "kpack_search_paths": ...,
    /// "kernel_name": ...}, use_bin_type=True)` (and `"host_entry_id": ...` last, when
    /// recorded), `xxh3` the digest of the rest.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut e = Encoder::default();
        e.map(3 + usize::from(self.host_entry_id.is_some()))?;
        e.str(MARKER_KEY)?;
        e.bin(&[0; 8])?;
        e.str("kpack_search_paths")?;
        e.array(self.search_paths.len())?;
        for p in &self.search_paths {
            e.str(p)?;
        }
        e.str("kernel_name")?;
        e.str(&self.kernel_name)?;
        if let Some(id) = &self.host_entry_id {
            e.str(HOST_ENTRY_KEY)?;
            e.str(id)?;
        }
        let mut bytes = e.into_bytes();
        // After the map header (1 byte), the key (1 + 4) and the bin's header (2).
        let hole = 8..16;
        let digest = digest_except(&bytes, hole.clone());
        bytes[hole].copy_from_slice(&digest.to_be_bytes());
        Ok(bytes)
    }

    /// Decodes metadata from the start of `bytes` as the runtime does: the root must be a map,
    /// `kernel_name` a str, `kpack_search_paths` an array with at least one str (other
    /// elements are skipped); extra keys (of any type) are skipped and key order is free. Bytes
    /// after the map (section padding) are left alone; returns the metadata and the bytes it
    /// took. A marker that carries its digest (`xxh3`, an 8-byte bin) must match it; one
    /// written without (by the reference, or kpack before digests) reads unchecked.
    pub fn decode(bytes: &[u8]) -> Result<(MarkerMetadata, usize), MetadataError> {
        let mut c = Cursor::new(bytes, 0);
        let root = &Path::Root;
        let (mut kernel_name, mut search_paths, mut host_entry_id) = (None, None, None);
        // Where the digest's value lies, and the digest.
        let mut digest: Option<(std::ops::Range<usize>, &[u8])> = None;
        let mut others = KeySet::default();
        c.lenient_map::<MetadataError>(root, |c, key| {
            let path = &Path::Field(root, key);
            match key {
                "kernel_name" => {
                    let name = c.str::<MetadataError>(path)?.to_owned();
                    once(&mut kernel_name, name, root, key)?;
                }
                "kpack_search_paths" => {
                    let mut paths = Vec::new();
                    for i in 0..c.array::<MetadataError>(path)? {
                        if c.at_str() {
                            paths.push(c.str::<MetadataError>(&Path::Index(path, i))?.to_owned());
                        } else {
                            c.skip()?;
                        }
                    }
                    once(&mut search_paths, paths, root, key)?;
                }
                // A value of another type is skipped like an unknown key: the runtime never
                // refuses a marker for it.
                HOST_ENTRY_KEY if c.at_str() => {
                    let id = c.str::<MetadataError>(path)?.to_owned();
                    once(&mut host_entry_id, id, root, key)?;
                }
                MARKER_KEY => {
                    let value = c.bin::<MetadataError>(path)?;
                    let end = c.pos();
                    once(&mut digest, (end - value.len()..end, value), root, key)?;
                }
                _ => others.skip_unknown::<MetadataError>(c, root, key)?,
            }
            Ok(())
        })?;
        if let Some((at, stored)) = digest {
            let damaged = |problem: String| MetadataError::Damaged {
                offset: at.start as u64,
                problem,
            };
            let Ok(stored) = <[u8; 8]>::try_from(stored) else {
                let len = stored.len();
                return Err(damaged(format!(
                    "{MARKER_KEY} is a {len}-byte bin, expected 8"
                )));
            };
            let stored = u64::from_be_bytes(stored);
            let actual = digest_except(&bytes[..c.pos()], at.clone());
            if actual != stored {
                return Err(damaged(format!(
                    "the marker's bytes 0..{} but for its digest have XXH3-64 {actual:#018x}, \
                     its {MARKER_KEY} is {stored:#018x}",
                    c.pos()
                )));
            }
        }
        let kernel_name = required(kernel_name, root, "kernel_name")?;
        let search_paths = required(search_paths, root, "kpack_search_paths")?;
        if search_paths.is_empty() {
            return Err(FieldError::Invalid {
                path: "kpack_search_paths".to_owned(),
                problem: "expected at least one str element".to_owned(),
            }
            .into());
        }
        let metadata = MarkerMetadata {
            kernel_name,
            search_paths,
            host_entry_id,
        };
        Ok((metadata, c.pos()))
    }
}

/// The XXH3-64 of `bytes` but for `hole` (the digest's own bytes inside what it covers).
fn digest_except(bytes: &[u8], hole: std::ops::Range<usize>) -> u64 {
    let mut hasher = XxHash3_64::new();
    hasher.write(&bytes[..hole.start]);
    hasher.write(&bytes[hole.end..]);
    hasher.finish()
}
