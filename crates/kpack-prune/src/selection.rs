//! Which device code a prune keeps: the targets named on the command line ([`Selection`])
//! and what they match.

use std::collections::BTreeSet;

use kpack_target::TargetId;

use crate::PruneError;

/// Why a name given to `--keep` or `--drop` is not a target.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetNameError {
    /// Not a target id.
    #[error(transparent)]
    Id(#[from] kpack_target::TargetError),
    /// A target id whose processor no AMDGPU code object names.
    #[error(
        "{0:?} is not an AMDGPU processor (expected e.g. gfx90a, gfx90a:xnack-, gfx11-generic, amdgcnspirv)"
    )]
    NotAmdgpu(String),
}

/// A target named on the command line: a target id whose processor is an AMDGPU processor
/// (`gfx90a`, `gfx90a:xnack-`, `gfx11-generic`) or the portable SPIR-V target
/// (`amdgcnspirv`); an error saying what is wrong otherwise.
pub fn parse_target_name(s: &str) -> Result<TargetId, TargetNameError> {
    let t = TargetId::parse(s)?;
    let known = t.is_spirv()
        || (0..=u8::MAX).any(|m| kpack_target::processor_for_mach(m) == Some(t.processor()));
    if !known {
        return Err(TargetNameError::NotAmdgpu(t.processor().to_owned()));
    }
    Ok(t)
}

/// Which device code a prune keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Keep the code objects each of these targets runs: a bare processor (`gfx90a`) keeps
    /// every variant of it; `gfx90a:xnack-` keeps `gfx90a:xnack-` and the code objects that
    /// leave xnack open (`gfx90a`). Generic targets (`gfx11-generic`) are named like any other.
    Keep(Vec<TargetId>),
    /// Drop these targets' code objects: `gfx90a` drops every variant of the processor,
    /// `gfx90a:xnack+` exactly that one.
    Drop(Vec<TargetId>),
}

impl Selection {
    /// The targets named on the command line.
    pub fn named(&self) -> &[TargetId] {
        match self {
            Selection::Keep(t) | Selection::Drop(t) => t,
        }
    }

    /// Whether the named target `named` matches the code object target `target`.
    pub fn matches(&self, named: &TargetId, target: &TargetId) -> bool {
        let bare = named.features().is_empty() && named.processor() == target.processor();
        bare || match self {
            Selection::Keep(_) => target.is_compatible_with_agent(named),
            Selection::Drop(_) => named == target,
        }
    }

    /// Whether a code object built for `target` stays.
    pub fn keeps(&self, target: &TargetId) -> bool {
        let named = self.named().iter().any(|n| self.matches(n, target));
        match self {
            Selection::Keep(_) => named,
            Selection::Drop(_) => !named,
        }
    }
}

/// The named targets of `selection` that match none of `present`; an error naming them.
pub fn check_named(selection: &Selection, present: &BTreeSet<TargetId>) -> Result<(), PruneError> {
    let missing: Vec<TargetId> = selection
        .named()
        .iter()
        .filter(|n| !present.iter().any(|t| selection.matches(n, t)))
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(PruneError::NotPresent {
        named: missing,
        present: present.iter().map(ToString::to_string).collect(),
    })
}
