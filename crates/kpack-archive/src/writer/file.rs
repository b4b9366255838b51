//! An archive streamed to its file as kernels are added.

use std::borrow::Cow;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::blobs::{Blobs, io_error};
use super::{ArchiveWriter, Compression, GroupMember, PreparedKernel};
use crate::{ArchiveError, DATA_START};

/// An archive written straight to its file as kernels are added: only the TOC stays in
/// memory, so packing gigabytes of code objects costs the memory of one kernel.
///
/// The blobs go to a temporary file beside the final path, in the layout
/// [`ArchiveWriter::write_to`] produces (the bytes are identical for the same `add` calls);
/// [`ArchiveFileWriter::finish`] appends the TOC, fills in the header's `toc_offset` and the
/// zstd frame count, syncs, and renames the file into place. Dropped unfinished (an error, a
/// panic), it removes its temporary file: nothing ever appears at the final path half
/// written.
pub struct ArchiveFileWriter<'a> {
    pub(super) writer: ArchiveWriter<'a>,
    path: PathBuf,
    /// The temporary file ([`kpack_fs::temp_file_beside`]), removed when dropped unpublished.
    tmp: Option<tempfile::TempPath>,
}

/// The buffer of each archive's file. A split writes one archive per target for every fat
/// binary in flight (14 targets × 4 fat binaries of `split --batch` on 2 cores): at 1 MiB
/// each, their buffers alone held 56 MiB. Most kernels are larger than this and bypass it.
const WRITE_BUFFER: usize = 64 << 10;

impl<'a> ArchiveFileWriter<'a> {
    /// Starts the archive that [`ArchiveFileWriter::finish`] will publish at `path`.
    pub fn create(
        path: impl Into<PathBuf>,
        group_name: impl Into<String>,
        gfx_arch_family: impl Into<String>,
        compression: Compression,
    ) -> Result<Self, ArchiveError> {
        let path = path.into();
        let (file, tmp) = kpack_fs::temp_file_beside(&path)
            .map_err(io_error("creating temporary archive file"))
            .map_err(|e| e.in_file(Some(&path)))?
            .into_parts();
        let mut this = ArchiveFileWriter {
            writer: ArchiveWriter::new(group_name, gfx_arch_family, compression),
            path,
            tmp: Some(tmp),
        };
        let mut out = BufWriter::with_capacity(WRITE_BUFFER, file);
        // Placeholders for `toc_offset` and the frame count, filled in by `finish`.
        let mut start = DATA_START;
        let placeholder = out.write_all(&this.writer.header(0)).and_then(|()| {
            if compression.prefixed() {
                start += 4;
                out.write_all(&0u32.to_le_bytes())
            } else {
                Ok(())
            }
        });
        placeholder
            .map_err(io_error("writing archive"))
            .map_err(|e| e.in_file(Some(&this.path)))?;
        this.writer.blobs = Blobs::Streamed {
            out,
            spans: Vec::new(),
            end: start,
        };
        Ok(this)
    }

    /// [`ArchiveWriter::add`], the stored bytes going straight to the file.
    pub fn add(
        &mut self,
        binary_key: &str,
        arch: &str,
        data: impl Into<Cow<'a, [u8]>>,
        metadata: &[(String, String)],
    ) -> Result<(), ArchiveError> {
        let result = self.writer.add(binary_key, arch, data, metadata);
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// [`ArchiveWriter::add_prepared`], the stored bytes going straight to the file.
    pub fn add_prepared(
        &mut self,
        binary_key: &str,
        arch: &str,
        kernel: PreparedKernel<'a>,
        metadata: &[(String, String)],
    ) -> Result<(), ArchiveError> {
        let result = self.writer.add_prepared(binary_key, arch, kernel, metadata);
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// [`ArchiveWriter::add_prepared_under`], the stored bytes going straight to the file.
    pub fn add_prepared_under<K: AsRef<str>>(
        &mut self,
        keys: &[K],
        arch: &str,
        kernel: PreparedKernel<'a>,
        metadata: &[(String, String)],
    ) -> Result<(), ArchiveError> {
        let result = self.writer.add_prepared_under(keys, arch, kernel, metadata);
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// [`ArchiveWriter::add_group`], the frames going straight to the file.
    pub fn add_group(&mut self, members: &[GroupMember<'_>]) -> Result<(), ArchiveError> {
        let result = self.writer.add_group(members);
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// [`ArchiveWriter::end_group`], the frames going straight to the file.
    pub fn end_group(&mut self) -> Result<(), ArchiveError> {
        let result = self.writer.end_group();
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// Number of `(binary, arch)` entries added.
    pub fn entry_count(&self) -> usize {
        self.writer.entry_count()
    }

    /// [`ArchiveWriter::set_gfx_arches`].
    pub fn set_gfx_arches(&mut self, arches: Vec<String>) -> Result<(), ArchiveError> {
        let result = self.writer.set_gfx_arches(arches);
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// [`ArchiveWriter::gfx_arches`].
    pub fn gfx_arches(&self) -> &[String] {
        self.writer.gfx_arches()
    }

    /// [`ArchiveWriter::set_gfx_arch_family`].
    pub fn set_gfx_arch_family(&mut self, family: impl Into<String>) {
        self.writer.set_gfx_arch_family(family);
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the TOC, completes the header, syncs and renames the archive into place;
    /// returns its size.
    pub fn finish(mut self) -> Result<u64, ArchiveError> {
        let result = self.finish_inner();
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    fn finish_inner(&mut self) -> Result<u64, ArchiveError> {
        self.writer.code_group()?;
        let region_len = self.writer.region_len();
        let toc = self.writer.toc(region_len)?;
        let count = self.writer.blobs.count() as u32;
        let zstd = self.writer.compression.prefixed();
        let Blobs::Streamed { out, .. } = &mut self.writer.blobs else {
            unreachable!("an ArchiveFileWriter streams its blobs");
        };
        let io = io_error("writing archive");
        let toc_offset = DATA_START + region_len;
        out.write_all(&toc).map_err(&io)?;
        out.seek(SeekFrom::Start(8)).map_err(&io)?;
        out.write_all(&toc_offset.to_le_bytes()).map_err(&io)?;
        if zstd {
            out.seek(SeekFrom::Start(DATA_START)).map_err(&io)?;
            out.write_all(&count.to_le_bytes()).map_err(&io)?;
        }
        let Blobs::Streamed { out, .. } =
            std::mem::replace(&mut self.writer.blobs, Blobs::Memory(Vec::new()))
        else {
            unreachable!()
        };
        let file = out
            .into_inner()
            .map_err(|e| io_error("writing archive")(e.into_error()))?;
        file.sync_all().map_err(io_error("syncing archive"))?;
        drop(file);
        let tmp = self
            .tmp
            .take()
            .expect("an unfinished writer has its temporary file");
        kpack_fs::fault_point("atomic-written");
        tmp.persist(&self.path)
            .map_err(|e| io_error("renaming temporary archive into place")(e.error))?;
        Ok(toc_offset + toc.len() as u64)
    }
}
