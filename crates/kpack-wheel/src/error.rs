//! Why a wheel could not be split. Every error names the file or wheel entry at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The input is not a well-formed wheel (or a hostile one).
    #[error("{}: entry {entry:?}: {problem}", wheel.display())]
    Entry {
        wheel: PathBuf,
        entry: String,
        problem: String,
    },
    /// The wheel as a whole is not a wheel (no dist-info, no METADATA, ...).
    #[error("{}: not a wheel: {problem}", wheel.display())]
    NotAWheel { wheel: PathBuf, problem: String },
    #[error("{}: no fat binaries under {overlay_root:?}: nothing to split", wheel.display())]
    NoFatBinaries {
        wheel: PathBuf,
        overlay_root: String,
    },
    #[error("{}: transforming {entry}: {source}", wheel.display())]
    Transform {
        wheel: PathBuf,
        entry: String,
        #[source]
        source: Box<kpack_pipeline::transform::TransformError>,
    },
    #[error("{}: writing {}: {source}", wheel.display(), output.display())]
    Zip {
        wheel: PathBuf,
        output: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
    #[error(transparent)]
    Artifact(Box<kpack_artifact::ArtifactError>),
    #[error("{0}")]
    Usage(String),
}

/// Wraps an I/O error with its path.
pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> WheelError {
    let path = path.into();
    move |source| WheelError::Io { path, source }
}

impl From<kpack_artifact::ArtifactError> for WheelError {
    fn from(e: kpack_artifact::ArtifactError) -> Self {
        WheelError::Artifact(Box::new(e))
    }
}
