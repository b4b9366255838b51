//! Kernel-database files (as [`kpack_package::handlers`] classify them): those of dropped
//! targets are left out, a family's unless a `--keep` list names none of its processors.

use kpack_package::handlers::{self, Handler};

use crate::Selection;
use crate::job::PruneJob;
use crate::report::Action;

impl PruneJob<'_> {
    /// [`Action::Omitted`] when `rel` is a database file of a dropped target (its target
    /// counts as present either way).
    pub(crate) fn omitted(&mut self, rel: &str) -> Option<Action> {
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
