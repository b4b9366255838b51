use thiserror::Error;

use crate::CompressionMethod;

/// Everything that can go wrong reading or writing a bundle.
///
/// Offsets are byte offsets from the start of the buffer handed to the public function
/// that failed (for [`crate::walk_fatbin`]: from the start of the section), printed in hex;
/// [`BundleError::shifted`] makes them absolute in a file. Errors about the *decompressed*
/// payload of a CCOB (reported by [`crate::DecodedBundle::bundle`] and
/// [`crate::DecodedBundle::bundles`]) carry offsets inside that payload.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BundleError {
    #[error(
        "truncated {what} at offset {offset:#x}: need {needed} bytes, only {available} available"
    )]
    Truncated {
        offset: u64,
        needed: u64,
        available: u64,
        what: &'static str,
    },
    #[error("no bundle at offset {offset:#x}: expected magic `__CLANG_OFFLOAD_BUNDLE__` or `CCOB`")]
    BadMagic { offset: u64 },
    #[error(
        "non-zero byte {byte:#04x} at offset {offset:#x} between bundles: expected zero padding or a bundle magic"
    )]
    NonZeroPadding { offset: u64, byte: u8 },
    #[error(
        "implausible entry count {count} at offset {offset:#x}: the remaining bytes hold at most {max} entry headers"
    )]
    TooManyEntries { offset: u64, count: u64, max: u64 },
    /// The count claims more entries than the header holds: entry `entry`'s header (at
    /// `entry_offset`) is zero padding or runs into the data of the entries before it.
    #[error(
        "implausible entry count {count} at offset {offset:#x}: the header holds only {entry} entries (entry {entry} at {entry_offset:#x} {why})"
    )]
    ImplausibleEntryCount {
        offset: u64,
        count: u64,
        entry: u64,
        entry_offset: u64,
        why: &'static str,
    },
    #[error("triple of entry {entry} at offset {offset:#x} is not valid UTF-8")]
    TripleNotUtf8 { entry: u64, offset: u64 },
    /// `offset`/`size` are the entry's stored fields, relative to its bundle, which starts
    /// at `bundle_offset`.
    #[error(
        "bundle at offset {bundle_offset:#x}, entry {entry}: data at {:#x} (bundle + {offset:#x}) size {size} lies outside the {bundle_len} available bytes", .bundle_offset.saturating_add(*.offset)
    )]
    EntryOutOfRange {
        bundle_offset: u64,
        entry: u64,
        offset: u64,
        size: u64,
        bundle_len: u64,
    },
    /// `offset` is the entry's stored field, relative to its bundle.
    #[error(
        "bundle at offset {bundle_offset:#x}, entry {entry}: data at {:#x} (bundle + {offset:#x}) lies inside the bundle header, which ends at bundle + {header_len:#x}", .bundle_offset.saturating_add(*.offset)
    )]
    EntryOverlapsHeader {
        bundle_offset: u64,
        entry: u64,
        offset: u64,
        header_len: u64,
    },
    #[error("unsupported CCOB version {version} at offset {offset:#x}: expected 1, 2 or 3")]
    UnsupportedVersion { offset: u64, version: u16 },
    #[error(
        "unsupported CCOB compression method {method} at offset {offset:#x}: expected 0 (zlib) or 1 (zstd)"
    )]
    UnsupportedMethod { offset: u64, method: u16 },
    #[error(
        "CCOB total size {total_size} at offset {offset:#x} is smaller than its own {header_len}-byte header"
    )]
    BadTotalSize {
        offset: u64,
        total_size: u64,
        header_len: u64,
    },
    #[error(
        "CCOB at offset {offset:#x} claims {claimed} decompressed bytes, more than the limit {limit} its compressed size allows"
    )]
    DecompressedTooLarge {
        offset: u64,
        claimed: u64,
        limit: u64,
    },
    #[error("{method:?} data at offset {offset:#x} does not decompress: {message}")]
    Decompress {
        offset: u64,
        method: CompressionMethod,
        message: String,
    },
    #[error("{what} at offset {offset:#x}: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        offset: u64,
        expected: u64,
        actual: u64,
        what: &'static str,
    },
    #[error(
        "CCOB hash at offset {offset:#x}: stored {expected:#018x}, but the low 64 bits of the MD5 of the decompressed bundle are {actual:#018x}"
    )]
    HashMismatch {
        offset: u64,
        expected: u64,
        actual: u64,
    },
    #[error("{len} unexpected bytes at offset {offset:#x} after the end of {what}")]
    TrailingData {
        offset: u64,
        len: u64,
        what: &'static str,
    },
    #[error("compressed bundle at offset {offset:#x} inside a decompressed CCOB payload")]
    NestedCompressed { offset: u64 },
    #[error("expected exactly one bundle, found {count}")]
    NotSingleBundle { count: usize },
    #[error("cannot write CCOB version {version}: only 2 and 3 are written")]
    CannotWriteVersion { version: u16 },
    #[error("{what} of {size} bytes does not fit the 32-bit fields of CCOB version 2")]
    TooLargeForVersion { size: u64, what: &'static str },
    #[error("compression level {level} is out of range for {method:?}")]
    InvalidLevel {
        method: CompressionMethod,
        level: i32,
    },
    #[error("{method:?} compression failed: {message}")]
    Compress {
        method: CompressionMethod,
        message: String,
    },
}

