//! The HIPK metadata stored in `.rocm_kpack_ref` (spec §2.2): a msgpack map
//! `{"kpack_search_paths": [str, ...], "kernel_name": str}` that the rewritten fat-binary wrapper
//! points at.

use crate::error::MetadataError;
use crate::msgpack::{self, EncodeError, FieldError, Value, schema};

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
        let (root, used) = msgpack::decode(bytes)?;
        if !matches!(root, Value::Map(_)) {
            return Err(schema::wrong("root", "map", &root).into());
        }
        let m = schema::lenient_map("", &root)?;
        let kernel_name = schema::str_field(&m, "", "kernel_name")?.to_owned();
        let paths_v = schema::field(&m, "", "kpack_search_paths")?;
        let paths = paths_v
            .as_array()
            .ok_or_else(|| schema::wrong("kpack_search_paths", "array", paths_v))?;
        let search_paths: Vec<String> = paths
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
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
