//! Recombine never writes code no marker reaches: before anything is published, every archive
//! a component's group packages install must be found by some marker of its generic package
//! (a search path with `@GFXARCH@` standing for a target, or for the group after
//! `--group-archives`), and every marker must find an archive in some package. Whatever
//! `verify_generic_artifacts_match` says: a generic artifact from one shard does not always
//! name the archives of another.
//!
//! Shards split by two tools are where this happens. The reference names a component's
//! archives `<component>_<target>.kpack` (one archive per component, every binary's code in
//! it), kpack `<module>_<target>.kpack` (one per binary); the generic package's markers name
//! one convention only, so recombine refuses such a mix and names both.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kpack_hostbin::marker::MarkerMetadata;

use super::{Item, Package};
use crate::ArtifactError;
use crate::search_path::Pattern;
use kpack_package::handlers::parse_target;
use kpack_package::index;

/// A marker of the generic package: where it is installed and what it searches.
struct Marker {
    /// Its source file (the shard's).
    source: PathBuf,
    /// Its installed path.
    rel: String,
    meta: MarkerMetadata,
}

/// The problems of one component's planned packages (`generic` first, then its groups),
/// one line each: the archives no marker reaches and the markers that reach no archive.
pub(super) fn problems(
    component: &str,
    generic: &Package,
    groups: &[Package],
) -> Result<Vec<String>, ArtifactError> {
    let markers = markers_of(generic)?;
    let mut reached: BTreeSet<(usize, String)> = BTreeSet::new();
    let mut problems = Vec::new();
    // Every installed archive name (files, group archives, per-target links): (package, path).
    let archive_names: Vec<(usize, &str)> = (groups.iter().enumerate())
        .flat_map(|(p, package)| package.items.keys().map(move |(_, rel)| (p, rel.as_str())))
        .filter(|(_, rel)| index::archive_dir(rel).is_some())
        .collect();
    for m in &markers {
        let mut any = false;
        for search in &m.meta.search_paths {
            let Ok(pattern) = Pattern::of(&m.rel, search) else {
                continue; // reaches nothing
            };
            for &(p, rel) in &archive_names {
                if found_by(&pattern, rel, &groups[p]) {
                    any = true;
                    reached.insert((p, rel.to_owned()));
                }
            }
        }
        if !any && !groups.is_empty() {
            problems.push(format!(
                "{}: its marker (search paths {}) reaches no archive of the packages of {component}",
                m.source.display(),
                m.meta.search_paths.join(", ")
            ));
        }
    }
    let searched = markers
        .iter()
        .flat_map(|m| &m.meta.search_paths)
        .map(String::as_str)
        .collect::<BTreeSet<_>>();
    let conventions: BTreeSet<&str> = searched
        .iter()
        .map(|s| convention(s.rsplit('/').next().unwrap_or(s), component))
        .collect();
    for (p, package) in groups.iter().enumerate() {
        for ((prefix, rel), item) in &package.items {
            let (Item::File(_) | Item::GroupArchive { .. }) = item else {
                continue;
            };
            let Some(dir) = index::archive_dir(rel) else {
                continue;
            };
            let name = rel.rsplit('/').next().unwrap_or(rel);
            let linked = package.items.iter().any(|((_, r), i)| {
                matches!(i, Item::Symlink(t) if t == Path::new(name))
                    && index::archive_dir(r) == Some(dir)
                    && reached.contains(&(p, r.clone()))
            });
            if reached.contains(&(p, rel.clone())) || linked {
                continue;
            }
            let mine = convention(name, component);
            let searched = searched.iter().copied().collect::<Vec<_>>().join(", ");
            let mut line = format!(
                "{}/{prefix}/{rel}: no marker of {component}_generic reaches this archive",
                package.name
            );
            if conventions.is_empty() || conventions.contains(mine) {
                line.push_str(&format!(" (the markers search {searched})"));
            } else {
                let theirs = conventions
                    .iter()
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" and ");
                line.push_str(&format!(
                    ": it is named {mine}, and the markers search {searched}, named {theirs} \
                     (shards split by the two tools cannot be recombined together)"
                ));
            }
            problems.push(line);
        }
    }
    Ok(problems)
}

/// Whether the search path `pattern` finds the installed archive name `rel` of `package`: in
/// its directory, with a target or the group in place of `@GFXARCH@`.
fn found_by(pattern: &Pattern<'_>, rel: &str, package: &Package) -> bool {
    let Some((dir, name)) = rel.rsplit_once('/') else {
        return false;
    };
    dir == pattern.dir
        && pattern.gfxarch(name).is_some_and(|t| {
            // Either spelling: a split for Windows writes the target's `:` as `@`.
            parse_target(&kpack_target::from_file_name_spelling(t)).is_some()
                || package.group() == Some(t)
        })
}

/// The naming convention of an archive file name or search-path file name.
fn convention(name: &str, component: &str) -> &'static str {
    let stem = name.strip_suffix(".kpack").unwrap_or(name);
    let module = stem.rsplit_once('_').map_or(stem, |(m, _)| m);
    if module == component {
        "<component>_<target>.kpack as the reference's split names archives"
    } else {
        "<module>_<target>.kpack as kpack's split names archives"
    }
}

/// The markers of the generic package's kpacked binaries.
fn markers_of(generic: &Package) -> Result<Vec<Marker>, ArtifactError> {
    let mut markers = Vec::new();
    for ((_, rel), item) in &generic.items {
        let Item::File(source) = item else {
            continue;
        };
        if !looks_like_a_host_binary(source)? {
            continue;
        }
        let file = std::fs::File::open(source).map_err(ArtifactError::io(source))?;
        let bytes = kpack_pipeline::map_file(&file, source).map_err(|e| ArtifactError::Source {
            path: source.clone(),
            source: Box::new(e),
        })?;
        // A file that does not inspect has no marker to reach anything (verify says why).
        let Ok(Some(kpacked)) = kpack_pipeline::transform::kpacked_marker(&bytes) else {
            continue;
        };
        let (meta, _) = MarkerMetadata::decode(&kpacked.bytes).map_err(|e| {
            ArtifactError::invalid(
                source,
                format!(
                    "the marker at offset {:#x} does not decode: {e}",
                    kpacked.offset
                ),
            )
        })?;
        markers.push(Marker {
            source: source.clone(),
            rel: rel.clone(),
            meta,
        });
    }
    Ok(markers)
}

/// Whether `path` starts like an ELF file or a PE image (the files a marker can be in).
fn looks_like_a_host_binary(path: &Path) -> Result<bool, ArtifactError> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(ArtifactError::io(path))?;
    let n = file.read(&mut magic).map_err(ArtifactError::io(path))?;
    Ok(magic[..n].starts_with(b"\x7fELF") || magic[..n].starts_with(b"MZ"))
}
