//! Check 4's architectures: a per-arch or group artifact holds archives and database files of
//! its own architectures only. Its architectures are what its record says (kpack wrote it), or,
//! without a record (the reference's artifacts), what its archives declare and its component's
//! `.kpm` indexes assign to it, never what its name seems to say: the reference names
//! artifacts after target IDs (`demo_lib_gfx90a:xnack+`) and groups after families
//! (`demo_lib_gfx9`). An artifact without a record, archives or an index entry (the
//! reference's `demo_lib_gfx90a`, database files only) has nothing to be checked against.

use std::collections::BTreeSet;

use super::Ctx;
use crate::ArtifactKind;
use kpack_package::handlers::parse_target;

/// The processor of a target as archives and indexes write it (`gfx90a` of `gfx90a:xnack+`).
fn processor(target: &str) -> Option<String> {
    parse_target(target).map(|t| t.processor().to_owned())
}

/// The architectures of artifact `a`, or `None` when nothing says what they are.
fn of(ctx: &Ctx, a: usize) -> Option<BTreeSet<String>> {
    let info = &ctx.artifacts[a];
    if let Some(recorded) = &info.arches {
        return Some(recorded.clone());
    }
    let mut found = BTreeSet::new();
    for ((i, _), facts) in &ctx.facts {
        if *i == a {
            let declared = facts.archive.iter().flat_map(|x| &x.gfx_arches);
            found.extend(declared.filter_map(|t| processor(t)));
        }
        let indexer = &ctx.artifacts[*i];
        if indexer.kind != ArtifactKind::Generic || indexer.component != info.component {
            continue;
        }
        let Some(Ok(kpm)) = &facts.index else {
            continue;
        };
        let assigned = kpm
            .kpack_files
            .iter()
            .filter(|(_, e)| e.package.as_deref() == Some(info.name.as_str()));
        found.extend(assigned.filter_map(|(t, _)| processor(t)));
    }
    (!found.is_empty()).then_some(found)
}

/// One failure per archive target or database file of another architecture than its
/// artifact's.
pub(super) fn check(ctx: &Ctx, failures: &mut Vec<String>) {
    for (a, info) in ctx.artifacts.iter().enumerate() {
        if info.kind == ArtifactKind::Generic || info.installed {
            continue;
        }
        let Some(arches) = of(ctx, a) else {
            continue;
        };
        let listed = arches
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        for ((i, rel), facts) in &ctx.facts {
            if *i != a {
                continue;
            }
            let shown = ctx.path(a, rel);
            let declared = facts.archive.iter().flat_map(|x| &x.gfx_arches);
            for t in declared.filter(|t| processor(t).is_none_or(|p| !arches.contains(&p))) {
                failures.push(format!(
                    "{}: holds {t}, not an architecture of {} ({listed})",
                    shown.display(),
                    info.name
                ));
            }
            if let Some(db) = facts
                .database
                .as_ref()
                .filter(|d| !arches.contains(&d.artifact))
            {
                failures.push(format!(
                    "{}: a file of {} in {} ({listed})",
                    shown.display(),
                    db.target,
                    info.name
                ));
            }
        }
    }
}
