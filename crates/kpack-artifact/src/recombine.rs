//! `kpack recombine`: the shards' split artifacts become one generic artifact and one
//! package per architecture group (the reduce step).
//!
//! Shards are the sub-directories of the shards directory, each holding split outputs
//! `C_generic` and `C_<processor>` (or `C_<family>`), as directories or `.tar.zst` files
//! ([`crate::tarball`]: each tarball recombine reads is unpacked in one pass into the
//! output's stage and its files moved from there into the packages, so nothing is extracted
//! to a temporary directory and a killed run leaves nothing the next run does not sweep);
//! the packages are written as directories or, with
//! [`OutputFormat::TarZst`], as `.tar.zst` files. For every component:
//! * `C_generic` is copied from the primary shard (symlinks kept), plus, per module with
//!   archives in any group, the [index](kpack_package::index) `<dir>/.kpack/<module>.kpm` listing
//!   every architecture packaged and the group package providing it;
//! * for each group of the configuration (in order) with at least one architecture
//!   available, `C_<group>` gets every file of the arch artifacts of its architectures
//!   (a family artifact such as AOTriton's `gfx11xx` joins every group holding an
//!   architecture it covers) — archives and database files only, never host code, and no
//!   index. Binaries keep finding archives by `@GFXARCH@`; the index is for tools and people.
//!
//! The packages install side by side: the contents of every manifest prefix install at one
//! install root, and no installed path (file or symlink; a directory may be shared) belongs
//! to two packages of one recombine, but for the portable SPIR-V archive
//! (`<module>_amdgcnspirv.kpack`), which every group a configuration places `amdgcnspirv` in
//! ships as the same file. That is checked before anything is written.
//! `artifact_manifest.txt` and `kpack_artifact.json` sit beside the prefixes: they describe
//! the artifact and are never installed.
//!
//! The configuration's `validation` flags are enforced (spec §5.4 ignores them), all
//! checked before anything is written:
//! * `error_on_duplicate_device_code` (default true): two shards providing an artifact for
//!   the same architecture of a component is an error; when false the first shard in name
//!   order wins and the others are reported as ignored;
//! * `verify_generic_artifacts_match` (default false): every shard's generic artifact must
//!   be interchangeable with the primary's ([`compare_generic`]);
//! * `error_on_missing_architecture` (default false): a group architecture that no shard
//!   provides for a component with device code is an error; otherwise it is reported.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_archive::{Archive, Compression};
use serde::Deserialize;

use crate::tarball::{self, OutputFormat};
use crate::{ArtifactError, ArtifactKind, ArtifactRecord, RECORD, TreeEntry, manifest};
use kpack_archive::kpm::KpmManifest;
use kpack_package::handlers::{family_covers, parse_family, parse_target};
use kpack_package::index::{self, IndexedArchive};

/// One architecture group of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArchGroup {
    /// The group name (`C_<name>` artifacts).
    pub name: String,
    /// Its human-readable name.
    pub display_name: String,
    /// Processors (`gfx90a`), in configuration order.
    pub architectures: Vec<String>,
}

/// The `validation` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Validation {
    /// Two shards providing device code for one architecture is an error.
    pub error_on_duplicate_device_code: bool,
    /// Every shard's generic artifact must equal the primary's.
    pub verify_generic_artifacts_match: bool,
    /// A group architecture no shard provides is an error.
    pub error_on_missing_architecture: bool,
}

impl Default for Validation {
    fn default() -> Self {
        Validation {
            error_on_duplicate_device_code: true,
            verify_generic_artifacts_match: false,
            error_on_missing_architecture: false,
        }
    }
}

/// `packaging.json` (spec §5.4).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PackagingConfig {
    /// The shard whose generic artifacts are used.
    pub primary_shard: String,
    /// The groups to package, in configuration order.
    pub architecture_groups: Vec<ArchGroup>,
    /// What to check.
    pub validation: Validation,
}

/// Why a packaging configuration was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Not JSON, an unknown or missing field, a value of the wrong type, a group defined
    /// twice; `path` is where (`validation.error_on_missing_architecture`).
    #[error("{path}: {source}")]
    Schema {
        /// Where in the file.
        path: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// `primary_shard` is not a directory name.
    #[error("primary_shard: {0:?} is not a shard directory name (non-empty, no '/')")]
    PrimaryShard(String),
    /// No architecture group.
    #[error("architecture_groups: expected at least one group")]
    NoGroups,
    /// A group name that cannot name a package.
    #[error(
        "architecture_groups.{0}: invalid group name (expected ASCII letters, digits, '-' or '.', \
         not \"generic\": it names the package <component>_<group>)"
    )]
    GroupName(String),
    /// A group without architectures.
    #[error("architecture_groups.{0}.architectures: expected at least one architecture")]
    EmptyGroup(String),
    /// An architecture that is not a GPU processor name.
    #[error(
        "architecture_groups.{group}.architectures: expected GPU processor names (gfx90a, \
         gfx1100, gfx11-generic), got {architecture:?}"
    )]
    Architecture {
        /// The group.
        group: String,
        /// The architecture as written.
        architecture: String,
    },
    /// An architecture listed twice in one group.
    #[error("architecture_groups.{group}.architectures: {architecture} listed twice")]
    RepeatedArchitecture {
        /// The group.
        group: String,
        /// The architecture.
        architecture: String,
    },
}

