//! A package planned in full before it is written: its entries, where each comes
//! from, and how it is written (files copied or moved, group archives and indexes made).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_archive::kpm::KpmManifest;
use kpack_archive::{Archive, Compression};

use crate::{ArtifactError, ArtifactRecord, RECORD, TreeEntry, manifest};
use kpack_package::index;

/// One entry of a package to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Item {
    Dir,
    Symlink(PathBuf),
    /// A regular file copied from this source.
    File(PathBuf),
    /// The index of a module, encoded when written: the sizes of the group archives it
    /// lists are known only once they are written.
    Index(Box<KpmManifest>),
    /// A group archive: every entry of these per-target archives (target, path), targets
    /// in order.
    GroupArchive {
        /// The archives' group name (the module).
        module: String,
        /// Its `gfx_arch_family`: the architecture group.
        group: String,
        sources: Vec<(String, PathBuf)>,
        compression: Compression,
    },
}

/// Where a package's manifest and record come from.
pub(super) enum Meta {
    /// Copied from this artifact (the primary's generic artifact).
    CopiedFrom(PathBuf),
    Written {
        prefixes: Vec<String>,
        record: Box<ArtifactRecord>,
    },
}

/// A package (artifact) planned in full before it is written.
pub(super) struct Package {
    pub(super) name: String,
    pub(super) meta: Meta,
    /// By (manifest prefix, path below it; empty for the prefix itself).
    pub(super) items: BTreeMap<(String, String), Item>,
    /// The modes of the files of `items` that a tarball shard's headers recorded, by the same
    /// key: its output tarball carries them whatever the staged copy on disk keeps.
    modes: BTreeMap<(String, String), u32>,
}

impl Package {
    /// The architecture group of a group package.
    pub(super) fn group(&self) -> Option<&str> {
        match &self.meta {
            Meta::Written { record, .. } => record.group.as_deref(),
            Meta::CopiedFrom(_) => None,
        }
    }

    pub(super) fn new(name: String, meta: Meta) -> Package {
        Package {
            name,
            meta,
            items: BTreeMap::new(),
            modes: BTreeMap::new(),
        }
    }

    /// Adds every entry of the artifact `from`'s prefix trees, with the links and modes
    /// `recorded` for its members (a tarball shard's, see [`super::ShardRecords`]). An entry
    /// already planned must be the same (two artifacts of a group may ship the same file,
    /// never different ones).
    pub(super) fn add_artifact(
        &mut self,
        from: &Path,
        recorded: &kpack_tar::Recorded,
    ) -> Result<Vec<String>, ArtifactError> {
        let prefixes = manifest::read(from)?;
        for prefix in &prefixes {
            let root = from.join(prefix);
            if !root.is_dir() {
                continue;
            }
            self.add(prefix, String::new(), Item::Dir, &root)?;
            for (rel, entry) in super::prefix_tree(from, prefix, recorded)? {
                let src = root.join(&rel);
                let item = match entry {
                    TreeEntry::Dir => Item::Dir,
                    TreeEntry::Symlink(t) => Item::Symlink(t),
                    TreeEntry::File => Item::File(src.clone()),
                };
                if let Some(kpack_tar::RecordedMember::Mode(mode)) =
                    recorded.get(&format!("{prefix}/{rel}"))
                {
                    self.modes
                        .entry((prefix.clone(), rel.clone()))
                        .or_insert(*mode);
                }
                self.add(prefix, rel, item, &src)?;
            }
        }
        Ok(prefixes)
    }

    /// What the package's tarball carries beyond its staged copy on disk (see
    /// [`kpack_tar::Recorded`]): every symbolic link, and every file copied from a shard,
    /// packed from there with its recorded mode.
    pub(super) fn recorded(&self) -> kpack_tar::Recorded {
        let members = self.items.iter().filter_map(|(key, item)| {
            let member = match item {
                Item::Symlink(target) => kpack_tar::RecordedMember::Symlink(target.clone()),
                Item::File(source) => kpack_tar::RecordedMember::Elsewhere {
                    source: source.clone(),
                    mode: self.modes.get(key).copied(),
                },
                _ => return None,
            };
            Some((format!("{}/{}", key.0, key.1), member))
        });
        members.collect()
    }

