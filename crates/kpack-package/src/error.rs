//! Why an index or a group archive could not be read or written. Every error names the file.

use std::path::PathBuf;

/// Why an index or a group archive could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// Reading a file or walking a tree failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// An archive could not be read or written.
    #[error("{}: {source}", path.display())]
    Archive {
        /// The archive.
        path: PathBuf,
        /// Why (boxed: it is large, and this path is cold).
        source: Box<kpack_archive::ArchiveError>,
    },
    /// A file is not what it must be (an index that does not decode or names no GPU
    /// target, an archive outside a `.kpack` directory).
    #[error("{}: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The request itself is invalid (a GPU name that names no target).
    #[error("{0}")]
    Usage(String),
}

impl PackageError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> PackageError {
        let path = path.into();
        move |source| PackageError::Io { path, source }
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, problem: impl Into<String>) -> PackageError {
        PackageError::Invalid {
            path: path.into(),
            problem: problem.into(),
        }
    }

    pub(crate) fn archive(
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(kpack_archive::ArchiveError) -> PackageError {
        let path = path.into();
        move |source| PackageError::Archive {
            path,
            source: Box::new(source),
        }
    }
}

impl From<kpack_fs::WalkError> for PackageError {
    fn from(e: kpack_fs::WalkError) -> Self {
        PackageError::Io {
            path: e.path,
            source: e.source,
        }
    }
}
