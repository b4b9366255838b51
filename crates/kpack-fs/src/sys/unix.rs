//! Unix: signals (`rustix`), `std::os::unix`.

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Whether a process `pid` exists (signal 0: "no such process" is the only no).
pub(crate) fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(e) if e == rustix::io::Errno::SRCH
    )
}

/// `kill -9` of this process: no destructor, no flush, exactly what a crash leaves.
pub(crate) fn kill_self() -> ! {
    use rustix::process::{Signal, getpid, kill_process};
    let _ = kill_process(getpid(), Signal::KILL);
    // SIGKILL cannot be caught or blocked; wait for it rather than run on.
    loop {
        std::thread::park();
    }
}

pub(crate) fn make_symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

pub(crate) fn positioned_read(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

pub(crate) fn metadata_mode(meta: &std::fs::Metadata) -> u32 {
    meta.permissions().mode() & 0o7777
}

pub(crate) fn apply_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// A journal's paths: each path's bytes, then a NUL (which no path contains).
pub(crate) fn encode_path(path: &Path, out: &mut Vec<u8>) {
    out.extend_from_slice(path.as_os_str().as_bytes());
    out.push(0);
}

/// The paths [`encode_path`] wrote, in order.
pub(crate) fn decode_paths(bytes: &[u8]) -> Vec<PathBuf> {
    bytes
        .split(|&b| b == 0)
        .map(|p| PathBuf::from(OsStr::from_bytes(p)))
        .collect()
}

pub(crate) fn remove_dir_tree(path: &Path) -> std::io::Result<()> {
    std::fs::remove_dir_all(path)
}
