//! Why a wheel could not be split. Every error names the file or wheel entry at fault.

use std::path::PathBuf;

/// Why [`split_wheel`](crate::split_wheel) or [`detect`](crate::detect) failed; nothing was
/// published.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WheelError {
    /// Reading the input, or writing into the staged output, failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The input is not a well-formed wheel (or a hostile one).
    #[error("{}: entry {entry:?}: {problem}", wheel.display())]
    Entry {
        /// The input wheel.
        wheel: PathBuf,
        /// The entry at fault, `/`-separated as in the zip.
        entry: String,
        /// What is wrong with it (a RECORD mismatch, an unsafe name, a bad target, ...).
        problem: String,
    },
    /// The wheel as a whole is not a wheel (no dist-info, no METADATA, ...).
    #[error("{}: not a wheel: {problem}", wheel.display())]
    NotAWheel {
        /// The input wheel.
        wheel: PathBuf,
        /// What is missing or malformed.
        problem: String,
    },
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
    /// Writing an output `.whl` failed in the zip layer.
    #[error("{}: writing {}: {source}", wheel.display(), output.display())]
    Zip {
        /// The input wheel.
        wheel: PathBuf,
        /// The `.whl` being written (in the staging directory).
        output: PathBuf,
        /// The zip crate's error.
        #[source]
        source: zip::result::ZipError,
    },
    /// A database handler, or staging and publishing the outputs, failed (boxed: large).
    #[error(transparent)]
    Artifact(Box<kpack_artifact::ArtifactError>),
    /// The request cannot be met as given: a bad option (a variant label with unsafe
    /// characters), options that do not fit the input (an overlay root that is not there,
    /// fat binaries under several top-level directories and no overlay root given), or a
    /// GPU node whose KFD properties name no known target.
    #[error("{0}")]
    Usage(String),
}

/// Wraps an I/O error with its path.
pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> WheelError {
    let path = path.into();
    move |source| WheelError::Io { path, source }
}

impl From<kpack_fs::WalkError> for WheelError {
    fn from(e: kpack_fs::WalkError) -> Self {
        WheelError::Io {
            path: e.path,
            source: e.source,
        }
    }
}

impl From<kpack_artifact::ArtifactError> for WheelError {
    fn from(e: kpack_artifact::ArtifactError) -> Self {
        WheelError::Artifact(Box::new(e))
    }
}
