use std::io;
use std::path::PathBuf;

pub use kpack_msgpack::MetadataError;
use kpack_msgpack::{DecodeError, EncodeError, FieldError};

/// The class of an error, one per C runtime error code it maps onto (spec §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// `KPACK_ERROR_INVALID_ARGUMENT`: the caller asked for something the format cannot hold.
    InvalidArgument,
    /// `KPACK_ERROR_FILE_NOT_FOUND`.
    FileNotFound,
    /// `KPACK_ERROR_INVALID_FORMAT`.
    InvalidFormat,
    /// `KPACK_ERROR_UNSUPPORTED_VERSION`.
    UnsupportedVersion,
    /// `KPACK_ERROR_KERNEL_NOT_FOUND`.
    KernelNotFound,
    /// `KPACK_ERROR_DECOMPRESSION_FAILED`.
    DecompressionFailed,
    /// `KPACK_ERROR_IO_ERROR`.
    Io,
    /// `KPACK_ERROR_MSGPACK_PARSE_FAILED`.
    MsgpackParse,
    /// `KPACK_ERROR_INVALID_METADATA` (HIPK marker metadata, `.kpm` manifests).
    InvalidMetadata,
    /// `KPACK_ERROR_INTEGRITY_CHECK_FAILED` (kpack's addition, value 15): bytes read from an
    /// archive do not match the digest it stores for them ([`crate::digest`]). None of the
    /// reference's codes says "the file is damaged": `INVALID_FORMAT` means unreadable
    /// structure and `DECOMPRESSION_FAILED` a frame zstd refused, while a damaged `none`
    /// entry decodes fine and is simply other bytes.
    IntegrityCheckFailed,
}

/// Everything that can go wrong reading or writing a `.kpack` archive.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// Wraps any other error with the archive file it concerns.
    #[error("{}: {source}", path.display())]
    File {
        /// The archive file.
        path: PathBuf,
        /// The error, about that file.
        source: Box<ArchiveError>,
    },

    /// Reading or writing the file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The I/O error.
        source: io::Error,
    },

    /// The file ends before the 16-byte header does.
    #[error("file is {len} bytes, shorter than the 16-byte kpack header")]
    TooShort {
        /// Length of the file, in bytes.
        len: u64,
    },

    /// The file does not start with `KPAK`.
    #[error("bad magic {found:02x?} at byte 0, expected \"KPAK\"")]
    BadMagic {
        /// What the input holds there.
        found: [u8; 4],
    },

    /// A version other than 1 or 2 in the header, or a TOC `format_version` other than the
    /// header's.
    #[error("unsupported {what} {version}, expected 1 or 2 (as in the header)")]
    UnsupportedVersion {
        /// What the version belongs to (the header or the TOC).
        what: &'static str,
        /// The version the input holds.
        version: u64,
    },

    /// The header's `toc_offset` is outside `[64, file length)`.
    #[error("toc_offset {toc_offset} at byte 8 is outside [64, {file_len})")]
    TocOffsetOutOfRange {
        /// Where the TOC starts.
        toc_offset: u64,
        /// Length of the file, in bytes.
        file_len: u64,
    },

    /// The TOC bytes are not one valid msgpack value; `source.offset` is a file offset.
    #[error("TOC: {source}")]
    TocParse {
        /// The msgpack error, at a file offset.
        source: DecodeError,
    },

    /// The TOC is one msgpack value, but not a map.
    #[error("TOC at byte {toc_offset}: expected a map, found {found}")]
    TocNotMap {
        /// Where the TOC starts.
        toc_offset: u64,
        /// What the input holds there.
        found: &'static str,
    },

    /// A TOC field is missing, mistyped or duplicated.
    #[error("TOC: {0}")]
    TocField(FieldError),

    /// A `compression_scheme` neither reference writes.
    #[error("TOC: unknown compression_scheme {0}")]
    UnknownCompressionScheme(String),

    /// A scheme in an archive of the wrong version: `unified` needs version 2, the others 1.
    #[error("TOC: compression_scheme {scheme} cannot appear in a version {version} archive")]
    SchemeVersionMismatch {
        /// The TOC's `compression_scheme`.
        scheme: &'static str,
        /// The header's version.
        version: u32,
    },

    /// An entry's `ordinal` names no stored blob or frame.
    #[error("TOC: {path}: ordinal {ordinal} out of range, the archive stores {count} blobs")]
    OrdinalOutOfRange {
        /// The entry's `ordinal` field in the TOC.
        path: String,
        /// The `ordinal` field.
        ordinal: u64,
        /// How many blobs or frames the archive stores.
        count: usize,
    },

    /// A blob (`none`), the zstd region, or a zstd frame lies outside the data region
    /// `[64, toc_offset)`, or the region is not exactly the frames it declares.
    #[error("{what}: {detail}")]
    BadLayout {
        /// What lies outside: a blob, the zstd region or a frame.
        what: String,
        /// Where it lies, and where it should.
        detail: String,
    },

    /// An entry's `original_size` is over the limit, or (`none`) not its blob's size.
    #[error("TOC: {path}: original_size {original_size} {problem}")]
    BadOriginalSize {
        /// The entry's `original_size` field in the TOC.
        path: String,
        /// The `original_size` field.
        original_size: u64,
        /// What is wrong.
        problem: String,
    },

    /// The archive has no entry for this binary and arch.
    #[error("no kernel for binary {binary}, arch {arch}")]
    KernelNotFound {
        /// The TOC binary key.
        binary: String,
        /// The architecture, as the archive spells it.
        arch: String,
    },

    /// A zstd frame does not decode to the entry's `original_size` bytes.
    #[error("decompressing binary {binary}, arch {arch}: {reason}")]
    DecompressionFailed {
        /// The TOC binary key.
        binary: String,
        /// The architecture, as the archive spells it.
        arch: String,
        /// What the decompressor reported.
        reason: String,
    },

    /// Bytes read do not match the digest the archive stores for them, a frame of an archive
    /// with digests does not decode, or the digests themselves are inconsistent: the file is
    /// damaged ([`crate::digest`]).
    #[error("{what} at byte {offset}: {problem}; the archive is damaged")]
    Damaged {
        /// What was read: the TOC, or an entry (binary and arch).
        what: String,
        /// The absolute file offset of what was read (the TOC, or the entry's stored bytes).
        offset: u64,
        /// What did not match.
        problem: String,
    },

    /// Found by [`crate::Archive::validate`]: the runtime could not reach this entry.
    #[error("binary {binary}, arch {arch}: {problem}")]
    Unreachable {
        /// The TOC binary key.
        binary: String,
        /// The architecture, as the archive spells it.
        arch: String,
        /// What is wrong.
        problem: String,
    },

    /// The writer was given the same binary and arch twice.
    #[error("binary {binary}, arch {arch} is already in the archive")]
    DuplicateEntry {
        /// The TOC binary key.
        binary: String,
        /// The architecture, as the archive spells it.
        arch: String,
    },

    /// The writer was asked for something the format cannot hold.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A string or list too long for msgpack.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

