//! The sorted tree walk (`walkdir`).

use std::fs::FileType;
use std::path::{Path, PathBuf};

/// One entry found by [`walk`].
#[derive(Debug, Clone)]
pub struct WalkEntry {
    /// Its path (`root` joined with `rel`).
    pub path: PathBuf,
    /// Its path relative to the walked root.
    pub rel: PathBuf,
    /// Its type, of the entry itself (a symlink is a symlink).
    pub file_type: FileType,
}

/// A directory or entry that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct WalkError {
    /// The path that could not be read.
    pub path: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

impl From<walkdir::Error> for WalkError {
    fn from(e: walkdir::Error) -> Self {
        let path = e.path().map(Path::to_owned).unwrap_or_default();
        // Without following links the walk meets no loop, so every error is an I/O error.
        let source = e
            .into_io_error()
            .unwrap_or_else(|| std::io::Error::other("file system loop"));
        WalkError { path, source }
    }
}

/// Every entry below `root` (not `root` itself), depth first, each directory's entries
/// sorted by file name (bytes) and right after it. Symlinks are reported, never followed.
/// An entry that cannot be read is an error item, never skipped.
pub fn walk(root: &Path) -> impl Iterator<Item = Result<WalkEntry, WalkError>> + use<> {
    let root = root.to_owned();
    walkdir::WalkDir::new(&root)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .map(move |e| {
            let e = e?;
            let rel = e
                .path()
                .strip_prefix(&root)
                .expect("walkdir yields paths below its root")
                .to_owned();
            Ok(WalkEntry {
                file_type: e.file_type(),
                rel,
                path: e.into_path(),
            })
        })
}

/// The sub-directories of `dir` (symlinks to directories included), sorted by name; kpack's
/// own temporaries (`.kpack-tmp-*`, a run's staging) are never listed.
pub fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, WalkError> {
    walkdir::WalkDir::new(dir)
        .min_depth(1)
        .max_depth(1)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_map(|e| match e {
            Ok(e) if e.file_type().is_dir() && crate::temp_owner(e.file_name()).is_none() => {
                Some(Ok(e.into_path()))
            }
            Ok(_) => None,
            Err(e) => Some(Err(e.into())),
        })
        .collect()
}

/// `rel` (a path relative to a walked root) as a member name in tarballs, wheels and
/// archives: its components joined by `/` whatever the system's separator (`\` on
/// Windows); `None` when a component is not valid Unicode or is not a plain name (`..`, a
/// root, a drive).
pub fn slash_path(rel: &Path) -> Option<String> {
    let mut out = String::new();
    for c in rel.components() {
        let std::path::Component::Normal(name) = c else {
            return None;
        };
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(name.to_str()?);
    }
    Some(out)
}
