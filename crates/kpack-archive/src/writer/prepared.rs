//! Kernels in the form an archive stores them, prepared (compressed) off the writer's thread.

use std::borrow::Cow;

use super::{Compression, DEFAULT_ZSTD_LEVEL};
use crate::coder::within_frame_size;
use std::hash::Hasher;
use std::io::Write;

use crate::digest::{content_digest, content_digester};
use crate::{Archive, ArchiveError, CompressionScheme, MAX_ORIGINAL_SIZE};

/// A kernel in the form an archive stores it (compressed or not), prepared off the writer's
/// thread by a [`KernelCompressor`] and added with [`crate::ArchiveWriter::add_prepared`] or
/// [`crate::ArchiveFileWriter::add_prepared`].
#[derive(Clone)]
pub struct PreparedKernel<'a> {
    pub(super) stored: Cow<'a, [u8]>,
    pub(super) original_size: u64,
    /// The code object's digest ([`crate::digest`]), whatever form `stored` is in.
    pub(super) digest: u64,
    pub(super) compression: Compression,
}

impl PreparedKernel<'_> {
    /// Length of the stored bytes.
    pub fn stored_len(&self) -> usize {
        self.stored.len()
    }

    /// The same kernel owning its stored bytes (copied only if borrowed: a `none` kernel).
    pub fn into_owned(self) -> PreparedKernel<'static> {
        PreparedKernel {
            stored: Cow::Owned(self.stored.into_owned()),
            original_size: self.original_size,
            digest: self.digest,
            compression: self.compression,
        }
    }
}

impl<'a> PreparedKernel<'a> {
    /// The entry `(binary, arch)` of `archive` as a writer of `compression` stores it, taken
    /// as the archive stores it, without decoding, when that is already the form
    /// `compression` stores: a `none` kernel for `none`, a zstd frame for `zstd` at the
    /// default level (frames record no level: they are kept as the archive's writer made
    /// them, at the default unless asked otherwise; another level asked for codes them
    /// again). `None` otherwise (and always for `unified`, whose frames depend on the other
    /// frames of their archive, and for archives without digests, whose copies could not be
    /// proven): the kernel must be decoded and prepared again.
    /// The entry is read and checked against its digest first ([`Archive::get`]), so a copy
    /// carries only what the source's writer was given.
    pub fn stored_in(
        archive: &'a Archive,
        binary: &str,
        arch: &str,
        compression: Compression,
    ) -> Result<Option<PreparedKernel<'a>>, ArchiveError> {
        let copies = match compression {
            Compression::None => archive.compression_scheme() == CompressionScheme::None,
            Compression::Zstd { level } => {
                level == DEFAULT_ZSTD_LEVEL
                    && archive.compression_scheme() == CompressionScheme::ZstdPerKernel
            }
            Compression::Unified { .. } => false,
        };
        let Some((info, digest)) = archive
            .info(binary, arch)
            .and_then(|info| Some((info, info.digest?)))
            .filter(|_| copies)
        else {
            return Ok(None);
        };
        archive.get(binary, arch)?;
        Ok(Some(PreparedKernel {
            stored: Cow::Borrowed(archive.stored_bytes(binary, arch)?),
            original_size: info.original_size,
            digest,
            compression,
        }))
    }
}

/// Compresses kernels as an archive of a given [`Compression`] stores them; keeps one zstd
/// context, so use one per thread. For `unified` it only checks the size: the coding depends
/// on the kernels stored before, so the writer does it as kernels are added.
pub struct KernelCompressor {
    compression: Compression,
    context: Option<zstd::bulk::Compressor<'static>>,
    /// Where `context` codes a kernel before its frame is copied out.
    scratch: Vec<u8>,
}

impl KernelCompressor {
    /// A compressor for archives of `compression` (its zstd context is made on first use).
    pub fn new(compression: Compression) -> Self {
        KernelCompressor {
            compression,
            context: None,
            scratch: Vec::new(),
        }
    }

