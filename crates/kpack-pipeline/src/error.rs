//! Errors of the pipeline; format errors keep their own types underneath.

use std::path::PathBuf;

/// Something wrong with the device code in one input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// A bundle or CCOB is malformed.
    #[error(transparent)]
    Bundle(#[from] kpack_bundle::BundleError),
    /// A bundle of a file is malformed: its index and where it starts in the file (and, for
    /// a `.hip_fatbin` bundle, in the section). The bundle error's offsets are absolute in
    /// the file too, except for errors inside a CCOB's decompressed payload, which are
    /// offsets in that payload.
    #[error(
        "bundle {index} at file offset {file_offset:#x}{}: {}{source}",
        section_offset.map(|o| format!(" (.hip_fatbin + {o:#x})")).unwrap_or_default(),
        if *in_payload { "in its decompressed payload: " } else { "" }
    )]
    InBundle {
        /// Index of the bundle within the file (or `.hip_fatbin`).
        index: usize,
        /// Absolute offset of the bundle in the file.
        file_offset: u64,
        /// Offset of the bundle within `.hip_fatbin`.
        section_offset: Option<u64>,
        /// Whether `source` is about the decompressed payload of a CCOB.
        in_payload: bool,
        /// What is wrong with it.
        source: kpack_bundle::BundleError,
    },
    /// A CCOB too large to decode whole cannot be read as a stream: its method is not zstd,
    /// or its entries are not in header order without overlapping (what clang writes).
    #[error(
        "bundle {index} at file offset {file_offset:#x}: a CCOB decoding to {decoded_size} bytes (more than {limit}) must be read as a stream, which needs zstd and entries in header order without overlap"
    )]
    CannotStream {
        /// Index of the bundle within the file (or `.hip_fatbin`).
        index: usize,
        /// Absolute offset of the bundle in the file.
        file_offset: u64,
        /// What its header claims it decodes to.
        decoded_size: u64,
        /// The most a bundle decoded whole may take.
        limit: u64,
    },
    /// The ELF file is malformed.
    #[error(transparent)]
    Elf(#[from] kpack_elf::ElfError),
    /// An LLVM OffloadBinary is malformed (offsets absolute in the file).
    #[error(transparent)]
    Offload(#[from] kpack_offload::OffloadError),
    /// The PE image is malformed.
    #[error(transparent)]
    Pe(#[from] kpack_pe::PeError),
    /// The `ar` archive is malformed.
    #[error(transparent)]
    Ar(#[from] kpack_ar::ArError),
    /// A bundle id, target id or code-object header is malformed.
    #[error(transparent)]
    Target(#[from] kpack_target::TargetError),
    /// A `.kpack` archive is malformed.
    #[error(transparent)]
    Archive(#[from] kpack_archive::ArchiveError),
    /// A code object's ELF target disagrees with the bundle entry that holds it.
    #[error("bundle {bundle} entry {entry} ({bundle_id}): code object is built for {decoded}")]
    TargetMismatch {
        /// Bundle index within the file.
        bundle: usize,
        /// Entry index within the bundle.
        entry: usize,
        /// The entry's bundle id.
        bundle_id: String,
        /// The target decoded from the code object's `e_flags`.
        decoded: String,
    },
    /// An input that had to hold device code holds none.
    #[error("{}: no device code objects in this {kind} file", path.display())]
    NoDeviceCode {
        /// The input.
        path: PathBuf,
        /// What the file is.
        kind: &'static str,
    },
    /// An error while processing one of several inputs.
    #[error("{}: {source}", path.display())]
    InInput {
        /// The input.
        path: PathBuf,
        /// What went wrong in it.
        source: Box<SourceError>,
    },
    /// The wheel holding an input could not be read, or one written (its error names the
    /// wheel and the member).
    #[error(transparent)]
    Wheel(Box<kpack_wheelfile::WheelFileError>),
    /// The tarball holding an input could not be read, or one written (its error names the
    /// tarball, the member and the offset).
    #[error(transparent)]
    Tar(Box<kpack_tar::TarError>),
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// An error tied to the input file it came from.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct FileError {
    /// The input file.
    pub path: PathBuf,
    /// What went wrong in it.
    #[source]
    pub source: SourceError,
}

impl SourceError {
    /// Attaches the input path.
    pub fn in_file(self, path: impl Into<PathBuf>) -> FileError {
        FileError {
            path: path.into(),
            source: self,
        }
    }
}

/// Builds the I/O variant for `path`.
impl From<kpack_wheelfile::WheelFileError> for SourceError {
    fn from(e: kpack_wheelfile::WheelFileError) -> Self {
        SourceError::Wheel(Box::new(e))
    }
}

impl From<kpack_tar::TarError> for SourceError {
    fn from(e: kpack_tar::TarError) -> Self {
        SourceError::Tar(Box::new(e))
    }
}

impl From<kpack_fs::StageError> for SourceError {
    fn from(e: kpack_fs::StageError) -> Self {
        SourceError::Io {
            path: e.path,
            source: e.source,
        }
    }
}

/// [`SourceError::Io`] at `path`, for `map_err`.
pub fn io_error(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SourceError {
    let path = path.into();
    move |source| SourceError::Io { path, source }
}

/// `err` and those of its causes that its own message does not already show, joined by `: `:
/// what `kpack` prints after `kpack: error: `, and the message of the Python package's
/// exceptions (one function, so the two cannot differ).
pub fn error_message(err: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        // thiserror's transparent/#[source] chains often repeat the message already shown.
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = cause.source();
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose message does not show its cause.
    #[derive(Debug, thiserror::Error)]
    #[error("packing {0}")]
    struct Packing(&'static str, #[source] SourceError);

    #[test]
    fn error_message_joins_causes_not_already_shown_and_skips_repeated_ones() {
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let io = SourceError::Io {
            path: PathBuf::from("/in/lib.so"),
            source: missing,
        };
        // `Io` shows its cause itself: not repeated.
        assert_eq!(error_message(&io), "/in/lib.so: no such file");
        // `Packing` does not: joined with `: `, each cause once.
        let packing = Packing("gfx942", io);
        assert_eq!(
            error_message(&packing),
            "packing gfx942: /in/lib.so: no such file"
        );
    }
}
