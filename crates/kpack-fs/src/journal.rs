//! The publish journal of a [`crate::Stage`]: the renames of one job, in order.
//!
//! Paths are stored in the system's own form, each followed by a terminator no path contains
//! (`crate::sys::encode_path`: bytes and a NUL on Unix, UTF-16LE units and a 0 unit on
//! Windows): `staged\0final\0staged\0final\0…`. Staged paths are absolute. A journal is
//! read only by a later run on the same machine, so the two forms never meet.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::sys;

/// The journal's name in each staging directory of a publishing job.
pub(crate) const NAME: &str = ".kpack-publish";

pub(crate) fn encode<'a>(renames: impl Iterator<Item = (&'a Path, &'a Path)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (staged, to) in renames {
        sys::encode_path(staged, &mut out);
        sys::encode_path(to, &mut out);
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
    let paths: Vec<PathBuf> = sys::decode_paths(&bytes);
    let mut staging_dirs = vec![staging.to_owned()];
    for pair in paths.chunks_exact(2) {
        let (staged, to) = (&pair[0], &pair[1]);
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
        match crate::sys::remove_tree(&dir) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file name that is not valid Unicode: a lone UTF-16 surrogate on Windows, a byte that
    /// is not UTF-8 on Unix. Both systems allow such names.
    fn not_unicode() -> PathBuf {
        #[cfg(windows)]
        let name = <std::ffi::OsString as std::os::windows::ffi::OsStringExt>::from_wide(&[
            0x61, 0xD800, 0x62,
        ]);
        #[cfg(unix)]
        let name =
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"a\xffb").to_owned();
        PathBuf::from(name)
    }

    #[test]
    fn a_journal_keeps_every_path_exactly_names_that_are_not_unicode_included() {
        let dir = std::env::temp_dir();
        let odd = dir.join(not_unicode());
        assert!(odd.to_str().is_none());
        let staged = dir.join(".kpack-tmp-1-x").join("m.kpack");
        let renames = [
            (staged.as_path(), odd.as_path()),
            (odd.as_path(), staged.as_path()),
        ];
        let decoded = sys::decode_paths(&encode(renames.into_iter()));
        assert_eq!(decoded[..4], [staged.clone(), odd.clone(), odd, staged]);
    }
}
