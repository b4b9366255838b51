//! `kpack recombine`: the shards' split artifacts become one generic artifact and one
//! package per architecture group (the reduce step).
//!
//! Shards are the sub-directories of the shards directory, each holding split outputs
//! `C_generic` and `C_<processor>` (or `C_<family>`, or, as the reference splits,
//! `C_<target ID>` such as `demo_lib_gfx90a:xnack+`, packaged with its processor), as
//! directories or `.tar.zst` files
//! ([`crate::tarball`]: the components are recombined one per worker, the largest first;
//! each tarball a component's packages take is unpacked in one pass beside the output's
//! stage, its files moved from there into package directories or packed from there into
//! package tarballs, and removed once the component's packages are written, so nothing is
//! extracted to a temporary directory and a killed run leaves nothing the next run does
//! not sweep); the packages are written as directories or, with
//! [`OutputFormat::TarZst`], as `.tar.zst` files. A tarball shard's symbolic links are not
//! made on disk when it is unpacked, and its files' modes are not read back from there: both
//! are taken from its members' headers ([`ShardRecords`]) and written into the output
//! tarballs ([`kpack_tar::pack_dir_recorded`]), so a recombine gives the same tarballs on a
//! disk that keeps neither (Windows), as a split does. For every component:
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
//! ships as the same file. That is checked before anything is published.
//! `artifact_manifest.txt` and `kpack_artifact.json` sit beside the prefixes: they describe
//! the artifact and are never installed.
//!
//! The configuration's `validation` flags are enforced (spec §5.4 ignores them), all
//! checked before anything is published (those the artifacts' names answer before any is
//! read, the others as each component is recombined):
//! * `error_on_duplicate_device_code` (default true): two shards providing an artifact for
//!   the same architecture of a component is an error; when false the first shard in name
//!   order wins and the others are reported as ignored;
//! * `verify_generic_artifacts_match` (default false): every shard's generic artifact must
//!   be interchangeable with the primary's ([`compare_generic`]);
//! * `error_on_missing_architecture` (default false): a group architecture that no shard
//!   provides for a component with device code is an error; otherwise it is reported.
//!
//! Whatever the flags say, recombine publishes no code that no marker reaches: every archive a
//! group package installs must be found by a marker of the generic package, and every marker
//! must find an archive (`recombine/reach.rs`; shards split by the reference and by kpack name their
//! archives differently, and are refused together).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use kpack_archive::Compression;

use crate::tarball::{self, OutputFormat};
use crate::{ArtifactError, ArtifactKind, ArtifactRecord};
use kpack_package::handlers::{family_covers, parse_family, parse_target};
use kpack_package::index::{self, IndexedArchive};

mod config;
mod generic;
mod package;
mod reach;
mod shards;
mod side_by_side;

