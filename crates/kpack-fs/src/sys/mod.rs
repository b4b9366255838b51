//! What kpack-fs asks of the operating system that `std` does not say the same way on Unix
//! and Windows: whether a process is alive (the sweep), killing this process (the crash-test
//! hook), symbolic links, a positioned read, permission bits, removing a tree that holds
//! read-only files, and a path's bytes in a publish journal. One
//! module per system, with the same functions.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;

use std::path::Path;

/// Makes `link` a symbolic link to `target` (a relative `target` is relative to `link`'s
/// directory). On Windows, where a link is made for a file or for a directory, it is a
/// directory link when `target` names a directory now, else a file link; making links there
/// needs the privilege or developer mode that Windows asks for.
pub fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    make_symlink(target, link)
}

/// Reads exactly `buf.len()` bytes of `file` at `offset`, without moving the position where
/// the next sequential read or write of `file` happens (a writer reading back what it wrote
/// keeps appending where it was). An end of file before `buf` is full is `UnexpectedEof`.
pub fn read_exact_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    positioned_read(file, buf, offset)
}

/// The Unix permission bits (`0o7777`) of what `meta` describes. Windows has one permission
/// bit, read-only: there a file reads as `0o644`, a directory as `0o755`, each without its
/// write bits when read-only (tarballs and wheels read on Windows carry their members' own
/// modes through unchanged; these are only for trees read from a Windows disk).
pub fn mode(meta: &std::fs::Metadata) -> u32 {
    metadata_mode(meta)
}

/// Gives `path` the Unix permission bits `mode`; on Windows, the read-only attribute when
/// `mode` lacks the owner's write bit (`0o200`), which is all of `mode` Windows can keep.
pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    apply_mode(path, mode)
}

/// Removes the directory `path` and everything below it, as [`std::fs::remove_dir_all`], read-only
/// files included: Windows refuses to delete a file with the read-only attribute (which
/// [`set_mode`] gives a member whose mode lacks the write bit), where Unix asks only for the
/// directory's write permission.
pub fn remove_tree(path: &Path) -> std::io::Result<()> {
    remove_dir_tree(path)
}
