//! Every output of one job staged, then published together.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use std::io::Write;

use crate::{
    fault_point, journal, parent_dir, sweep, temp_builder, temp_name_prefix, tempfile_error,
};

/// Whether publishing may replace what is at a final path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replace {
    /// Replace it (a rewritten host binary, a regenerated archive).
    Allowed,
    /// Refuse to (an artifact directory): checked for every output before the first rename.
    Refused,
}

/// A staging or publishing step that failed, with the path it concerns.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct StageError {
    /// The path.
    pub path: PathBuf,
    /// What happened (`AlreadyExists` for an output [`Replace::Refused`] finds in place).
    pub source: std::io::Error,
}

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> StageError + '_ {
    move |source| StageError {
        path: path.to_owned(),
        source,
    }
}

enum Output {
    /// One file or directory, renamed to `to`.
    One {
        staged: PathBuf,
        to: PathBuf,
        replace: Replace,
    },
    /// The entries of `staged`, each renamed into the existing directory `to`.
    Entries {
        staged: PathBuf,
        to: PathBuf,
        last: Box<dyn Fn(&OsStr) -> bool>,
    },
}

/// The outputs of one job (a transform's host binary and archives, a split's artifact tree),
/// written under temporary names and published together, so that a failure, a panic or a
/// `kill -9` before [`Stage::publish`] leaves nothing at any final path.
///
/// Each output is written into a hidden staging directory, `.kpack-tmp-<pid>-<random>`, in the
/// directory of its final path (so that publishing is a rename on one file system), under its
/// final name. Before the first staging directory is made in a directory, that directory is
/// [swept](crate::sweep) of what killed runs left there. Dropping an unpublished stage removes
/// everything staged.
///
/// Publishing renames the outputs in the order they were added. Several renames cannot be
/// one atomic step, so before the first of several, the stage writes a journal (the renames,
/// in order) into each of its staging directories: the job is then committed, and a
/// [sweep](crate::sweep) that finds a killed run's journal completes its renames rather than
/// discarding them. Add what refers to other outputs last (a host binary after the archives
/// its marker names, a generic artifact after the per-architecture ones): until a sweep has
/// run, a kill between the renames can leave only complete outputs that nothing published
/// refers to yet. An output staged as a whole new directory ([`Stage::add_tree`] on a missing
/// path) appears in one rename and needs no journal.
#[derive(Default)]
pub struct Stage {
    /// Staging directories, one per destination directory (kept as `TempDir`s so that they
    /// are removed with whatever is left in them when the stage is dropped).
    dirs: Vec<(PathBuf, TempDir)>,
    swept: BTreeSet<PathBuf>,
    outputs: Vec<Output>,
}

impl Stage {
    /// An empty stage.
    pub fn new() -> Stage {
        Stage::default()
    }

    fn sweep_once(&mut self, dir: &Path) {
        if self.swept.insert(dir.to_owned()) {
            // Housekeeping: a leftover we may not remove (another user's) must not stop the job.
            let _ = sweep(dir);
        }
    }

    /// The staging directory in `dir`, made (with `dir`, if missing) on first use, after
    /// sweeping `dir`. What is written there is published only through [`Stage::add`].
    pub fn dir_in(&mut self, dir: &Path) -> Result<PathBuf, StageError> {
        if let Some((_, t)) = self.dirs.iter().find(|(d, _)| d == dir) {
            return Ok(t.path().to_owned());
        }
        std::fs::create_dir_all(dir).map_err(at(dir))?;
        self.sweep_once(dir);
        // Absolute, so that a publish journal means the same from any working directory.
        let abs = std::path::absolute(dir).map_err(at(dir))?;
        let prefix = temp_name_prefix();
        let t = temp_builder(&prefix)
            .tempdir_in(&abs)
            .map_err(|e| at(dir)(tempfile_error(e)))?;
        let path = t.path().to_owned();
        self.dirs.push((dir.to_owned(), t));
        fault_point("stage-created");
        Ok(path)
    }

