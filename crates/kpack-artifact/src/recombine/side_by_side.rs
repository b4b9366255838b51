//! Packages install side by side: no installed path (file or symlink; a directory may be
//! shared) belongs to two packages, but for the portable SPIR-V archive, which every group a
//! configuration places `amdgcnspirv` in ships as the same file. Recombine checks its
//! packages with it before publishing, and `verify` the artifacts it is given.

use std::collections::BTreeMap;

use kpack_package::index;

use crate::ArtifactError;

/// A package's name and its installed paths (below the install root) with their
/// [`Sharing`].
pub(super) type Installed = (String, Vec<(String, Sharing)>);

/// Refuses `packages` that would install one path twice ([`shared_paths`]).
pub(super) fn side_by_side<'a>(
    packages: impl IntoIterator<Item = &'a Installed>,
) -> Result<(), ArtifactError> {
    let collisions = shared_paths(packages.into_iter().map(|(name, entries)| {
        let entries = entries
            .iter()
            .map(|(rel, sharing)| (rel.as_str(), *sharing));
        (name.as_str(), entries)
    }));
    if collisions.is_empty() {
        return Ok(());
    }
    Err(ArtifactError::Validation {
        what: "installed paths shared by two packages (packages must install side by side)",
        problems: collisions,
    })
}

/// Whether packages may install the same path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sharing {
    /// A directory: any number of packages may hold it.
    Dir,
    /// The portable SPIR-V archive (`<dir>/.kpack/<module>_amdgcnspirv.kpack`) as a regular
    /// file: every group a configuration places `amdgcnspirv` in ships the same one, so
    /// packages holding it only as such a file install side by side.
    Portable,
    /// Anything else: one package only.
    Exclusive,
}

impl Sharing {
    /// The sharing of the installed path `rel`, a directory or a regular file or neither.
    pub(crate) fn of(rel: &str, dir: bool, file: bool) -> Sharing {
        if dir {
            Sharing::Dir
        } else if file && index::is_portable_archive(rel) {
            Sharing::Portable
        } else {
            Sharing::Exclusive
        }
    }
}

/// Installed paths that two packages would both install, one line each naming the path and
/// the packages: a file or symlink in two packages (unless every one holds it as the
/// portable SPIR-V archive), or a directory in one and something else in another.
/// `packages`: each package's name and its entries as (installed path, [`Sharing`]).
pub(crate) fn shared_paths<'a, P, E>(packages: P) -> Vec<String>
where
    P: IntoIterator<Item = (&'a str, E)>,
    E: IntoIterator<Item = (&'a str, Sharing)>,
{
    let mut owners: BTreeMap<&str, Vec<(&str, Sharing)>> = BTreeMap::new();
    for (name, entries) in packages {
        for (rel, sharing) in entries {
            let o = owners.entry(rel).or_default();
            if !o.iter().any(|(n, s)| *n == name && *s == sharing) {
                o.push((name, sharing));
            }
        }
    }
    owners
        .into_iter()
        .filter(|(_, o)| {
            let all = |s: Sharing| o.iter().all(|(_, x)| *x == s);
            o.len() > 1 && !all(Sharing::Dir) && !all(Sharing::Portable)
        })
        .map(|(rel, o)| {
            let names: Vec<String> = o
                .iter()
                .map(|(n, sharing)| {
                    if *sharing == Sharing::Dir {
                        format!("{n} (a directory)")
                    } else {
                        (*n).to_owned()
                    }
                })
                .collect();
            format!("{rel}: installed by {}", names.join(" and "))
        })
        .collect()
}