    /// The kernel `data` as an archive stores it: its zstd frame, or the bytes themselves.
    pub fn prepare<'a>(
        &mut self,
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<PreparedKernel<'a>, ArchiveError> {
        let data = data.into();
        let original_size = data.len() as u64;
        if original_size > MAX_ORIGINAL_SIZE {
            return Err(ArchiveError::InvalidArgument(format!(
                "kernel of {original_size} bytes exceeds the {MAX_ORIGINAL_SIZE}-byte limit"
            )));
        }
        let digest = content_digest(&data);
        let stored = match self.compression {
            Compression::None | Compression::Unified { .. } => data,
            Compression::Zstd { level } => Cow::Owned(self.compress(&data, level)?),
        };
        Ok(PreparedKernel {
            stored,
            original_size,
            digest,
            compression: self.compression,
        })
    }

    fn compress(&mut self, data: &[u8], level: i32) -> Result<Vec<u8>, ArchiveError> {
        let io = zstd_io;
        let compressor = match &mut self.context {
            Some(c) => c,
            None => {
                let mut c = zstd::bulk::Compressor::new(level).map_err(io)?;
                // Every zstd decoder checks this, the reference readers' included.
                c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
                    .map_err(io)?;
                self.context.insert(c)
            }
        };
        // The bulk API writes the content size into the frame header, which the reference's
        // Python reader needs. It codes into `scratch`, sized for the worst case once, and the
        // frame is copied out at its size: a new worst-case buffer for every kernel cost a
        // page fault and a zeroed page per 4 KiB of kernel, more than the copy. A kernel too
        // large for the scratch gets a buffer of its own, whose pages beyond the frame are
        // never touched: kept as scratch, each writer of a transform would hold a buffer the
        // size of its largest kernel (RCCL's are 200 MB, one writer per target).
        if data.len() > SCRATCH_MAX {
            let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
            compressor
                .compress_to_buffer(data, &mut frame)
                .map_err(io)?;
            frame.shrink_to_fit();
            return within_frame_size(frame);
        }
        self.scratch.clear();
        self.scratch
            .reserve(zstd::zstd_safe::compress_bound(data.len()));
        compressor
            .compress_to_buffer(data, &mut self.scratch)
            .map_err(io)?;
        within_frame_size(self.scratch.clone())
    }
}

/// A kernel prepared from its bytes given in pieces, in order, never held whole: a code
/// object too large to hold (librocprim-tests' are 217 MB each, read from a CCOB as a stream),
/// coded and digested as its pieces come. Its frame is coded as [`KernelCompressor::prepare`]
/// codes one: zstd's checksum, and the content size in the frame header.
pub struct KernelInPieces {
    encoder: zstd::stream::write::Encoder<'static, Vec<u8>>,
    digest: twox_hash::XxHash3_64,
    len: u64,
    given: u64,
    compression: Compression,
}