pub use config::{ArchGroup, ConfigError, PackagingConfig, Validation};
pub use generic::compare_generic;
use package::{Item, Meta, Package};
use shards::{ShardRecords, prefix_tree};
use side_by_side::{Installed, side_by_side};
pub(crate) use side_by_side::{Sharing, shared_paths};

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
/// unpacked. Nothing is published before every package is planned, checked and written.
///
/// The components are recombined one per worker, the largest first: each one's tarball
/// shards unpacked, its packages planned, checked and written (packed), and what was
/// unpacked for it removed (and its tarballs synced) by a disk thread ([`Chore`]), while
/// the next is unpacked. So the stage holds the unpacked
/// shards of the components in flight only, not the whole input's, and a worker's
/// decoding and disk writes overlap another's packing (a distribution's recombine kept
/// 1.4 cores of 2 busy with a phase per step over every component, most of it in the
/// kernel writing and reading back 8 GB of unpacked shards). A component unpacks and
/// packs on workers of its own too, so that one left alone at the end (a distribution's
/// largest, or the one large package of a few) still keeps every core busy: two
/// components at once run up to twice `threads` threads for a while.
fn recombine_unpacking(
    shards: &Path,
    config: &PackagingConfig,
    out: &Path,
    opts: &RecombineOptions,
    unpacked_from: &mut Vec<(String, String)>,
) -> Result<RecombineSummary, ArtifactError> {
    let mut components = collect_components(shards, config, opts)?;
    validate(&components, config)?;
    // Largest first (by the bytes of its tarball shards), so that the last to finish is a
    // small one; the results come back in component order whatever the order of the work.
    let weights: Vec<u64> = components.values().map(shards::tarball_bytes).collect();
    let mut order: Vec<usize> = (0..components.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(weights[i]));
    // Staging first: its sweep completes what a run killed while publishing began.
    let (stage, root) = crate::stage_output(out)?;
    let unpacking = shards::place_tarball_shards(&mut components, config, &root, unpacked_from)?;
    let threads = kpack_concurrency::threads::count(opts.threads);
    let work: Vec<(&String, &Collected)> = components.iter().collect();
    let done = std::thread::scope(|scope| {
        let (chores, pending) = std::sync::mpsc::channel::<Chore>();
        let disk = scope.spawn(move || pending.into_iter().try_for_each(Chore::run));
        let done: Result<_, ArtifactError> =
            kpack_concurrency::threads::map(&order, threads, |_, &i| {
                let (component, c) = work[i];
                let tarballs = unpacking.of(component);
                let mut r =
                    recombine_component(component, c, tarballs, config, opts, &root, threads)?;
                for chore in r.chores.drain(..) {
                    // Refused only once the disk thread has ended on an error, which is reported.
                    chores.send(chore).ok();
                }
                Ok(r)
            });
        drop(chores);
        let disk = disk
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let done = done?;
        disk.map(|()| done)
    })?;
    let mut done: Vec<(usize, Recombined)> = order.into_iter().zip(done).collect();
    done.sort_by_key(|(i, _)| *i);
    drop(unpacking);
    side_by_side(done.iter().flat_map(|(_, r)| &r.installed))?;
    for (_, r) in &done {
        for (name, _) in &r.installed {
            if let Some(existing) = tarball::existing(out, name) {
                return Err(ArtifactError::invalid(
                    existing,
                    "already exists; refusing to overwrite an artifact",
                ));
            }
        }
    }
    stage.publish()?;
    Ok(RecombineSummary {
        components: done.into_iter().map(|(_, r)| r.summary).collect(),
    })
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
            } else if parse_family(suffix).is_some() || parse_target(suffix).is_some() {
                c.arch
                    .entry(suffix.to_owned())
                    .or_default()
                    .push((shard.clone(), dir));
            } else {
                return Err(ArtifactError::invalid(
                    dir,
                    "neither <component>_generic nor <component>_<target or family>: not a split output",
                ));
            }
        }
    }
    if let Some(c) = &opts.component {
        if !components.contains_key(c) {
            return Err(ArtifactError::Usage(format!(
                "no artifact of component {c} in {}",
                shards.display()
            )));
        }
    }
    Ok(components)
}