impl BundleError {
    /// The same error with every reported offset moved by `base`, for errors found in a
    /// sub-slice that starts at `base` within the caller's buffer.
    pub fn shifted(self, base: u64) -> Self {
        use BundleError::*;
        let b = |o: u64| o.saturating_add(base);
        match self {
            Truncated {
                offset,
                needed,
                available,
                what,
            } => Truncated {
                offset: b(offset),
                needed,
                available,
                what,
            },
            BadMagic { offset } => BadMagic { offset: b(offset) },
            NonZeroPadding { offset, byte } => NonZeroPadding {
                offset: b(offset),
                byte,
            },
            TooManyEntries { offset, count, max } => TooManyEntries {
                offset: b(offset),
                count,
                max,
            },
            ImplausibleEntryCount {
                offset,
                count,
                entry,
                entry_offset,
                why,
            } => ImplausibleEntryCount {
                offset: b(offset),
                count,
                entry,
                entry_offset: b(entry_offset),
                why,
            },
            TripleNotUtf8 { entry, offset } => TripleNotUtf8 {
                entry,
                offset: b(offset),
            },
            UnsupportedVersion { offset, version } => UnsupportedVersion {
                offset: b(offset),
                version,
            },
            UnsupportedMethod { offset, method } => UnsupportedMethod {
                offset: b(offset),
                method,
            },
            BadTotalSize {
                offset,
                total_size,
                header_len,
            } => BadTotalSize {
                offset: b(offset),
                total_size,
                header_len,
            },
            DecompressedTooLarge {
                offset,
                claimed,
                limit,
            } => DecompressedTooLarge {
                offset: b(offset),
                claimed,
                limit,
            },
            Decompress {
                offset,
                method,
                message,
            } => Decompress {
                offset: b(offset),
                method,
                message,
            },
            SizeMismatch {
                offset,
                expected,
                actual,
                what,
            } => SizeMismatch {
                offset: b(offset),
                expected,
                actual,
                what,
            },
            HashMismatch {
                offset,
                expected,
                actual,
            } => HashMismatch {
                offset: b(offset),
                expected,
                actual,
            },
            TrailingData { offset, len, what } => TrailingData {
                offset: b(offset),
                len,
                what,
            },
            NestedCompressed { offset } => NestedCompressed { offset: b(offset) },
            EntryOutOfRange {
                bundle_offset,
                entry,
                offset,
                size,
                bundle_len,
            } => EntryOutOfRange {
                bundle_offset: b(bundle_offset),
                entry,
                offset,
                size,
                bundle_len,
            },
            EntryOverlapsHeader {
                bundle_offset,
                entry,
                offset,
                header_len,
            } => EntryOverlapsHeader {
                bundle_offset: b(bundle_offset),
                entry,
                offset,
                header_len,
            },
            // These carry no buffer position.
            other @ (NotSingleBundle { .. }
            | CannotWriteVersion { .. }
            | TooLargeForVersion { .. }
            | InvalidLevel { .. }
            | Compress { .. }) => other,
        }
    }
}
