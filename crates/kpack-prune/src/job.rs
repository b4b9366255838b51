//! One prune in progress ([`PruneJob`]): what every input file became and the targets seen,
//! and one binary pruned by its kind: a fat binary ([`crate::fatbin`]), OffloadBinary device
//! code ([`crate::offload`]) or a static library ([`crate::ar`]).

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;

use kpack_target::TargetId;

use crate::ar::{holds_prunable_member, prune_archive_bytes};
use crate::error::io_at;
use crate::fatbin::prune_elf;
use crate::offload::{holds_offload, prune_offload_bytes, write_pruned};
use crate::report::{Action, FileOutcome};
use crate::{PruneError, PruneTreeError, PrunedFile, Selection};

/// One prune in progress: what every input became, and the targets seen.
pub(crate) struct PruneJob<'s> {
    pub(crate) selection: &'s Selection,
    pub(crate) files: Vec<FileOutcome>,
    /// Every device target found (code objects and database files).
    pub(crate) present: BTreeSet<TargetId>,
    pub(crate) kept: BTreeSet<String>,
    pub(crate) dropped: BTreeSet<String>,
}

impl<'s> PruneJob<'s> {
    pub(crate) fn new(selection: &'s Selection) -> Self {
        PruneJob {
            selection,
            files: Vec::new(),
            present: BTreeSet::new(),
            kept: BTreeSet::new(),
            dropped: BTreeSet::new(),
        }
    }

    /// Notes what became of `input` and the targets it held.
    pub(crate) fn record(&mut self, input: &Path, output: Option<&Path>, action: Action) {
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
    pub(crate) fn binary(&self, input: &Path, staged: &Path) -> Result<PrunedFile, PruneTreeError> {
        let in_file = |source| PruneTreeError::File {
            path: input.to_owned(),
            source: Box::new(source),
        };
        let file = File::open(input).map_err(io_at(input))?;
        let mode = kpack_fs::mode(&file.metadata().map_err(io_at(input))?);
        let map = kpack_pipeline::map_file(&file, input).map_err(|e| in_file(e.into()))?;
        prune_bytes(&map, Some(&map), staged, mode, self.selection).map_err(in_file)
    }
}

/// Prunes a fat binary ([`prune_elf`]), OffloadBinary device code ([`prune_offload_bytes`])
/// or a static library ([`prune_archive_bytes`]) into the new file `output`.
pub(crate) fn prune_bytes(
    bytes: &[u8],
    mapping: Option<&kpack_pipeline::FileBytes>,
    output: &Path,
    mode: u32,
    selection: &Selection,
) -> Result<PrunedFile, PruneError> {
    let (pruned_bytes, pruned) = if kpack_ar::is_ar(bytes) {
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
pub(crate) fn is_prunable(path: &Path) -> Result<bool, PruneTreeError> {
    let file = File::open(path).map_err(io_at(path))?;
    let map = kpack_pipeline::map_file(&file, path).map_err(|e| PruneTreeError::File {
        path: path.to_owned(),
        source: Box::new(e.into()),
    })?;
    Ok(is_prunable_bytes(&map))
}

/// [`is_prunable`] of a file's bytes.
pub(crate) fn is_prunable_bytes(bytes: &[u8]) -> bool {
    // A file that does not parse as ELF is not ours to judge here: it is copied.
    holds_offload(bytes)
        || holds_prunable_member(bytes)
        || kpack_elf::is_elf(bytes)
            && kpack_elf::inspect(bytes)
                .is_ok_and(|f| f.kind == kpack_elf::FatBinaryKind::Fat && !f.is_relocatable())
}
