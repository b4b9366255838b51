//! One file replaced whole.

use std::fs::File;
use std::path::Path;

use crate::{fault_point, parent_dir, temp_builder, temp_name_prefix, tempfile_error};

/// Writes `path` whole or not at all: `fill` writes into a temporary file beside it
/// (`.kpack-tmp-<pid>-<random>`, mode 0666 less the umask on Unix, readable and writable),
/// which is renamed over `path` only when `fill` succeeds (on Windows `MoveFileExW` with
/// `MOVEFILE_REPLACE_EXISTING`, through `tempfile`; the temporary is open with
/// `FILE_SHARE_DELETE`, so the rename needs no close first). On any error, or a panic, the
/// temporary file is removed and `path` keeps what it held; after `kill -9` (or
/// `TerminateProcess`) only the temporary file can remain, for [`crate::sweep`].
///
/// `fill` does its own `sync_all` where durability across power loss matters (a kill does not
/// need it). `io_error` turns an I/O failure into the caller's error, given the path it
/// concerns (the directory, or the final path).
pub fn write_atomic<T, E>(
    path: &Path,
    fill: impl FnOnce(&mut File) -> Result<T, E>,
    io_error: impl Fn(&Path, std::io::Error) -> E,
) -> Result<T, E> {
    let mut tmp = temp_file_beside(path).map_err(|e| io_error(parent_dir(path), e))?;
    let value = fill(tmp.as_file_mut())?;
    fault_point("atomic-written");
    tmp.persist(path).map_err(|e| io_error(path, e.error))?;
    Ok(value)
}

/// A new temporary file beside `path`, named as every kpack temporary is (so a killed run's
/// is swept) and, on Unix, with mode 0666 less the umask rather than `tempfile`'s private
/// 0600 (Windows files carry no mode; the new file inherits its directory's ACL): for writers that fill a file over many calls
/// and `persist` it over `path` at the end ([`write_atomic`] for one call). Dropped
/// unpersisted, it is removed.
pub fn temp_file_beside(path: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    let prefix = temp_name_prefix();
    let mut builder = temp_builder(&prefix);
    readable_by_others(&mut builder)
        .tempfile_in(parent_dir(path))
        .map_err(tempfile_error)
}

/// `builder` making files with mode 0666 less the umask (Unix; on Windows as it is).
fn readable_by_others<'a, 'b>(
    builder: &'b mut tempfile::Builder<'a, 'static>,
) -> &'b mut tempfile::Builder<'a, 'static> {
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    builder
}

/// Makes `path` a symbolic link to `target`, replacing what was there in one rename (so a
/// reader sees the old entry or the new link, never neither); made as [`crate::symlink`]
/// makes links.
pub fn symlink_atomic(target: &Path, path: &Path) -> std::io::Result<()> {
    let prefix = temp_name_prefix();
    temp_builder(&prefix)
        .make_in(parent_dir(path), |tmp| crate::symlink(target, tmp))
        .map_err(tempfile_error)?
        .persist(path)
        .map_err(|e| e.error)?;
    Ok(())
}

/// A new temporary directory in `dir`, named as every kpack temporary is (so a killed run's
/// is swept from `dir`); removed with its contents when dropped.
pub fn temp_dir_in(dir: &Path) -> std::io::Result<tempfile::TempDir> {
    let prefix = temp_name_prefix();
    temp_builder(&prefix)
        .tempdir_in(dir)
        .map_err(tempfile_error)
}
