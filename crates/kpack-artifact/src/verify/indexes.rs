//! Checks 5 (index sizes) and 7: the `.kpm` indexes against the archives they list.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use kpack_archive::kpm::{KpmEntry, KpmManifest};

use super::{ArtifactInfo, Facts};
use crate::{ArtifactKind, TreeEntry};
use kpack_package::index::{self, IndexedArchive};

/// Check 7: per component, the indexes of its generic artifact against the archives of its
/// other artifacts.
pub(super) fn check_indexes(
    artifacts: &[ArtifactInfo],
    installed: &[Vec<(String, String, TreeEntry)>],
    facts: &HashMap<(usize, String), Facts>,
    failures: &mut Vec<String>,
) {
    let facts_of = |i: usize, prefix: &str, rel: &str| facts.get(&(i, format!("{prefix}/{rel}")));
    let components: BTreeSet<&str> = artifacts.iter().map(|a| a.component.as_str()).collect();
    for component in components {
        let of = || {
            artifacts
                .iter()
                .enumerate()
                .zip(installed)
                .filter(move |((_, a), _)| a.component == component)
        };
        // (prefix, installed path) → the index found, with its shown path.
        let mut found: BTreeMap<(String, String), (PathBuf, Option<KpmManifest>)> = BTreeMap::new();
        let mut generic_dir = None;
        for ((i, a), entries) in of().filter(|((_, a), _)| a.kind == ArtifactKind::Generic) {
            generic_dir.get_or_insert((a.name.as_str(), &a.dir));
            for (prefix, rel, e) in entries {
                let in_kpack_dir = rel
                    .rsplit('/')
                    .nth(1)
                    .is_some_and(|d| d == index::KPACK_DIR);
                if *e == TreeEntry::File && rel.ends_with(".kpm") && in_kpack_dir {
                    let path = a.dir.join(prefix).join(rel);
                    let manifest = match facts_of(i, prefix, rel).and_then(|f| f.index.as_ref()) {
                        Some(Ok(m)) => Some(m.clone()),
                        // Reported by the per-file check.
                        Some(Err(_)) | None => None,
                    };
                    found.insert((prefix.clone(), rel.clone()), (path, manifest));
                }
            }
        }
        let required = of().any(|((_, a), _)| a.kind == ArtifactKind::Group);
        if !required && found.is_empty() {
            continue;
        }
        let mut archives: BTreeMap<&str, Vec<IndexedArchive>> = BTreeMap::new();
        for ((i, _), entries) in of().filter(|((_, a), _)| a.kind != ArtifactKind::Generic) {
            for (prefix, rel, e) in entries {
                if *e != TreeEntry::File || index::archive_dir(rel).is_none() {
                    continue;
                }
                // An archive that does not open is reported by the per-file check.
                let described = facts_of(i, prefix, rel)
                    .into_iter()
                    .flat_map(|f| &f.described);
                for (_, x) in described.filter(|(p, _)| p == prefix) {
                    archives.entry(prefix).or_default().push(x.clone());
                }
            }
        }
        let mut expected: BTreeMap<(String, String), KpmManifest> = BTreeMap::new();
        for (prefix, list) in archives {
            match index::build(component, list) {
                Ok(indexes) => expected.extend(
                    indexes
                        .into_iter()
                        .map(|(rel, m)| ((prefix.to_owned(), rel), m)),
                ),
                Err(problems) => failures.extend(problems),
            }
        }
        for (key, want) in &expected {
            let Some((shown, got)) = found.get(key) else {
                let targets: Vec<&str> = want.kpack_files.iter().map(|(t, _)| t.as_str()).collect();
                failures.push(match generic_dir {
                    Some((name, dir)) => format!(
                        "{}: missing; {name} must index {} ({})",
                        dir.join(&key.0).join(&key.1).display(),
                        key.1,
                        targets.join(", ")
                    ),
                    None => format!(
                        "{component}: no generic artifact holds the index {}/{} ({})",
                        key.0,
                        key.1,
                        targets.join(", ")
                    ),
                });
                continue;
            };
            if let Some(got) = got {
                compare_index(&shown.display().to_string(), got, want, failures);
            }
        }
        for (key, (shown, got)) in &found {
            if !expected.contains_key(key) {
                let listed = got.iter().flat_map(|m| &m.kpack_files);
                for (t, e) in listed {
                    failures.push(format!(
                        "{}: lists {t} as {}, but no package holds it",
                        shown.display(),
                        describe_entry(e)
                    ));
                }
            }
        }
    }
}

fn describe_entry(e: &KpmEntry) -> String {
    format!(
        "{} in {} ({} bytes, {} kernels)",
        e.file,
        e.package.as_deref().unwrap_or("no package"),
        e.size,
        e.kernel_count
    )
}

