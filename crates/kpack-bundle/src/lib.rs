//! Clang offload bundles: the containers `.hip_fatbin` sections and HIP kernel files hold
//! device code objects in.
//!
//! # Uncompressed bundle
//!
//! ```text
//! 0   24 bytes  magic "__CLANG_OFFLOAD_BUNDLE__" (no NUL)
//! 24  u64 LE    entry count
//! 32  entries:  u64 offset (from the bundle's first byte), u64 size, u64 triple_len,
//!               triple_len bytes of triple (UTF-8, no NUL)
//! ... entry data at the stored offsets
//! ```
//!
//! clang-offload-bundler writes the host entry first (empty), and places each entry at
//! the next multiple of its alignment (4096 by default, so the host entry and the first
//! device entry share offset 4096; with alignment 1 they share the header's end). Readers
//! must use the stored offsets. [`write_uncompressed`] reproduces that layout.
//!
//! # Compressed bundle (`CCOB`, LLVM `CompressedOffloadBundle`)
//!
//! | field                    | v1      | v2      | v3      |
//! |--------------------------|---------|---------|---------|
//! | magic `CCOB`             | 0       | 0       | 0       |
//! | version u16              | 4       | 4       | 4       |
//! | method u16 (0 zlib, 1 zstd) | 6    | 6       | 6       |
//! | total size incl. header  | —       | 8 (u32) | 8 (u64) |
//! | uncompressed size        | 8 (u32) | 12 (u32)| 16 (u64)|
//! | hash                     | 12 (u64)| 16 (u64)| 24 (u64)|
//! | header length            | 20      | 24      | 32      |
//!
//! The hash is LLVM's `MD5Result::low()` of the uncompressed bundle: the first 8 bytes of
//! the MD5 digest, read little-endian (verified on the LLVM 18/19/22 fixtures). The
//! decompressed payload is one uncompressed bundle. LLVM defines no other method (no lz4).
//!
//! # Why bundles are bounded by their headers
//!
//! A `.hip_fatbin` section holds one bundle per translation unit, back to back, each
//! starting 4096-aligned with zero padding between (ROCm 5 output also ends with one NUL).
//! The only sound way to find where one bundle ends is its header: the furthest entry end
//! for an uncompressed bundle, `total_size` for CCOB v2/v3, and the end of the compressed
//! stream for CCOB v1, which stores no total size. Scanning for magic bytes is wrong:
//! code objects and compressed data can contain `__CLANG_OFFLOAD_BUNDLE__` or `CCOB`
//! (large real compressed sections, e.g. rocSPARSE 7.2, contain the former over 100 times
//! inside zstd data; a code object may embed a whole bundle), which silently truncates
//! objects or invents bundles (the upstream bug B13). [`walk_fatbin`] therefore walks
//! headers and allows only zero bytes between bundles.
//!
//! # Untrusted input
//!
//! Every parser takes `&[u8]`, never panics, and allocates only what the input justifies:
//! entry counts are bounded by the bytes that remain, triples are borrowed, and a CCOB's
//! claimed size must be within what its compressed bytes can possibly decode to (deflate
//! 1032:1, zstd 32768:1) and, when it is decoded whole ([`DecodedBundle::decode`]), within
//! [`MAX_DECOMPRESSED`]; read as a stream ([`EntryStream`]) it holds no buffer of its size,
//! so it may decode to more (real ones do: 1.2 GB). zstd decodes in one shot into a
//! buffer reserved at the claimed size, whose pages cost memory only as they are written (and
//! zstd then needs no window buffer of its own); zlib's buffer grows as data arrives and
//! decoding stops one byte past the claim. Errors name the byte offset (in hex) and what was
//! expected.
//!
//! Depends on no other kpack crate (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

mod ccob;
mod error;
mod plain;
mod stream;

use std::borrow::Cow;

pub use ccob::{
    CcobWriter, CompressionMethod, MAX_DECOMPRESSED, ccob_hash, ccob_header, write_compressed,
};
pub use error::BundleError;
pub use plain::{
    Bundle, BundleBuilder, Entry, EntryHeader, uncompressed_layout, write_uncompressed,
};
pub use stream::{EntryStream, MAX_STREAM_WINDOW, Piece, StreamedEntry, stream_window};

