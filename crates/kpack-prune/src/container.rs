//! What pruning a wheel and a tarball share: the output staged, and each member decided as a
//! file of a tree would be ([`PruneJob::member`]) and written from its own bytes or from its
//! pruned form in a spool, one member at a time.

use std::io::Read;
use std::path::{Path, PathBuf};

use kpack_fs::{Replace, Stage};
use kpack_inputs::{Input, member_path};
use kpack_pipeline::SourceError;
use kpack_pipeline::error::io_error;

use crate::PruneTreeError;
use crate::job::{PruneJob, is_prunable_bytes, prune_bytes};
use crate::report::Action;

/// The error of the wheel or tarball being pruned (read or written).
pub(crate) fn container_error(e: impl Into<SourceError>) -> PruneTreeError {
    e.into().into()
}

/// Where a container's output is written, and where its pruned members are spooled.
pub(crate) struct Staged {
    /// The output file in the stage.
    pub(crate) path: PathBuf,
    /// The directory holding the member being pruned (removed with the stage).
    spool: tempfile::TempDir,
}

pub(crate) fn stage_output(stage: &mut Stage, to: &Path) -> Result<Staged, PruneTreeError> {
    let path = stage.add(to, Replace::Allowed)?;
    let dir = kpack_fs::parent_dir(&path);
    let spool = kpack_fs::temp_dir_in(dir).map_err(io_error(dir))?;
    Ok(Staged { path, spool })
}

/// Writes a member into a container: its length, its content, and the file the content is
/// read from (for errors).
pub(crate) type WriteMember<'w> =
    dyn FnMut(u64, &mut dyn Read, &Path) -> Result<(), PruneTreeError> + 'w;

/// Decides what becomes of the member `input` and hands `write` the bytes to write (the
/// member's own, or its pruned form from the spool), unless it is left out.
pub(crate) fn each_member(
    job: &mut PruneJob<'_>,
    staged: &Staged,
    to: &Path,
    input: &Input<'_>,
    write: &mut WriteMember<'_>,
) -> Result<(), PruneTreeError> {
    let rel = input.member.unwrap_or_default();
    let spool = staged.spool.path().join("member");
    let published = member_path(to, rel);
    match job.member(
        input.shown,
        rel,
        input.bytes,
        input.mode,
        &spool,
        &published,
    )? {
        MemberFate::Omitted => Ok(()),
        MemberFate::Copied => write(input.bytes.len() as u64, &mut &input.bytes[..], input.shown),
        MemberFate::Pruned => {
            let file = std::fs::File::open(&spool).map_err(io_error(&spool))?;
            let len = file.metadata().map_err(io_error(&spool))?.len();
            let mut content = std::io::BufReader::with_capacity(1 << 20, file);
            write(len, &mut content, &spool)?;
            std::fs::remove_file(&spool).map_err(io_error(&spool))?;
            Ok(())
        }
    }
}

/// What became of a member of a container ([`PruneJob::member`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberFate {
    /// Pruned into the spool file given.
    Pruned,
    /// To be copied as it is.
    Copied,
    /// Left out (a database file of a dropped target).
    Omitted,
}

impl PruneJob<'_> {
    /// Decides and records what becomes of the member `rel` (`/`-separated) of a
    /// container, shown as `shown` and to be written as `published`, as a file of a tree:
    /// a database file of a dropped target is left out, a linked fat binary is pruned into
    /// the new file `spool` with permission bits `mode`, anything else is to be copied.
    pub(crate) fn member(
        &mut self,
        shown: &Path,
        rel: &str,
        bytes: &kpack_pipeline::FileBytes,
        mode: u32,
        spool: &Path,
        published: &Path,
    ) -> Result<MemberFate, PruneTreeError> {
        if let Some(omitted) = self.omitted(rel) {
            self.record(shown, None, omitted);
            return Ok(MemberFate::Omitted);
        }
        if !is_prunable_bytes(bytes) {
            self.record(shown, Some(published), Action::Copied);
            return Ok(MemberFate::Copied);
        }
        let pruned =
            prune_bytes(bytes, Some(bytes), spool, mode, self.selection).map_err(|source| {
                PruneTreeError::File {
                    path: shown.to_owned(),
                    source: Box::new(source),
                }
            })?;
        self.record(shown, Some(published), Action::Pruned(pruned));
        Ok(MemberFate::Pruned)
    }

    /// Records a member copied as it is without a look at its bytes (a symbolic link).
    pub(crate) fn copied(&mut self, shown: &Path, published: &Path) {
        self.record(shown, Some(published), Action::Copied);
    }
}
