//! `kpack prune`: every fat binary among the inputs keeps only the device code of the
//! selected targets ([`Selection`]), in every form inputs come in, one module per kind of
//! what is pruned: a linked fat binary ([`fatbin`]), OffloadBinary device code ([`offload`]),
//! a static library ([`ar`]), kernel-database files ([`database`]), a directory ([`tree`]),
//! a wheel ([`wheel`]) and a tarball ([`tarball`]), the last two member by member
//! ([`container`]) with the same decision per member as per file of a tree.
//!
//! One input file is written to the output path (a wheel or a tarball of the same form for
//! one container); one directory becomes the output tree (its other files copied, symbolic
//! links kept as links); several inputs go into the output directory under their own names.
//! A fat binary that is not a linked ELF file with a `.hip_fatbin` (an object, an `ar`
//! archive, a kpacked binary) is copied as it is in a tree and an error when named alone.
//!
//! Every output is staged and published together ([`kpack_fs::Stage`]) once every input is
//! done and every named target was found in some input: on any error, nothing is written.
//!
//! An application crate: it may depend on `kpack-inputs`, `kpack-package` (the
//! kernel-database handlers), `kpack-wheelfile` and everything below them, never on a front end.
//!
//! Depends on `kpack-ar`, `kpack-bundle`, `kpack-concurrency`, `kpack-elf`, `kpack-fs`,
//! `kpack-inputs`, `kpack-offload`, `kpack-package`, `kpack-pipeline`, `kpack-tar`, `kpack-target` and
//! `kpack-wheelfile` (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

mod ar;
mod container;
mod database;
mod error;
mod fatbin;
mod job;
mod offload;
mod report;
mod selection;
mod tarball;
mod tree;
mod wheel;

use std::path::{Path, PathBuf};

use kpack_elf::rewrite::RewriteError;
use kpack_fs::{Replace, Stage};
use kpack_inputs::Form;

pub use error::{PruneError, PruneTreeError};
pub use report::{Action, FileOutcome, PruneReport, PrunedFile};
pub use selection::{Selection, TargetNameError, parse_target_name};

use error::io_at;
use job::PruneJob;
use selection::check_named;

/// Prunes `inputs` (files, directories, wheels, tarballs) into `output`: a file for one
/// input file (a wheel or a tarball of the same form for one container), a tree for one
/// directory, a directory holding each input under its name for several.
pub fn prune(
    inputs: &[PathBuf],
    output: &Path,
    selection: &Selection,
    allow_empty: bool,
) -> Result<PruneReport, PruneTreeError> {
    let mut stage = Stage::new();
    let mut job = PruneJob::new(selection);
    let several = inputs.len() > 1;
    for input in inputs {
        let meta = std::fs::metadata(input).map_err(io_at(input))?;
        let to = if several {
            let name = input.file_name().ok_or_else(|| PruneTreeError::Io {
                path: input.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
            })?;
            output.join(name)
        } else {
            output.to_owned()
        };
        if meta.is_dir() {
            let staged = stage
                .add_tree(&to, |_| false)
                .map_err(PruneTreeError::from)?;
            job.tree(input, &staged, &to)?;
        } else {
            match Form::of(input) {
                Form::Wheel => wheel::prune_wheel(&mut job, &mut stage, input, &to)?,
                Form::Tarball => tarball::prune_tarball(&mut job, &mut stage, input, &to)?,
                Form::File => {
                    let staged = stage
                        .add(&to, Replace::Allowed)
                        .map_err(PruneTreeError::from)?;
                    match job.binary(input, &staged) {
                        Ok(pruned) => job.record(input, Some(&to), Action::Pruned(pruned)),
                        // A separated debug file has no device code to prune: it goes as it is,
                        // as it does in a tree.
                        Err(PruneTreeError::File { source, .. })
                            if matches!(*source, PruneError::Rewrite(RewriteError::DebugOnly)) =>
                        {
                            std::fs::copy(input, &staged).map_err(io_at(&staged))?;
                            job.record(input, Some(&to), Action::Copied);
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
    // Without device code in the inputs (host files, debug files) nothing is pruned, so a
    // named target cannot be told from a typo: there is nothing it should have matched.
    if !job.present.is_empty() {
        check_named(selection, &job.present).map_err(|e| PruneTreeError::Prune(Box::new(e)))?;
    }
    if !allow_empty {
        for f in &job.files {
            if let Action::Pruned(p) = &f.action {
                p.check_not_empty().map_err(|source| PruneTreeError::File {
                    path: f.input.clone(),
                    source: Box::new(source),
                })?;
            }
        }
    }
    stage.publish().map_err(PruneTreeError::from)?;
    Ok(PruneReport {
        files: job.files,
        kept: job.kept.into_iter().collect(),
        dropped: job.dropped.into_iter().collect(),
    })
}
