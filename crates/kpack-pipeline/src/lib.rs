//! Device code found in files and trees: what a file holds ([`source`]), what `kpack inspect`
//! reports ([`inspect`]), writing code objects out ([`unbundle`]) and packing them into
//! `.kpack` archives ([`pack`]).
//!
//! This crate knows nothing of the command line; `kpack-cli` only parses arguments and
//! prints what these functions return.
//!
//! Depends on `kpack-ar`, `kpack-archive`, `kpack-bundle`, `kpack-concurrency`, `kpack-elf`,
//! `kpack-fs`, `kpack-hostbin`, `kpack-offload`, `kpack-pe`, `kpack-runtime`, `kpack-tar`,
//! `kpack-target` and `kpack-wheelfile` (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

pub mod error;
pub mod inspect;
pub mod kpacked;
pub mod pack;
pub mod restore;
pub mod source;
pub mod transform;
pub mod unbundle;

pub use error::{FileError, SourceError};

use std::fs::File;
use std::path::{Path, PathBuf};

/// A file's bytes, mapped read-only (or, for a small member of a wheel or tarball, read
/// into memory).
pub enum FileBytes {
    /// A non-empty file.
    Mapped(memmap2::Mmap),
    /// An empty file (which cannot be mapped).
    Empty,
    /// Bytes read into memory.
    Owned(Vec<u8>),
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(map) => map,
            FileBytes::Empty => &[],
            FileBytes::Owned(bytes) => bytes,
        }
    }
}

/// Maps `file` read-only. Pages are only read when touched, so walking the headers of a
/// 1.3 GB library costs a few pages, and the mapping is never copied.
pub fn map_file(file: &File, path: &Path) -> Result<FileBytes, SourceError> {
    let len = file.metadata().map_err(error::io_error(path))?.len();
    if len == 0 {
        return Ok(FileBytes::Empty);
    }
    #[allow(unsafe_code)]
    // SAFETY: the map is read-only; kpack never writes its inputs, and a concurrent writer
    // truncating the file is outside what any file-reading tool can defend against (it
    // would get SIGBUS, as with any mmap reader such as `readelf`).
    let map = unsafe { memmap2::Mmap::map(file) };
    map.map(FileBytes::Mapped).map_err(error::io_error(path))
}

/// Expands directories into the regular files below them (sorted by name, symlinks not
/// followed, [`kpack_fs::walk`]); files are kept as given. An entry that cannot be read is an
/// error. This is how every command that takes `PATH...` reads its inputs.
pub fn expand_inputs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, SourceError> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(error::io_error(path))?;
        if meta.is_dir() {
            for e in kpack_fs::walk(path) {
                let e = e.map_err(|e| SourceError::Io {
                    path: e.path,
                    source: e.source,
                })?;
                if e.file_type.is_file() {
                    files.push(below(path, &e));
                }
            }
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// The walk's entry `e` below the directory `root`, spelled `root`, `/` and its relative path
/// with `/` between components, on every system: what commands print of the files found
/// (`--json` included) is then the same bytes on Windows, which takes `/` as a separator, as
/// on Linux. The walk's own path where the relative path is not valid Unicode.
fn below(root: &Path, e: &kpack_fs::WalkEntry) -> PathBuf {
    let Some(rel) = kpack_fs::slash_path(&e.rel) else {
        return e.path.clone();
    };
    let mut joined = root.as_os_str().to_owned();
    if !root
        .to_string_lossy()
        .ends_with(['/', std::path::MAIN_SEPARATOR])
    {
        joined.push("/");
    }
    joined.push(rel);
    PathBuf::from(joined)
}

/// Streams a host rewrite's output (`write` writes it) into the new file `path`, syncs it and
/// returns it mapped, for the caller to verify. `path` is a staged path: on failure the
/// caller's stage removes it.
pub fn write_rewrite(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<FileBytes, SourceError> {
    // Read access too: the written file is mapped for verification.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(error::io_error(path))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    write(&mut out).map_err(error::io_error(path))?;
    let file = out
        .into_inner()
        .map_err(|e| error::io_error(path)(e.into_error()))?;
    file.sync_all().map_err(error::io_error(path))?;
    map_file(&file, path)
}

impl FileBytes {
    /// Drops this process's pages of `part` (a slice of this mapping) from its resident set
    /// ([`kpack_archive::release_mapped_pages`]): reading a large input through the mapping
    /// (zstd compressing 1.3 GB of code objects) would otherwise keep every page touched
    /// resident until the mapping is dropped. Nothing for bytes held in memory, or a `part`
    /// outside the mapping.
    pub fn release(&self, part: &[u8]) {
        let FileBytes::Mapped(map) = self else {
            return;
        };
        let base = map.as_ptr() as usize;
        let start = part.as_ptr() as usize;
        if start < base || start - base > map.len() {
            return;
        }
        let from = start - base;
        #[allow(unsafe_code)]
        // SAFETY: a `FileBytes::Mapped` is a file's map (`map_file`).
        unsafe {
            kpack_archive::release_mapped_pages(map, from..from + part.len())
        };
    }
}
