//! Kernels in the form an archive stores them, prepared (compressed) off the writer's thread.

use std::borrow::Cow;
use std::cell::RefCell;

use super::{Compression, DEFAULT_ZSTD_LEVEL};
use crate::coder::within_frame_size;

use crate::digest::content_digest;
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
}

thread_local! {
    /// The compressor of the archive writers on this thread ([`KernelCompressor::on_this_thread`]).
    static THIS_THREAD: RefCell<Option<KernelCompressor>> = const { RefCell::new(None) };
}

impl KernelCompressor {
    /// Has `f` compress with this thread's compressor for `compression`, which every archive
    /// writer on the thread shares: a writer of its own kept a zstd context (and then a
    /// scratch buffer), per archive, for the archive's life. A split writes an archive per
    /// target of every fat binary in flight (14 for each of 4 fat binaries on 2 cores): their
    /// compressors held over 100 MiB that no memory gate counted. Per thread, they hold what
    /// the threads coding at once hold.
    pub(super) fn on_this_thread<R>(
        compression: Compression,
        f: impl FnOnce(&mut KernelCompressor) -> R,
    ) -> R {
        THIS_THREAD.with_borrow_mut(|slot| match slot {
            Some(c) if c.compression == compression => f(c),
            _ => f(slot.insert(KernelCompressor::new(compression))),
        })
    }

    /// A compressor for archives of `compression` (its zstd context is made on first use).
    pub fn new(compression: Compression) -> Self {
        KernelCompressor {
            compression,
            context: None,
        }
    }

    /// The kernel `data` as an archive stores it: its zstd frame, or the bytes themselves.
    pub fn prepare<'a>(
        &mut self,
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<PreparedKernel<'a>, ArchiveError> {
        let data = data.into();
        let original_size = within_kernel_size(data.len() as u64)?;
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
        // Python reader needs. It codes into a buffer of the worst case, whose pages beyond
        // the frame are never touched, shrunk to the frame. A scratch buffer kept for the next
        // kernel held up to 16 MiB per compressor, for the compressor's life, that no memory
        // gate counted (176 MiB allocated at the peak of a split of the distribution, issue
        // 38), to save a copy of every frame.
        let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
        compressor
            .compress_to_buffer(data, &mut frame)
            .map_err(io)?;
        frame.shrink_to_fit();
        within_frame_size(frame)
    }
}

/// `len`, if a kernel of that many bytes fits the format ([`MAX_ORIGINAL_SIZE`]).
pub(super) fn within_kernel_size(len: u64) -> Result<u64, ArchiveError> {
    if len > MAX_ORIGINAL_SIZE {
        return Err(ArchiveError::InvalidArgument(format!(
            "kernel of {len} bytes exceeds the {MAX_ORIGINAL_SIZE}-byte limit"
        )));
    }
    Ok(len)
}

pub(super) fn zstd_io(source: std::io::Error) -> ArchiveError {
    ArchiveError::Io {
        context: "zstd compression",
        source,
    }
}