/// The file as written; [`PackagingConfig::parse`] checks what the types cannot.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    primary_shard: String,
    architecture_groups: GroupsFile,
    #[serde(default)]
    validation: Validation,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupFile {
    display_name: Option<String>,
    architectures: Vec<String>,
}

/// The groups in file order (the packages are written in it); a group named twice is an
/// error where a map would keep the last silently.
struct GroupsFile(Vec<(String, GroupFile)>);

impl<'de> Deserialize<'de> for GroupsFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = GroupsFile;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of groups")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<GroupsFile, A::Error> {
                let mut groups: Vec<(String, GroupFile)> = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    if groups.iter().any(|(n, _)| *n == name) {
                        return Err(serde::de::Error::custom(format!(
                            "group {name:?} defined twice"
                        )));
                    }
                    let group = map.next_value()?;
                    groups.push((name, group));
                }
                Ok(GroupsFile(groups))
            }
        }
        d.deserialize_map(Visitor)
    }
}

impl PackagingConfig {
    /// Reads and checks a configuration file.
    pub fn load(path: &Path) -> Result<PackagingConfig, ArtifactError> {
        let text = std::fs::read_to_string(path).map_err(ArtifactError::io(path))?;
        Self::parse(&text).map_err(|source| ArtifactError::Config {
            path: path.to_owned(),
            source,
        })
    }

    /// Parses and checks a configuration; the error says which key is wrong and what was
    /// expected.
    pub fn parse(text: &str) -> Result<PackagingConfig, ConfigError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let file: ConfigFile =
            serde_path_to_error::deserialize(&mut de).map_err(|e| ConfigError::Schema {
                path: e.path().to_string(),
                source: e.into_inner(),
            })?;
        de.end().map_err(|source| ConfigError::Schema {
            path: ".".to_owned(),
            source,
        })?;
        if file.primary_shard.is_empty() || file.primary_shard.contains('/') {
            return Err(ConfigError::PrimaryShard(file.primary_shard));
        }
        if file.architecture_groups.0.is_empty() {
            return Err(ConfigError::NoGroups);
        }
        let mut architecture_groups = Vec::new();
        for (name, g) in file.architecture_groups.0 {
            let valid_name = !name.is_empty()
                && name != "generic"
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            if !valid_name {
                return Err(ConfigError::GroupName(name));
            }
            if g.architectures.is_empty() {
                return Err(ConfigError::EmptyGroup(name));
            }
            let mut architectures: Vec<String> = Vec::new();
            for arch in g.architectures {
                if !parse_target(&arch).is_some_and(|t| t.features().is_empty()) {
                    return Err(ConfigError::Architecture {
                        group: name,
                        architecture: arch,
                    });
                }
                if architectures.contains(&arch) {
                    return Err(ConfigError::RepeatedArchitecture {
                        group: name,
                        architecture: arch,
                    });
                }
                architectures.push(arch);
            }
            architecture_groups.push(ArchGroup {
                display_name: g.display_name.unwrap_or_else(|| name.clone()),
                name,
                architectures,
            });
        }
        Ok(PackagingConfig {
            primary_shard: file.primary_shard,
            architecture_groups,
            validation: file.validation,
        })
    }
}

/// Options of [`recombine`].
#[derive(Debug, Clone, Default)]
pub struct RecombineOptions {
    /// Only this component.
    pub component: Option<String>,
    /// Worker threads for copying; 0 = one per core.
    pub threads: usize,
    /// Directories or `.tar.zst` packages.
    pub output: OutputFormat,
    /// Group archives: per group package and module, one archive holding every target of
    /// the group (`<module>_<group>.kpack`, written with this compression) and, for each
    /// target, the relative link `<module>_<target>.kpack -> <module>_<group>.kpack` the
    /// markers find; `None` copies the per-target archives as they are.
    pub group_archives: Option<Compression>,
}

impl RecombineOptions {
    /// The [`RecombineOptions::group_archives`] of a request: group archives when asked for
    /// (`--group-archives`) or when `compression` is `unified`, which implies them: format v2
    /// saves what it saves across targets (per target it would only recompress each shard's
    /// archives, which `kpack recompress` does); else `None`, and `compression` has nothing
    /// to write.
    pub fn group_archives_for(asked: bool, compression: Compression) -> Option<Compression> {
        let unified = matches!(compression, Compression::Unified { .. });
        (asked || unified).then_some(compression)
    }
}

