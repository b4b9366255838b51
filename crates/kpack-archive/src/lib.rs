//! The `.kpack` archive format: a reader built for the runtime and a deterministic writer,
//! plus `.kpm` manifests, all in MessagePack ([`msgpack`]: the `kpack-msgpack` crate, `rmp`
//! with offsets in errors and bounded reads of untrusted bytes). The HIPK marker record
//! that names the archives is `kpack-hostbin`'s (`kpack_hostbin::marker`), its one home.
//!
//! # Format (reference spec §1)
//!
//! ```text
//! offset 0   "KPAK" | u32 version = 1 | u64 toc_offset      (little-endian, 16 bytes)
//! offset 16  zero bytes up to 64
//! offset 64  blob region
//! toc_offset msgpack TOC (one map) running to end of file
//! ```
//!
//! The TOC keys, in the order the writer emits them: `format_version` (1), `group_name`,
//! `gfx_arch_family`, `gfx_arches` (array of str), `toc`, `compression_scheme`, then `blobs`
//! for scheme `"none"` or `zstd_offset`, `zstd_size`, `zstd_frame_sizes` for
//! `"zstd-per-kernel"`, then the digest keys ([`digest`]).
//! `toc[binary_key][arch]` is `{type: "hsaco", ordinal, original_size[, metadata]}`, and
//! `metadata` (a str → str map) is present only when non-empty. Binary keys are
//! `kernel_name#co_index` ([`binary_key`]); arch keys carry feature flags (`gfx942:xnack+`).
//!
//! * `none`: kernels concatenated in ordinal order, no padding; `blobs[ordinal]` is
//!   `{offset, size}` with an absolute offset.
//! * `zstd-per-kernel`: `u32 count`, then per ordinal `u32 frame_size` and one zstd frame
//!   that records its content size; `zstd_offset` (always 64) and `zstd_size` (the whole
//!   region, prefixes included) locate it. kpack adds `zstd_frame_sizes`, a `bin` of every
//!   frame's size as `u32` LE in ordinal order, which the reference readers ignore: with it a
//!   reader reaches any frame without walking the prefixes before it.
//!
//! # Reader
//!
//! [`Archive::open`] memory-maps the file and reads only the header, the TOC and (for zstd)
//! the frame count, so it costs O(TOC) in time and touched memory. The TOC is read straight
//! from the wire form in one pass: no msgpack tree, paths for error messages spelled only on
//! error. zstd frames are located from `zstd_frame_sizes` at open (a read checks its frame's
//! prefix against it); in an archive without it, by walking their size prefixes once, on the
//! first call that needs them ([`Archive::get`], [`Archive::get_into`], [`Archive::validate`],
//! or an [`EntryInfo`]'s `stored_size`). The walk faults in a page per frame: on a 777-frame
//! archive a first load took 1.08 ms walking, 0.11 ms without (`cargo bench -p kpack-capi`).
//! `none` kernels are returned borrowed from the map. zstd kernels are decoded on each `get`
//! with a pooled decompression context, or straight into the caller's buffer with `get_into`.
//! `unified` entries decode the root and middle frames they are coded against through a cache
//! the archive's readers share, bounded by [`REFERENCE_CACHE_BUDGET`]. The archive is
//! `Send + Sync`; only that cache takes a lock, never while decoding.
//!
//! # Deliberate divergences from the reference
//!
//! The reference readers accept malformed archives and then misbehave (spec §9 B14: C++
//! exceptions escaping `extern "C"`, uninitialised fields, unknown schemes read as `none`).
//! This reader rejects at open (or, where noted, at first use), with an error naming the TOC
//! path or byte offset:
//! * a missing or mistyped required field (`format_version` ≠ 1 is
//!   [`ErrorKind::UnsupportedVersion`]), a negative or non-int ordinal or size, non-str
//!   `gfx_arches` elements, duplicate map keys, non-str TOC keys;
//! * an unknown `compression_scheme` (a missing one still means `none`, as in both references);
//! * `toc_offset` outside `[64, file_len)`, bytes after the TOC (as Python does; C++ ignores
//!   them), any blob or the zstd region outside `[64, toc_offset)`, a frame count whose size
//!   prefixes cannot fit in the region;
//! * at first use of the frames (see above), as [`ErrorKind::InvalidFormat`] naming the byte
//!   offset, from every such call: a frame running past the region, or a region that is not
//!   exactly its frames (an [`EntryInfo`]'s `stored_size` is then 0);
//! * an ordinal out of range (C++ reports that only at `get`, as `KERNEL_NOT_FOUND`), an
//!   `original_size` over [`MAX_ORIGINAL_SIZE`], and for `none` one that differs from the
//!   blob size (C++ ignores `original_size` there);
//! * a file shorter than the header, empty included, is [`ErrorKind::InvalidFormat`]
//!   (C++ reports an empty file as `IO_ERROR`).
//!
//! A frame whose header records a content size other than `original_size`, or that decodes to
//! a different length, fails at [`Archive::get`] with [`ErrorKind::DecompressionFailed`] before
//! any allocation sized from the TOC (as C++ reports it, but C++ allocates first).
//!
//! Entries whose arch is missing from `gfx_arches`, and binary keys without `#N`, are read
//! (the reference reads them, and listing tools should show them) but the runtime can never
//! reach them: [`Archive::validate`] reports them, and the writer cannot produce the former.
//! Lookups map `\` to `/` in the binary key like the Python reader (the C++ one does not).
//!
//! The writer stores entries with identical bytes once, several TOC entries sharing one
//! ordinal; the Python writer stores every entry, so only inputs without duplicates give
//! byte-identical `none` archives. zstd frames are byte-identical only with the same libzstd.
//!
//! Depends on `kpack-msgpack`; the writer (feature `write`) also on
//! `kpack-concurrency` and `kpack-fs` (the layering: docs/CONTRIBUTING.md).

