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
/// its stored bytes are dropped from the resident set once read ([`page_out`]): the memory
/// is that of one code object plus the writer's ([`crate::unified`] keeps candidate
/// references within a budget), not that of the input archive.
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
        page_out(archive.stored_bytes(binary, arch)?);
    }
    out.finish()
}

/// Asks the kernel to drop the whole pages of `bytes` from this process's resident set.
///
/// An archive opened from a file is a mapping, and reading every entry would otherwise keep
/// the whole file resident (ru_maxrss counts mapped file pages). `MADV_PAGEOUT` never
/// changes what memory reads: a file page is read again from the file (page cache) when
/// next touched, and an anonymous page (an archive held in a `Vec`) is left alone without
/// swap, or swapped and read back, so it is safe whatever holds the archive. A refusal (an
/// older kernel) only leaves the pages resident.
fn page_out(bytes: &[u8]) {
    #[allow(unsafe_code)]
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = (bytes.as_ptr() as usize).next_multiple_of(page.max(1));
    let end = (bytes.as_ptr() as usize + bytes.len()) / page.max(1) * page.max(1);
    if end > start {
        #[allow(unsafe_code)]
        // SAFETY: the range lies within `bytes`, which is live memory of this process, and
        // MADV_PAGEOUT keeps its content (see above).
        let _ =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_PAGEOUT) };
    }
}