/// One group package written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupSummary {
    /// The group name.
    pub group: String,
    /// The artifact written (`C_<group>`).
    pub artifact: String,
    /// The architectures packaged and the shard each came from.
    pub architectures: BTreeMap<String, String>,
    /// Group architectures no shard provided.
    pub missing: Vec<String>,
    /// Regular files written.
    pub files: usize,
    /// `.kpack` archives among them.
    pub archives: usize,
}

/// One component recombined.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ComponentSummary {
    /// The component.
    pub component: String,
    /// The shard whose generic artifact was used.
    pub generic_from: String,
    /// No device code anywhere: only the generic artifact.
    pub generic_only: bool,
    /// The group packages written.
    pub groups: Vec<GroupSummary>,
    /// The indexes written into the generic package, as `<artifact>/<prefix>/<path>`.
    pub indexes: Vec<String>,
    /// Arch artifacts left out because an earlier shard provided the same architecture.
    pub ignored_duplicates: Vec<String>,
}

/// What [`recombine`] did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RecombineSummary {
    /// Per component, in name order.
    pub components: Vec<ComponentSummary>,
}

/// The artifacts of one component across shards.
#[derive(Default)]
struct Collected {
    /// Shard → its generic artifact.
    generic: BTreeMap<String, PathBuf>,
    /// Arch artifact suffix → (shard, dir), shards in name order.
    arch: BTreeMap<String, Vec<(String, PathBuf)>>,
}

/// One entry of a package to write.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
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
enum Meta {
    /// Copied from this artifact (the primary's generic artifact).
    CopiedFrom(PathBuf),
    Written {
        prefixes: Vec<String>,
        record: Box<ArtifactRecord>,
    },
}

/// A package (artifact) planned in full before anything is written.
struct Package {
    name: String,
    meta: Meta,
    /// By (manifest prefix, path below it; empty for the prefix itself).
    items: BTreeMap<(String, String), Item>,
}

impl Package {
    fn new(name: String, meta: Meta) -> Package {
        Package {
            name,
            meta,
            items: BTreeMap::new(),
        }
    }

    /// Adds every entry of the artifact `from`'s prefix trees. An entry already planned
    /// must be the same (two artifacts of a group may ship the same file, never different
    /// ones).
    fn add_artifact(&mut self, from: &Path) -> Result<Vec<String>, ArtifactError> {
        let prefixes = manifest::read(from)?;
        for prefix in &prefixes {
            let root = from.join(prefix);
            if !root.is_dir() {
                continue;
            }
            self.add(prefix, String::new(), Item::Dir, &root)?;
            for (rel, entry) in crate::walk_tree(&root)? {
                let src = root.join(&rel);
                let item = match entry {
                    TreeEntry::Dir => Item::Dir,
                    TreeEntry::Symlink(t) => Item::Symlink(t),
                    TreeEntry::File => Item::File(src.clone()),
                };
                self.add(prefix, rel, item, &src)?;
            }
        }
        Ok(prefixes)
    }

