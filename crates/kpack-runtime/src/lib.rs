//! The kpack loader: turns a HIPK wrapper's metadata into the code object for the local GPU.
//!
//! This is the safe Rust side of `librocm_kpack` (the C ABI lives in `kpack-capi`). The HIP
//! runtime finds a fat-binary wrapper whose magic is `HIPK`, takes the binary's path from the
//! wrapper's address ([`discover_binary_path`]), reads the msgpack metadata the wrapper points
//! at ([`read_metadata`]) and asks a process-wide [`Cache`] for wrapper `co_index` and the
//! device's ISA list ([`Cache::load_with`]).
//!
//! # Lookup (reference spec §4.4–4.6, with the divergences below)
//!
//! 1. The search paths are `ROCM_KPACK_PATH` when set (it replaces everything), else
//!    `ROCM_KPACK_PATH_PREFIX` followed by the metadata's `kpack_search_paths`, the latter
//!    resolved against the binary's directory (absolute paths as they are; `..`, `.` and
//!    symlinks resolved in the part of the path that exists).
//! 2. Every `@GFXARCH@` in a path is replaced by each candidate target of each requested ISA
//!    (see [`target`]), in priority order; paths without it are used once.
//! 3. Each path that exists is opened once and kept open for the cache's lifetime.
//! 4. For each requested ISA in order, for each of its feature subsets most specific first,
//!    for each archive in path order: an archive whose `gfx_arches` lists the target (compared
//!    insensitive to feature order) is asked for `kernel_name#co_index`.
//!
//! # Where this goes beyond the reference (spec §9 B14, B15)
//!
//! * An archive that lists the target but lacks the kernel (or fails to decode it, or is
//!   damaged) does not end the search: the next archive, then the next candidate target, then
//!   the next ISA is tried. The reference returns the first archive's answer, which breaks as
//!   soon as two archives share a target (TheRock#7081). When nothing is found the most
//!   informative failure is reported: a damaged archive
//!   ([`ErrorCode::IntegrityCheckFailed`]: an intact copy would load), else an archive that
//!   failed to open or decode, else
//!   [`ErrorCode::KernelNotFound`], else [`ErrorCode::ArchNotFound`], else
//!   [`ErrorCode::ArchiveNotFound`].
//! * A search path `<dir>/<module>_@GFXARCH@.kpack` also reaches the archives the index
//!   `<dir>/<module>.kpm` (written by `kpack recombine` and `kpack split-wheel`) lists for
//!   the candidate targets, after the per-target names: a multi-target archive installed
//!   without per-target names (a family device wheel; wheels cannot hold links) is found.
//!   Index file names must lie beside the index; a missing or damaged index is no index.
//! * Targets match whatever the order of their features (`gfx942:xnack-:sramecc+` is
//!   `gfx942:sramecc+:xnack-`), and `@GFXARCH@` is also expanded in the environment paths.
//! * Resolution and probing are cached: a warm load makes no file-system call at all, and a
//!   path that did not exist or held no valid archive is not probed again. Negative entries
//!   live as long as the cache, like positive ones (the reference keeps every archive it
//!   opened until the cache is destroyed, so an archive replaced on disk is not re-read
//!   either): an archive installed while the process runs is seen by the next cache, i.e. the
//!   next process. Only I/O failures (`IO_ERROR`, `OUT_OF_MEMORY`), which may pass, are
//!   retried on the next load.
//! * Decoding runs outside the cache lock, and archives need no per-archive lock: concurrent
//!   loads of different kernels proceed in parallel.
//! * The metadata is read through its pointer byte by byte, only as far as its msgpack
//!   encoding requires (at most 64 KiB), rather than copying a blind 64 KiB window.
//! * Corrupt archives and metadata are errors, never out-of-bounds reads or aborts.
//!
//! Depends on `kpack-archive`, `kpack-hostbin` and `kpack-target` (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

pub mod config;
pub mod discover;
pub mod metadata;
pub mod target;

mod cache;
mod paths;
mod sync;
#[cfg(windows)]
mod win;

pub use cache::{Cache, CacheStats, Found};
pub use config::Config;
pub use discover::{DiscoverError, MappedAddress, discover_binary_path};
pub use kpack_archive::{Archive, ArchiveError, CompressionScheme};
pub use metadata::{MAX_METADATA_LEN, MetadataReadError, read_metadata};
pub use paths::{GFXARCH, files_matching};

use std::path::PathBuf;

