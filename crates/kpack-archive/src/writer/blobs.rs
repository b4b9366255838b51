//! Where a writer's stored blobs are: in memory, or already in the archive's file.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};

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
        if let Blobs::Memory(blobs) = self {
            return Ok(*blobs[ordinal as usize] == *bytes);
        }
        self.stored_equals(ordinal, Compared::Bytes(bytes))
    }

    /// Whether blob `ordinal` holds exactly the `len` bytes of the blob being written in
    /// place ([`Blobs::write_in_place`]); both are read back a [`COMPARE_CHUNK`] at a time.
    pub(super) fn holds_in_place(&mut self, ordinal: u32, len: u64) -> Result<bool, ArchiveError> {
        if self.len(ordinal as usize) != len {
            return Ok(false);
        }
        let Blobs::Streamed { end, .. } = self else {
            unreachable!("only a streamed archive writes a blob in place");
        };
        let at = *end + PREFIX;
        self.stored_equals(ordinal, Compared::InFile(at))
    }

    /// Compares streamed blob `ordinal` (of the same length as `other`) with `other`.
    fn stored_equals(&mut self, ordinal: u32, other: Compared<'_>) -> Result<bool, ArchiveError> {
        let Blobs::Streamed { out, spans, .. } = self else {
            unreachable!("a blob in memory is compared in place");
        };
        let io = io_error("reading back a streamed blob");
        out.flush().map_err(&io)?;
        let (offset, len) = spans[ordinal as usize];
        let chunk = (COMPARE_CHUNK as u64).min(len) as usize;
        let (mut stored, mut expected) = (vec![0u8; chunk], Vec::new());
        let mut done = 0u64;
        while done < len {
            let n = (COMPARE_CHUNK as u64).min(len - done) as usize;
            let stored = &mut stored[..n];
            kpack_fs::read_exact_at(out.get_ref(), stored, offset + done).map_err(&io)?;
            let expected: &[u8] = match other {
                Compared::Bytes(bytes) => &bytes[done as usize..done as usize + n],
                Compared::InFile(at) => {
                    expected.resize(n, 0);
                    kpack_fs::read_exact_at(out.get_ref(), &mut expected, at + done)
                        .map_err(&io)?;
                    &expected
                }
            };
            if stored != expected {
                return Ok(false);
            }
            done += n as u64;
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

    /// Starts a blob written in place at the end of a streamed archive's file, as its bytes
    /// come ([`super::KernelInPieces`]): its size prefix, filled in by
    /// [`Blobs::end_in_place`].
    pub(super) fn begin_in_place(&mut self) -> Result<(), ArchiveError> {
        let Blobs::Streamed { out, .. } = self else {
            unreachable!("only a streamed archive writes a blob in place");
        };
        out.write_all(&[0; PREFIX as usize])
            .map_err(io_error("writing archive"))
    }

    /// The next bytes of the blob being written in place.
    pub(super) fn write_in_place(&mut self, bytes: &[u8]) -> Result<(), ArchiveError> {
        let Blobs::Streamed { out, .. } = self else {
            unreachable!("only a streamed archive writes a blob in place");
        };
        out.write_all(bytes).map_err(io_error("writing archive"))
    }

    /// Keeps the blob written in place, of `len` bytes (checked against u32 by the
    /// caller), as the next ordinal: fills in its size prefix.
    pub(super) fn end_in_place(&mut self, len: u32) -> Result<(), ArchiveError> {
        let Blobs::Streamed { out, spans, end } = self else {
            unreachable!("only a streamed archive writes a blob in place");
        };
        let io = io_error("writing archive");
        let next = *end + PREFIX + u64::from(len);
        out.seek(SeekFrom::Start(*end)).map_err(&io)?;
        out.write_all(&len.to_le_bytes()).map_err(&io)?;
        out.seek(SeekFrom::Start(next)).map_err(&io)?;
        spans.push((*end + PREFIX, u64::from(len)));
        *end = next;
        Ok(())
    }

    /// Drops what was written in place since the last blob (a copy of a stored blob, or a
    /// kernel whose coding failed): the file ends at the last blob again.
    pub(super) fn discard_in_place(&mut self) -> Result<(), ArchiveError> {
        let Blobs::Streamed { out, end, .. } = self else {
            unreachable!("only a streamed archive writes a blob in place");
        };
        let io = io_error("writing archive");
        out.flush().map_err(&io)?;
        out.get_ref().set_len(*end).map_err(&io)?;
        out.seek(SeekFrom::Start(*end)).map_err(&io)?;
        Ok(())
    }
}

/// How much of a stored blob [`Blobs::holds`] reads back at once.
const COMPARE_CHUNK: usize = 1 << 20;

/// The size prefix of a zstd frame in the blob region (the only blobs written in place).
const PREFIX: u64 = 4;

/// What a streamed blob is compared with: bytes in memory, or the blob being written in
/// place, from this offset of the file.
#[derive(Clone, Copy)]
enum Compared<'b> {
    Bytes(&'b [u8]),
    InFile(u64),
}

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
