//! The `.kpm` index (spec §6): a msgpack map naming one `.kpack` file per arch.
//!
//! The reference dropped it; kpack's `recombine` writes it again, one per module in the
//! generic package, listing every architecture packaged in any group. It keeps the legacy
//! keys, so old readers still work, and adds one optional entry key, `package`: the package
//! that provides the archive. Old indexes (without `package`) decode and re-encode byte for
//! byte.

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
    /// The package providing the archive (`<component>_<group>`); absent in legacy files.
    pub package: Option<String>,
}

impl KpmManifest {
    /// The exact bytes Python's `msgpack.pack` wrote: keys `format_version`, `component_name`,
    /// `prefix`, `kpack_files`, entries keyed `file`, `size`, `kernel_count` (then `package`,
    /// when known).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let files = self
            .kpack_files
            .iter()
            .map(|(arch, e)| {
                let mut entry = vec![
                    ("file".into(), e.file.as_str().into()),
                    ("size".into(), e.size.into()),
                    ("kernel_count".into(), e.kernel_count.into()),
                ];
                if let Some(package) = &e.package {
                    entry.push(("package".into(), package.as_str().into()));
                }
                (arch.as_str().into(), Value::Map(entry))
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
    /// required (as `PackManifest.from_file` required them), `package` is optional; other keys
    /// are ignored.
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
                    package: e
                        .get("package")
                        .map(|n| n.str::<MetadataError>(&Path::Field(&path, "package")))
                        .transpose()?
                        .map(|s| s.into_owned()),
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
