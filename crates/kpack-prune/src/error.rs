//! Why a prune failed: one file ([`PruneError`]) or the whole job ([`PruneTreeError`]).
//! Nothing is written at the output path either way.

use std::path::{Path, PathBuf};

use kpack_elf::VerifyIssue;
use kpack_elf::rewrite::RewriteError;
use kpack_pipeline::SourceError;
use kpack_target::TargetId;

/// Why a prune failed. Nothing is written at the output path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PruneError {
    /// Reading the input or writing the output failed, or the device code is malformed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A static library that does not read or write as an `ar` archive.
    #[error(transparent)]
    Ar(#[from] kpack_ar::ArError),
    /// A member of a static library that does not prune.
    #[error("member {name:?} (header at offset {offset:#x}): {source}")]
    Member {
        /// The member's name.
        name: String,
        /// File offset of its header.
        offset: u64,
        /// Why it does not prune.
        #[source]
        source: Box<PruneError>,
    },
    /// The host rewrite was refused.
    #[error(transparent)]
    Rewrite(#[from] RewriteError),
    /// The rewritten binary failed verification.
    #[error("the pruned binary fails verification:\n{}", .0.iter().map(|i| format!("  {i}")).collect::<Vec<_>>().join("\n"))]
    Verify(Vec<VerifyIssue>),
    /// A bundle could not be rewritten.
    #[error("bundle {index} at file offset {file_offset:#x}: {source}")]
    WriteBundle {
        /// Index of the bundle within `.hip_fatbin`.
        index: usize,
        /// Absolute offset of the bundle in the input.
        file_offset: u64,
        /// What went wrong.
        source: kpack_bundle::BundleError,
    },
    /// The input is not a fat binary with device code to prune.
    #[error("{0}")]
    NotFat(&'static str),
    /// A wrapper points at no bundle.
    #[error("wrapper {0} points at no bundle of .hip_fatbin")]
    WrapperWithoutBundle(usize),
    /// Every device target would go.
    #[error(
        "pruning removes every device target ({}); nothing would be left to run: pass --allow-empty to keep only the host code",
        dropped.join(", ")
    )]
    Empty {
        /// The targets the file holds, all dropped.
        dropped: Vec<String>,
    },
    /// A named target that no code object of the inputs has.
    #[error("{} matches no code object of the input (it holds {})", named.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "), present.join(", "))]
    NotPresent {
        /// The named targets that match nothing.
        named: Vec<TargetId>,
        /// The targets the input holds.
        present: Vec<String>,
    },
    /// The output does not look as planned.
    #[error("the pruned binary is not as planned: {0}")]
    Unexpected(String),
}

impl From<kpack_elf::ElfError> for PruneError {
    fn from(e: kpack_elf::ElfError) -> Self {
        PruneError::Source(e.into())
    }
}

/// Why a prune failed. Nothing is left behind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PruneTreeError {
    /// One input file could not be pruned.
    #[error("{}: {source}", path.display())]
    File {
        /// The input file.
        path: PathBuf,
        /// What went wrong.
        source: Box<PruneError>,
    },
    /// A named target matches nothing in the inputs, or a container (wheel, tarball) cannot
    /// be read or written.
    #[error(transparent)]
    Prune(Box<PruneError>),
    /// Reading or writing failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

impl From<kpack_pipeline::SourceError> for PruneTreeError {
    fn from(e: kpack_pipeline::SourceError) -> Self {
        PruneTreeError::Prune(Box::new(e.into()))
    }
}

impl From<kpack_fs::StageError> for PruneTreeError {
    fn from(e: kpack_fs::StageError) -> Self {
        PruneTreeError::Io {
            path: e.path,
            source: e.source,
        }
    }
}

pub(crate) fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> PruneTreeError + '_ {
    move |source| PruneTreeError::Io {
        path: path.to_owned(),
        source,
    }
}