impl ArchiveError {
    /// The C error code class of this error.
    pub fn kind(&self) -> ErrorKind {
        use ArchiveError as E;
        match self {
            E::File { source, .. } => source.kind(),
            E::Io { source, .. } if source.kind() == io::ErrorKind::NotFound => {
                ErrorKind::FileNotFound
            }
            E::Io { .. } => ErrorKind::Io,
            E::TooShort { .. }
            | E::BadMagic { .. }
            | E::TocOffsetOutOfRange { .. }
            | E::TocField(_)
            | E::UnknownCompressionScheme(_)
            | E::SchemeVersionMismatch { .. }
            | E::OrdinalOutOfRange { .. }
            | E::BadLayout { .. }
            | E::BadOriginalSize { .. }
            | E::Unreachable { .. } => ErrorKind::InvalidFormat,
            E::UnsupportedVersion { .. } => ErrorKind::UnsupportedVersion,
            E::TocParse { .. } | E::TocNotMap { .. } => ErrorKind::MsgpackParse,
            E::KernelNotFound { .. } => ErrorKind::KernelNotFound,
            E::DecompressionFailed { .. } => ErrorKind::DecompressionFailed,
            E::Damaged { .. } => ErrorKind::IntegrityCheckFailed,
            E::DuplicateEntry { .. } | E::InvalidArgument(_) | E::Encode(_) => {
                ErrorKind::InvalidArgument
            }
        }
    }

    /// The error without its [`ArchiveError::File`] wrapper.
    pub fn inner(&self) -> &ArchiveError {
        match self {
            ArchiveError::File { source, .. } => source.inner(),
            e => e,
        }
    }

    pub(crate) fn in_file(self, path: Option<&std::path::Path>) -> Self {
        match (path, self) {
            (_, e @ ArchiveError::File { .. }) | (None, e) => e,
            (Some(p), e) => ArchiveError::File {
                path: p.to_owned(),
                source: Box::new(e),
            },
        }
    }
}

impl From<FieldError> for ArchiveError {
    fn from(e: FieldError) -> Self {
        ArchiveError::TocField(e)
    }
}

impl From<&MetadataError> for ErrorKind {
    /// [`ErrorKind::IntegrityCheckFailed`] for damage, else [`ErrorKind::InvalidMetadata`],
    /// the runtime's code for any bad metadata.
    fn from(e: &MetadataError) -> Self {
        match e {
            MetadataError::Damaged { .. } => ErrorKind::IntegrityCheckFailed,
            _ => ErrorKind::InvalidMetadata,
        }
    }
}