    fn add(
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
    /// `movable` selects; returns the number of files. `sizes`: the group archives written
    /// so far by installed path, to which this package's are added; the indexes take their
    /// sizes from it (so packages with indexes are written last).
    fn write(
        &self,
        dir: &Path,
        threads: usize,
        sizes: &mut BTreeMap<String, u64>,
        movable: &(dyn Fn(&Path) -> bool + Sync),
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
        let mut indexes = Vec::new();
        for ((prefix, rel), item) in &self.items {
            let to = dest.join(prefix).join(rel);
            match item {
                Item::Dir => std::fs::create_dir_all(&to).map_err(ArtifactError::io(&to))?,
                Item::Symlink(t) => crate::copy_symlink(t, &to)?,
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
        Ok(files.len() + indexes.len())
    }

    /// Replaces the per-target archives of this (group) package by one group archive per
    /// directory and module, `<module>_<group>.kpack`, and the per-target names by relative
    /// links to it, so that every marker's `<module>_@GFXARCH@.kpack` still finds its
    /// target. Sources must hold one target each and be named `<module>_<target>.kpack`.
    fn merge_archives(
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
                        "expected one architecture in gfx_arches to build a group archive, found {:?}",
                        a.gfx_arches()
                    ),
                ));
            };
            let (kpack_dir, name) = rel.rsplit_once('/').expect("archives lie in .kpack/");
            let Some(stem) = name.strip_suffix(&format!("_{target}.kpack")) else {
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
                        "group name {:?} differs from {module:?} of the other archives of {stem}",
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

/// Recombines the shards under `shards` per `config` into `out`.
pub fn recombine(
    shards: &Path,
    config: &PackagingConfig,
    out: &Path,
    opts: &RecombineOptions,
) -> Result<RecombineSummary, ArtifactError> {
    // (unpacked artifact directory, its tarball), for errors about what was unpacked.
    let mut unpacked_from: Vec<(String, String)> = Vec::new();
    recombine_unpacking(shards, config, out, opts, &mut unpacked_from).map_err(|e| {
        e.shown_as(&|text| {
            let mut text = text.to_owned();
            for (dir, tarball) in &unpacked_from {
                if text == *dir {
                    return tarball.clone();
                }
                text = text.replace(&format!("{dir}/"), &format!("{tarball}/"));
            }
            text
        })
    })
}

/// [`recombine`], noting in `unpacked_from` where each tarball shard artifact it reads is
/// unpacked. Nothing is written before every package is planned and checked.
fn recombine_unpacking(
    shards: &Path,
    config: &PackagingConfig,
    out: &Path,
    opts: &RecombineOptions,
    unpacked_from: &mut Vec<(String, String)>,
) -> Result<RecombineSummary, ArtifactError> {
    let mut components = collect_components(shards, config, opts)?;
    let staged = unpack_tarball_shards(&mut components, config, out, unpacked_from)?;
    validate(&components, config)?;
    let (mut summary, packages) = plan_packages(&components, config, opts)?;
    write_packages(&packages, staged, out, opts, &mut summary)?;
    Ok(summary)
}

/// The artifacts of every shard, per component (only `opts.component`'s when it names one).
fn collect_components(
    shards: &Path,
    config: &PackagingConfig,
    opts: &RecombineOptions,
) -> Result<BTreeMap<String, Collected>, ArtifactError> {
    let shard_names: Vec<String> = crate::sorted_subdirs(shards)?
        .iter()
        .filter_map(|d| d.file_name()?.to_str().map(str::to_owned))
        .collect();
    if !shard_names.contains(&config.primary_shard) {
        return Err(ArtifactError::invalid(
            shards.join(&config.primary_shard),
            "the primary shard is missing",
        ));
    }
    let mut components: BTreeMap<String, Collected> = BTreeMap::new();
    for shard in &shard_names {
        for (name, dir) in tarball::artifacts_in(&shards.join(shard))? {
            let Some((component, suffix)) = crate::split_artifact_name(&name) else {
                return Err(ArtifactError::invalid(dir, "not a split artifact name"));
            };
            if opts.component.as_deref().is_some_and(|c| c != component) {
                continue;
            }
            let c = components.entry(component.to_owned()).or_default();
            if suffix == "generic" {
                c.generic.insert(shard.clone(), dir);
            } else if parse_family(suffix).is_some()
                || parse_target(suffix).is_some_and(|t| t.features().is_empty())
            {
                c.arch
                    .entry(suffix.to_owned())
                    .or_default()
                    .push((shard.clone(), dir));
            } else {
                return Err(ArtifactError::invalid(
                    dir,
                    "neither <component>_generic nor <component>_<processor>: not a split output",
                ));
            }
        }
    }
    if let Some(c) = &opts.component {
        if !components.contains_key(c) {
            return Err(ArtifactError::Usage(format!(
                "no artifact of component {c:?} in {}",
                shards.display()
            )));
        }
    }
    Ok(components)
}

/// The artifacts read from here on (by name, so those of tarball shards can be chosen
/// before any is read), unpacked when they are tarballs; the output's stage they are
/// unpacked into, if any is.
fn unpack_tarball_shards(
    components: &mut BTreeMap<String, Collected>,
    config: &PackagingConfig,
    out: &Path,
    unpacked_from: &mut Vec<(String, String)>,
) -> Result<Option<Staged>, ArtifactError> {
    let v = config.validation;
    let mut staged = None;
    for c in components.values_mut() {
        // The arch artifacts some group takes (from the first shard providing each).
        let grouped: BTreeSet<String> = (config.architecture_groups.iter())
            .flat_map(|g| &g.architectures)
            .flat_map(|a| provider_suffixes(c, a))
            .collect();
        let generic = c.generic.iter_mut().filter(|(shard, _)| {
            v.verify_generic_artifacts_match || **shard == config.primary_shard
        });
        let arch = (c.arch.iter_mut())
            .filter(|(suffix, _)| grouped.contains(*suffix))
            .filter_map(|(_, from)| from.first_mut())
            .map(|(shard, path)| (&*shard, path));
        for (shard, path) in generic.chain(arch) {
            if tarball::is_tarball(path) {
                *path = unpack_shard_member(path, shard, out, &mut staged, unpacked_from)?;
            }
        }
    }
    Ok(staged)
}

/// The checks of `config.validation`, before anything is written.
fn validate(
    components: &BTreeMap<String, Collected>,
    config: &PackagingConfig,
) -> Result<(), ArtifactError> {
    let v = config.validation;
    let mut duplicates = Vec::new();
    let mut generic_mismatch = Vec::new();
    let mut missing_arch = Vec::new();
    let mut missing_generic = Vec::new();
    for (component, c) in components {
        let Some(primary) = c.generic.get(&config.primary_shard) else {
            missing_generic.push(format!(
                "{component}: the primary shard {} has no {component}_generic",
                config.primary_shard
            ));
            continue;
        };
        for (suffix, from) in &c.arch {
            if from.len() > 1 && v.error_on_duplicate_device_code {
                duplicates.push(format!(
                    "{component}_{suffix} is provided by shards {}",
                    from.iter()
                        .map(|(s, _)| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        if v.verify_generic_artifacts_match {
            for (shard, dir) in &c.generic {
                if shard != &config.primary_shard {
                    for p in compare_generic(primary, dir)? {
                        generic_mismatch.push(format!(
                            "{component}_generic of {shard} vs {}: {p}",
                            config.primary_shard
                        ));
                    }
                }
            }
        }
        if v.error_on_missing_architecture && !c.arch.is_empty() {
            for g in &config.architecture_groups {
                for a in &g.architectures {
                    if provider_suffixes(c, a).is_empty() {
                        missing_arch.push(format!(
                            "{component}: no shard provides {a} (group {})",
                            g.name
                        ));
                    }
                }
            }
        }
    }
    for (what, problems) in [
        (
            "components without a generic artifact in the primary shard",
            missing_generic,
        ),
        (
            "duplicate device code (error_on_duplicate_device_code)",
            duplicates,
        ),
        (
            "generic artifacts differ (verify_generic_artifacts_match)",
            generic_mismatch,
        ),
        (
            "missing architectures (error_on_missing_architecture)",
            missing_arch,
        ),
    ] {
        if !problems.is_empty() {
            return Err(ArtifactError::Validation { what, problems });
        }
    }
    Ok(())
}

/// Every package planned in full, its installed paths checked, before anything is written.
fn plan_packages(
    components: &BTreeMap<String, Collected>,
    config: &PackagingConfig,
    opts: &RecombineOptions,
) -> Result<(RecombineSummary, Vec<Package>), ArtifactError> {
    let mut summary = RecombineSummary {
        components: Vec::new(),
    };
    let mut packages: Vec<Package> = Vec::new();
    let mut index_problems = Vec::new();
    for (component, c) in components {
        let (cs, planned, problems) = plan_component(component, c, config, opts.group_archives)?;
        summary.components.push(cs);
        packages.extend(planned);
        index_problems.extend(problems);
    }
    let collisions = shared_paths(packages.iter().map(|p| {
        let entries = p.items.iter().filter(|((_, rel), _)| !rel.is_empty());
        let entries = entries.map(|((_, rel), item)| {
            let file = matches!(item, Item::File(_));
            (rel.as_str(), Sharing::of(rel, *item == Item::Dir, file))
        });
        (p.name.as_str(), entries)
    }));
    if !collisions.is_empty() {
        return Err(ArtifactError::Validation {
            what: "installed paths shared by two packages (packages must install side by side)",
            problems: collisions,
        });
    }
    if !index_problems.is_empty() {
        return Err(ArtifactError::Validation {
            what: "one module's archive for one target in two packages",
            problems: index_problems,
        });
    }
    Ok((summary, packages))
}

/// Writes `packages` into the output's stage (`staged`, when tarball shards were unpacked
/// into it) and publishes them; notes each group's file count in `summary`.
fn write_packages(
    packages: &[Package],
    staged: Option<Staged>,
    out: &Path,
    opts: &RecombineOptions,
    summary: &mut RecombineSummary,
) -> Result<(), ArtifactError> {
    // Staging first: its sweep completes what a run killed while publishing began.
    let (stage, root, unpacked) = match staged {
        Some(Staged {
            stage,
            root,
            unpacked,
        }) => (stage, root, Some(unpacked)),
        None => {
            let (stage, root) = crate::stage_output(out)?;
            (stage, root, None)
        }
    };
    for p in packages {
        if let Some(existing) = tarball::existing(out, &p.name) {
            return Err(ArtifactError::invalid(
                existing,
                "already exists; refusing to overwrite an artifact",
            ));
        }
    }
    let threads = kpack_concurrency::threads::count(opts.threads);
    // Packages with indexes are written last (they take the group archives' sizes).
    let has_index = |p: &&Package| p.items.values().any(|i| matches!(i, Item::Index(_)));
    let (indexed, plain): (Vec<&Package>, Vec<&Package>) = packages.iter().partition(has_index);
    let order: Vec<&Package> = plain.into_iter().chain(indexed).collect();
    let last_use = match &unpacked {
        Some(unpacked) => last_uses(&order, unpacked.path()),
        None => BTreeMap::new(),
    };
    let mut files: BTreeMap<&str, usize> = BTreeMap::new();
    let mut sizes = BTreeMap::new();
    for (i, p) in order.iter().enumerate() {
        let movable = |from: &Path| last_use.get(from) == Some(&(i, true));
        files.insert(&p.name, p.write(&root, threads, &mut sizes, &movable)?);
    }
    drop(unpacked);
    for g in summary
        .components
        .iter_mut()
        .flat_map(|c| c.groups.iter_mut())
    {
        g.files = files[g.artifact.as_str()];
    }
    tarball::pack_staged(&root, packages.iter().map(|p| p.name.clone()), opts.output)?;
    stage.publish()?;
    Ok(())
}

/// Where each file unpacked from a tarball shard is last used: the index in `order` of the
/// last package that holds it, and whether that package may move it there.
///
/// A file unpacked from a tarball shard is moved into the last package that holds it
/// (copied into any earlier one): the stage then holds each member once. A file a group
/// archive reads is never moved by the package that reads it (its files are written in
/// parallel), so its last use is then noted as not movable.
fn last_uses<'p>(order: &[&'p Package], unpacked: &Path) -> BTreeMap<&'p Path, (usize, bool)> {
    let mut last_use: BTreeMap<&Path, (usize, bool)> = BTreeMap::new();
    for (i, p) in order.iter().enumerate() {
        for item in p.items.values() {
            match item {
                Item::File(from) if from.starts_with(unpacked) => {
                    let movable = last_use.get(from.as_path()) != Some(&(i, false));
                    last_use.insert(from, (i, movable));
                }
                Item::GroupArchive { sources, .. } => {
                    for (_, from) in sources {
                        if from.starts_with(unpacked) {
                            last_use.insert(from, (i, false));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    last_use
}

/// The output's stage, made before the packages are planned when tarball shards are unpacked
/// into it.
struct Staged {
    stage: kpack_fs::Stage,
    root: PathBuf,
    /// Where the tarball shards' artifacts are unpacked: beside the staged packages (on their
    /// file system, so that their files move in by rename), swept with them after a kill.
    unpacked: tempfile::TempDir,
}

/// Unpacks the artifact tarball `path` of `shard` into the output's stage (made on first use)
/// and returns the artifact directory, noted in `unpacked_from`. Read as one stream, into the place its files are moved
/// from into the packages: no temporary copy outside the output, no space beyond the outputs
/// but that of the members no package takes (manifests, records).
fn unpack_shard_member(
    path: &Path,
    shard: &str,
    out: &Path,
    staged: &mut Option<Staged>,
    unpacked_from: &mut Vec<(String, String)>,
) -> Result<PathBuf, ArtifactError> {
    let staged = match staged {
        Some(s) => s,
        None => {
            let (stage, root) = crate::stage_output(out)?;
            let beside = kpack_fs::parent_dir(&root);
            let unpacked = kpack_fs::temp_dir_in(beside).map_err(ArtifactError::io(beside))?;
            staged.insert(Staged {
                stage,
                root,
                unpacked,
            })
        }
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(kpack_tar::stem)
        .ok_or_else(|| ArtifactError::invalid(path, "expected <artifact>.tar.zst or .tar.xz"))?;
    let to = staged.unpacked.path().join(shard).join(name);
    let shown = |p: &Path| p.to_string_lossy().into_owned();
    unpacked_from.push((shown(&to), shown(path)));
    kpack_tar::unpack(path, &to)?;
    Ok(to)
}

/// Plans the packages of one component: its generic package (with the indexes) and one
/// package per group with at least one architecture available. Also returns the archives
/// that two packages provide for one module and target (no index is planned for those; the
/// caller reports the installed paths they share first, the likelier cause).
fn plan_component(
    component: &str,
    c: &Collected,
    config: &PackagingConfig,
    group_archives: Option<Compression>,
) -> Result<(ComponentSummary, Vec<Package>, Vec<String>), ArtifactError> {
    let primary = &c.generic[&config.primary_shard];
    let record = ArtifactRecord::read(primary)?;
    let mut generic = Package::new(
        format!("{component}_generic"),
        Meta::CopiedFrom(primary.clone()),
    );
    generic.add_artifact(primary)?;
    let mut cs = ComponentSummary {
        component: component.to_owned(),
        generic_from: config.primary_shard.clone(),
        generic_only: record.as_ref().is_some_and(|r| r.generic_only) || c.arch.is_empty(),
        groups: Vec::new(),
        indexes: Vec::new(),
        ignored_duplicates: Vec::new(),
    };
    for (suffix, from) in &c.arch {
        for (shard, _) in from.iter().skip(1) {
            cs.ignored_duplicates
                .push(format!("{component}_{suffix} of {shard}"));
        }
    }
    let mut packages = Vec::new();
    let mut archives: Vec<(String, IndexedArchive)> = Vec::new();
    for g in &config.architecture_groups {
        let mut suffixes: BTreeSet<String> = BTreeSet::new();
        let mut packaged = BTreeMap::new();
        let mut missing = Vec::new();
        for a in &g.architectures {
            let found = provider_suffixes(c, a);
            if found.is_empty() {
                missing.push(a.clone());
            }
            for s in found {
                packaged.insert(s.clone(), c.arch[&s][0].0.clone());
                suffixes.insert(s);
            }
        }
        if suffixes.is_empty() {
            continue;
        }
        let name = format!("{component}_{}", g.name);
        let mut package = Package::new(
            name.clone(),
            Meta::Written {
                prefixes: Vec::new(),
                record: Box::new(ArtifactRecord {
                    format_version: 1,
                    component: component.to_owned(),
                    kind: ArtifactKind::Group,
                    generic_only: false,
                    split_databases: Vec::new(),
                    binaries: Vec::new(),
                    group: Some(g.name.clone()),
                    architectures: suffixes.iter().cloned().collect(),
                }),
            },
        );
        let mut prefixes: BTreeSet<String> = BTreeSet::new();
        for s in &suffixes {
            prefixes.extend(package.add_artifact(&c.arch[s][0].1)?);
        }
        if let Meta::Written { prefixes: p, .. } = &mut package.meta {
            *p = prefixes.into_iter().collect();
        }
        if let Some(compression) = group_archives {
            package.merge_archives(&g.name, compression)?;
        }
        let mut archive_files = 0;
        for ((prefix, rel), item) in &package.items {
            match item {
                Item::File(src) if index::archive_dir(rel).is_some() => {
                    archive_files += 1;
                    archives.extend(
                        index::describe_archive(src, rel, &name)?
                            .into_iter()
                            .map(|a| (prefix.clone(), a)),
                    );
                }
                // Listed as the group archive; its size is filled in once it is written.
                Item::GroupArchive { sources, .. } => {
                    archive_files += 1;
                    let file = rel.rsplit('/').next().unwrap_or(rel);
                    for (_, src) in sources {
                        for mut a in index::describe_archive(src, rel, &name)? {
                            a.entry.file = file.to_owned();
                            archives.push((prefix.clone(), a));
                        }
                    }
                }
                _ => {}
            }
        }
        cs.groups.push(GroupSummary {
            group: g.name.clone(),
            artifact: name,
            architectures: packaged,
            missing,
            files: 0,
            archives: archive_files,
        });
        packages.push(package);
    }
    // One index per (prefix, module), into the generic package.
    let mut by_prefix: BTreeMap<String, Vec<IndexedArchive>> = BTreeMap::new();
    for (prefix, a) in archives {
        by_prefix.entry(prefix).or_default().push(a);
    }
    let mut problems = Vec::new();
    for (prefix, archives) in by_prefix {
        let indexes = match index::build(component, archives) {
            Ok(indexes) => indexes,
            Err(p) => {
                problems.extend(p);
                continue;
            }
        };
        for (rel, kpm) in indexes {
            let kpack_dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
            let mut dir = String::new();
            for part in kpack_dir.split('/') {
                dir = if dir.is_empty() {
                    part.to_owned()
                } else {
                    format!("{dir}/{part}")
                };
                let key = (prefix.clone(), dir.clone());
                generic.items.entry(key).or_insert(Item::Dir);
            }
            let key = (prefix.clone(), rel.clone());
            if generic.items.contains_key(&key) {
                return Err(ArtifactError::invalid(
                    primary.join(&prefix).join(&rel),
                    "already in the generic artifact, where recombine writes the index",
                ));
            }
            generic.items.insert(key, Item::Index(Box::new(kpm)));
            cs.indexes.push(format!("{}/{prefix}/{rel}", generic.name));
        }
    }
    packages.insert(0, generic);
    Ok((cs, packages, problems))
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

/// The arch artifact suffixes of `c` that hold files for processor `arch`: its own and any
/// family covering it.
fn provider_suffixes(c: &Collected, arch: &str) -> Vec<String> {
    c.arch
        .keys()
        .filter(|s| *s == arch || (parse_family(s).is_some() && family_covers(s, arch)))
        .cloned()
        .collect()
}

/// How two generic artifacts of one component (from different shards) differ, one line per
/// difference; empty when they are interchangeable.
///
/// Interchangeable means: the same manifest and record; the same entries (files,
/// directories, symlinks with the same link text, files with the same permissions); files
/// byte-identical, except rewritten binaries, which must have the same marker, the same
/// wrappers (index, magic, version, `reserved1`) and the same sections (names, types,
/// flags, sizes) apart from the size of `.hip_fatbin`. A shard with other targets has
/// another device-code size, and everything the linker placed after `.hip_fatbin` moves
/// with it (measured on the hipcc shards: `.text`, `.dynsym`, `.rela.dyn`, `.dynamic`,
/// `.eh_frame` differ while `.rodata`, `.got`, `.symtab` do not), so host bytes are
/// compared whole only where the layouts agree: two rewritten binaries whose `.hip_fatbin`
/// have the same address and size must be byte-identical.
pub fn compare_generic(a: &Path, b: &Path) -> Result<Vec<String>, ArtifactError> {
    let mut diffs = Vec::new();
    let (ma, mb) = (manifest::read(a)?, manifest::read(b)?);
    if ma != mb {
        diffs.push(format!("manifests differ: {ma:?} vs {mb:?}"));
        return Ok(diffs);
    }
    if ArtifactRecord::read(a)? != ArtifactRecord::read(b)? {
        diffs.push(format!("{RECORD} differs"));
    }
    for prefix in &ma {
        let (ra, rb) = (a.join(prefix), b.join(prefix));
        let ta: BTreeMap<String, TreeEntry> = if ra.is_dir() {
            crate::walk_tree(&ra)?.into_iter().collect()
        } else {
            BTreeMap::new()
        };
        let tb: BTreeMap<String, TreeEntry> = if rb.is_dir() {
            crate::walk_tree(&rb)?.into_iter().collect()
        } else {
            BTreeMap::new()
        };
        for (rel, ea) in &ta {
            let at = format!("{prefix}/{rel}");
            let Some(eb) = tb.get(rel) else {
                diffs.push(format!("{at}: only in the first"));
                continue;
            };
            if ea != eb {
                diffs.push(format!("{at}: {ea:?} vs {eb:?}"));
                continue;
            }
            if *ea == TreeEntry::File {
                if let Some(d) = compare_files(&ra.join(rel), &rb.join(rel))? {
                    diffs.push(format!("{at}: {d}"));
                }
            }
        }
        for rel in tb.keys().filter(|r| !ta.contains_key(*r)) {
            diffs.push(format!("{prefix}/{rel}: only in the second"));
        }
    }
    Ok(diffs)
}

/// The shape of a rewritten binary that must not depend on the shard's targets.
#[derive(Debug, PartialEq, Eq)]
struct HostShape {
    marker: Vec<u8>,
    wrappers: Vec<(usize, String, u32, u64)>,
    sections: Vec<(String, u32, u64, u64)>,
    fatbin: Option<(u64, u64)>,
}

fn host_shape(bytes: &[u8]) -> Option<HostShape> {
    let elf = kpack_elf::ElfFile::parse(bytes).ok()?;
    let fat = kpack_elf::inspect_elf(&elf).ok()?;
    if fat.kind != kpack_elf::FatBinaryKind::Kpacked {
        return None;
    }
    let marker = fat.marker.as_ref()?.bytes(bytes)?.to_vec();
    Some(HostShape {
        marker,
        wrappers: fat
            .wrappers
            .iter()
            .map(|w| (w.index, format!("{:?}", w.magic), w.version, w.reserved1))
            .collect(),
        sections: elf
            .section_headers()
            .iter()
            .map(|s| {
                let size = if s.name == kpack_elf::FATBIN_SECTION {
                    0
                } else {
                    s.sh_size
                };
                (s.name.clone(), s.sh_type, s.sh_flags, size)
            })
            .collect(),
        fatbin: elf
            .section_by_name(kpack_elf::FATBIN_SECTION)
            .map(|s| (s.sh_addr, s.sh_size)),
    })
}

fn compare_files(a: &Path, b: &Path) -> Result<Option<String>, ArtifactError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode() & 0o7777)
            .map_err(ArtifactError::io(p))
    };
    let (mode_a, mode_b) = (mode(a)?, mode(b)?);
    if mode_a != mode_b {
        return Ok(Some(format!("mode {mode_a:o} vs {mode_b:o}")));
    }
    let open = |p: &Path| -> Result<kpack_pipeline::FileBytes, ArtifactError> {
        let f = std::fs::File::open(p).map_err(ArtifactError::io(p))?;
        kpack_pipeline::map_file(&f, p).map_err(|source| ArtifactError::Source {
            path: p.to_owned(),
            source: Box::new(source),
        })
    };
    let (ba, bb) = (open(a)?, open(b)?);
    if ba[..] == bb[..] {
        return Ok(None);
    }
    Ok(Some(match (host_shape(&ba), host_shape(&bb)) {
        (Some(sa), Some(sb)) => {
            if sa.marker != sb.marker {
                "markers differ".to_owned()
            } else if sa.wrappers != sb.wrappers {
                format!("wrappers differ: {:?} vs {:?}", sa.wrappers, sb.wrappers)
            } else if sa.sections != sb.sections {
                "section tables differ beyond .hip_fatbin's size".to_owned()
            } else if sa.fatbin == sb.fatbin {
                "host bytes differ although the layouts agree".to_owned()
            } else {
                return Ok(None);
            }
        }
        _ => "contents differ".to_owned(),
    }))
}
