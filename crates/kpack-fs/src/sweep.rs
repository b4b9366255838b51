//! Removing what killed runs left.

use std::ffi::OsStr;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How every temporary name kpack creates begins; the creating process's id and `-` follow.
pub const TEMP_PREFIX: &str = ".kpack-tmp-";

/// Age after which a temporary entry is swept even if a process with its owner's id is alive
/// (the id may have been reused, or belong to another PID namespace); no kpack job runs
/// this long.
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The process id in one of kpack's temporary names (`.kpack-tmp-<pid>-…`), or `None` for any
/// other name. The names earlier kpack versions used are recognised too, so that what they
/// left is swept as well: `.<out>.kpack-split-tmp-<pid>-<n>`, `.kpack-recombine-tmp-<pid>-<n>`
/// (staged artifact trees) and `.<file>.kpack-tmp-<pid>` (a file being written).
pub fn temp_owner(name: &OsStr) -> Option<u32> {
    let name = name.to_str()?;
    if let Some(rest) = name.strip_prefix(TEMP_PREFIX) {
        let (pid, _) = rest.split_once('-')?;
        return number(pid);
    }
    if !name.starts_with('.') {
        return None;
    }
    for legacy in [".kpack-split-tmp-", ".kpack-recombine-tmp-"] {
        if let Some((_, rest)) = name.split_once(legacy) {
            let (pid, n) = rest.split_once('-')?;
            return number(n).and(number(pid));
        }
    }
    let (_, pid) = name.rsplit_once(".kpack-tmp-")?;
    number(pid)
}

/// `s` as a decimal number, digits only.
fn number(s: &str) -> Option<u32> {
    s.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| s.parse().ok())
        .flatten()
}

/// Removes from `dir` (not below it) the temporary entries of kpack runs that are gone:
/// those whose owner process no longer exists, and those older than [`STALE_AFTER`]. Another
/// live run's temporaries, and this process's, are kept; so is every name that is not one of
/// ours. A staging directory holding a publish journal (its run was killed while publishing,
/// see [`crate::Stage`]) is first completed: its job's remaining outputs are renamed into
/// place, in order, from every staging directory of that job. A missing `dir` has nothing to
/// sweep. Returns the temporaries removed.
pub fn sweep(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        other => other?,
    };
    let me = std::process::id();
    let now = SystemTime::now();
    let mut removed = Vec::new();
    for e in entries {
        let e = e?;
        let Some(owner) = temp_owner(&e.file_name()) else {
            continue;
        };
        let path = e.path();
        let meta = match path.symlink_metadata() {
            // Its owner finished with it meanwhile.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            other => other?,
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age > STALE_AFTER);
        if !old && (owner == me || crate::sys::alive(owner)) {
            continue;
        }
        let gone = if meta.is_dir() {
            crate::journal::roll_forward(&path).and_then(|()| {
                match crate::sys::remove_tree(&path) {
                    Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
                    other => other,
                }
            })
        } else {
            std::fs::remove_file(&path)
        };
        match gone {
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", path.display()),
                ));
            }
            Ok(()) => removed.push(path),
        }
    }
    removed.sort();
    Ok(removed)
}
