//! Why a wheel could not be split. Every error names the file or wheel entry at fault.

use std::path::PathBuf;

use kpack_wheelfile::WheelFileError;

/// Why [`split_wheel`](crate::split_wheel) failed; nothing was published.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WheelError {
    /// Reading the input wheel or writing an output one failed, or the input is not a
    /// well-formed wheel (or a hostile one); also an I/O error of the split itself, or a
    /// problem with one of the input's entries.
    #[error(transparent)]
    File(#[from] WheelFileError),
    /// A member would have a name Windows cannot hold, and the wheels are meant for Windows.
    #[error(transparent)]
    Name(#[from] kpack_fs::NameError),
    /// No binary under the overlay root carries device code: there is nothing to split.
    #[error("{}: no fat binaries under {overlay_root:?}: nothing to split", wheel.display())]
    NoFatBinaries {
        /// The input wheel.
        wheel: PathBuf,
        /// The package directory searched.
        overlay_root: String,
    },
    /// Taking the device code out of one fat binary failed.
    #[error("{}: transforming {entry}: {source}", wheel.display())]
    Transform {
        /// The input wheel.
        wheel: PathBuf,
        /// The fat binary's path inside the wheel.
        entry: String,
        /// Why the transform failed (boxed: it is large, and this path is cold).
        #[source]
        source: Box<kpack_pipeline::transform::TransformError>,
    },
    /// A database handler, or staging and publishing the outputs, failed (boxed: large).
    #[error(transparent)]
    Artifact(Box<kpack_artifact::ArtifactError>),
    /// The request cannot be met as given: a bad option (a variant label with unsafe
    /// characters), options that do not fit the input (an overlay root that is not there,
    /// fat binaries under several top-level directories and no overlay root given).
    #[error("{0}")]
    Usage(String),
}

/// Wraps an I/O error with its path.
pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> WheelError {
    let io = kpack_wheelfile::io(path);
    move |source| WheelError::File(io(source))
}

/// The error of the input's entry `entry`: `problem`.
pub(crate) fn entry(
    wheel: &std::path::Path,
    entry: impl Into<String>,
    problem: impl Into<String>,
) -> WheelError {
    WheelError::File(WheelFileError::Entry {
        wheel: wheel.to_owned(),
        entry: entry.into(),
        problem: problem.into(),
    })
}

impl From<kpack_fs::WalkError> for WheelError {
    fn from(e: kpack_fs::WalkError) -> Self {
        WheelError::File(e.into())
    }
}

impl From<kpack_package::PackageError> for WheelError {
    fn from(e: kpack_package::PackageError) -> Self {
        WheelError::Artifact(Box::new(e.into()))
    }
}

impl From<kpack_artifact::ArtifactError> for WheelError {
    fn from(e: kpack_artifact::ArtifactError) -> Self {
        WheelError::Artifact(Box::new(e))
    }
}