//!
//! # Features
//!
//! `write` (default): the writers (`ArchiveWriter`, `ArchiveFileWriter`, `recompress`)
//! and the `unified` coder, with what only they need (rayon, kpack-fs, tempfile). Readers go
//! without it (`default-features = false`): `librocm_kpack`, the library every HIP process
//! loads, links only the reader, the TOC and the digests.

#![warn(missing_docs)]

#[cfg(feature = "write")]
mod coder;
#[cfg(feature = "write")]
mod compression;
pub mod digest;
mod error;
pub mod kpm;
#[cfg(feature = "write")]
mod prefix_template;
mod reader;
#[cfg(feature = "write")]
mod recompress;
mod references;
mod toc;
pub mod unified;
#[cfg(feature = "write")]
mod writer;

use std::borrow::Cow;

#[cfg(feature = "write")]
pub use coder::{CONTEXT_BUDGET, GROUP_BUDGET, RETAINED_BUDGET};
#[cfg(feature = "write")]
pub use compression::{COMPRESSION_NAMES, CompressionArgsError};
pub use error::{ArchiveError, ErrorKind, MetadataError};
// The msgpack of the archives is kpack-msgpack's, re-exported where the tools have always
// found it.
pub use kpack_msgpack as msgpack;
pub use reader::{Archive, EntryInfo, PIECES_ABOVE, release_mapped_pages};
#[cfg(feature = "write")]
pub use recompress::recompress;
pub use references::REFERENCE_CACHE_BUDGET;
#[cfg(feature = "write")]
pub use writer::{
    ArchiveFileWriter, ArchiveWriter, Compression, DEFAULT_UNIFIED_LEVEL, DEFAULT_ZSTD_LEVEL,
    GroupMember, KernelCompressor, KernelInPieces, PreparedKernel,
};

