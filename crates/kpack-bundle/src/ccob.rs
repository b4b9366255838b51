//! The compressed `CCOB` format (LLVM `CompressedOffloadBundle`): header, bounds,
//! decompression with bounded memory, and the writer.

use std::io::Write;

use md5::{Digest, Md5};
use zstd::zstd_safe;

use crate::plain::{check_magic, le_u64, read};
use crate::{BundleError, CCOB_MAGIC};

/// The compression method of a CCOB (LLVM `compression::Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompressionMethod {
    /// Method 0: a zlib stream (RFC 1950).
    Zlib,
    /// Method 1: one or more zstd frames; what every real ROCm file uses.
    Zstd,
}

impl CompressionMethod {
    /// The on-disk method number.
    pub fn code(self) -> u16 {
        match self {
            CompressionMethod::Zlib => 0,
            CompressionMethod::Zstd => 1,
        }
    }

    fn from_code(code: u16) -> Option<Self> {
        match code {
            0 => Some(CompressionMethod::Zlib),
            1 => Some(CompressionMethod::Zstd),
            _ => None,
        }
    }

    /// The most bytes `compressed_len` bytes of this method can decode to.
    ///
    /// zstd: a block has a 3-byte header and at least one content byte and decodes to at
    /// most 128 KiB (an RLE block), so 4 input bytes yield at most 2^17 output bytes.
    /// deflate: at best one 258-byte match per 2 bits, i.e. 1032 bytes per input byte.
    fn max_output(self, compressed_len: u64) -> u64 {
        let ratio = match self {
            CompressionMethod::Zlib => 1032,
            CompressionMethod::Zstd => (128 * 1024) / 4,
        };
        compressed_len.saturating_mul(ratio)
    }
}

/// Absolute cap on a bundle decoded whole ([`crate::DecodedBundle::decode`]), whatever its
/// header claims: such a bundle is decoded into one buffer reserved at its claimed size, so
/// without the cap a hostile header could make us reserve any size the compressed bytes
/// allow (32768 times them for zstd). The largest real bundles decoded whole are well below
/// it (kpack-pipeline decodes whole only bundles up to its `STREAM_ABOVE`, 192 MiB). A bundle
/// read as a stream ([`crate::EntryStream`]) holds no buffer of its size, so the cap does not
/// apply there: real CCOBs decode to more (librccl 7.2.4: 1.2 GB in one bundle), and a
/// stream is bounded by what its compressed bytes can produce.
pub const MAX_DECOMPRESSED: u64 = 1 << 30;

/// The parsed fixed header of a CCOB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CcobHeader {
    pub version: u16,
    pub method: CompressionMethod,
    pub header_len: u64,
    /// v2/v3 only: the whole CCOB including its header.
    pub total_size: Option<u64>,
    pub uncompressed_size: u64,
    pub hash: u64,
}

