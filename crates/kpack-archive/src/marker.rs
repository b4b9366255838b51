//! The HIPK metadata stored in `.rocm_kpack_ref` (spec §2.2): a msgpack map
//! `{"kpack_search_paths": [str, ...], "kernel_name": str}` that the rewritten fat-binary wrapper
//! points at.

use crate::error::MetadataError;
use crate::msgpack::schema::{Fields, Path};
use crate::msgpack::{self, Decoder, EncodeError, FieldError, Head, Value};

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
        let paths = self
            .search_paths
            .iter()
            .map(|p| Value::from(p.as_str()))
            .collect();
        msgpack::encode(&Value::Map(vec![
            ("kpack_search_paths".into(), Value::Array(paths)),
            ("kernel_name".into(), self.kernel_name.as_str().into()),
        ]))
    }

    /// Decodes metadata from the start of `bytes` as the runtime does: the root must be a map,
    /// `kernel_name` a str, `kpack_search_paths` an array with at least one str (other
    /// elements are skipped); extra keys are ignored and key order is free. Bytes after the
    /// map (section padding) are left alone; returns the metadata and the bytes it took.
    pub fn decode(bytes: &[u8]) -> Result<(MarkerMetadata, usize), MetadataError> {
        let mut d = Decoder::new(bytes);
        let mut m = Fields::new();
        m.read_as::<MetadataError>(&mut d, &Path::Root, 0, true)?;
        let used = d.pos();
        let kernel_name = m
            .str::<MetadataError>(&Path::Root, "kernel_name")?
            .into_owned();
        let paths_path = Path::Field(&Path::Root, "kpack_search_paths");
        let (n, mut paths, depth) = m
            .req(&Path::Root, "kpack_search_paths")?
            .array::<MetadataError>(&paths_path)?;
        let mut search_paths = Vec::new();
        for _ in 0..n {
            if let Head::Str(s) = paths.next(depth)? {
                search_paths.push(msgpack::checked_str(s).into_owned());
            }
        }
        if search_paths.is_empty() {
            return Err(FieldError::Invalid {
                path: "kpack_search_paths".to_owned(),
                problem: "expected at least one str element".to_owned(),
            }
            .into());
        }
        Ok((
            MarkerMetadata {
                kernel_name,
                search_paths,
            },
            used,
        ))
    }
}
