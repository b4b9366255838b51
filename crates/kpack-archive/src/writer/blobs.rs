//! Where a writer's stored blobs are: in memory, or already in the archive's file.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};

use super::Compression;
use crate::ArchiveError;

/// Where the stored blobs are, per ordinal.
pub(super) enum Blobs<'a> {
    /// Kept in memory until [`super::ArchiveWriter::write_to`].
    Memory(Vec<Cow<'a, [u8]>>),
    /// Already written to `out`, laid out as in the final file: per ordinal, the absolute
    /// offset and length of the stored bytes (after the zstd size prefix).
    Streamed {
        out: BufWriter<File>,
        spans: Vec<(u64, u64)>,
        end: u64,
    },
}

pub(super) fn io_error(context: &'static str) -> impl Fn(std::io::Error) -> ArchiveError {
    move |source| ArchiveError::Io { context, source }
}

impl Blobs<'_> {
    pub(super) fn count(&self) -> usize {
        match self {
            Blobs::Memory(blobs) => blobs.len(),
            Blobs::Streamed { spans, .. } => spans.len(),
        }
    }

    /// Length of the stored bytes of `ordinal`.
    pub(super) fn len(&self, ordinal: usize) -> u64 {
        match self {
            Blobs::Memory(blobs) => blobs[ordinal].len() as u64,
            Blobs::Streamed { spans, .. } => spans[ordinal].1,
        }
    }

    /// Whether blob `ordinal` holds exactly `bytes` (a streamed blob is read back, a
    /// [`COMPARE_CHUNK`] at a time: a stored frame may be 100 MB).
    pub(super) fn holds(&mut self, ordinal: u32, bytes: &[u8]) -> Result<bool, ArchiveError> {
        if self.len(ordinal as usize) != bytes.len() as u64 {
            return Ok(false);
        }
        let Blobs::Streamed { out, spans, .. } = self else {
            return Ok(self.read(ordinal)? == bytes);
        };
        let io = io_error("reading back a streamed blob");
        out.flush().map_err(&io)?;
        let offset = spans[ordinal as usize].0;
        let mut stored = vec![0u8; COMPARE_CHUNK.min(bytes.len())];
        for (i, expected) in bytes.chunks(COMPARE_CHUNK).enumerate() {
            let stored = &mut stored[..expected.len()];
            let at = offset + (i * COMPARE_CHUNK) as u64;
            kpack_fs::read_exact_at(out.get_ref(), stored, at).map_err(&io)?;
            if stored != expected {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The stored bytes of `ordinal` (a streamed blob is read back).
    pub(super) fn read(&mut self, ordinal: u32) -> Result<Cow<'_, [u8]>, ArchiveError> {
        match self {
            Blobs::Memory(blobs) => Ok(Cow::Borrowed(&blobs[ordinal as usize])),
            Blobs::Streamed { out, spans, .. } => {
                let (offset, len) = spans[ordinal as usize];
                let io = io_error("reading back a streamed blob");
                out.flush().map_err(&io)?;
                let mut stored = vec![0u8; len as usize];
                kpack_fs::read_exact_at(out.get_ref(), &mut stored, offset).map_err(&io)?;
                Ok(Cow::Owned(stored))
            }
        }
    }
}

/// How much of a stored blob [`Blobs::holds`] reads back at once.
const COMPARE_CHUNK: usize = 1 << 20;

impl<'a> Blobs<'a> {
    pub(super) fn push(
        &mut self,
        stored: Cow<'a, [u8]>,
        compression: Compression,
    ) -> Result<(), ArchiveError> {
        match self {
            Blobs::Memory(blobs) => blobs.push(stored),
            Blobs::Streamed { out, spans, end } => {
                let io = io_error("writing archive");
                if compression.prefixed() {
                    // Frame lengths were checked against u32 in `compress`.
                    out.write_all(&(stored.len() as u32).to_le_bytes())
                        .map_err(&io)?;
                    *end += 4;
                }
                out.write_all(&stored).map_err(&io)?;
                spans.push((*end, stored.len() as u64));
                *end += stored.len() as u64;
            }
        }
        Ok(())
    }
}
