//! A kernel coded straight into its archive's file as its pieces come.

use std::hash::Hasher;
use std::io::Write;

use super::prepared::{within_kernel_size, zstd_io};
use super::{ArchiveFileWriter, Compression};
use crate::ArchiveError;
use crate::coder::frame_size;
use crate::digest::content_digester;

/// A kernel given in pieces, in order, never held whole: a code object too large to hold
/// (librocprim-tests' are 217 MB each, read from a CCOB as a stream), coded and digested as
/// its pieces come, its frame written to the archive's file as it is coded
/// ([`ArchiveFileWriter::kernel_in_pieces`]). It holds zstd's context and the frame of one
/// piece, not the whole frame: RCCL's 133 MB code objects code to 47 MB frames that no memory
/// budget counted. The frame is coded as [`super::KernelCompressor::prepare`] codes one:
/// zstd's checksum, and the content size in the frame header.
///
/// [`KernelInPieces::finish`] adds it under each of its keys; a frame identical to a stored
/// one is dropped from the file and shares that one's blob, as a kernel added whole does.
/// Dropped unfinished (its coding failed), it leaves the file as it found it.
pub struct KernelInPieces<'w, 'a> {
    file: &'w mut ArchiveFileWriter<'a>,
    keys: Vec<String>,
    arch: String,
    encoder: zstd::stream::write::Encoder<'static, Vec<u8>>,
    digest: twox_hash::XxHash3_64,
    len: u64,
    given: u64,
    /// Frame bytes written to the file so far.
    written: u64,
    finished: bool,
}

impl<'a> ArchiveFileWriter<'a> {
    /// Starts adding the kernel of `len` bytes for `arch` under each of `keys`, coded as its
    /// pieces come ([`KernelInPieces`]); `None` when this archive does not store each kernel
    /// as a frame of its own: `none` stores the bytes themselves and `unified` codes them
    /// against the frames before, both from the kernel whole. The keys are checked now, so
    /// that a duplicate entry is refused before anything is coded.
    pub fn kernel_in_pieces(
        &mut self,
        keys: Vec<String>,
        arch: &str,
        len: u64,
    ) -> Result<Option<KernelInPieces<'_, 'a>>, ArchiveError> {
        let result = self.begin_in_pieces(&keys, arch, len);
        let Some(encoder) = result.map_err(|e| e.in_file(Some(self.path())))? else {
            return Ok(None);
        };
        Ok(Some(KernelInPieces {
            file: self,
            keys,
            arch: arch.to_owned(),
            encoder,
            digest: content_digester(),
            len,
            given: 0,
            written: 0,
            finished: false,
        }))
    }

    fn begin_in_pieces(
        &mut self,
        keys: &[String],
        arch: &str,
        len: u64,
    ) -> Result<Option<zstd::stream::write::Encoder<'static, Vec<u8>>>, ArchiveError> {
        let Compression::Zstd { level } = self.writer.compression else {
            return Ok(None);
        };
        within_kernel_size(len)?;
        for key in keys {
            self.writer.check_new_entry(key, arch, &[])?;
        }
        self.writer.next_ordinal()?;
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), level).map_err(zstd_io)?;
        encoder.include_checksum(true).map_err(zstd_io)?;
        encoder.include_contentsize(true).map_err(zstd_io)?;
        encoder.set_pledged_src_size(Some(len)).map_err(zstd_io)?;
        self.writer.blobs.begin_in_place()?;
        Ok(Some(encoder))
    }
}

impl KernelInPieces<'_, '_> {
    /// Codes the next piece of the kernel, its frame so far going to the file.
    pub fn piece(&mut self, bytes: &[u8]) -> Result<(), ArchiveError> {
        let result = self.code(bytes);
        result.map_err(|e| e.in_file(Some(self.file.path())))
    }

    fn code(&mut self, bytes: &[u8]) -> Result<(), ArchiveError> {
        self.given += bytes.len() as u64;
        if self.given > self.len {
            return Err(self.size_error());
        }
        self.digest.write(bytes);
        self.encoder.write_all(bytes).map_err(zstd_io)?;
        self.drain()
    }

    /// Moves the frame coded so far from the encoder's buffer to the file.
    fn drain(&mut self) -> Result<(), ArchiveError> {
        let coded = self.encoder.get_mut();
        self.file.writer.blobs.write_in_place(coded)?;
        self.written += coded.len() as u64;
        coded.clear();
        Ok(())
    }

    /// Ends the kernel once every one of its `len` bytes was given, and adds it under each
    /// of its keys.
    pub fn finish(mut self) -> Result<(), ArchiveError> {
        let result = self.end();
        result.map_err(|e| e.in_file(Some(self.file.path())))
    }

    fn end(&mut self) -> Result<(), ArchiveError> {
        if self.given != self.len {
            return Err(self.size_error());
        }
        self.encoder.do_finish().map_err(zstd_io)?;
        self.drain()?;
        let len = frame_size(self.written)?;
        let content = (self.digest.finish(), self.len);
        let writer = &mut self.file.writer;
        let mut stored = None;
        for &o in writer.dedupe.get(&content).into_iter().flatten() {
            if writer.blobs.holds_in_place(o, u64::from(len))? {
                stored = Some(o);
                break;
            }
        }
        let ordinal = match stored {
            Some(o) => {
                writer.blobs.discard_in_place()?;
                o
            }
            None => {
                let ordinal = writer.next_ordinal()?;
                writer.blobs.end_in_place(len)?;
                writer.dedupe.entry(content).or_default().push(ordinal);
                ordinal
            }
        };
        self.finished = true;
        writer.add_stored_under(&self.keys, &self.arch, ordinal, content, &[])
    }

    fn size_error(&self) -> ArchiveError {
        ArchiveError::InvalidArgument(format!(
            "kernel given in pieces of {} bytes or more, not the {} it was begun with",
            self.given, self.len
        ))
    }
}

impl Drop for KernelInPieces<'_, '_> {
    fn drop(&mut self) {
        if !self.finished {
            // The writer is then abandoned with the error that stopped the kernel; if it
            // goes on, its next blob starts where the last one ended.
            let _ = self.file.writer.blobs.discard_in_place();
        }
    }
}