impl CcobHeader {
    /// The header length of `version` (1, 2 or 3).
    fn header_len(version: u16) -> Option<u64> {
        match version {
            1 => Some(20),
            2 => Some(24),
            3 => Some(32),
            _ => None,
        }
    }

    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, BundleError> {
        check_magic(bytes, CCOB_MAGIC)?;
        let common = read(bytes, 0, 8, "CCOB header")?;
        let version = u16::from_le_bytes([common[4], common[5]]);
        let method_code = u16::from_le_bytes([common[6], common[7]]);
        let header_len = Self::header_len(version)
            .ok_or(BundleError::UnsupportedVersion { offset: 4, version })?;
        let method =
            CompressionMethod::from_code(method_code).ok_or(BundleError::UnsupportedMethod {
                offset: 6,
                method: method_code,
            })?;
        let h = read(bytes, 0, header_len, "CCOB header")?;
        let le_u32 =
            |at: usize| u64::from(u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]));
        let (total_size, uncompressed_size, hash) = match version {
            1 => (None, le_u32(8), le_u64(&h[12..])),
            2 => (Some(le_u32(8)), le_u32(12), le_u64(&h[16..])),
            _ => (Some(le_u64(&h[8..])), le_u64(&h[16..]), le_u64(&h[24..])),
        };
        if let Some(total_size) = total_size
            && total_size < header_len
        {
            // Also what keeps a fatbin walk from looping on `total_size == 0`.
            return Err(BundleError::BadTotalSize {
                offset: 8,
                total_size,
                header_len,
            });
        }
        Ok(CcobHeader {
            version,
            method,
            header_len,
            total_size,
            uncompressed_size,
            hash,
        })
    }

    /// Extent of the CCOB at `bytes[0]`. v2/v3 store it; v1 does not, so its compressed
    /// stream is walked: zstd frames by their block headers (no decoding), zlib by
    /// inflating it (the only way to find the end of a deflate stream).
    pub(crate) fn extent(&self, bytes: &[u8]) -> Result<u64, BundleError> {
        let available = bytes.len() as u64;
        if let Some(total) = self.total_size {
            if total > available {
                return Err(BundleError::Truncated {
                    offset: 0,
                    needed: total,
                    available,
                    what: "CCOB (total size from its header)",
                });
            }
            return Ok(total);
        }
        let stream = &bytes[self.header_len as usize..];
        let stream_len = match self.method {
            CompressionMethod::Zstd => {
                zstd_safe::find_frame_compressed_size(stream).map_err(|code| {
                    BundleError::Decompress {
                        offset: self.header_len,
                        method: self.method,
                        message: format!(
                            "cannot find the end of the zstd frame: {}",
                            zstd_safe::get_error_name(code)
                        ),
                    }
                })? as u64
            }
            CompressionMethod::Zlib => self.decompress_zlib(stream)?.1,
        };
        Ok(self.header_len + stream_len)
    }

    /// Decompresses the CCOB at `bytes[0]`; returns the payload and the CCOB's extent.
    pub(crate) fn decode(&self, bytes: &[u8]) -> Result<(Vec<u8>, u64), BundleError> {
        if self.total_size.is_none() && self.method == CompressionMethod::Zlib {
            // Inflating is the only way to bound a v1 zlib stream; do it once.
            let (out, consumed) = self.decompress_zlib(&bytes[self.header_len as usize..])?;
            return Ok((out, self.header_len + consumed));
        }
        let extent = self.extent(bytes)?;
        let stream = &bytes[self.header_len as usize..extent as usize];
        Ok((self.decompress(stream)?, extent))
    }

    /// Checks the claimed size against what `compressed_len` bytes can possibly decode to
    /// and, for a bundle decoded `whole` into one buffer, against [`MAX_DECOMPRESSED`],
    /// before any output is allocated.
    pub(crate) fn check_claim(&self, compressed_len: u64, whole: bool) -> Result<(), BundleError> {
        let possible = self.method.max_output(compressed_len);
        let limit = if whole {
            MAX_DECOMPRESSED.min(possible)
        } else {
            possible
        };
        if self.uncompressed_size > limit {
            return Err(BundleError::DecompressedTooLarge {
                offset: match self.version {
                    1 => 8,
                    2 => 12,
                    _ => 16,
                },
                claimed: self.uncompressed_size,
                limit,
            });
        }
        Ok(())
    }

    /// Decompresses `stream` (exactly the compressed bytes of this CCOB) into exactly
    /// `uncompressed_size` bytes; the whole of `stream` must be consumed.
    pub(crate) fn decompress(&self, stream: &[u8]) -> Result<Vec<u8>, BundleError> {
        let (out, consumed) = match self.method {
            CompressionMethod::Zstd => self.decompress_zstd(stream)?,
            CompressionMethod::Zlib => self.decompress_zlib(stream)?,
        };
        if consumed != stream.len() as u64 {
            return Err(BundleError::TrailingData {
                offset: self.header_len + consumed,
                len: stream.len() as u64 - consumed,
                what: "the compressed stream",
            });
        }
        Ok(out)
    }

    /// An output buffer that grows as data actually arrives: its first reservation is
    /// bounded by a typical code-object ratio, never by the claim alone.
    fn output_buffer(&self, compressed_len: u64) -> Vec<u8> {
        let initial = self
            .uncompressed_size
            .min(compressed_len.saturating_mul(16))
            .min(64 << 20);
        Vec::with_capacity(initial as usize)
    }

    pub(crate) fn decompress_error(&self, offset: u64, message: String) -> BundleError {
        BundleError::Decompress {
            offset: self.header_len + offset,
            method: self.method,
            message,
        }
    }

    pub(crate) fn size_error(&self, actual: u64) -> BundleError {
        BundleError::SizeMismatch {
            offset: self.header_len,
            expected: self.uncompressed_size,
            actual,
            what: "decompressed size",
        }
    }

    fn decompress_zstd(&self, stream: &[u8]) -> Result<(Vec<u8>, u64), BundleError> {
        self.check_claim(stream.len() as u64, true)?;
        // zstd sizes its window buffer from the frame header: min(window, content size).
        // Refuse a frame announcing more content than the CCOB header before it allocates
        // anything. A frame without a content size (LLVM always writes one) can still make
        // the decoder reserve up to zstd's default window limit, 2^27 bytes.
        if let Ok(Some(content)) = zstd_safe::get_frame_content_size(stream)
            && content > self.uncompressed_size
        {
            return Err(BundleError::SizeMismatch {
                offset: self.header_len,
                expected: self.uncompressed_size,
                actual: content,
                what: "zstd frame content size",
            });
        }
        // The frames are bounded by their headers first: bytes after the last frame are
        // trailing data (reported by `decompress`), not a decoding error.
        let mut frames_end = 0;
        while frames_end < stream.len() {
            match zstd_safe::find_frame_compressed_size(&stream[frames_end..]) {
                Ok(len) => frames_end += len,
                Err(code) if frames_end == 0 => {
                    return Err(self.decompress_error(0, zstd_safe::get_error_name(code).into()));
                }
                Err(_) => break,
            }
        }
        // One-shot decoding straight into a buffer of the claimed size: zstd then needs no
        // window buffer of its own (streaming would add up to 128 MiB per bundle, the window
        // clang's long-distance matching uses), and the buffer's pages are only touched as
        // they are written, so a lie costs address space, not memory. The claim was bounded
        // above by the compressed size and `MAX_DECOMPRESSED`.
        let mut out = Vec::new();
        out.try_reserve_exact(self.uncompressed_size as usize)
            .map_err(|e| self.decompress_error(0, e.to_string()))?;
        zstd_safe::DCtx::create()
            .decompress(&mut out, &stream[..frames_end])
            .map_err(|code| {
                if zstd_safe::get_error_name(code) == "Destination buffer is too small" {
                    // More content than claimed (at least one byte more).
                    self.size_error(self.uncompressed_size + 1)
                } else {
                    self.decompress_error(0, zstd_safe::get_error_name(code).into())
                }
            })?;
        if out.len() as u64 != self.uncompressed_size {
            return Err(self.size_error(out.len() as u64));
        }
        Ok((out, frames_end as u64))
    }

    /// Makes room in a full `out`, up to one byte beyond the claim (enough to detect a lie),
    /// at most doubling it. Reserved bytes are not touched, so cost no memory until written.
    fn grow(&self, out: &mut Vec<u8>) -> Result<(), BundleError> {
        if out.len() < out.capacity() {
            return Ok(());
        }
        let room = (self.uncompressed_size + 1).saturating_sub(out.len() as u64);
        if room == 0 {
            return Err(self.size_error(out.len() as u64));
        }
        out.reserve_exact(room.min((out.len() as u64).max(64 << 10)) as usize);
        Ok(())
    }

    /// Inflates one zlib stream from the start of `stream`; returns the output and the
    /// number of input bytes the stream occupies.
    fn decompress_zlib(&self, stream: &[u8]) -> Result<(Vec<u8>, u64), BundleError> {
        use flate2::{Decompress, FlushDecompress, Status};
        self.check_claim(stream.len() as u64, true)?;
        let mut out = self.output_buffer(stream.len() as u64);
        let mut inflater = Decompress::new(true);
        loop {
            self.grow(&mut out)?;
            let consumed = inflater.total_in() as usize;
            let produced = out.len();
            let status = inflater
                .decompress_vec(&stream[consumed..], &mut out, FlushDecompress::None)
                .map_err(|e| self.decompress_error(inflater.total_in(), e.to_string()))?;
            if out.len() as u64 > self.uncompressed_size {
                return Err(self.size_error(out.len() as u64));
            }
            match status {
                Status::StreamEnd => break,
                _ if inflater.total_in() as usize == consumed && out.len() == produced => {
                    return Err(BundleError::Truncated {
                        offset: self.header_len,
                        needed: stream.len() as u64 + 1,
                        available: stream.len() as u64,
                        what: "zlib stream (ends before its final block)",
                    });
                }
                _ => {}
            }
        }
        if out.len() as u64 != self.uncompressed_size {
            return Err(self.size_error(out.len() as u64));
        }
        Ok((out, inflater.total_in()))
    }
}

