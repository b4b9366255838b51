use std::io;
use std::path::PathBuf;

use crate::msgpack::{DecodeError, EncodeError, FieldError};

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
}

/// Everything that can go wrong reading or writing a `.kpack` archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Wraps any other error with the archive file it concerns.
    #[error("{}: {source}", path.display())]
    File {
        path: PathBuf,
        source: Box<ArchiveError>,
    },

    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        source: io::Error,
    },

    #[error("file is {len} bytes, shorter than the 16-byte kpack header")]
    TooShort { len: u64 },

    #[error("bad magic {found:02x?} at byte 0, expected \"KPAK\"")]
    BadMagic { found: [u8; 4] },

    #[error("unsupported {what} {version}, expected 1")]
    UnsupportedVersion { what: &'static str, version: u64 },

    #[error("toc_offset {toc_offset} at byte 8 is outside [64, {file_len})")]
    TocOffsetOutOfRange { toc_offset: u64, file_len: u64 },

    /// The TOC bytes are not one valid msgpack value; `source.offset` is a file offset.
    #[error("TOC: {source}")]
    TocParse { source: DecodeError },

    #[error("TOC at byte {toc_offset}: expected a map, found {found}")]
    TocNotMap {
        toc_offset: u64,
        found: &'static str,
    },

    /// A TOC field is missing, mistyped or duplicated.
    #[error("TOC: {0}")]
    TocField(FieldError),

    #[error("TOC: unknown compression_scheme {0:?}")]
    UnknownCompressionScheme(String),

    #[error("TOC: {path}: ordinal {ordinal} out of range, the archive stores {count} blobs")]
    OrdinalOutOfRange {
        path: String,
        ordinal: u64,
        count: usize,
    },

    /// A blob (`none`), the zstd region, or a zstd frame lies outside the data region
    /// `[64, toc_offset)`, or the region is not exactly the frames it declares.
    #[error("{what}: {detail}")]
    BadLayout { what: String, detail: String },

    #[error("TOC: {path}: original_size {original_size} {problem}")]
    BadOriginalSize {
        path: String,
        original_size: u64,
        problem: String,
    },

    #[error("no kernel for binary {binary:?}, arch {arch:?}")]
    KernelNotFound { binary: String, arch: String },

    #[error("decompressing binary {binary:?}, arch {arch:?}: {reason}")]
    DecompressionFailed {
        binary: String,
        arch: String,
        reason: String,
    },

    /// Found by [`crate::Archive::validate`]: the runtime could not reach this entry.
    #[error("{binary:?}/{arch:?}: {problem}")]
    Unreachable {
        binary: String,
        arch: String,
        problem: String,
    },

    #[error("binary {binary:?}, arch {arch:?} is already in the archive")]
    DuplicateEntry { binary: String, arch: String },

    #[error("invalid argument: {0}")]
    InvalidArgument(String),

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
            | E::OrdinalOutOfRange { .. }
            | E::BadLayout { .. }
            | E::BadOriginalSize { .. }
            | E::Unreachable { .. } => ErrorKind::InvalidFormat,
            E::UnsupportedVersion { .. } => ErrorKind::UnsupportedVersion,
            E::TocParse { .. } | E::TocNotMap { .. } => ErrorKind::MsgpackParse,
            E::KernelNotFound { .. } => ErrorKind::KernelNotFound,
            E::DecompressionFailed { .. } => ErrorKind::DecompressionFailed,
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

/// A HIPK marker or `.kpm` manifest that does not decode or does not fit its schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    #[error(transparent)]
    Msgpack(#[from] DecodeError),
    #[error(transparent)]
    Field(#[from] FieldError),
}

impl MetadataError {
    /// Always [`ErrorKind::InvalidMetadata`], the runtime's code for any bad metadata.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidMetadata
    }
}
