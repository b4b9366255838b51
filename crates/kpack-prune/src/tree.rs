//! A directory pruned into a tree: each file as it is decided ([`crate::database`] for
//! kernel-database files, [`crate::job`] for binaries), directories made again, symbolic
//! links kept as links.

use std::path::Path;

use crate::PruneTreeError;
use crate::error::io_at;
use crate::job::{PruneJob, is_prunable};
use crate::report::Action;

impl PruneJob<'_> {
    /// Prunes the tree `input` into the (created) directory `staged`, to be published at `to`.
    pub(crate) fn tree(
        &mut self,
        input: &Path,
        staged: &Path,
        to: &Path,
    ) -> Result<(), PruneTreeError> {
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
                kpack_fs::symlink(&target, &dst).map_err(io_at(&dst))?;
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
}