/// The header magic, `KPAK`.
pub const MAGIC: [u8; 4] = *b"KPAK";
/// The header (and TOC `format_version`) version of schemes `none` and `zstd-per-kernel`,
/// the only one the reference readers and deployed HIP runtimes accept.
pub const FORMAT_VERSION: u32 = 1;
/// The version of scheme `unified` ([`unified`]): readers that check `version == 1` reject
/// it with `UNSUPPORTED_VERSION`.
pub const FORMAT_VERSION_UNIFIED: u32 = 2;
/// Header length: magic, version, toc_offset.
pub const HEADER_LEN: usize = 16;
/// Where the blob region starts: the header padded to `BLOB_ALIGNMENT = 64`.
pub const DATA_START: u64 = 64;
/// Largest `original_size` accepted (4 GiB); bounds what one `get` may allocate.
pub const MAX_ORIGINAL_SIZE: u64 = 1 << 32;

/// How the blob region stores kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompressionScheme {
    /// `"none"`.
    None,
    /// `"zstd-per-kernel"`.
    ZstdPerKernel,
    /// `"unified"` (format version 2): zstd frames, each standalone or coded against another
    /// frame's content, in chains of at most 3 frames ([`unified`]).
    Unified,
}

impl CompressionScheme {
    /// The TOC's `compression_scheme` string.
    pub fn name(self) -> &'static str {
        match self {
            CompressionScheme::None => "none",
            CompressionScheme::ZstdPerKernel => "zstd-per-kernel",
            CompressionScheme::Unified => "unified",
        }
    }

    /// The header and TOC `format_version` an archive of this scheme carries.
    pub fn format_version(self) -> u32 {
        match self {
            CompressionScheme::None | CompressionScheme::ZstdPerKernel => FORMAT_VERSION,
            CompressionScheme::Unified => FORMAT_VERSION_UNIFIED,
        }
    }

    /// The scheme a TOC's `compression_scheme` string names, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(CompressionScheme::None),
            "zstd-per-kernel" => Some(CompressionScheme::ZstdPerKernel),
            "unified" => Some(CompressionScheme::Unified),
            _ => None,
        }
    }
}

/// The TOC key the runtime looks up: `kernel_name#co_index`, decimal, unpadded.
pub fn binary_key(kernel_name: &str, co_index: u32) -> String {
    format!("{kernel_name}#{co_index}")
}

/// Splits `name#N` into `(name, N)`; `None` unless `N` is an unpadded decimal `u32`, the
/// only form [`binary_key`] produces.
pub fn split_binary_key(key: &str) -> Option<(&str, u32)> {
    let (name, index) = key.rsplit_once('#')?;
    let canonical = !index.is_empty()
        && index.bytes().all(|b| b.is_ascii_digit())
        && (index == "0" || !index.starts_with('0'));
    Some((name, index.parse().ok().filter(|_| canonical)?))
}

/// Binary keys use `/`; both the Python writer and reader map `\` to it.
fn normalise_key(key: &str) -> Cow<'_, str> {
    if key.contains('\\') {
        Cow::Owned(key.replace('\\', "/"))
    } else {
        Cow::Borrowed(key)
    }
}

/// Index of the first item whose key equals an earlier item's. Quadratic: for the short
/// lists it serves (arches, metadata keys).
fn first_repeat<T, K: PartialEq + ?Sized>(items: &[T], key: impl Fn(&T) -> &K) -> Option<usize> {
    (1..items.len()).find(|&i| {
        items[..i]
            .iter()
            .any(|earlier| key(earlier) == key(&items[i]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_keys_round_trip_only_in_canonical_form() {
        assert_eq!(binary_key("lib/libtest.so", 0), "lib/libtest.so#0");
        assert_eq!(split_binary_key("a#b#12"), Some(("a#b", 12)));
        assert_eq!(split_binary_key("lib/x.so#0"), Some(("lib/x.so", 0)));
        for bad in [
            "lib/x.so",
            "x#",
            "x#01",
            "x#+1",
            "x#-1",
            "x#4294967296",
            "x#1a",
        ] {
            assert_eq!(split_binary_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn scheme_names_match_the_toc_strings() {
        for s in [
            CompressionScheme::None,
            CompressionScheme::ZstdPerKernel,
            CompressionScheme::Unified,
        ] {
            assert_eq!(CompressionScheme::from_name(s.name()), Some(s));
        }
        assert_eq!(CompressionScheme::from_name("zstd"), None);
    }
}
