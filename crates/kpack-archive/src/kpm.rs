//! The historical `.kpm` manifest (spec §6): a msgpack map naming one `.kpack` file per arch.
//! Read for old artifacts; written only to reproduce them.

use crate::error::MetadataError;
use crate::msgpack::schema::{Fields, Path};
use crate::msgpack::{self, Decoder, EncodeError, Value};

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
        let mut d = Decoder::new(bytes);
        let mut m = Fields::new();
        let root = m.read(&mut d, &Path::Root, 0, true)?;
        d.finish()?;
        root?;
        let files_path = Path::Field(&Path::Root, "kpack_files");
        let mut files = Fields::new();
        m.req(&Path::Root, "kpack_files")?
            .map_into::<MetadataError>(&mut files, &files_path, false)?;
        let mut e = Fields::new();
        let kpack_files = files
            .iter()
            .map(|(arch, v)| {
                let path = Path::Key(&files_path, &arch);
                v.map_into::<MetadataError>(&mut e, &path, true)?;
                let entry = KpmEntry {
                    file: e.str::<MetadataError>(&path, "file")?.into_owned(),
                    size: e.uint::<MetadataError>(&path, "size")?,
                    kernel_count: e.uint::<MetadataError>(&path, "kernel_count")?,
                };
                Ok((arch.into_owned(), entry))
            })
            .collect::<Result<Vec<_>, MetadataError>>()?;
        Ok(KpmManifest {
            format_version: m.uint::<MetadataError>(&Path::Root, "format_version")?,
            component_name: m
                .str::<MetadataError>(&Path::Root, "component_name")?
                .into_owned(),
            prefix: m.str::<MetadataError>(&Path::Root, "prefix")?.into_owned(),
            kpack_files,
        })
    }
}