/// The checks of `config.validation` that the shards' artifact names answer, over every
/// component, before anything is read (`verify_generic_artifacts_match` reads the generic
/// artifacts: [`recombine_component`] checks it).
fn validate(
    components: &BTreeMap<String, Collected>,
    config: &PackagingConfig,
) -> Result<(), ArtifactError> {
    let v = config.validation;
    let mut duplicates = Vec::new();
    let mut missing_arch = Vec::new();
    let mut missing_generic = Vec::new();
    for (component, c) in components {
        if !c.generic.contains_key(&config.primary_shard) {
            missing_generic.push(format!(
                "{component}: the primary shard {} has no {component}_generic",
                config.primary_shard
            ));
            continue;
        }
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

/// One component recombined into the stage.
struct Recombined {
    summary: ComponentSummary,
    /// Its packages' installed paths, for the check across components.
    installed: Vec<Installed>,
    /// What is left to do on the disk once it is written, no worker waiting for it.
    chores: Vec<Chore>,
}

/// Disk work a worker hands to the disk thread of [`recombine_unpacking`] rather than wait
/// for it: removing a tree and syncing a file keep a thread waiting on the disk for most of
/// their time (a distribution's 8 GB of unpacked shards took a worker 5 s of waits to
/// remove, on a file system that discards freed blocks as each file is removed), while the
/// other workers need the cores. The disk thread is done before anything is published.
enum Chore {
    /// Remove this directory's tree (a tarball shard unpacked).
    Remove(PathBuf),
    /// Sync this file (a package tarball) to the disk ([`tarball::sync`]).
    Sync(PathBuf),
}

impl Chore {
    fn run(self) -> Result<(), ArtifactError> {
        match self {
            Chore::Remove(dir) => kpack_fs::remove_tree(&dir).map_err(ArtifactError::io(&dir)),
            Chore::Sync(file) => tarball::sync(&file),
        }
    }
}

/// Recombines `component` into the stage `root`: unpacks its `tarballs` (tarball shard,
/// directory), checks its generic artifacts against the primary's when the configuration
/// asks, plans its packages and checks them, and writes them; what was unpacked is left to
/// remove and the tarballs written to sync ([`Recombined::chores`]).
fn recombine_component(
    component: &str,
    c: &Collected,
    tarballs: &[(PathBuf, PathBuf)],
    config: &PackagingConfig,
    opts: &RecombineOptions,
    root: &Path,
    threads: usize,
) -> Result<Recombined, ArtifactError> {
    let records = shards::unpack(tarballs, threads)?;
    if config.validation.verify_generic_artifacts_match {
        let primary = &c.generic[&config.primary_shard];
        let mut mismatch = Vec::new();
        for (shard, dir) in &c.generic {
            if shard != &config.primary_shard {
                let a = (primary.as_path(), records.of(primary));
                let b = (dir.as_path(), records.of(dir));
                for p in generic::compare_recorded(a, b)? {
                    mismatch.push(format!(
                        "{component}_generic of {shard} vs {}: {p}",
                        config.primary_shard
                    ));
                }
            }
        }
        if !mismatch.is_empty() {
            return Err(ArtifactError::Validation {
                what: "generic artifacts differ (verify_generic_artifacts_match)",
                problems: mismatch,
            });
        }
    }
    let (mut summary, packages, index_problems) =
        plan_component(component, c, config, opts.group_archives, &records)?;
    let installed: Vec<Installed> = packages
        .iter()
        .map(|p| {
            let entries = p.items.iter().filter(|((_, rel), _)| !rel.is_empty());
            let entries = entries.map(|((_, rel), item)| {
                let file = matches!(item, Item::File(_));
                (rel.clone(), Sharing::of(rel, *item == Item::Dir, file))
            });
            (p.name.clone(), entries.collect())
        })
        .collect();
    // Within the component now, across components once every one is planned.
    side_by_side(&installed)?;
    if !index_problems.is_empty() {
        return Err(ArtifactError::Validation {
            what: "one module's archive for one target in two packages",
            problems: index_problems,
        });
    }
    if !c.arch.is_empty() {
        let unreached = reach::problems(component, &packages[0], &packages[1..])?;
        if !unreached.is_empty() {
            return Err(ArtifactError::Validation {
                what: "code no marker would reach (the generic package's markers must find every archive)",
                problems: unreached,
            });
        }
    }
    write_packages(&packages, tarballs, root, opts, threads, &mut summary)?;
    let mut chores: Vec<Chore> = (tarballs.iter())
        .map(|(_, dir)| Chore::Remove(dir.clone()))
        .collect();
    if opts.output == OutputFormat::TarZst {
        let packed = packages
            .iter()
            .map(|p| root.join(format!("{}.tar.zst", p.name)));
        chores.extend(packed.map(Chore::Sync));
    }
    Ok(Recombined {
        summary,
        installed,
        chores,
    })
}

/// Writes one component's `packages` into the stage `root` (in the output's format); notes
/// each group's file count in `summary`. `tarballs`: its tarball shards and the directories
/// they were unpacked into, whose files a directory output moves rather than copies.
fn write_packages(
    packages: &[Package],
    tarballs: &[(PathBuf, PathBuf)],
    root: &Path,
    opts: &RecombineOptions,
    threads: usize,
    summary: &mut ComponentSummary,
) -> Result<(), ArtifactError> {
    // Packages with indexes are written last (they take the group archives' sizes).
    let has_index = |p: &&Package| p.items.values().any(|i| matches!(i, Item::Index(_)));
    let (indexed, plain): (Vec<&Package>, Vec<&Package>) = packages.iter().partition(has_index);
    let order: Vec<&Package> = plain.into_iter().chain(indexed).collect();
    // A tarball takes the packages' links from their plan, not from the disk (which on
    // Windows may not hold one), and their files from the shards where they lie: nothing
    // is copied to be packed.
    let all_on_disk = opts.output == OutputFormat::Dir;
    let unpacked: Vec<&Path> = tarballs.iter().map(|(_, dir)| dir.as_path()).collect();
    let last_use = match all_on_disk {
        true => last_uses(&order, &unpacked),
        false => BTreeMap::new(),
    };
    let mut files: BTreeMap<&str, usize> = BTreeMap::new();
    let mut sizes = BTreeMap::new();
    for (i, p) in order.iter().enumerate() {
        let movable = |from: &Path| last_use.get(from) == Some(&(i, true));
        let written = p.write(root, threads, &mut sizes, &movable, all_on_disk)?;
        files.insert(&p.name, written);
    }
    for g in &mut summary.groups {
        g.files = files[g.artifact.as_str()];
    }
    let names: Vec<String> = packages.iter().map(|p| p.name.clone()).collect();
    let recorded: HashMap<String, kpack_tar::Recorded> = packages
        .iter()
        .map(|p| (p.name.clone(), p.recorded()))
        .collect();
    tarball::pack_staged(root, &names, opts.output, threads, &recorded)
}

/// Where each file unpacked from a tarball shard (into one of the directories `unpacked`) is
/// last used: the index in `order` of the last package that holds it, and whether that
/// package may move it there.
///
/// A file unpacked from a tarball shard is moved into the last package that holds it
/// (copied into any earlier one): the stage then holds each member once. A file a group
/// archive reads is never moved by the package that reads it (its files are written in
/// parallel), so its last use is then noted as not movable.
fn last_uses<'p>(order: &[&'p Package], unpacked: &[&Path]) -> BTreeMap<&'p Path, (usize, bool)> {
    let from_tarball = |from: &Path| unpacked.iter().any(|dir| from.starts_with(dir));
    let mut last_use: BTreeMap<&Path, (usize, bool)> = BTreeMap::new();
    for (i, p) in order.iter().enumerate() {
        for item in p.items.values() {
            match item {
                Item::File(from) if from_tarball(from) => {
                    let movable = last_use.get(from.as_path()) != Some(&(i, false));
                    last_use.insert(from, (i, movable));
                }
                Item::GroupArchive { sources, .. } => {
                    for (_, from) in sources {
                        if from_tarball(from) {
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

/// Plans the packages of one component: its generic package (with the indexes) and one
/// package per group with at least one architecture available. Also returns the archives
/// that two packages provide for one module and target (no index is planned for those; the
/// caller reports the installed paths they share first, the likelier cause).
fn plan_component(
    component: &str,
    c: &Collected,
    config: &PackagingConfig,
    group_archives: Option<Compression>,
    records: &ShardRecords,
) -> Result<(ComponentSummary, Vec<Package>, Vec<String>), ArtifactError> {
    let primary = &c.generic[&config.primary_shard];
    let record = ArtifactRecord::read(primary)?;
    let mut generic = Package::new(
        format!("{component}_generic"),
        Meta::CopiedFrom(primary.clone()),
    );
    generic.add_artifact(primary, records.of(primary))?;
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
                    architectures: suffixes
                        .iter()
                        .map(|s| suffix_architecture(s))
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect(),
                }),
            },
        );
        let mut prefixes: BTreeSet<String> = BTreeSet::new();
        for s in &suffixes {
            let from = &c.arch[s][0].1;
            prefixes.extend(package.add_artifact(from, records.of(from))?);
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
    let problems = add_indexes(component, archives, primary, &mut generic, &mut cs)?;
    packages.insert(0, generic);
    Ok((cs, packages, problems))
}

/// Adds to the generic package one index per (prefix, module) listing `archives`, noted in
/// `cs`; returns the archives two packages provide for one module and target (no index is
/// planned for those).
fn add_indexes(
    component: &str,
    archives: Vec<(String, IndexedArchive)>,
    primary: &Path,
    generic: &mut Package,
    cs: &mut ComponentSummary,
) -> Result<Vec<String>, ArtifactError> {
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
    Ok(problems)
}

/// The arch artifact suffixes of `c` that hold files for processor `arch`: its own and any
/// family covering it.
fn provider_suffixes(c: &Collected, arch: &str) -> Vec<String> {
    c.arch
        .keys()
        .filter(|s| {
            suffix_architecture(s) == arch || (parse_family(s).is_some() && family_covers(s, arch))
        })
        .cloned()
        .collect()
}

/// The architecture an arch artifact's suffix names: a family, or a target's processor (the
/// reference names artifacts after target IDs, `demo_lib_gfx90a:xnack+`).
fn suffix_architecture(suffix: &str) -> String {
    match parse_target(suffix) {
        Some(t) if parse_family(suffix).is_none() => t.processor().to_owned(),
        _ => suffix.to_owned(),
    }
}
