//! `kpack recombine`: the shards' split artifacts become one generic artifact and one
//! package per architecture group (the reduce step).
//!
//! Shards are the sub-directories of the shards directory, each holding split outputs
//! `C_generic` and `C_<processor>` (or `C_<family>`), as directories or `.tar.zst` files
//! ([`crate::tarball`]); the packages are written as directories or, with
//! [`OutputFormat::TarZst`], as `.tar.zst` files. For every component:
//! * `C_generic` is copied from the primary shard (symlinks kept);
//! * for each group of the configuration (in order) with at least one architecture
//!   available, `C_<group>` gets every file of the arch artifacts of its architectures
//!   (a family artifact such as AOTriton's `gfx11xx` joins every group holding an
//!   architecture it covers) — archives and database files only, never host code — and,
//!   per prefix and module, an index `<prefix>/.kpack/<module>.kpm` (spec §6: msgpack,
//!   `format_version` 1, `component_name`, `prefix` = the install prefix, `kpack_files`:
//!   target → `{file, size, kernel_count}` for every archive packaged, sorted by target).
//!   Binaries keep finding archives by `@GFXARCH@`; the index is for tools and people.
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

use kpack_archive::Archive;
use kpack_archive::kpm::{KpmEntry, KpmManifest};
use serde_json::Value;

use crate::handlers::{family_covers, parse_family, parse_target};
use crate::tarball::{self, OutputFormat};
use crate::{ArtifactError, ArtifactKind, ArtifactRecord, RECORD, Staging, TreeEntry, manifest};

/// One architecture group of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArchGroup {
    pub name: String,
    pub display_name: String,
    /// Processors (`gfx90a`), in configuration order.
    pub architectures: Vec<String>,
}

/// The `validation` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Validation {
    pub error_on_duplicate_device_code: bool,
    pub verify_generic_artifacts_match: bool,
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
    pub primary_shard: String,
    pub architecture_groups: Vec<ArchGroup>,
    pub validation: Validation,
}

impl PackagingConfig {
    /// Reads and checks a configuration file.
    pub fn load(path: &Path) -> Result<PackagingConfig, ArtifactError> {
        let text = std::fs::read_to_string(path).map_err(ArtifactError::io(path))?;
        Self::parse(&text).map_err(|problem| ArtifactError::invalid(path, problem))
    }

    /// Parses a configuration; the error says which key is wrong and what was expected.
    pub fn parse(text: &str) -> Result<PackagingConfig, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let root = root.as_object().ok_or("expected a JSON object")?;
        let primary_shard = root
            .get("primary_shard")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && !s.contains('/'))
            .ok_or("primary_shard: expected a non-empty shard directory name")?
            .to_owned();
        let groups = root
            .get("architecture_groups")
            .and_then(Value::as_object)
            .filter(|g| !g.is_empty())
            .ok_or("architecture_groups: expected a non-empty object")?;
        let mut architecture_groups = Vec::new();
        for (name, g) in groups {
            let at = format!("architecture_groups.{name}");
            if name.is_empty() || name.contains('/') || name == "generic" {
                return Err(format!("{at}: invalid group name"));
            }
            let g = g.as_object().ok_or(format!("{at}: expected an object"))?;
            let display_name = match g.get("display_name") {
                None => name.clone(),
                Some(v) => v
                    .as_str()
                    .ok_or(format!("{at}.display_name: expected a string"))?
                    .to_owned(),
            };
            let list = g
                .get("architectures")
                .and_then(Value::as_array)
                .filter(|a| !a.is_empty())
                .ok_or(format!("{at}.architectures: expected a non-empty array"))?;
            let mut architectures = Vec::new();
            for a in list {
                let arch = a
                    .as_str()
                    .filter(|s| parse_target(s).is_some_and(|t| t.features().is_empty()))
                    .ok_or(format!(
                        "{at}.architectures: expected GPU processor names (gfx90a, gfx1100, gfx11-generic), got {a}"
                    ))?;
                if architectures.iter().any(|x| x == arch) {
                    return Err(format!("{at}.architectures: {arch} listed twice"));
                }
                architectures.push(arch.to_owned());
            }
            architecture_groups.push(ArchGroup {
                name: name.clone(),
                display_name,
                architectures,
            });
        }
        let mut validation = Validation::default();
        if let Some(v) = root.get("validation") {
            let v = v.as_object().ok_or("validation: expected an object")?;
            for (key, value) in v {
                let flag = value
                    .as_bool()
                    .ok_or(format!("validation.{key}: expected true or false"))?;
                match key.as_str() {
                    "error_on_duplicate_device_code" => {
                        validation.error_on_duplicate_device_code = flag
                    }
                    "verify_generic_artifacts_match" => {
                        validation.verify_generic_artifacts_match = flag
                    }
                    "error_on_missing_architecture" => {
                        validation.error_on_missing_architecture = flag
                    }
                    _ => return Err(format!("validation.{key}: unknown flag")),
                }
            }
        }
        Ok(PackagingConfig {
            primary_shard,
            architecture_groups,
            validation,
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
}

/// One group package written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupSummary {
    pub group: String,
    pub artifact: String,
    /// The architectures packaged and the shard each came from.
    pub architectures: BTreeMap<String, String>,
    /// Group architectures no shard provided.
    pub missing: Vec<String>,
    pub files: usize,
    pub archives: usize,
    pub indexes: usize,
}

