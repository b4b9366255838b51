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
    /// The input ends inside a structure.
    #[error(
        "truncated {what} at offset {offset:#x}: need {needed} bytes, only {available} available"
    )]
    Truncated {
        /// Byte offset of the problem.
        offset: u64,
        /// Bytes needed.
        needed: u64,
        /// Bytes left.
        available: u64,
        /// What was being read.
        what: &'static str,
    },
    /// No bundle magic where a bundle should start.
    #[error("no bundle at offset {offset:#x}: expected magic `__CLANG_OFFLOAD_BUNDLE__` or `CCOB`")]
    BadMagic {
        /// Byte offset of the problem.
        offset: u64,
    },
    /// Between bundles, a byte that is neither padding nor a magic.
    #[error(
        "non-zero byte {byte:#04x} at offset {offset:#x} between bundles: expected zero padding or a bundle magic"
    )]
    NonZeroPadding {
        /// Byte offset of the problem.
        offset: u64,
        /// The byte found.
        byte: u8,
    },
    /// An entry count the rest of the input cannot hold.
    #[error(
        "implausible entry count {count} at offset {offset:#x}: the remaining bytes hold at most {max} entry headers"
    )]
    TooManyEntries {
        /// Byte offset of the problem.
        offset: u64,
        /// The entry count the header records.
        count: u64,
        /// The most entry headers the remaining bytes can hold.
        max: u64,
    },
    /// The count claims more entries than the header holds: entry `entry`'s header (at
    /// `entry_offset`) is zero padding or runs into the data of the entries before it.
    #[error(
        "implausible entry count {count} at offset {offset:#x}: the header holds only {entry} entries (entry {entry} at {entry_offset:#x} {why})"
    )]
    ImplausibleEntryCount {
        /// Byte offset of the entry count.
        offset: u64,
        /// The entry count the header records.
        count: u64,
        /// The first entry that is not there.
        entry: u64,
        /// Byte offset of that entry's header.
        entry_offset: u64,
        /// Why it is not an entry.
        why: &'static str,
    },
    /// An entry's bundle ID is not UTF-8.
    #[error("triple of entry {entry} at offset {offset:#x} is not valid UTF-8")]
    TripleNotUtf8 {
        /// Index of the entry in its bundle.
        entry: u64,
        /// Byte offset of the problem.
        offset: u64,
    },
    /// `offset`/`size` are the entry's stored fields, relative to its bundle, which starts
    /// at `bundle_offset`.
    #[error(
        "bundle at offset {bundle_offset:#x}, entry {entry}: data at {:#x} (bundle + {offset:#x}) size {size} lies outside the {bundle_len} available bytes", .bundle_offset.saturating_add(*.offset)
    )]
    EntryOutOfRange {
        /// Byte offset of the bundle.
        bundle_offset: u64,
        /// Index of the entry in its bundle.
        entry: u64,
        /// Byte offset of the problem.
        offset: u64,
        /// The entry's stored size.
        size: u64,
        /// Bytes the bundle holds.
        bundle_len: u64,
    },
    /// `offset` is the entry's stored field, relative to its bundle.
    #[error(
        "bundle at offset {bundle_offset:#x}, entry {entry}: data at {:#x} (bundle + {offset:#x}) lies inside the bundle header, which ends at bundle + {header_len:#x}", .bundle_offset.saturating_add(*.offset)
    )]
    EntryOverlapsHeader {
        /// Byte offset of the bundle.
        bundle_offset: u64,
        /// Index of the entry in its bundle.
        entry: u64,
        /// Byte offset of the problem.
        offset: u64,
        /// Length of the header, in bytes.
        header_len: u64,
    },
    /// A CCOB version other than 1, 2 or 3.
    #[error("unsupported CCOB version {version} at offset {offset:#x}: expected 1, 2 or 3")]
    UnsupportedVersion {
        /// Byte offset of the problem.
        offset: u64,
        /// The version the input holds.
        version: u16,
    },
    /// A CCOB compression method other than zlib or zstd.
    #[error(
        "unsupported CCOB compression method {method} at offset {offset:#x}: expected 0 (zlib) or 1 (zstd)"
    )]
    UnsupportedMethod {
        /// Byte offset of the problem.
        offset: u64,
        /// The method field found.
        method: u16,
    },
    /// A CCOB total size smaller than its header.
    #[error(
        "CCOB total size {total_size} at offset {offset:#x} is smaller than its own {header_len}-byte header"
    )]
    BadTotalSize {
        /// Byte offset of the problem.
        offset: u64,
        /// The total size the header records.
        total_size: u64,
        /// Length of the header, in bytes.
        header_len: u64,
    },
    /// A CCOB claims more decompressed bytes than its compressed size can produce.
    #[error(
        "CCOB at offset {offset:#x} claims {claimed} decompressed bytes, more than the limit {limit} its compressed size allows"
    )]
    DecompressedTooLarge {
        /// Byte offset of the problem.
        offset: u64,
        /// The decompressed size the header claims.
        claimed: u64,
        /// The most its compressed size allows.
        limit: u64,
    },
    /// The compressed payload does not decode.
    #[error("{method:?} data at offset {offset:#x} does not decompress: {message}")]
    Decompress {
        /// Byte offset of the problem.
        offset: u64,
        /// The compression method.
        method: CompressionMethod,
        /// The compression library's message.
        message: String,
    },
    /// A size the header records differs from the data's.
    #[error("{what} at offset {offset:#x}: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        /// Byte offset of the problem.
        offset: u64,
        /// The size the header records.
        expected: u64,
        /// The size of the data.
        actual: u64,
        /// What was being read.
        what: &'static str,
    },
    /// A CCOB's stored hash differs from the decompressed bundle's.
    #[error(
        "CCOB hash at offset {offset:#x}: stored {expected:#018x}, but the low 64 bits of the MD5 of the decompressed bundle are {actual:#018x}"
    )]
    HashMismatch {
        /// Byte offset of the problem.
        offset: u64,
        /// The hash the header stores.
        expected: u64,
        /// The hash of the decompressed bundle.
        actual: u64,
    },
    /// Bytes after the end of a structure that should end the input.
    #[error("{len} unexpected bytes at offset {offset:#x} after the end of {what}")]
    TrailingData {
        /// Byte offset of the first such byte.
        offset: u64,
        /// How many bytes.
        len: u64,
        /// What was being read.
        what: &'static str,
    },
    /// A CCOB inside a decompressed CCOB payload.
    #[error("compressed bundle at offset {offset:#x} inside a decompressed CCOB payload")]
    NestedCompressed {
        /// Byte offset of the problem.
        offset: u64,
    },
    /// One bundle was expected.
    #[error("expected exactly one bundle, found {count}")]
    NotSingleBundle {
        /// How many bundles the input holds.
        count: usize,
    },
    /// The writer was asked for a CCOB version it does not write.
    #[error("cannot write CCOB version {version}: only 2 and 3 are written")]
    CannotWriteVersion {
        /// The version asked for.
        version: u16,
    },
    /// A size over the 32-bit fields of CCOB version 2.
    #[error("{what} of {size} bytes does not fit the 32-bit fields of CCOB version 2")]
    TooLargeForVersion {
        /// Its size, in bytes.
        size: u64,
        /// What does not fit.
        what: &'static str,
    },
    /// A compression level the method does not have.
    #[error("compression level {level} is out of range for {method:?}")]
    InvalidLevel {
        /// The compression method.
        method: CompressionMethod,
        /// The level asked for.
        level: i32,
    },
    /// The compressor failed.
    #[error("{method:?} compression failed: {message}")]
    Compress {
        /// The compression method.
        method: CompressionMethod,
        /// The compression library's message.
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