    pub(super) fn add(
        &mut self,
        prefix: &str,
        rel: String,
        item: Item,
        src: &Path,
    ) -> Result<(), ArtifactError> {
        let key = (prefix.to_owned(), rel);
        let Some(planned) = self.items.get(&key) else {
            self.items.insert(key, item);
            return Ok(());
        };
        let same = match (planned, &item) {
            (Item::File(a), Item::File(b)) => {
                std::fs::read(a).map_err(ArtifactError::io(a))?
                    == std::fs::read(b).map_err(ArtifactError::io(b))?
            }
            (a, b) => a == b,
        };
        if same {
            return Ok(());
        }
        let shown = match planned {
            Item::File(p) => p.display().to_string(),
            _ => format!("{}/{}", key.0, key.1),
        };
        Err(ArtifactError::invalid(
            src,
            format!("differs from {shown}, already packaged in {}", self.name),
        ))
    }

    /// Writes the package under `dir`, moving rather than copying the source files
    /// `movable` selects; its files copied from shards and its symbolic links only when
    /// `all_on_disk` (a tarball packs them from [`Package::recorded`]: the sources where they
    /// lie, the links from the plan); returns the number of files. `sizes`: the group
    /// archives written so far by installed path, to which this package's are added; the
    /// indexes take their sizes from it (so packages with indexes are written last).
    pub(super) fn write(
        &self,
        dir: &Path,
        threads: usize,
        sizes: &mut BTreeMap<String, u64>,
        movable: &(dyn Fn(&Path) -> bool + Sync),
        all_on_disk: bool,
    ) -> Result<usize, ArtifactError> {
        let dest = dir.join(&self.name);
        std::fs::create_dir_all(&dest).map_err(ArtifactError::io(&dest))?;
        match &self.meta {
            Meta::CopiedFrom(from) => {
                crate::copy_file(
                    &from.join(manifest::MANIFEST),
                    &dest.join(manifest::MANIFEST),
                )?;
                if from.join(RECORD).exists() {
                    crate::copy_file(&from.join(RECORD), &dest.join(RECORD))?;
                }
            }
            Meta::Written { prefixes, record } => {
                manifest::write(&dest, prefixes)?;
                record.write(&dest)?;
            }
        }
        let mut files = Vec::new();
        let mut packed_from_source = 0;
        let mut indexes = Vec::new();
        for ((prefix, rel), item) in &self.items {
            let to = dest.join(prefix).join(rel);
            match item {
                Item::Dir => std::fs::create_dir_all(&to).map_err(ArtifactError::io(&to))?,
                Item::Symlink(t) if all_on_disk => crate::copy_symlink(t, &to)?,
                Item::Symlink(_) => {}
                Item::File(_) if !all_on_disk => packed_from_source += 1,
                Item::File(_) | Item::GroupArchive { .. } => files.push((rel, item, to)),
                Item::Index(kpm) => indexes.push((rel, kpm, to)),
            }
        }
        let written =
            kpack_concurrency::threads::map(&files, threads, |_, (_, item, to)| match item {
                Item::File(from) if movable(from) => crate::move_file(from, to).map(|_| None),
                Item::File(from) => crate::copy_file(from, to).map(|_| None),
                Item::GroupArchive {
                    module,
                    group,
                    sources,
                    compression,
                } => kpack_package::group::write(to, module, group, sources, *compression)
                    .map(Some)
                    .map_err(ArtifactError::from),
                _ => unreachable!("only files are queued"),
            })?;
        for ((rel, _, _), size) in files.iter().zip(written) {
            if let Some(size) = size {
                sizes.insert((*rel).clone(), size);
            }
        }
        for (rel, kpm, to) in &indexes {
            let mut kpm = (**kpm).clone();
            let kpack_dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
            for (_, e) in &mut kpm.kpack_files {
                if let Some(size) = sizes.get(&format!("{kpack_dir}/{}", e.file)) {
                    e.size = *size;
                }
            }
            let bytes = kpm
                .encode()
                .map_err(|e| ArtifactError::invalid(to, format!("encoding the index: {e}")))?;
            std::fs::write(to, bytes).map_err(ArtifactError::io(to))?;
        }
        Ok(files.len() + packed_from_source + indexes.len())
    }

