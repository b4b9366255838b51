//! `kpack report`: where the bytes of a set of files go, per file, GPU target and kind (host
//! code, device code, kernel-database files, already-split `.kpack` archives).
//!
//! [`usage::collect`] does the accounting (its JSON form is the `--json` output; its
//! per-target code-object totals equal `kpack inspect`'s), [`treemap`] lays it out and
//! [`html`] draws the self-contained page that [`write_html`] writes atomically.

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
    /// Reading an input or writing the page failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

impl From<kpack_pipeline::FileError> for UsageError {
    fn from(e: kpack_pipeline::FileError) -> Self {
        UsageError::Input(Box::new(e))
    }
}

/// Writes the page for `usage` (of `inputs`, the paths as given) to `out`: to a temporary file beside it, synced, then renamed
/// over `out`, so `out` is either absent, its old self, or the whole new page.
pub fn write_html(usage: &Usage, inputs: &str, out: &Path) -> Result<(), UsageError> {
    let io = |source| UsageError::Io {
        path: out.to_owned(),
        source,
    };
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".kpack-report")
        // A page to share, not a secret: the mode a plain `>` redirection would give
        // (tempfile's default is 0600).
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(io)?;
    tmp.write_all(html::render(usage, inputs).as_bytes())
        .map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(out).map_err(|e| io(e.error))?;
    Ok(())
}
