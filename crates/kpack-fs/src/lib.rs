//! Outputs written so that a failed or killed run (`kill -9` included) never leaves a partial
//! file under a final name, and the one sorted tree walk every kpack crate uses.
//!
//! * [`write_atomic`] and [`symlink_atomic`]: one file (or link), made under a temporary name
//!   beside its final path and renamed over it (`tempfile`'s `persist`).
//! * [`Stage`]: every output of one job (a host binary and its archives, an artifact tree)
//!   written into hidden staging directories beside the final paths, and published together
//!   in an order the caller chooses (what refers to other outputs last).
//! * [`sweep`]: removes what a killed run left. Every temporary name kpack creates is
//!   `.kpack-tmp-<pid>-<random>` ([`TEMP_PREFIX`], then the id of the creating process), so a
//!   later run can tell its own leftovers from anything else, and a dead run's from a live
//!   one's: an entry is swept only when its process is gone or it is older than
//!   [`STALE_AFTER`]. A killed run's job that had begun publishing is completed, not
//!   discarded (see [`Stage`]).
//! * [`walk`]: every entry below a directory, sorted by file name (`walkdir`), errors reported.
//! * [`fault_point`]: the test hook that lets crash tests kill the real binary at a named
//!   point.
//! * [`OutputNames`]: the names Windows cannot hold (device names, refused characters, a
//!   trailing dot or space, members differing only in case), refused before an output is
//!   written, on Windows and for outputs meant for Windows ([`NameRules`]).
//! * [`source_date_epoch`]: the timestamp every output carries, when the build sets one.
//! * [`symlink`], [`read_exact_at`], [`mode`] and [`set_mode`]: what `std` offers per system (`std::os::unix`,
//!   `std::os::windows`), one way for callers on both.
//!
//! On Windows every step works the same: a rename replaces an existing file
//! (`MoveFileExW` with `MOVEFILE_REPLACE_EXISTING`, which `std::fs::rename` and `tempfile`
//! use), staging directories, the publish journal and the sweep are the same, a process's
//! liveness is asked of `OpenProcess`, and the crash-test hook ends the process with
//! `TerminateProcess`.
//!
//! Why a crate of its own: the archive writer (kpack-archive), unbundle and transform
//! (kpack-pipeline), split and recombine (kpack-artifact), the C library installer
//! (kpack-capi-install) and the test kit all write or walk trees; the lowest of them,
//! kpack-archive, is about one format, and the installer does not depend on it.
//!
//! Depends on no other kpack crate (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

mod atomic;
mod epoch;
mod fault;
mod journal;
mod names;
mod stage;
mod sweep;
mod sys;
mod walk;

pub use atomic::{symlink_atomic, temp_dir_in, temp_file_beside, write_atomic};
pub use epoch::{SOURCE_DATE_EPOCH, source_date_epoch};
pub use fault::{FAULT_ENV, fault_point};
pub use names::{NameError, NameProblem, NameRules, OutputNames};
pub use stage::{Replace, Stage, StageError};
pub use sweep::{STALE_AFTER, TEMP_PREFIX, sweep, temp_owner};
pub use sys::{mode, read_exact_at, remove_tree, set_mode, symlink};
pub use walk::{WalkEntry, WalkError, slash_path, subdirs, walk};

use std::path::Path;

/// The directory a path's file lives in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The prefix of this process's temporary names: `.kpack-tmp-<pid>-`.
fn temp_name_prefix() -> String {
    format!("{TEMP_PREFIX}{}-", std::process::id())
}

/// A `tempfile` builder naming temporaries `.kpack-tmp-<pid>-<random>`.
fn temp_builder(prefix: &str) -> tempfile::Builder<'_, 'static> {
    let mut b = tempfile::Builder::new();
    b.prefix(prefix);
    b
}

/// The error of a `tempfile` call as kpack reports it. `tempfile` appends the name it tried,
/// in Rust's debug quoting (`No such file or directory (os error 2) at path
/// "/dir/.kpack-tmp-…"`), inside an error type it does not export, so only its text can be
/// cut; every caller names the path itself, in its own words. The kind is kept.
fn tempfile_error(e: std::io::Error) -> std::io::Error {
    let cause = e
        .get_ref()
        .map(ToString::to_string)
        .and_then(|text| Some(text.rsplit_once(" at path \"")?.0.to_owned()));
    match cause {
        Some(cause) => std::io::Error::new(e.kind(), cause),
        None => e,
    }
}