/// The CCOB hash: the low 64 bits of the MD5 digest (LLVM `MD5Result::low()`), i.e. the
/// first 8 digest bytes read little-endian.
pub fn ccob_hash(uncompressed_bundle: &[u8]) -> u64 {
    let digest = Md5::digest(uncompressed_bundle);
    le_u64(&digest[..8])
}

/// Compresses an uncompressed bundle into a CCOB of `version` 1, 2 or 3, as LLVM's
/// `CompressedOffloadBundle::compress` lays it out: [`CcobWriter`] given the whole bundle.
/// Deterministic for given inputs: one zstd frame (content size, no checksum,
/// long-distance matching on, as clang does: at level 3 this reproduces
/// clang-offload-bundler 22's CCOBs byte for byte, though not the ones the clang driver
/// embeds, whose zstd parameters differ) or one zlib stream (miniz_oxide, so not
/// byte-identical to LLVM's zlib output). The input is not validated as a bundle, as in LLVM.
///
/// `level`: zstd accepts its own range (negative = fast levels, up to 22; clang uses 3),
/// zlib 0..=9.
pub fn write_compressed(
    uncompressed_bundle: &[u8],
    version: u16,
    method: CompressionMethod,
    level: i32,
) -> Result<Vec<u8>, BundleError> {
    let size = uncompressed_bundle.len() as u64;
    let mut writer = CcobWriter::new(Vec::new(), version, method, level, size)?;
    writer
        .write_all(uncompressed_bundle)
        .map_err(|e| writer.compress_error(e))?;
    let (mut out, compressed) = writer.finish()?;
    out.extend_from_slice(&compressed);
    Ok(out)
}

