//! The `.kpm` index (spec §6): a msgpack map naming one `.kpack` file per arch.
//!
//! The reference dropped it; kpack's `recombine` writes it again, one per module in the
//! generic package, listing every architecture packaged in any group. It keeps the legacy
//! keys, so old readers still work, and adds one optional entry key, `package`: the package
//! that provides the archive, and one root key, `xxh3`: the digest of the index
//! ([`crate::digest::seal`]), last in the map, always written and checked on every read, so
//! that a damaged index fails with [`MetadataError::Damaged`] rather than naming another
//! file, size or architecture. Indexes without it (the reference's, kpack's before it) still
//! decode, unchecked; they re-encode as their bytes with the digest appended.

use crate::digest::{KPM_KEY, content_digest, seal, stored_digest};
use crate::error::MetadataError;
use crate::msgpack::{Cursor, EncodeError, Encoder, KeySet, Path, Source, once, required};

/// A decoded `.kpm` manifest; `kpack_files` keeps the file's arch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KpmManifest {
    /// `format_version` (1 in every known manifest).
    pub format_version: u64,
    /// The component the manifest describes.
    pub component_name: String,
    /// The install prefix the archives belong under.
    pub prefix: String,
    /// Per arch, the archive holding its kernels, in the file's order.
    pub kpack_files: Vec<(String, KpmEntry)>,
}

/// One arch's archive in a `.kpm` manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KpmEntry {
    /// Archive file name, in the manifest's directory.
    pub file: String,
    /// Archive size in bytes.
    pub size: u64,
    /// Kernels in the archive.
    pub kernel_count: u64,
    /// The package providing the archive (`<component>_<group>`); absent in legacy files.
    pub package: Option<String>,
}

impl KpmManifest {
    /// The bytes Python's `msgpack.pack` wrote: keys `format_version`, `component_name`,
    /// `prefix`, `kpack_files`, entries keyed `file`, `size`, `kernel_count` (then `package`,
    /// when known); then the digest, `xxh3`.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut e = Encoder::default();
        e.map(5)?;
        e.str("format_version")?;
        e.uint(self.format_version);
        e.str("component_name")?;
        e.str(&self.component_name)?;
        e.str("prefix")?;
        e.str(&self.prefix)?;
        e.str("kpack_files")?;
        e.map(self.kpack_files.len())?;
        for (arch, entry) in &self.kpack_files {
            e.str(arch)?;
            e.map(if entry.package.is_some() { 4 } else { 3 })?;
            e.str("file")?;
            e.str(&entry.file)?;
            e.str("size")?;
            e.uint(entry.size);
            e.str("kernel_count")?;
            e.uint(entry.kernel_count);
            if let Some(package) = &entry.package {
                e.str("package")?;
                e.str(package)?;
            }
        }
        let mut bytes = e.into_bytes();
        seal(KPM_KEY, &mut bytes);
        Ok(bytes)
    }

    /// Decodes a whole `.kpm` file. All four top-level keys and all three entry keys are
    /// required (as `PackManifest.from_file` required them), `package` is optional; other keys
    /// are skipped. A file that ends with a digest is checked against it first; a digest key
    /// anywhere else is damage (its trailer was hit), not an index without a digest.
    pub fn decode(bytes: &[u8]) -> Result<KpmManifest, MetadataError> {
        let sealed = stored_digest(KPM_KEY, bytes, 0);
        if let Some((at, stored)) = sealed {
            let actual = content_digest(&bytes[..at]);
            if actual != stored {
                return Err(MetadataError::Damaged {
                    offset: at as u64,
                    problem: format!(
                        "bytes 0..{at} have XXH3-64 {actual:#018x}, the index's {KPM_KEY} is \
                         {stored:#018x}"
                    ),
                });
            }
        }
        let mut c = Cursor::new(bytes, 0);
        let root = &Path::Root;
        let (mut version, mut component, mut prefix, mut files) = (None, None, None, None);
        let mut others = KeySet::default();
        c.lenient_map::<MetadataError>(root, |c, key| {
            let path = &Path::Field(root, key);
            match key {
                KPM_KEY if sealed.is_none() => {
                    return Err(MetadataError::Damaged {
                        offset: c.pos() as u64,
                        problem: format!(
                            "the digest key {KPM_KEY:?} is not the 8-byte bin ending the file"
                        ),
                    });
                }
                KPM_KEY => {
                    c.bin::<MetadataError>(path)?;
                }
                "format_version" => once(&mut version, c.uint::<MetadataError>(path)?, root, key)?,
                "component_name" => {
                    let name = c.str::<MetadataError>(path)?.to_owned();
                    once(&mut component, name, root, key)?;
                }
                "prefix" => {
                    let p = c.str::<MetadataError>(path)?.to_owned();
                    once(&mut prefix, p, root, key)?;
                }
                "kpack_files" => once(&mut files, kpack_files(c, path)?, root, key)?,
                _ => others.skip_unknown::<MetadataError>(c, root, key)?,
            }
            Ok(())
        })?;
        c.finish()?;
        Ok(KpmManifest {
            format_version: required(version, root, "format_version")?,
            component_name: required(component, root, "component_name")?,
            prefix: required(prefix, root, "prefix")?,
            kpack_files: required(files, root, "kpack_files")?,
        })
    }
}

/// `kpack_files`: arch → `{file, size, kernel_count[, package]}`, in the file's order.
fn kpack_files(
    c: &mut Cursor<'_>,
    path: &Path<'_>,
) -> Result<Vec<(String, KpmEntry)>, MetadataError> {
    let mut files = Vec::new();
    let mut arches = KeySet::default();
    let mut others = KeySet::default();
    for _ in 0..c.map::<MetadataError>(path)? {
        let arch = c.str_key::<MetadataError>(path)?;
        arches.note(path, arch)?;
        let epath = &Path::Key(path, arch);
        let (mut file, mut size, mut kernel_count, mut package) = (None, None, None, None);
        others.clear();
        c.lenient_map::<MetadataError>(epath, |c, key| {
            let field = &Path::Field(epath, key);
            match key {
                "file" => {
                    let f = c.str::<MetadataError>(field)?.to_owned();
                    once(&mut file, f, epath, key)?;
                }
                "size" => once(&mut size, c.uint::<MetadataError>(field)?, epath, key)?,
                "kernel_count" => once(
                    &mut kernel_count,
                    c.uint::<MetadataError>(field)?,
                    epath,
                    key,
                )?,
                "package" => {
                    let p = c.str::<MetadataError>(field)?.to_owned();
                    once(&mut package, p, epath, key)?;
                }
                _ => others.skip_unknown::<MetadataError>(c, epath, key)?,
            }
            Ok(())
        })?;
        let entry = KpmEntry {
            file: required(file, epath, "file")?,
            size: required(size, epath, "size")?,
            kernel_count: required(kernel_count, epath, "kernel_count")?,
            package,
        };
        files.push((arch.to_owned(), entry));
    }
    Ok(files)
}