use ccob::CcobHeader;
use plain::check_magic;

/// Magic of an uncompressed bundle.
pub const BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Magic of a compressed bundle.
pub const CCOB_MAGIC: &[u8; 4] = b"CCOB";

/// How a bundle is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleFormat {
    /// A `__CLANG_OFFLOAD_BUNDLE__` bundle.
    Uncompressed,
    /// A CCOB; the fields are those of its header.
    Compressed {
        /// The CCOB version (1, 2 or 3).
        version: u16,
        /// The compression method.
        method: CompressionMethod,
        /// Low 64 bits of the MD5 of the uncompressed bundle, as stored.
        hash: u64,
        /// The decompressed size the header records.
        uncompressed_size: u64,
    },
}

impl From<&CcobHeader> for BundleFormat {
    fn from(h: &CcobHeader) -> Self {
        BundleFormat::Compressed {
            version: h.version,
            method: h.method,
            hash: h.hash,
            uncompressed_size: h.uncompressed_size,
        }
    }
}

/// A bundle located in a larger region (e.g. a `.hip_fatbin` section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocatedBundle {
    /// Offset of the bundle's magic from the start of the region.
    pub offset: u64,
    /// Extent of the bundle as stored (compressed size for a CCOB).
    pub len: u64,
    /// Which kind of bundle it is.
    pub format: BundleFormat,
}

/// Whether `bytes` starts like a CCOB (or a truncated CCOB magic) rather than an
/// uncompressed bundle.
fn looks_compressed(bytes: &[u8]) -> bool {
    !bytes.is_empty() && CCOB_MAGIC.starts_with(&bytes[..bytes.len().min(CCOB_MAGIC.len())])
}

/// Extent and format of the bundle at `bytes[0]`, from its header alone (plus the stream
/// walk a CCOB v1 needs).
fn locate(bytes: &[u8]) -> Result<(u64, BundleFormat), BundleError> {
    if looks_compressed(bytes) {
        let header = CcobHeader::parse(bytes)?;
        Ok((header.extent(bytes)?, BundleFormat::from(&header)))
    } else {
        Ok((Bundle::parse(bytes)?.len(), BundleFormat::Uncompressed))
    }
}

/// Extent in bytes of the bundle (either format) starting at `bytes[0]`, from its header.
///
/// Errors if `bytes` does not start with a bundle, or if the header claims more bytes than
/// `bytes` holds. An uncompressed bundle's header is fully validated (entries in range,
/// UTF-8 triples); a CCOB's compressed data is not decoded (except to find the end of a v1
/// zlib stream).
pub fn bundle_extent(bytes: &[u8]) -> Result<u64, BundleError> {
    locate(bytes).map(|(len, _)| len)
}

/// The format of the bundle at `bytes[0]`, from its header alone (a CCOB's compressed data
/// is neither bounded nor decoded): what [`DecodedBundle::decode`] will find, e.g. to know
/// how many bytes decoding it will take.
pub fn peek_format(bytes: &[u8]) -> Result<BundleFormat, BundleError> {
    if looks_compressed(bytes) {
        Ok(BundleFormat::from(&CcobHeader::parse(bytes)?))
    } else {
        check_magic(bytes, BUNDLE_MAGIC).map(|()| BundleFormat::Uncompressed)
    }
}

/// Walks `region` by headers: calls `visit(offset, &region[offset..])` for each bundle,
/// which returns the bundle's extent. Zero bytes between bundles (and after the last) are
/// skipped; anything else that is not a bundle is an error at its offset.
fn walk_regions<'r>(
    region: &'r [u8],
    mut visit: impl FnMut(u64, &'r [u8]) -> Result<u64, BundleError>,
) -> Result<(), BundleError> {
    let mut pos = 0usize;
    let mut found = 0usize;
    while let Some(skip) = region[pos..].iter().position(|&b| b != 0) {
        pos += skip;
        let len = visit(pos as u64, &region[pos..]).map_err(|e| match e {
            BundleError::BadMagic { offset: 0 } if found > 0 => BundleError::NonZeroPadding {
                offset: pos as u64,
                byte: region[pos],
            },
            e => e.shifted(pos as u64),
        })?;
        found += 1;
        // `len` is at least a header and at most the rest of the region, so the walk
        // always advances and stays in bounds.
        pos += len as usize;
    }
    Ok(())
}

