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

use std::path::{Path, PathBuf};

use kpack_archive::{Archive, ArchiveFileWriter, Compression, PreparedKernel};

use crate::ArtifactError;

/// Writes the group archive `to`: every entry of `sources` (one target each), in order, so
/// its `gfx_arches` are the sources' targets in that order.
pub fn write(
    to: &Path,
    module: &str,
    group: &str,
    sources: &[(String, PathBuf)],
    compression: Compression,
) -> Result<u64, ArtifactError> {
    let archive_error = |path: &Path| {
        let path = path.to_owned();
        move |source| ArtifactError::Archive {
            path,
            source: Box::new(source),
        }
    };
    let opened = sources
        .iter()
        .map(|(_, src)| Archive::open(src).map_err(archive_error(src)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut w =
        ArchiveFileWriter::create(to, module, group, compression).map_err(archive_error(to))?;
    for ((_, src), a) in sources.iter().zip(&opened) {
        for (binary, arch, info) in a.entries() {
            let stored = PreparedKernel::stored_in(a, binary, arch, compression)
                .map_err(archive_error(src))?;
            let added = match stored {
                Some(kernel) => w.add_prepared(binary, arch, kernel, info.metadata),
                None => {
                    let code = a.get(binary, arch).map_err(archive_error(src))?;
                    w.add(binary, arch, code, info.metadata)
                }
            };
            added.map_err(archive_error(to))?;
        }
    }
    w.finish().map_err(archive_error(to))
}
