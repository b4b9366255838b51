//! The historical `.kpm` manifest (spec §6): a msgpack map naming one `.kpack` file per arch.
//! Read for old artifacts; written only to reproduce them.

use crate::error::MetadataError;
use crate::msgpack::{self, EncodeError, FieldError, Value, schema};

/// A decoded `.kpm` manifest; `kpack_files` keeps the file's arch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KpmManifest {
    pub format_version: u64,
    pub component_name: String,
    pub prefix: String,
    pub kpack_files: Vec<(String, KpmEntry)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KpmEntry {
    /// Archive file name, in the manifest's directory.
    pub file: String,
    /// Archive size in bytes.
    pub size: u64,
    pub kernel_count: u64,
}

impl KpmManifest {
    /// The exact bytes Python's `msgpack.pack` wrote: keys `format_version`, `component_name`,
    /// `prefix`, `kpack_files`, entries keyed `file`, `size`, `kernel_count`.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let files = self
            .kpack_files
            .iter()
            .map(|(arch, e)| {
                let entry = Value::Map(vec![
                    ("file".into(), e.file.as_str().into()),
                    ("size".into(), e.size.into()),
                    ("kernel_count".into(), e.kernel_count.into()),
                ]);
                (arch.as_str().into(), entry)
            })
            .collect();
        msgpack::encode(&Value::Map(vec![
            ("format_version".into(), self.format_version.into()),
            ("component_name".into(), self.component_name.as_str().into()),
            ("prefix".into(), self.prefix.as_str().into()),
            ("kpack_files".into(), Value::Map(files)),
        ]))
    }

    /// Decodes a whole `.kpm` file. All four top-level keys and all three entry keys are
    /// required (as `PackManifest.from_file` required them); extra keys are ignored.
    pub fn decode(bytes: &[u8]) -> Result<KpmManifest, MetadataError> {
        let root = msgpack::decode_exact(bytes)?;
        if !matches!(root, Value::Map(_)) {
            return Err(schema::wrong("root", "map", &root).into());
        }
        let m = schema::lenient_map("", &root)?;
        let files = schema::str_map("kpack_files", schema::field(&m, "", "kpack_files")?)?;
        let kpack_files = files
            .into_iter()
            .map(|(arch, v)| {
                let path = format!("kpack_files[{arch:?}]");
                let e = schema::lenient_map(&path, v)?;
                let entry = KpmEntry {
                    file: schema::str_field(&e, &path, "file")?.to_owned(),
                    size: schema::uint_field(&e, &path, "size")?,
                    kernel_count: schema::uint_field(&e, &path, "kernel_count")?,
                };
                Ok((arch.to_owned(), entry))
            })
            .collect::<Result<Vec<_>, FieldError>>()?;
        Ok(KpmManifest {
            format_version: schema::uint_field(&m, "", "format_version")?,
            component_name: schema::str_field(&m, "", "component_name")?.to_owned(),
            prefix: schema::str_field(&m, "", "prefix")?.to_owned(),
            kpack_files,
        })
    }
}
