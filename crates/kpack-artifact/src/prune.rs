//! `kpack prune` over files, directories and artifacts: every fat binary keeps only the
//! device code of the selected targets ([`kpack_pipeline::prune`]), and the kernel-database
//! files of dropped targets (as the [`handlers`](crate::handlers) classify them) are left out.
//!
//! One input file is written to the output path; one directory becomes the output tree (its
//! other files copied, symbolic links kept as links); several inputs go into the output
//! directory under their own names. A fat binary that is not a linked ELF file with a
//! `.hip_fatbin` (an object, an `ar` archive, a kpacked binary) is copied as it is in a tree
//! and an error when named alone.
//!
//! Every output is staged and published together ([`kpack_fs::Stage`]) once every input is
//! done and every named target was found in some input: on any error, nothing is written.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use kpack_elf::rewrite::RewriteError;
use kpack_fs::{Replace, Stage};
use kpack_pipeline::prune::{PruneError, PrunedFile, Selection, check_named, prune_elf};
use kpack_pipeline::prune_ar::{holds_prunable_member, prune_archive_bytes};
use kpack_pipeline::prune_offload::{holds_offload, prune_offload_bytes, write_pruned};
use kpack_target::TargetId;

use crate::handlers::{self, Handler};

/// Why a prune failed. Nothing is left behind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PruneTreeError {
    /// One input file could not be pruned.
    #[error("{}: {source}", path.display())]
    File {
        /// The input file.
        path: PathBuf,
        /// What went wrong.
        source: Box<PruneError>,
    },
    /// A named target matches nothing in the inputs, or a container (wheel, tarball) cannot
    /// be read or written.
    #[error(transparent)]
    Prune(Box<PruneError>),
    /// Reading or writing failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

impl From<kpack_pipeline::SourceError> for PruneTreeError {
    fn from(e: kpack_pipeline::SourceError) -> Self {
        PruneTreeError::Prune(Box::new(e.into()))
    }
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> PruneTreeError + '_ {
    move |source| PruneTreeError::Io {
        path: path.to_owned(),
        source,
    }
}

/// What happened to one input file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// A fat binary, pruned.
    Pruned(PrunedFile),
    /// A file without device code to prune, copied (or a symbolic link, recreated).
    Copied,
    /// A kernel-database file of a dropped target, left out.
    Omitted {
        /// The handler that classified it.
        handler: &'static str,
        /// Its target (or family).
        target: String,
    },
}

/// One input file and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileOutcome {
    /// The input file.
    pub input: PathBuf,
    /// Where it was written (none when omitted).
    pub output: Option<PathBuf>,
    /// What was done.
    #[serde(flatten)]
    pub action: Action,
}

/// What a prune did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PruneReport {
    /// Every input file, in input and tree order.
    pub files: Vec<FileOutcome>,
    /// Device targets kept, sorted.
    pub kept: Vec<String>,
    /// Device targets dropped (code objects and database files), sorted.
    pub dropped: Vec<String>,
}

/// Prunes `inputs` (files or directories) into `output`: a file for one input file, a tree
/// for one directory, a directory holding each input under its name for several.
pub fn prune(
    inputs: &[PathBuf],
    output: &Path,
    selection: &Selection,
    allow_empty: bool,
) -> Result<PruneReport, PruneTreeError> {
    prune_each(inputs, output, selection, allow_empty, &mut |_, _, _, _| {
        Ok(false)
    })
}