/// One failure per difference between an index read and the index the archives make.
fn compare_index(shown: &str, got: &KpmManifest, want: &KpmManifest, failures: &mut Vec<String>) {
    for (field, g, w) in [
        (
            "format_version",
            got.format_version.to_string(),
            want.format_version.to_string(),
        ),
        (
            "component_name",
            got.component_name.clone(),
            want.component_name.clone(),
        ),
        ("prefix", got.prefix.clone(), want.prefix.clone()),
    ] {
        if g != w {
            failures.push(format!("{shown}: {field} is {g}, expected {w}"));
        }
    }
    let got_files: BTreeMap<&str, &KpmEntry> = got
        .kpack_files
        .iter()
        .map(|(t, e)| (t.as_str(), e))
        .collect();
    let want_files: BTreeMap<&str, &KpmEntry> = want
        .kpack_files
        .iter()
        .map(|(t, e)| (t.as_str(), e))
        .collect();
    for (t, g) in &got_files {
        match want_files.get(t) {
            None => failures.push(format!(
                "{shown}: lists {t} as {}, but no package holds it",
                describe_entry(g)
            )),
            Some(w) if w != g => failures.push(format!(
                "{shown}: lists {t} as {}, but the package holds {}",
                describe_entry(g),
                describe_entry(w)
            )),
            Some(_) => {}
        }
    }
    for (t, w) in &want_files {
        if !got_files.contains_key(t) {
            failures.push(format!(
                "{shown}: does not list {t}, which {} provides",
                describe_entry(w)
            ));
        }
    }
}

/// Check 5's size check of every `.kpm` against the archives beside it in its artifact.
pub(super) fn check_index_sizes(
    artifacts: &[ArtifactInfo],
    facts: &HashMap<(usize, String), Facts>,
    failures: &mut Vec<String>,
) {
    for ((a, rel), f) in facts {
        if artifacts[*a].kind == ArtifactKind::Generic || artifacts[*a].installed {
            continue;
        }
        let Some(Ok(m)) = &f.index else {
            continue;
        };
        let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
        for (t, e) in &m.kpack_files {
            let size = facts
                .get(&(*a, format!("{dir}/{}", e.file)))
                .map(|f| f.size);
            if size != Some(e.size) {
                let found = size.map_or("no such file".to_owned(), |n| format!("{n} bytes"));
                failures.push(format!(
                    "{}: lists {} for {t} with {} bytes, found {found}",
                    artifacts[*a].dir.join(rel).display(),
                    e.file,
                    e.size
                ));
            }
        }
    }
}

/// Check 7 of an installed tree: each `.kpm` against the archives installed beside it. The
/// packages are gone, so an index may list targets whose package is not installed; but a
/// target it lists whose archive is present must be that archive's, with its size and
/// kernel count, and every archive present must be listed by its module's index.
pub(super) fn check_installed_indexes(
    artifacts: &[ArtifactInfo],
    facts: &HashMap<(usize, String), Facts>,
    failures: &mut Vec<String>,
) {
    let index_at = |a: usize, rel: &str| match facts.get(&(a, rel.to_owned())) {
        Some(Facts {
            index: Some(Ok(m)), ..
        }) => Some(m),
        _ => None,
    };
    for ((a, rel), f) in facts {
        let info = &artifacts[*a];
        if !info.installed {
            continue;
        }
        let shown = info.dir.join(rel);
        if let Some(Ok(m)) = &f.index {
            let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
            for (t, e) in &m.kpack_files {
                let Some(present) = facts.get(&(*a, format!("{dir}/{}", e.file))) else {
                    continue; // its package is not installed
                };
                let found = present.described.iter().find(|(_, d)| d.target == *t);
                let matches = found.is_some_and(|(_, d)| {
                    d.entry.size == e.size && d.entry.kernel_count == e.kernel_count
                });
                if !matches {
                    failures.push(format!(
                        "{}: lists {t} as {}, but the archive installed there {}",
                        shown.display(),
                        describe_entry(e),
                        match found {
                            Some((_, d)) => format!("holds {}", describe_entry(&d.entry)),
                            None => format!("does not declare {t}"),
                        }
                    ));
                }
            }
        }
        for (prefix, d) in &f.described {
            let index = format!("{prefix}/{}", index::index_path(&d.dir, &d.module));
            let listed =
                index_at(*a, &index).map(|m| m.kpack_files.iter().any(|(t, _)| *t == d.target));
            if listed == Some(false) {
                failures.push(format!(
                    "{}: does not list {}, which {} provides",
                    info.dir.join(&index).display(),
                    d.target,
                    shown.display()
                ));
            }
        }
    }
}
