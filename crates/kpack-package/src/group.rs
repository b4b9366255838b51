//! Group archives: several single-target archives of one module as one multi-target
//! archive, for packages that hold several targets (`recombine --group-archives`, the
//! device wheels of `split-wheel --multi-target-archives`). The entries are copied as they
//! are, through the archive writer with the caller's compression: with a scheme that codes
//! entries against each other, a group archive compresses across its targets. Where the
//! sources already store an entry as the group archive will (`none` into `none`, zstd frames
//! into `zstd` at the default level 3, split's and recombine's), its stored bytes are copied
//! without decoding and coding them again ([`PreparedKernel::stored_in`]): the same bytes as
//! coding them again when the sources were written at that level, for a fraction of the
//! time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kpack_archive::{Archive, ArchiveFileWriter, Compression, PreparedKernel};

use crate::PackageError;

/// One entry of a source archive: the source's index, the arch and the entry's metadata.
type SourceEntry<'a> = (usize, &'a str, &'a [(String, String)]);

/// Writes the group archive `to`: every entry of `sources` (one target each). Its
/// `gfx_arches` are the sources' targets in the order given; entries are added kernel by
/// kernel (each binary key's targets together, in source order), so that a scheme coding
/// entries against each other sees every target of a kernel at once.
pub fn write(
    to: &Path,
    module: &str,
    group: &str,
    sources: &[(String, PathBuf)],
    compression: Compression,
) -> Result<u64, PackageError> {
    let opened = sources
        .iter()
        .map(|(_, src)| Archive::open(src).map_err(PackageError::archive(src)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut w = ArchiveFileWriter::create(to, module, group, compression)
        .map_err(PackageError::archive(to))?;
    let mut arches: Vec<String> = Vec::new();
    for a in &opened {
        for arch in a.gfx_arches() {
            if !arches.contains(arch) {
                arches.push(arch.clone());
            }
        }
    }
    w.set_gfx_arches(arches)
        .map_err(PackageError::archive(to))?;
    // Binary keys in order of first appearance, each with its entries from every source.
    let mut kernels: Vec<(&str, Vec<SourceEntry>)> = Vec::new();
    let mut position: HashMap<&str, usize> = HashMap::new();
    for (source, a) in opened.iter().enumerate() {
        for (binary, arch, info) in a.entries() {
            let at = *position.entry(binary).or_insert_with(|| {
                kernels.push((binary, Vec::new()));
                kernels.len() - 1
            });
            kernels[at].1.push((source, arch, info.metadata));
        }
    }
    for (binary, entries) in kernels {
        for (source, arch, metadata) in entries {
            let (a, src) = (&opened[source], &sources[source].1);
            let stored = PreparedKernel::stored_in(a, binary, arch, compression)
                .map_err(PackageError::archive(src))?;
            let added = match stored {
                Some(kernel) => w.add_prepared(binary, arch, kernel, metadata),
                None => {
                    let code = a.get(binary, arch).map_err(PackageError::archive(src))?;
                    w.add(binary, arch, code, metadata)
                }
            };
            added.map_err(PackageError::archive(to))?;
            // Every source is open at once (a kernel's targets are added together): without
            // this, each would stay resident whole once read (ru_maxrss counts mapped pages).
            a.forget_stored(binary, arch)
                .map_err(PackageError::archive(src))?;
        }
    }
    w.finish().map_err(PackageError::archive(to))
}