/// One component recombined.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ComponentSummary {
    pub component: String,
    pub generic_from: String,
    pub generic_only: bool,
    pub groups: Vec<GroupSummary>,
    /// Arch artifacts left out because an earlier shard provided the same architecture.
    pub ignored_duplicates: Vec<String>,
}

/// What [`recombine`] did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RecombineSummary {
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
    let view = tarball::view(shards)?;
    let shards = view.path();
    let mut shard_names: Vec<String> = Vec::new();
    for e in std::fs::read_dir(shards).map_err(ArtifactError::io(shards))? {
        let e = e.map_err(ArtifactError::io(shards))?;
        if e.path().is_dir() {
            if let Some(n) = e.file_name().to_str() {
                shard_names.push(n.to_owned());
            }
        }
    }
    shard_names.sort();
    if !shard_names.contains(&config.primary_shard) {
        return Err(ArtifactError::invalid(
            shards.join(&config.primary_shard),
            "the primary shard is missing",
        ));
    }
    let mut components: BTreeMap<String, Collected> = BTreeMap::new();
    for shard in &shard_names {
        for (name, dir) in crate::artifact_dirs(&shards.join(shard))? {
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

    // Validation, before anything is written.
    let v = config.validation;
    let mut duplicates = Vec::new();
    let mut generic_mismatch = Vec::new();
    let mut missing_arch = Vec::new();
    let mut missing_generic = Vec::new();
    for (component, c) in &components {
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

    for component in components.keys() {
        for name in std::iter::once(format!("{component}_generic")).chain(
            config
                .architecture_groups
                .iter()
                .map(|g| format!("{component}_{}", g.name)),
        ) {
            if let Some(existing) = tarball::existing(out, &name) {
                return Err(ArtifactError::invalid(
                    existing,
                    "already exists; refusing to overwrite an artifact",
                ));
            }
        }
    }
    let staging = Staging::new(out, "recombine")?;
    let threads = crate::thread_count(opts.threads);
    let mut summary = RecombineSummary {
        components: Vec::new(),
    };
    for (component, c) in &components {
        let primary = &c.generic[&config.primary_shard];
        let record = ArtifactRecord::read(primary)?;
        let generic_out = staging.path().join(format!("{component}_generic"));
        copy_artifact(primary, &generic_out, threads)?;
        let mut cs = ComponentSummary {
            component: component.clone(),
            generic_from: config.primary_shard.clone(),
            generic_only: record.as_ref().is_some_and(|r| r.generic_only) || c.arch.is_empty(),
            groups: Vec::new(),
            ignored_duplicates: Vec::new(),
        };
        for (suffix, from) in &c.arch {
            for (shard, _) in from.iter().skip(1) {
                cs.ignored_duplicates
                    .push(format!("{component}_{suffix} of {shard}"));
            }
        }
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
            let dest = staging.path().join(&name);
            std::fs::create_dir_all(&dest).map_err(ArtifactError::io(&dest))?;
            let mut prefixes: BTreeSet<String> = BTreeSet::new();
            let mut files = 0;
            for s in &suffixes {
                let dir = &c.arch[s][0].1;
                prefixes.extend(manifest::read(dir)?);
                files += copy_artifact_files(dir, &dest, threads)?;
            }
            let prefixes: Vec<String> = prefixes.into_iter().collect();
            manifest::write(&dest, &prefixes)?;
            let (archives, indexes) = write_indexes(&dest, component, &prefixes)?;
            ArtifactRecord {
                format_version: 1,
                component: component.clone(),
                kind: ArtifactKind::Group,
                generic_only: false,
                split_databases: Vec::new(),
                binaries: Vec::new(),
                group: Some(g.name.clone()),
                architectures: suffixes.iter().cloned().collect(),
            }
            .write(&dest)?;
            cs.groups.push(GroupSummary {
                group: g.name.clone(),
                artifact: name,
                architectures: packaged,
                missing,
                files,
                archives,
                indexes,
            });
        }
        summary.components.push(cs);
    }
    tarball::pack_staged(
        staging.path(),
        summary.components.iter().flat_map(|c| {
            std::iter::once(format!("{}_generic", c.component))
                .chain(c.groups.iter().map(|g| g.artifact.clone()))
        }),
        opts.output,
    )?;
    staging.commit()?;
    Ok(summary)
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

/// Copies a whole artifact (manifest, record and prefix trees; symlinks kept).
fn copy_artifact(from: &Path, to: &Path, threads: usize) -> Result<usize, ArtifactError> {
    std::fs::create_dir_all(to).map_err(ArtifactError::io(to))?;
    crate::copy_file(&from.join(manifest::MANIFEST), &to.join(manifest::MANIFEST))?;
    if from.join(RECORD).exists() {
        crate::copy_file(&from.join(RECORD), &to.join(RECORD))?;
    }
    copy_artifact_files(from, to, threads)
}

/// Copies the prefix trees of an artifact into `to`; a file already there must be
/// identical (two artifacts of a group may ship the same file, never different ones).
fn copy_artifact_files(from: &Path, to: &Path, threads: usize) -> Result<usize, ArtifactError> {
    let mut files = Vec::new();
    for prefix in manifest::read(from)? {
        let root = from.join(&prefix);
        if !root.is_dir() {
            continue;
        }
        std::fs::create_dir_all(to.join(&prefix)).map_err(ArtifactError::io(to.join(&prefix)))?;
        for (rel, entry) in crate::walk_tree(&root)? {
            let src = root.join(&rel);
            let dst = to.join(&prefix).join(&rel);
            match entry {
                TreeEntry::Dir => std::fs::create_dir_all(&dst).map_err(ArtifactError::io(&dst))?,
                TreeEntry::Symlink(t) => {
                    if std::fs::symlink_metadata(&dst).is_err() {
                        crate::copy_symlink(&t, &dst)?;
                    } else if std::fs::read_link(&dst).ok().as_ref() != Some(&t) {
                        return Err(ArtifactError::invalid(
                            &src,
                            format!("conflicts with {}", dst.display()),
                        ));
                    }
                }
                TreeEntry::File => files.push((src, dst)),
            }
        }
    }
    let n = files.len();
    crate::parallel_map(&files, threads, |_, (src, dst)| {
        if dst.exists() {
            let same = std::fs::read(src).map_err(ArtifactError::io(src))?
                == std::fs::read(dst).map_err(ArtifactError::io(dst))?;
            if !same {
                return Err(ArtifactError::invalid(
                    src,
                    format!("differs from {} already packaged", dst.display()),
                ));
            }
            return Ok(());
        }
        crate::copy_file(src, dst).map(|_| ())
    })?;
    Ok(n)
}

/// Writes `<prefix>/.kpack/<module>.kpm` for every module with archives in `dest`; returns
/// (archives, indexes).
fn write_indexes(
    dest: &Path,
    component: &str,
    prefixes: &[String],
) -> Result<(usize, usize), ArtifactError> {
    let (mut archives, mut indexes) = (0, 0);
    for prefix in prefixes {
        let dir = dest.join(prefix).join(".kpack");
        if !dir.is_dir() {
            continue;
        }
        let mut modules: BTreeMap<String, Vec<(String, KpmEntry)>> = BTreeMap::new();
        for (rel, entry) in crate::walk_tree(&dir)? {
            if entry != TreeEntry::File || rel.contains('/') || !rel.ends_with(".kpack") {
                continue;
            }
            let path = dir.join(&rel);
            let a = Archive::open(&path).map_err(|source| ArtifactError::Archive {
                path: path.clone(),
                source: Box::new(source),
            })?;
            let [target] = a.gfx_arches() else {
                return Err(ArtifactError::invalid(
                    &path,
                    format!(
                        "expected one architecture in gfx_arches, found {:?}",
                        a.gfx_arches()
                    ),
                ));
            };
            let size = std::fs::metadata(&path)
                .map_err(ArtifactError::io(&path))?
                .len();
            modules.entry(a.group_name().to_owned()).or_default().push((
                target.clone(),
                KpmEntry {
                    file: rel.clone(),
                    size,
                    kernel_count: a.entries().count() as u64,
                },
            ));
            archives += 1;
        }
        for (module, mut kpack_files) in modules {
            kpack_files.sort_by(|a, b| a.0.cmp(&b.0));
            let bytes = KpmManifest {
                format_version: 1,
                component_name: component.to_owned(),
                prefix: prefix.clone(),
                kpack_files,
            }
            .encode()
            .map_err(|e| ArtifactError::invalid(&dir, format!("encoding {module}.kpm: {e}")))?;
            let path = dir.join(format!("{module}.kpm"));
            std::fs::write(&path, bytes).map_err(ArtifactError::io(&path))?;
            indexes += 1;
        }
    }
    Ok((archives, indexes))
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