/// The C runtime's error codes (spec §4.1), `KPACK_SUCCESS` aside; the discriminant is the C
/// value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ErrorCode {
    /// `KPACK_ERROR_INVALID_ARGUMENT`.
    InvalidArgument = 1,
    /// `KPACK_ERROR_FILE_NOT_FOUND`.
    FileNotFound = 2,
    /// `KPACK_ERROR_INVALID_FORMAT`.
    InvalidFormat = 3,
    /// `KPACK_ERROR_UNSUPPORTED_VERSION`.
    UnsupportedVersion = 4,
    /// `KPACK_ERROR_KERNEL_NOT_FOUND`.
    KernelNotFound = 5,
    /// `KPACK_ERROR_DECOMPRESSION_FAILED`.
    DecompressionFailed = 6,
    /// `KPACK_ERROR_OUT_OF_MEMORY`.
    OutOfMemory = 7,
    /// `KPACK_ERROR_NOT_IMPLEMENTED`.
    NotImplemented = 8,
    /// `KPACK_ERROR_IO_ERROR`.
    IoError = 9,
    /// `KPACK_ERROR_MSGPACK_PARSE_FAILED`.
    MsgpackParseFailed = 10,
    /// `KPACK_ERROR_PATH_DISCOVERY_FAILED`.
    PathDiscoveryFailed = 11,
    /// `KPACK_ERROR_INVALID_METADATA`.
    InvalidMetadata = 12,
    /// `KPACK_ERROR_ARCHIVE_NOT_FOUND`.
    ArchiveNotFound = 13,
    /// `KPACK_ERROR_ARCH_NOT_FOUND`.
    ArchNotFound = 14,
    /// `KPACK_ERROR_INTEGRITY_CHECK_FAILED`, kpack's addition: the archive's digest of what
    /// was read does not match ([`kpack_archive::digest`]): the file is damaged.
    IntegrityCheckFailed = 15,
}

impl ErrorCode {
    /// Every code, in C value order (1 to 15).
    pub const ALL: [ErrorCode; 15] = [
        ErrorCode::InvalidArgument,
        ErrorCode::FileNotFound,
        ErrorCode::InvalidFormat,
        ErrorCode::UnsupportedVersion,
        ErrorCode::KernelNotFound,
        ErrorCode::DecompressionFailed,
        ErrorCode::OutOfMemory,
        ErrorCode::NotImplemented,
        ErrorCode::IoError,
        ErrorCode::MsgpackParseFailed,
        ErrorCode::PathDiscoveryFailed,
        ErrorCode::InvalidMetadata,
        ErrorCode::ArchiveNotFound,
        ErrorCode::ArchNotFound,
        ErrorCode::IntegrityCheckFailed,
    ];
}

impl From<kpack_archive::ErrorKind> for ErrorCode {
    fn from(kind: kpack_archive::ErrorKind) -> Self {
        use kpack_archive::ErrorKind as K;
        match kind {
            K::InvalidArgument => ErrorCode::InvalidArgument,
            K::FileNotFound => ErrorCode::FileNotFound,
            K::InvalidFormat => ErrorCode::InvalidFormat,
            K::UnsupportedVersion => ErrorCode::UnsupportedVersion,
            K::KernelNotFound => ErrorCode::KernelNotFound,
            K::DecompressionFailed => ErrorCode::DecompressionFailed,
            K::Io => ErrorCode::IoError,
            K::MsgpackParse => ErrorCode::MsgpackParseFailed,
            K::InvalidMetadata => ErrorCode::InvalidMetadata,
            K::IntegrityCheckFailed => ErrorCode::IntegrityCheckFailed,
        }
    }
}

impl From<&ArchiveError> for ErrorCode {
    fn from(e: &ArchiveError) -> Self {
        e.kind().into()
    }
}

/// Why [`Cache::load_with`] found no code object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// `ROCM_KPACK_DISABLE` was set when the cache was created.
    #[error("kpack loading is disabled (ROCM_KPACK_DISABLE)")]
    Disabled,

    /// No search path led to an archive.
    #[error("no kpack archive found; tried {}", display_paths(.tried))]
    ArchiveNotFound {
        /// The archive paths tried, in search order.
        tried: Vec<PathBuf>,
    },

    /// Archives were found, but none lists any candidate target of the requested ISAs.
    #[error(
        "none of {} (or a compatible target) is in any archive",
        .requested.join(", ")
    )]
    ArchNotFound {
        /// The ISAs asked for.
        requested: Vec<String>,
    },

    /// An archive lists the target but has no entry for this binary key, and no other
    /// archive or target had one either.
    #[error("{}: no kernel {key} for {arch}", archive.display())]
    KernelNotFound {
        /// The archive that lists the target.
        archive: PathBuf,
        /// The TOC binary key (`kernel_name#N`).
        key: String,
        /// The target, as the archive spells it.
        arch: String,
    },

    /// An archive failed to open, or an entry failed to decode, and nothing else was found.
    #[error("{message}")]
    Archive {
        /// The code of the archive error.
        code: ErrorCode,
        /// The archive error, as text.
        message: String,
    },
}

impl LoadError {
    /// The C error code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            LoadError::Disabled => ErrorCode::NotImplemented,
            LoadError::ArchiveNotFound { .. } => ErrorCode::ArchiveNotFound,
            LoadError::ArchNotFound { .. } => ErrorCode::ArchNotFound,
            LoadError::KernelNotFound { .. } => ErrorCode::KernelNotFound,
            LoadError::Archive { code, .. } => *code,
        }
    }

    pub(crate) fn from_archive(e: &ArchiveError) -> LoadError {
        LoadError::Archive {
            code: e.into(),
            message: e.to_string(),
        }
    }
}

fn display_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "no path".to_owned();
    }
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_have_the_reference_c_values() {
        for (i, code) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(*code as u32, i as u32 + 1, "{code:?}");
        }
    }
}
