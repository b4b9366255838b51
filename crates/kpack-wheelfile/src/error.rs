//! Why a wheel could not be read or written. Every error names the file or wheel entry at
//! fault.

use std::path::PathBuf;

/// Why a wheel could not be read (it is damaged, hostile or not a wheel) or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WheelFileError {
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
}

/// Wraps an I/O error with its path.
pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> WheelFileError {
    let path = path.into();
    move |source| WheelFileError::Io { path, source }
}

impl From<kpack_fs::WalkError> for WheelFileError {
    fn from(e: kpack_fs::WalkError) -> Self {
        WheelFileError::Io {
            path: e.path,
            source: e.source,
        }
    }
}