    /// Replaces the per-target archives of this (group) package by one group archive per
    /// directory and module, `<module>_<group>.kpack`, and the per-target names by relative
    /// links to it, so that every marker's `<module>_@GFXARCH@.kpack` still finds its
    /// target. Sources must hold one target each and be named `<module>_<target>.kpack`.
    pub(super) fn merge_archives(
        &mut self,
        group: &str,
        compression: Compression,
    ) -> Result<(), ArtifactError> {
        // (prefix, .kpack directory, file-name module) → (group name, per-target sources).
        type Sources = Vec<(String, String, PathBuf)>;
        let mut sets: BTreeMap<(String, String, String), (String, Sources)> = BTreeMap::new();
        for ((prefix, rel), item) in &self.items {
            let Item::File(src) = item else { continue };
            if index::archive_dir(rel).is_none() {
                continue;
            }
            let a = Archive::open(src).map_err(|source| ArtifactError::Archive {
                path: src.clone(),
                source: Box::new(source),
            })?;
            let [target] = a.gfx_arches() else {
                return Err(ArtifactError::invalid(
                    src,
                    format!(
                        "expected one architecture in gfx_arches to build a group archive, found {}",
                        a.gfx_arches().join(", ")
                    ),
                ));
            };
            let (kpack_dir, name) = rel.rsplit_once('/').expect("archives lie in .kpack/");
            let Some(stem) = kpack_target::archive_stem(name, target) else {
                return Err(ArtifactError::invalid(
                    src,
                    format!("expected the name <module>_{target}.kpack for its target {target}"),
                ));
            };
            let key = (prefix.clone(), kpack_dir.to_owned(), stem.to_owned());
            let (module, sources) = sets
                .entry(key)
                .or_insert_with(|| (a.group_name().to_owned(), Vec::new()));
            if module != a.group_name() {
                return Err(ArtifactError::invalid(
                    src,
                    format!(
                        "group name {} differs from {module} of the other archives of {stem}",
                        a.group_name()
                    ),
                ));
            }
            sources.push((target.clone(), rel.clone(), src.clone()));
        }
        for ((prefix, kpack_dir, stem), (module, mut sources)) in sets {
            sources.sort();
            let name = format!("{stem}_{group}.kpack");
            let archive_rel = format!("{kpack_dir}/{name}");
            let key = (prefix.clone(), archive_rel.clone());
            if let Some(Item::File(other)) = self.items.get(&key) {
                if !sources.iter().any(|(_, rel, _)| *rel == archive_rel) {
                    return Err(ArtifactError::invalid(
                        other,
                        format!(
                            "has the name of the group archive of {stem} in {}",
                            self.name
                        ),
                    ));
                }
            }
            // A group named after its one target keeps that name for the archive: no link.
            for (_, rel, _) in sources.iter().filter(|(_, rel, _)| *rel != archive_rel) {
                let link = Item::Symlink(PathBuf::from(&name));
                self.items.insert((prefix.clone(), rel.clone()), link);
            }
            let item = Item::GroupArchive {
                module,
                group: group.to_owned(),
                sources: sources.into_iter().map(|(t, _, src)| (t, src)).collect(),
                compression,
            };
            self.items.insert(key, item);
        }
        Ok(())
    }
}
