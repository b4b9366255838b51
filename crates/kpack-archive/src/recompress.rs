//! Rewriting an archive with another compression, entries unchanged.

use std::path::Path;

use crate::{Archive, ArchiveError, ArchiveFileWriter, Compression};

/// Writes the entries of `archive` to a new archive at `path` with `compression`, atomically
/// (nothing appears at `path` unless it is complete), and returns its size.
///
/// Group name, family, `gfx_arches`, binary and arch order and metadata are kept; entries are
/// added in TOC order, so a version 1 `none` archive our writer made comes back byte for byte
/// after any chain of conversions (identical code objects are stored once, so an archive that
/// stored duplicates twice comes back with them shared). One entry is decoded at a time, and
/// its stored bytes are dropped from the resident set once read ([`Archive::forget_stored`]):
/// the memory is that of one code object plus the writer's ([`crate::unified`] keeps
/// candidate references within a budget), not that of the input archive.
pub fn recompress(
    archive: &Archive,
    path: &Path,
    compression: Compression,
) -> Result<u64, ArchiveError> {
    let mut out = ArchiveFileWriter::create(
        path,
        archive.group_name(),
        archive.gfx_arch_family(),
        compression,
    )?;
    out.set_gfx_arches(archive.gfx_arches().to_vec())?;
    for (binary, arch, info) in archive.entries() {
        let data = archive.get(binary, arch)?;
        out.add(binary, arch, data.into_owned(), info.metadata)?;
        archive.forget_stored(binary, arch)?;
    }
    out.finish()
}
