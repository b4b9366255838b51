//! `kpack report`: where the bytes of a set of files go, per file, GPU target and kind (host
//! code, device code, kernel-database files, already-split `.kpack` archives).
//!
//! [`usage::collect`] does the accounting (its JSON form is the `--json` output; its
//! per-target code-object totals equal `kpack inspect`'s), [`treemap`] lays it out and
//! [`html`] draws the self-contained page that [`write_html`] writes atomically.
//!
//! Depends on `kpack-fs`, `kpack-inputs`, `kpack-package`, `kpack-pipeline` and `kpack-target`
//! (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

pub mod html;
pub mod treemap;
pub mod usage;

use std::io::Write;
use std::path::{Path, PathBuf};

pub use usage::{FileUsage, KindUsage, Part, PartKind, TargetUsage, Usage, collect};

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// An input is not what its first bytes claim (boxed: the error is large, and every
    /// `Result` of this crate would otherwise carry its size).
    #[error(transparent)]
    Input(Box<kpack_pipeline::FileError>),
    /// An input, or the wheel or tarball holding it, could not be read (the error names it).
    #[error(transparent)]
    Read(Box<kpack_pipeline::SourceError>),
    /// Reading an input or writing the page failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

impl From<kpack_pipeline::SourceError> for UsageError {
    fn from(e: kpack_pipeline::SourceError) -> Self {
        UsageError::Read(Box::new(e))
    }
}

impl From<kpack_pipeline::FileError> for UsageError {
    fn from(e: kpack_pipeline::FileError) -> Self {
        UsageError::Input(Box::new(e))
    }
}

/// Writes the page for `usage` (of `inputs`, the paths as given) to `out` whole or not at all
/// ([`kpack_fs::write_atomic`]: a temporary file beside it, synced, then renamed over `out`),
/// with the mode a plain `>` redirection would give.
pub fn write_html(usage: &Usage, inputs: &str, out: &Path) -> Result<(), UsageError> {
    let page = html::render(usage, inputs);
    kpack_fs::write_atomic(
        out,
        |file| {
            file.write_all(page.as_bytes())?;
            file.sync_all()
        },
        |_, e| e,
    )
    .map_err(|source| UsageError::Io {
        path: out.to_owned(),
        source,
    })
}
