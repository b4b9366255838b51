//! Windows: processes through `windows-sys` (the Win32 calls std does not wrap), everything
//! else through `std::os::windows`. The only unsafe code of kpack-fs; every call's contract is
//! stated where it is made.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use windows_sys::Win32::Foundation::{
    CloseHandle, ERROR_INVALID_PARAMETER, GetLastError, WAIT_OBJECT_0,
};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE,
    TerminateProcess, WaitForSingleObject,
};

/// The exit status [`kill_self`] leaves: 128 + 9, what a Unix shell reports for `kill -9`.
pub(crate) const KILLED_EXIT_CODE: u32 = 137;

/// Whether a process `pid` exists: it does unless Windows says there is no such process
/// (`OpenProcess` refuses the id as invalid) or the process has exited (its handle is
/// signalled). A process we may not open (another user's) counts as alive.
pub(crate) fn alive(pid: u32) -> bool {
    // SAFETY: OpenProcess takes plain values and returns a handle we own, or null.
    let process = unsafe {
        OpenProcess(
            PROCESS_QUERY_LIMITED_INFORMATION | PROCESS_SYNCHRONIZE,
            0,
            pid,
        )
    };
    if process.is_null() {
        // SAFETY: reads this thread's last-error value, set by the failed OpenProcess.
        return unsafe { GetLastError() } != ERROR_INVALID_PARAMETER;
    }
    // SAFETY: `process` is the live handle opened above, with SYNCHRONIZE access; a zero
    // timeout only polls.
    let exited = unsafe { WaitForSingleObject(process, 0) } == WAIT_OBJECT_0;
    // SAFETY: `process` is ours and closed once, here.
    unsafe { CloseHandle(process) };
    !exited
}

/// `TerminateProcess` of this process: no destructor, no flush, exactly what a crash (or a
/// kill from the task manager) leaves; the exit status is [`KILLED_EXIT_CODE`].
pub(crate) fn kill_self() -> ! {
    // SAFETY: the pseudo-handle of the current process needs no closing; TerminateProcess of
    // ourselves does not return when it succeeds.
    unsafe { TerminateProcess(GetCurrentProcess(), KILLED_EXIT_CODE) };
    // Only reached if Windows refused: end as abruptly as it can be done otherwise.
    std::process::abort()
}

/// A link is checked for after it is made: wine's `CreateSymbolicLinkW` reports success and
/// makes nothing, and an output tree silently without its links is worse than an error.
pub(crate) fn make_symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    if crate::parent_dir(link).join(target).is_dir() {
        std::os::windows::fs::symlink_dir(target, link)
    } else {
        std::os::windows::fs::symlink_file(target, link)
    }?;
    match std::fs::symlink_metadata(link) {
        Ok(meta) if meta.file_type().is_symlink() => Ok(()),
        _ => Err(std::io::Error::other(format!(
            "Windows reported the symbolic link to {} made, but there is none",
            target.display()
        ))),
    }
}

pub(crate) fn metadata_mode(meta: &std::fs::Metadata) -> u32 {
    let mode = if meta.is_dir() { 0o755 } else { 0o644 };
    if meta.permissions().readonly() {
        mode & !0o222
    } else {
        mode
    }
}

pub(crate) fn apply_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    let mut permissions = std::fs::metadata(path)?.permissions();
    permissions.set_readonly(mode & 0o200 == 0);
    std::fs::set_permissions(path, permissions)
}

/// `seek_read` moves the file's position on Windows, unlike `pread`: the position is put
/// back, whether the read succeeds or not.
pub(crate) fn positioned_read(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    let mut cursor = file;
    let position = cursor.stream_position()?;
    let mut read = 0;
    let result = loop {
        if read == buf.len() {
            break Ok(());
        }
        match file.seek_read(&mut buf[read..], offset + read as u64) {
            Ok(0) => break Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => read += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    cursor.seek(SeekFrom::Start(position))?;
    result
}

/// A journal's paths: each path's UTF-16 code units, little-endian, then a 0 unit (which no
/// path contains). Windows names are UTF-16 and need not be valid Unicode; this keeps them
/// exactly.
pub(crate) fn encode_path(path: &Path, out: &mut Vec<u8>) {
    for unit in path.as_os_str().encode_wide().chain([0]) {
        out.extend_from_slice(&unit.to_le_bytes());
    }
}

/// The paths [`encode_path`] wrote, in order (a trailing odd byte, which it never writes, is
/// ignored).
pub(crate) fn decode_paths(bytes: &[u8]) -> Vec<PathBuf> {
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    units
        .split(|&u| u == 0)
        .map(|p| PathBuf::from(OsString::from_wide(p)))
        .collect()
}

/// `remove_dir_all`, and when it is refused, again once every file below `path` is writable:
/// where Windows cannot delete with POSIX semantics (wine among them), a read-only file
/// refuses deletion.
pub(crate) fn remove_dir_tree(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            make_writable_below(path)?;
            std::fs::remove_dir_all(path)
        }
        other => other,
    }
}

/// Clears the read-only attribute of every file below `dir` (links are not followed).
fn make_writable_below(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            make_writable_below(&entry.path())?;
        } else if !kind.is_symlink() {
            let mut permissions = entry.metadata()?.permissions();
            if permissions.readonly() {
                // Windows: clears FILE_ATTRIBUTE_READONLY only (the lint's concern, a
                // world-writable Unix file, does not arise).
                #[allow(clippy::permissions_set_readonly_false)]
                permissions.set_readonly(false);
                std::fs::set_permissions(entry.path(), permissions)?;
            }
        }
    }
    Ok(())
}