/// Walks a `.hip_fatbin` section (or any concatenation of bundles) by headers and returns
/// every bundle with its offset, extent and format, in order.
///
/// Zero bytes before, between and after bundles are skipped (the linker's 4096-byte
/// alignment padding, ROCm 5's trailing NUL); alignment itself is not required. A
/// non-zero byte that does not start a bundle is an error naming its offset. An empty or
/// all-zero region yields no bundles.
pub fn walk_fatbin(section: &[u8]) -> Result<Vec<LocatedBundle>, BundleError> {
    let mut bundles = Vec::new();
    walk_regions(section, |offset, bytes| {
        let (len, format) = locate(bytes)?;
        bundles.push(LocatedBundle {
            offset,
            len,
            format,
        });
        Ok(len)
    })?;
    Ok(bundles)
}

/// A bundle ready to read: the decompressed payload of a CCOB (owned), or the bytes of an
/// uncompressed bundle (borrowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedBundle<'a> {
    format: BundleFormat,
    payload: Cow<'a, [u8]>,
    stored_len: u64,
}

impl<'a> DecodedBundle<'a> {
    /// Decodes the bundle at `bytes[0]` (bytes after its extent are ignored). A CCOB is
    /// decompressed and its hash verified: a mismatch is [`BundleError::HashMismatch`].
    ///
    /// There is no decode that skips or merely reports the hash. A flipped byte inside a
    /// zstd frame often still decompresses, to the header's size, into a payload that parses:
    /// only the hash tells. A command that went on would launder the damage (prune writes
    /// the kept entries again under a new, valid hash); none does.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, BundleError> {
        if !looks_compressed(bytes) {
            let bundle = Bundle::parse(bytes)?;
            return Ok(DecodedBundle {
                format: BundleFormat::Uncompressed,
                payload: Cow::Borrowed(bundle.as_bytes()),
                stored_len: bundle.len(),
            });
        }
        let header = CcobHeader::parse(bytes)?;
        let (payload, stored_len) = header.decode(bytes)?;
        let actual = ccob_hash(&payload);
        if actual != header.hash {
            return Err(BundleError::HashMismatch {
                offset: header.header_len - 8,
                expected: header.hash,
                actual,
            });
        }
        Ok(DecodedBundle {
            format: BundleFormat::from(&header),
            payload: Cow::Owned(payload),
            stored_len,
        })
    }

    /// How the bundle was stored.
    pub fn format(&self) -> &BundleFormat {
        &self.format
    }

    /// The uncompressed bundle bytes.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Extent of the bundle as stored in the input (the whole CCOB, header included).
    pub fn compressed_len(&self) -> u64 {
        self.stored_len
    }

    /// The payload parsed as exactly one uncompressed bundle, which is what LLVM writes;
    /// bytes after its extent are an error. Offsets in errors are within the payload.
    pub fn bundle(&self) -> Result<Bundle<'_>, BundleError> {
        Bundle::parse_exact(&self.payload)
    }

    /// The payload walked as a concatenation of uncompressed bundles (zero padding allowed
    /// between them), for producers that pack several into one CCOB. A CCOB inside the
    /// payload is an error.
    pub fn bundles(&self) -> Result<Vec<Bundle<'_>>, BundleError> {
        let mut bundles = Vec::new();
        walk_regions(&self.payload, |_, bytes| {
            if looks_compressed(bytes) {
                return Err(BundleError::NestedCompressed { offset: 0 });
            }
            let bundle = Bundle::parse(bytes)?;
            let len = bundle.len();
            bundles.push(bundle);
            Ok(len)
        })?;
        Ok(bundles)
    }
}