/// A CCOB written as a stream, for bundles too large to hold: the uncompressed bundle is
/// written in any chunks and compressed to `W` and hashed as it comes; [`CcobWriter::finish`]
/// then gives the CCOB header, which goes before the compressed bytes (it holds their length
/// and the hash, known only at the end). The bytes are those of [`write_compressed`] for the
/// same bundle however it is chunked: zstd's output depends on its parameters and the
/// content size, pledged here as `write_compressed` gives it, not on how input arrives.
pub struct CcobWriter<W: Write> {
    version: u16,
    method: CompressionMethod,
    encoder: Encoder<W>,
    md5: Md5,
    uncompressed_size: u64,
    written: u64,
}

enum Encoder<W: Write> {
    Zstd(zstd::stream::write::Encoder<'static, Counted<W>>),
    Zlib(flate2::write::ZlibEncoder<Counted<W>>),
}

/// A writer that counts what goes through it: the compressed length.
struct Counted<W> {
    inner: W,
    len: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> CcobWriter<W> {
    /// A CCOB of `version` and `method` at `level` (see [`write_compressed`]) of a bundle of
    /// exactly `uncompressed_size` bytes, its compressed bytes going to `out`.
    pub fn new(
        out: W,
        version: u16,
        method: CompressionMethod,
        level: i32,
        uncompressed_size: u64,
    ) -> Result<Self, BundleError> {
        written_header_len(version)?;
        let compress_error = |e: std::io::Error| BundleError::Compress {
            method,
            message: e.to_string(),
        };
        let out = Counted { inner: out, len: 0 };
        let encoder = match method {
            CompressionMethod::Zstd => {
                if !(zstd_safe::min_c_level()..=zstd_safe::max_c_level()).contains(&level) {
                    return Err(BundleError::InvalidLevel { method, level });
                }
                let mut encoder =
                    zstd::stream::write::Encoder::new(out, level).map_err(compress_error)?;
                // Long-distance matching as clang-offload-bundler enables it: with it the
                // output is byte-identical to LLVM 22's (same zstd version, same level).
                encoder
                    .long_distance_matching(true)
                    .and_then(|()| encoder.set_pledged_src_size(Some(uncompressed_size)))
                    .and_then(|()| encoder.include_contentsize(true))
                    .map_err(compress_error)?;
                Encoder::Zstd(encoder)
            }
            CompressionMethod::Zlib => {
                let level = u32::try_from(level)
                    .ok()
                    .filter(|&l| l <= 9)
                    .ok_or(BundleError::InvalidLevel { method, level })?;
                Encoder::Zlib(flate2::write::ZlibEncoder::new(
                    out,
                    flate2::Compression::new(level),
                ))
            }
        };
        Ok(CcobWriter {
            version,
            method,
            encoder,
            md5: Md5::new(),
            uncompressed_size,
            written: 0,
        })
    }

    /// [`BundleError::Compress`] of this writer's method, for a failed write.
    pub fn compress_error(&self, e: std::io::Error) -> BundleError {
        BundleError::Compress {
            method: self.method,
            message: e.to_string(),
        }
    }

    /// Ends the compressed stream; the CCOB header and `out`. Exactly the announced size must
    /// have been written.
    pub fn finish(self) -> Result<(Vec<u8>, W), BundleError> {
        if self.written != self.uncompressed_size {
            return Err(BundleError::SizeMismatch {
                offset: 0,
                expected: self.uncompressed_size,
                actual: self.written,
                what: "bundle written to a CCOB",
            });
        }
        let method = self.method;
        let compress_error = |e: std::io::Error| BundleError::Compress {
            method,
            message: e.to_string(),
        };
        let mut out = match self.encoder {
            Encoder::Zstd(e) => e.finish(),
            Encoder::Zlib(e) => e.finish(),
        }
        .map_err(compress_error)?;
        out.flush().map_err(compress_error)?;
        let digest = self.md5.finalize();
        let header = ccob_header(
            self.version,
            method,
            self.uncompressed_size,
            out.len,
            le_u64(&digest[..8]),
        )?;
        Ok((header, out.inner))
    }
}

impl<W: Write> Write for CcobWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match &mut self.encoder {
            Encoder::Zstd(e) => e.write(buf)?,
            Encoder::Zlib(e) => e.write(buf)?,
        };
        self.md5.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    /// Does nothing: flushing would end a zstd block (or a deflate block) early and change
    /// the output; everything reaches `out` by [`CcobWriter::finish`].
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The header length of a CCOB of `version`, for writers: an error for a version LLVM never
/// wrote.
fn written_header_len(version: u16) -> Result<u64, BundleError> {
    CcobHeader::header_len(version).ok_or(BundleError::CannotWriteVersion { version })
}

/// The header of a CCOB of `version` whose `compressed_len` bytes of `method` decode to
/// `uncompressed_size` bytes with CCOB hash `hash` ([`ccob_hash`]); the compressed stream
/// follows it. For writers that compress a bundle as a stream, never holding it whole.
pub fn ccob_header(
    version: u16,
    method: CompressionMethod,
    uncompressed_size: u64,
    compressed_len: u64,
    hash: u64,
) -> Result<Vec<u8>, BundleError> {
    let header_len = written_header_len(version)?;
    let total_size = header_len + compressed_len;
    let mut out = Vec::with_capacity(header_len as usize);
    out.extend_from_slice(CCOB_MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&method.code().to_le_bytes());
    let fit = |size: u64, what| {
        u32::try_from(size).map_err(|_| BundleError::TooLargeForVersion { size, what })
    };
    if version == 1 {
        // v1 stores no total size: readers find the end of the compressed stream.
        out.extend_from_slice(&fit(uncompressed_size, "uncompressed size")?.to_le_bytes());
    } else if version == 2 {
        out.extend_from_slice(&fit(total_size, "total size")?.to_le_bytes());
        out.extend_from_slice(&fit(uncompressed_size, "uncompressed size")?.to_le_bytes());
    } else {
        out.extend_from_slice(&total_size.to_le_bytes());
        out.extend_from_slice(&uncompressed_size.to_le_bytes());
    }
    out.extend_from_slice(&hash.to_le_bytes());
    Ok(out)
}
