//! The HIPK metadata stored in `.rocm_kpack_ref` (spec §2.2): a msgpack map
//! `{"kpack_search_paths": [str, ...], "kernel_name": str}` that the rewritten fat-binary wrapper
//! points at.

use crate::error::MetadataError;
use crate::msgpack::{
    Cursor, EncodeError, Encoder, FieldError, KeySet, Path, Source, once, required,
};

/// Where the runtime looks for a binary's kernels, and under which name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerMetadata {
    /// TOC binary key without the `#N` suffix.
    pub kernel_name: String,
    /// Archive paths relative to the binary's directory; may contain `@GFXARCH@`.
    /// The runtime needs at least one.
    pub search_paths: Vec<String>,
}

impl MarkerMetadata {
    /// The exact bytes of Python `msgpack.packb({"kpack_search_paths": ..., "kernel_name":
    /// ...}, use_bin_type=True)`.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut e = Encoder::default();
        e.map(2)?;
        e.str("kpack_search_paths")?;
        e.array(self.search_paths.len())?;
        for p in &self.search_paths {
            e.str(p)?;
        }
        e.str("kernel_name")?;
        e.str(&self.kernel_name)?;
        Ok(e.into_bytes())
    }

    /// Decodes metadata from the start of `bytes` as the runtime does: the root must be a map,
    /// `kernel_name` a str, `kpack_search_paths` an array with at least one str (other
    /// elements are skipped); extra keys (of any type) are skipped and key order is free. Bytes
    /// after the map (section padding) are left alone; returns the metadata and the bytes it
    /// took.
    pub fn decode(bytes: &[u8]) -> Result<(MarkerMetadata, usize), MetadataError> {
        let mut c = Cursor::new(bytes, 0);
        let root = &Path::Root;
        let (mut kernel_name, mut search_paths) = (None, None);
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
                _ => others.skip_unknown::<MetadataError>(c, root, key)?,
            }
            Ok(())
        })?;
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
        };
        Ok((metadata, c.pos()))
    }
}