/// Prunes one input file into the output `to`; `false` when the file is not its to prune.
pub type FilePruner<'f> =
    dyn FnMut(&mut PruneJob<'_>, &mut Stage, &Path, &Path) -> Result<bool, PruneTreeError> + 'f;

/// [`prune`], each input file first offered to `container` (which prunes wheels and
/// tarballs member by member, through [`PruneJob::member`]).
pub fn prune_each(
    inputs: &[PathBuf],
    output: &Path,
    selection: &Selection,
    allow_empty: bool,
    container: &mut FilePruner<'_>,
) -> Result<PruneReport, PruneTreeError> {
    let mut stage = Stage::new();
    let mut job = PruneJob {
        selection,
        files: Vec::new(),
        present: BTreeSet::new(),
        kept: BTreeSet::new(),
        dropped: BTreeSet::new(),
    };
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
        } else if !container(&mut job, &mut stage, input, &to)? {
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

impl From<kpack_fs::StageError> for PruneTreeError {
    fn from(e: kpack_fs::StageError) -> Self {
        PruneTreeError::Io {
            path: e.path,
            source: e.source,
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

/// One prune in progress: what every input became, and the targets seen.
pub struct PruneJob<'s> {
    selection: &'s Selection,
    files: Vec<FileOutcome>,
    /// Every device target found (code objects and database files).
    present: BTreeSet<TargetId>,
    kept: BTreeSet<String>,
    dropped: BTreeSet<String>,
}

impl PruneJob<'_> {
    fn record(&mut self, input: &Path, output: Option<&Path>, action: Action) {
        if let Action::Pruned(p) = &action {
            self.present.extend(p.present());
            self.kept.extend(p.kept.iter().cloned());
            self.dropped.extend(p.dropped.iter().cloned());
        }
        self.files.push(FileOutcome {
            input: input.to_owned(),
            output: output.map(Path::to_owned),
            action,
        });
    }

    /// Prunes the fat binary `input` into the new file `staged`.
    fn binary(&self, input: &Path, staged: &Path) -> Result<PrunedFile, PruneTreeError> {
        let in_file = |source| PruneTreeError::File {
            path: input.to_owned(),
            source: Box::new(source),
        };
        let file = File::open(input).map_err(io_at(input))?;
        let mode = file.metadata().map_err(io_at(input))?.permissions();
        let map = kpack_pipeline::map_file(&file, input).map_err(|e| in_file(e.into()))?;
        prune_bytes(&map, Some(&map), staged, mode, self.selection).map_err(in_file)
    }

    /// Prunes the tree `input` into the (created) directory `staged`, to be published at `to`.
    fn tree(&mut self, input: &Path, staged: &Path, to: &Path) -> Result<(), PruneTreeError> {
        for entry in kpack_fs::walk(input) {
            let e = entry.map_err(|e| PruneTreeError::Io {
                path: e.path,
                source: e.source,
            })?;
            let dst = staged.join(&e.rel);
            let published = to.join(&e.rel);
            if e.file_type.is_dir() {
                std::fs::create_dir_all(&dst).map_err(io_at(&dst))?;
                continue;
            }
            if e.file_type.is_symlink() {
                let target = std::fs::read_link(&e.path).map_err(io_at(&e.path))?;
                std::os::unix::fs::symlink(&target, &dst).map_err(io_at(&dst))?;
                self.record(&e.path, Some(&published), Action::Copied);
                continue;
            }
            let rel = e.rel.to_string_lossy().replace('\\', "/");
            if let Some(omitted) = self.omitted(&rel) {
                self.record(&e.path, None, omitted);
                continue;
            }
            if is_prunable(&e.path)? {
                let pruned = self.binary(&e.path, &dst)?;
                self.record(&e.path, Some(&published), Action::Pruned(pruned));
                continue;
            }
            std::fs::copy(&e.path, &dst).map_err(io_at(&dst))?;
            self.record(&e.path, Some(&published), Action::Copied);
        }
        Ok(())
    }

    /// [`Action::Omitted`] when `rel` is a database file of a dropped target (its target
    /// counts as present either way).
    fn omitted(&mut self, rel: &str) -> Option<Action> {
        let (handler, arch) = Handler::ALL
            .iter()
            .find_map(|h| h.classify(rel).map(|a| (h.name(), a)))?;
        if let Some(t) = handlers::parse_target(&arch.target) {
            self.present.insert(t);
        }
        if self.keeps_database(&arch.target) {
            return None;
        }
        self.dropped.insert(arch.target.clone());
        Some(Action::Omitted {
            handler,
            target: arch.target,
        })
    }

    /// Decides and records what becomes of the member `rel` (`/`-separated) of a
    /// container, shown as `shown` and to be written as `published`, as a file of a tree:
    /// a database file of a dropped target is left out, a linked fat binary is pruned into
    /// the new file `spool` with permission bits `mode`, anything else is to be copied.
    pub fn member(
        &mut self,
        shown: &Path,
        rel: &str,
        bytes: &kpack_pipeline::FileBytes,
        mode: u32,
        spool: &Path,
        published: &Path,
    ) -> Result<MemberFate, PruneTreeError> {
        use std::os::unix::fs::PermissionsExt;
        if let Some(omitted) = self.omitted(rel) {
            self.record(shown, None, omitted);
            return Ok(MemberFate::Omitted);
        }
        if !is_prunable_bytes(bytes) {
            self.record(shown, Some(published), Action::Copied);
            return Ok(MemberFate::Copied);
        }
        let mode = std::fs::Permissions::from_mode(mode);
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
    pub fn copied(&mut self, shown: &Path, published: &Path) {
        self.record(shown, Some(published), Action::Copied);
    }

    /// Whether a database file of `target` (a target or a family such as `gfx11xx`) stays: a
    /// family stays unless a `--keep` list names none of its processors.
    fn keeps_database(&self, target: &str) -> bool {
        match (handlers::parse_family(target), self.selection) {
            (Some(family), Selection::Keep(named)) => named
                .iter()
                .any(|n| handlers::family_covers(family, n.processor())),
            (Some(_), Selection::Drop(_)) => true,
            (None, _) => handlers::parse_target(target).is_none_or(|t| self.selection.keeps(&t)),
        }
    }
}

/// Prunes a fat binary ([`prune_elf`]), OffloadBinary device code ([`prune_offload_bytes`])
/// or a static library ([`prune_archive_bytes`]) into the new file `output`.
fn prune_bytes(
    bytes: &[u8],
    mapping: Option<&kpack_pipeline::FileBytes>,
    output: &Path,
    mode: std::fs::Permissions,
    selection: &Selection,
) -> Result<PrunedFile, PruneError> {
    let (pruned_bytes, pruned) = if kpack_elf::ar::is_ar(bytes) {
        prune_archive_bytes(bytes, selection)?
    } else if holds_offload(bytes) {
        prune_offload_bytes(bytes, selection)?
    } else {
        return prune_elf(bytes, mapping, output, Some(mode), selection);
    };
    write_pruned(output, &pruned_bytes, Some(mode))?;
    Ok(pruned)
}

/// Whether `path` is a linked ELF file with device code in `.hip_fatbin`, OffloadBinary
/// device code, or a static library with a member holding some (what prune rewrites);
/// anything else in a tree is copied.
fn is_prunable(path: &Path) -> Result<bool, PruneTreeError> {
    let file = File::open(path).map_err(io_at(path))?;
    let map = kpack_pipeline::map_file(&file, path).map_err(|e| PruneTreeError::File {
        path: path.to_owned(),
        source: Box::new(e.into()),
    })?;
    Ok(is_prunable_bytes(&map))
}

/// [`is_prunable`] of a file's bytes.
fn is_prunable_bytes(bytes: &[u8]) -> bool {
    // A file that does not parse as ELF is not ours to judge here: it is copied.
    holds_offload(bytes)
        || holds_prunable_member(bytes)
        || kpack_elf::is_elf(bytes)
            && kpack_elf::inspect(bytes)
                .is_ok_and(|f| f.kind == kpack_elf::FatBinaryKind::Fat && !f.is_relocatable())
}