impl KernelInPieces {
    /// For an archive of `compression` and a kernel of `len` bytes; `None` when that archive
    /// does not store each kernel as a frame of its own: `none` stores the bytes themselves
    /// and `unified` codes them against the frames before, both from the kernel whole.
    pub fn new(compression: Compression, len: u64) -> Result<Option<Self>, ArchiveError> {
        let Compression::Zstd { level } = compression else {
            return Ok(None);
        };
        if len > MAX_ORIGINAL_SIZE {
            return Err(ArchiveError::InvalidArgument(format!(
                "kernel of {len} bytes exceeds the {MAX_ORIGINAL_SIZE}-byte limit"
            )));
        }
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), level).map_err(zstd_io)?;
        encoder.include_checksum(true).map_err(zstd_io)?;
        encoder.include_contentsize(true).map_err(zstd_io)?;
        encoder.set_pledged_src_size(Some(len)).map_err(zstd_io)?;
        Ok(Some(KernelInPieces {
            encoder,
            digest: content_digester(),
            len,
            given: 0,
            compression,
        }))
    }

    /// Codes the next piece of the kernel.
    pub fn piece(&mut self, bytes: &[u8]) -> Result<(), ArchiveError> {
        self.given += bytes.len() as u64;
        if self.given > self.len {
            return Err(self.size_error());
        }
        self.digest.write(bytes);
        self.encoder.write_all(bytes).map_err(zstd_io)
    }

    /// The kernel prepared, once every one of its `len` bytes was given.
    pub fn finish(self) -> Result<PreparedKernel<'static>, ArchiveError> {
        if self.given != self.len {
            return Err(self.size_error());
        }
        let mut frame = self.encoder.finish().map_err(zstd_io)?;
        frame.shrink_to_fit();
        Ok(PreparedKernel {
            stored: Cow::Owned(within_frame_size(frame)?),
            original_size: self.len,
            digest: self.digest.finish(),
            compression: self.compression,
        })
    }

    fn size_error(&self) -> ArchiveError {
        ArchiveError::InvalidArgument(format!(
            "kernel given in pieces of {} bytes or more, not the {} it was begun with",
            self.given, self.len
        ))
    }
}

fn zstd_io(source: std::io::Error) -> ArchiveError {
    ArchiveError::Io {
        context: "zstd compression",
        source,
    }
}

/// The most bytes of kernel [`KernelCompressor`] codes into its reused scratch buffer.
const SCRATCH_MAX: usize = 16 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// A code object coded in pieces is stored as a frame that decodes to it, with its
    /// size in the frame header and zstd's checksum (as a frame coded whole), and the same
    /// digest and size as when coded whole. (Not the same frame bytes: zstd codes a stream
    /// in blocks as it comes. Whether a bundle is streamed depends only on its size, so an
    /// archive's bytes still do not depend on the thread count.)
    #[test]
    fn a_kernel_coded_in_pieces_is_a_checked_frame_of_it_with_the_digest_of_it_coded_whole() {
        let data: Vec<u8> = (0..(SCRATCH_MAX as u32 + 300_001))
            .map(|i| (i / 97 % 251) as u8 ^ (i % 7) as u8)
            .collect();
        for len in [0, 1000, data.len()] {
            let data = &data[..len];
            let compression = Compression::Zstd { level: 3 };
            let whole = KernelCompressor::new(compression).prepare(data).unwrap();
            let mut pieces = KernelInPieces::new(compression, len as u64)
                .unwrap()
                .unwrap();
            for piece in data.chunks(65_536) {
                pieces.piece(piece).unwrap();
            }
            let pieces = pieces.finish().unwrap();
            let frame = &pieces.stored;
            assert_eq!(
                zstd::zstd_safe::get_frame_content_size(frame).ok(),
                Some(Some(len as u64)),
                "{len} bytes: the content size is in the frame header"
            );
            assert_ne!(frame[4] & 0x04, 0, "{len} bytes: the checksum flag is set");
            assert!(
                zstd::bulk::decompress(frame, len).unwrap() == data,
                "{len} bytes: the frame decodes to the kernel"
            );
            assert_eq!(
                (pieces.digest, pieces.original_size),
                (whole.digest, whole.original_size)
            );
        }
    }

    #[test]
    fn a_kernel_given_more_or_fewer_bytes_than_begun_with_is_an_error() {
        let compression = Compression::Zstd { level: 3 };
        let mut short = KernelInPieces::new(compression, 10).unwrap().unwrap();
        short.piece(&[0; 9]).unwrap();
        let error = short.finish().err().unwrap().to_string();
        assert!(
            error.contains("pieces of 9 bytes") && error.contains("the 10"),
            "{error}"
        );
        let mut long = KernelInPieces::new(compression, 10).unwrap().unwrap();
        assert!(long.piece(&[0; 11]).is_err());
        for whole in [Compression::None, Compression::Unified { level: 3 }] {
            assert!(KernelInPieces::new(whole, 10).unwrap().is_none());
        }
    }
}
