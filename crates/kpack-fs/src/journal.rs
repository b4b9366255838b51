//! The publish journal of a [`crate::Stage`]: the renames of one job, in order.
//!
//! Paths are stored as their bytes, each followed by a NUL (which no path contains):
//! `staged\0final\0staged\0final\0…`. Staged paths are absolute.

use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The journal's name in each staging directory of a publishing job.
pub(crate) const NAME: &str = ".kpack-publish";

pub(crate) fn encode<'a>(renames: impl Iterator<Item = (&'a Path, &'a Path)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (staged, to) in renames {
        for p in [staged, to] {
            out.extend_from_slice(p.as_os_str().as_bytes());
            out.push(0);
        }
    }
    out
}

/// Completes the renames of the journal in the staging directory `staging` (of a run that
/// is gone), in order, then removes every staging directory of that job. A rename that
/// cannot be done (its output was replaced by a directory since) is dropped with the rest.
pub(crate) fn roll_forward(staging: &Path) -> std::io::Result<()> {
    let bytes = match std::fs::read(staging.join(NAME)) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        other => other?,
    };
    let paths: Vec<&Path> = bytes
        .split(|&b| b == 0)
        .map(|p| Path::new(OsStr::from_bytes(p)))
        .collect();
    let mut staging_dirs = vec![staging.to_owned()];
    for pair in paths.chunks_exact(2) {
        let (staged, to) = (pair[0], pair[1]);
        if staged.symlink_metadata().is_ok() {
            let _ = std::fs::rename(staged, to);
        }
        if let Some(dir) = staged
            .parent()
            .filter(|d| !staging_dirs.iter().any(|s| s == d))
        {
            staging_dirs.push(dir.to_owned());
        }
    }
    for dir in staging_dirs {
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}