    /// Registers the output `to` and returns where to write it: its final name in the
    /// staging directory of its directory. Nothing is created at the returned path.
    pub fn add(&mut self, to: &Path, replace: Replace) -> Result<PathBuf, StageError> {
        let name = to.file_name().ok_or_else(|| StageError {
            path: to.to_owned(),
            source: std::io::Error::new(ErrorKind::InvalidInput, "the path has no file name"),
        })?;
        let staged = self.dir_in(parent_dir(to))?.join(name);
        self.outputs.push(Output::One {
            staged: staged.clone(),
            to: to.to_owned(),
            replace,
        });
        Ok(staged)
    }

    /// Registers the directory `to` as an output tree and returns the (created) directory to
    /// fill. When `to` does not exist, the whole tree is renamed to `to` in one step;
    /// otherwise each entry of the tree is renamed into `to`, sorted by name, the entries
    /// `last` selects after the others, and none may replace an entry of `to`. Both `to`
    /// and its directory are swept (a killed run may have staged in either).
    pub fn add_tree(
        &mut self,
        to: &Path,
        last: impl Fn(&OsStr) -> bool + 'static,
    ) -> Result<PathBuf, StageError> {
        let parent = parent_dir(to);
        if to.is_dir() {
            self.sweep_once(parent);
            let staged = self.dir_in(to)?;
            self.outputs.push(Output::Entries {
                staged: staged.clone(),
                to: to.to_owned(),
                last: Box::new(last),
            });
            Ok(staged)
        } else {
            let staged = self.add(to, Replace::Refused)?;
            std::fs::create_dir(&staged).map_err(at(&staged))?;
            Ok(staged)
        }
    }

    /// Publishes every output (see [`Stage`] for the order and what a kill can leave). A
    /// refused replacement is found before anything is renamed.
    pub fn publish(self) -> Result<(), StageError> {
        fault_point("before-publish");
        let mut renames: Vec<(PathBuf, PathBuf, Replace)> = Vec::new();
        for output in &self.outputs {
            match output {
                Output::One {
                    staged,
                    to,
                    replace,
                } => renames.push((staged.clone(), to.clone(), *replace)),
                Output::Entries { staged, to, last } => {
                    let mut names: Vec<_> = std::fs::read_dir(staged)
                        .and_then(|rd| rd.map(|e| e.map(|e| e.file_name())).collect())
                        .map_err(at(staged))?;
                    names.sort_by(|a, b| (last(a), a).cmp(&(last(b), b)));
                    renames.extend(
                        names
                            .into_iter()
                            .map(|n| (staged.join(&n), to.join(&n), Replace::Refused)),
                    );
                }
            }
        }
        for (_, to, replace) in &renames {
            if *replace == Replace::Refused && to.symlink_metadata().is_ok() {
                return Err(StageError {
                    path: to.clone(),
                    source: std::io::Error::new(
                        ErrorKind::AlreadyExists,
                        "already exists; refusing to replace it",
                    ),
                });
            }
        }
        if renames.len() > 1 {
            // From here on the job is committed: a sweep finding this journal in a killed
            // run's staging directory completes the renames instead of discarding them.
            let journal =
                journal::encode(renames.iter().map(|(s, t, _)| (s.as_path(), t.as_path())));
            for (_, staging) in &self.dirs {
                let path = staging.path().join(journal::NAME);
                crate::write_atomic(
                    &path,
                    |f| f.write_all(&journal).map_err(at(&path)),
                    |p, e| at(p)(e),
                )?;
            }
        }
        for (i, (staged, to, _)) in renames.iter().enumerate() {
            std::fs::rename(staged, to).map_err(at(to))?;
            if i == 0 && renames.len() > 1 {
                fault_point("publish-partial");
            }
        }
        Ok(())
    }
}
