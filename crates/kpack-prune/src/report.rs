//! What a prune did: per binary ([`PrunedFile`]), per input file ([`FileOutcome`]) and in
//! all ([`PruneReport`]); their JSON form is `kpack prune --json`'s.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kpack_target::TargetId;

use crate::PruneError;

/// What pruning one binary did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PrunedFile {
    /// Size of the input.
    pub input_size: u64,
    /// Size of the output.
    pub output_size: u64,
    /// Size of `.hip_fatbin`'s contents in the input.
    pub fatbin_size: u64,
    /// Size of the packed pruned bundles (the new `.hip_fatbin`).
    pub pruned_fatbin_size: u64,
    /// File bytes of the old `.hip_fatbin` released (whole pages).
    pub removed: u64,
    /// Bundles rewritten (the others kept every entry and were copied).
    pub bundles_rewritten: usize,
    /// Bundles in `.hip_fatbin`.
    pub bundles: usize,
    /// Wrappers repointed.
    pub wrappers: usize,
    /// Device targets kept, sorted.
    pub kept: Vec<String>,
    /// Device targets dropped, sorted.
    pub dropped: Vec<String>,
}

impl PrunedFile {
    /// [`PruneError::Empty`] when every device target was dropped.
    pub(crate) fn check_not_empty(&self) -> Result<(), PruneError> {
        if self.kept.is_empty() && !self.dropped.is_empty() {
            return Err(PruneError::Empty {
                dropped: self.dropped.clone(),
            });
        }
        Ok(())
    }

    /// Every device target the input held, sorted.
    pub(crate) fn present(&self) -> BTreeSet<TargetId> {
        self.kept
            .iter()
            .chain(&self.dropped)
            .filter_map(|t| TargetId::parse(t).ok())
            .collect()
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
