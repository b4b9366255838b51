//! What the directory split and the tarball split ([`super::tar`]) share: the options and
//! summary, each entry's class and item, the modules of fat binaries, the output tree, one
//! fat binary split, and the records written at the end.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use kpack_archive::Compression;
use kpack_fs::{NameRules, OutputNames};
use kpack_tar::{Recorded, RecordedMember};
use kpack_target::TargetId;

use crate::tarball::OutputFormat;
use crate::{ArtifactError, ArtifactKind, ArtifactRecord, RecordBinary, TreeEntry, manifest};
use kpack_package::handlers::{self, DbArch, Handler};
use kpack_pipeline::transform::{self, HostState, TransformOptions};

/// How to split.
#[derive(Debug, Clone)]
pub struct SplitOptions {
    /// Database handlers, tried in this order.
    pub handlers: Vec<Handler>,
    /// Compression of the archives.
    pub compression: Compression,
    /// Worker threads; 0 = one per core.
    pub threads: usize,
    /// Directories or `.tar.zst` artifacts.
    pub output: OutputFormat,
    /// The names the outputs may have; a split is meant for Windows also when its artifact
    /// holds a `.dll` or `.exe` (see [`name_outputs`]).
    pub names: NameRules,
}

impl Default for SplitOptions {
    fn default() -> Self {
        SplitOptions {
            handlers: Vec::new(),
            compression: Compression::zstd(),
            threads: 0,
            output: OutputFormat::Dir,
            names: NameRules::for_output(false),
        }
    }
}

/// One artifact written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WrittenArtifact {
    /// The artifact's directory name.
    pub name: String,
    /// Regular files written (archives included).
    pub files: usize,
    /// `.kpack` archives among the files.
    pub archives: usize,
    /// Bytes of the regular files.
    pub bytes: u64,
}

/// What a split did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SplitSummary {
    /// The component.
    pub component: String,
    /// The artifact split.
    pub input: PathBuf,
    /// No device code: only the generic artifact was written.
    pub generic_only: bool,
    /// Fat binaries rewritten.
    pub fat_binaries: usize,
    /// Code objects archived.
    pub code_objects: usize,
    /// Database files moved to per-arch artifacts.
    pub database_files: usize,
    /// The artifacts written, generic first.
    pub artifacts: Vec<WrittenArtifact>,
}

/// Progress: called with (items done, items in total) as files are processed.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// The module name of a fat binary's file name (see the module docs).
pub fn module_name(file_name: &str) -> String {
    let stem = file_name.split('.').next().unwrap_or_default();
    match stem.strip_prefix("lib") {
        Some(rest) if !rest.is_empty() => rest.to_owned(),
        _ => stem.to_owned(),
    }
}

/// Where an entry goes.
#[derive(Debug, Clone)]
pub(crate) enum Class {
    Dir,
    Symlink(PathBuf),
    Plain,
    Db(DbArch),
    Fat,
}

#[derive(Clone)]
pub(crate) struct Item {
    pub(crate) prefix: String,
    pub(crate) rel: String,
    pub(crate) class: Class,
    /// A file's permission bits as the input recorded them (a tarball member's header),
    /// carried to the output tarball whatever its staged copy on disk keeps; `None` when
    /// the input is a directory, whose disk the staged copy's mode comes from.
    pub(crate) mode: Option<u32>,
}

/// What processing one item produced.
#[derive(Default)]
pub(crate) struct Done {
    /// (artifact suffix, prefix, bytes, is archive) of each file written to a per-arch artifact.
    arch_files: Vec<(String, u64, bool)>,
    generic_bytes: Option<u64>,
    code_objects: usize,
    binary: Option<RecordBinary>,
    /// The archives a fat binary's split wrote (the tarball split removes them should the
    /// binary's module turn out to be another: see [`super::tar`]).
    pub(crate) archives: Vec<PathBuf>,
}

/// Where a copied item (a plain or database file) goes; `None` for the other classes.
pub(crate) fn copy_destination(stage: &Path, component: &str, item: &Item) -> Option<PathBuf> {
    let artifact = match &item.class {
        Class::Plain => "generic",
        Class::Db(arch) => &arch.artifact,
        _ => return None,
    };
    Some(
        stage
            .join(format!("{component}_{artifact}"))
            .join(&item.prefix)
            .join(&item.rel),
    )
}

/// What the output tarballs carry of the items beyond their staged copies' bytes, by
/// artifact name: each symbolic link, and each file's mode as the input recorded it (a
/// fat binary's host rewrite keeps its input's). A Windows disk holds neither execute bits
/// nor (without a privilege) links, so a split's tarballs take them from here, and are the
/// same bytes on every system.
pub(crate) fn recorded(component: &str, items: &[Item]) -> HashMap<String, Recorded> {
    let mut recorded: HashMap<String, Recorded> = HashMap::new();
    for item in items {
        let (artifact, member) = match (&item.class, item.mode) {
            (Class::Symlink(target), _) => ("generic", RecordedMember::Symlink(target.clone())),
            (Class::Plain | Class::Fat, Some(mode)) => ("generic", RecordedMember::Mode(mode)),
            (Class::Db(arch), Some(mode)) => (arch.artifact.as_str(), RecordedMember::Mode(mode)),
            _ => continue,
        };
        recorded
            .entry(format!("{component}_{artifact}"))
            .or_default()
            .insert(format!("{}/{}", item.prefix, item.rel), member);
    }
    recorded
}

/// What copying `bytes` of an item of `class` produced.
pub(crate) fn copied(class: &Class, bytes: u64) -> Done {
    match class {
        Class::Db(arch) => Done {
            arch_files: vec![(arch.artifact.clone(), bytes, false)],
            ..Done::default()
        },
        _ => Done {
            generic_bytes: Some(bytes),
            ..Done::default()
        },
    }
}

/// Creates the generic artifact's prefixes, directories and symlinks, in order (cheap, and
/// files need their directories). Symlinks only for directory outputs: a tarball takes them
/// from [`recorded`], so that a split into tarballs never needs a link on disk (Windows
/// makes one only with a privilege).
pub(crate) fn create_tree(
    stage: &Path,
    component: &str,
    prefixes: &[String],
    items: &[Item],
    output: OutputFormat,
) -> Result<(), ArtifactError> {
    let generic = stage.join(format!("{component}_generic"));
    std::fs::create_dir_all(&generic).map_err(ArtifactError::io(&generic))?;
    for prefix in prefixes {
        let dir = generic.join(prefix);
        std::fs::create_dir_all(&dir).map_err(ArtifactError::io(&dir))?;
    }
    for item in items {
        let to = generic.join(&item.prefix).join(&item.rel);
        match &item.class {
            Class::Dir => std::fs::create_dir_all(&to).map_err(ArtifactError::io(&to))?,
            Class::Symlink(target) if output == OutputFormat::Dir => {
                crate::copy_symlink(target, &to)?
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes the manifests and records of the artifacts the items went to (one [`Done`] per
/// item), packs them when the output is tarballs, and sums up.
pub(crate) fn finish(
    input: &Path,
    stage: &Path,
    component: &str,
    opts: &SplitOptions,
    prefixes: &[String],
    items: &[Item],
    results: Vec<Done>,
) -> Result<SplitSummary, ArtifactError> {
    let generic = stage.join(format!("{component}_generic"));
    let mut summary = SplitSummary {
        component: component.to_owned(),
        input: input.to_owned(),
        generic_only: false,
        fat_binaries: 0,
        code_objects: 0,
        database_files: 0,
        artifacts: Vec::new(),
    };
    let mut generic_stats = WrittenArtifact {
        name: format!("{component}_generic"),
        files: 0,
        archives: 0,
        bytes: 0,
    };
    let mut arch: BTreeMap<String, (BTreeSet<String>, WrittenArtifact)> = BTreeMap::new();
    let mut binaries = Vec::new();
    for (item, done) in items.iter().zip(results) {
        if let Some(bytes) = done.generic_bytes {
            generic_stats.files += 1;
            generic_stats.bytes += bytes;
        }
        if matches!(item.class, Class::Db(_)) {
            summary.database_files += 1;
        }
        summary.code_objects += done.code_objects;
        for (suffix, bytes, is_archive) in done.arch_files {
            let name = format!("{component}_{suffix}");
            let (prefixes, stats) = arch.entry(suffix).or_insert_with(|| {
                (
                    BTreeSet::new(),
                    WrittenArtifact {
                        name,
                        files: 0,
                        archives: 0,
                        bytes: 0,
                    },
                )
            });
            prefixes.insert(item.prefix.clone());
            stats.files += 1;
            stats.archives += usize::from(is_archive);
            stats.bytes += bytes;
        }
        if let Some(b) = done.binary {
            summary.fat_binaries += 1;
            binaries.push(b);
        }
    }
    summary.generic_only = arch.is_empty();
    manifest::write(&generic, prefixes)?;
    ArtifactRecord {
        format_version: 1,
        component: component.to_owned(),
        kind: ArtifactKind::Generic,
        generic_only: summary.generic_only,
        split_databases: opts.handlers.iter().map(|h| h.name().to_owned()).collect(),
        binaries,
        group: None,
        architectures: Vec::new(),
    }
    .write(&generic)?;
    summary.artifacts.push(generic_stats);
    for (suffix, (prefixes, stats)) in arch {
        let dir = stage.join(&stats.name);
        manifest::write(&dir, &prefixes.into_iter().collect::<Vec<_>>())?;
        ArtifactRecord {
            format_version: 1,
            component: component.to_owned(),
            kind: ArtifactKind::Arch,
            generic_only: false,
            split_databases: Vec::new(),
            binaries: Vec::new(),
            group: None,
            architectures: vec![suffix],
        }
        .write(&dir)?;
        summary.artifacts.push(stats);
    }
    let names: Vec<String> = summary.artifacts.iter().map(|a| a.name.clone()).collect();
    let threads = kpack_concurrency::threads::count(opts.threads);
    let recorded = recorded(component, items);
    crate::tarball::pack_staged(stage, &names, opts.output, threads, &recorded)?;
    Ok(summary)
}

pub(crate) fn classify(
    path: &Path,
    rel: &str,
    entry: &TreeEntry,
    handlers: &[Handler],
) -> Result<Class, ArtifactError> {
    match entry {
        TreeEntry::Dir => return Ok(Class::Dir),
        TreeEntry::Symlink(t) => return Ok(Class::Symlink(t.clone())),
        TreeEntry::File => {}
    }
    if let Some(arch) = handlers::classify(handlers, rel) {
        return Ok(Class::Db(arch));
    }
    let file = std::fs::File::open(path).map_err(ArtifactError::io(path))?;
    let map = kpack_pipeline::map_file(&file, path).map_err(|source| ArtifactError::Source {
        path: path.to_owned(),
        source: Box::new(source),
    })?;
    let state = transform::check(&map).map_err(|source| ArtifactError::Transform {
        path: path.to_owned(),
        source: Box::new(source),
    })?;
    Ok(if state == HostState::Fat {
        Class::Fat
    } else {
        Class::Plain
    })
}

/// The module names of the fat items (by item index, see [`assign_modules`]) and the name
/// rules of the split, once every output the items name in `out` has been checked against
/// them, before anything is written: the files and directories of each artifact, and each
/// fat binary's archive names (`.kpack/<module>_@GFXARCH@.kpack`, the target spelled for the
/// rules). A split is meant for Windows when asked, on Windows, and when the artifact holds
/// a `.dll` or `.exe` (a Windows build's artifact: the same test on every system, so that a
/// split on Linux and one on Windows name the same archives).
pub(crate) fn name_outputs(
    out: &Path,
    component: &str,
    items: &[Item],
    opts: &SplitOptions,
) -> Result<(BTreeMap<usize, String>, NameRules), ArtifactError> {
    let modules = assign_modules(items)?;
    let rules = NameRules::for_output(
        opts.names.windows()
            || items
                .iter()
                .any(|i| matches!(i.class, Class::Fat) && windows_binary(&i.rel)),
    );
    let mut names = OutputNames::new(out, rules);
    for (i, item) in items.iter().enumerate() {
        let artifact = match &item.class {
            Class::Db(arch) => arch.artifact.as_str(),
            _ => "generic",
        };
        let member = format!("{component}_{artifact}/{}/{}", item.prefix, item.rel);
        names.check(&member)?;
        if let Some(module) = modules.get(&i) {
            // Every per-architecture artifact holds the same archive names but the target's;
            // one placeholder directory stands for all of them.
            names.check(&format!(
                "{component}_@GFXARCH@/{}/.kpack/{module}_@GFXARCH@.kpack",
                item.prefix
            ))?;
        }
    }
    Ok((modules, rules))
}

/// Whether a fat binary at `rel` is a Windows build's (a `.dll` or `.exe`), which makes the
/// split meant for Windows (see [`name_outputs`]).
pub(crate) fn windows_binary(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel).to_ascii_lowercase();
    name.ends_with(".dll") || name.ends_with(".exe")
}

/// Module names of the fat items (by item index); see the module docs.
fn assign_modules(items: &[Item]) -> Result<BTreeMap<usize, String>, ArtifactError> {
    let fat: Vec<usize> = (0..items.len())
        .filter(|&i| matches!(items[i].class, Class::Fat))
        .collect();
    let rels: Vec<&str> = fat.iter().map(|&i| items[i].rel.as_str()).collect();
    let names = module_names(&rels).map_err(|(a, b, name)| {
        let (a, b) = (&items[fat[a]], &items[fat[b]]);
        ArtifactError::invalid(
            format!("{}/{}", a.prefix, a.rel),
            format!(
                "its archives would be named {name} like those of {}/{}",
                b.prefix, b.rel
            ),
        )
    })?;
    Ok(fat.into_iter().zip(names).collect())
}

/// The module names of fat binaries at the relative paths `rels` (see the module docs):
/// [`module_name`] of the file name, or the path with `/` written `_` for every binary
/// whose module name another one shares. When even those collide: the indices of the two
/// binaries and the name.
pub fn module_names(rels: &[&str]) -> Result<Vec<String>, (usize, usize, String)> {
    let name_of = |rel: &str| module_name(rel.rsplit('/').next().unwrap_or(rel));
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for rel in rels {
        *count.entry(name_of(rel)).or_default() += 1;
    }
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut names = Vec::with_capacity(rels.len());
    for (i, rel) in rels.iter().enumerate() {
        let plain = name_of(rel);
        let name = if count[&plain] > 1 {
            rel.replace('/', "_")
        } else {
            plain
        };
        if let Some(&other) = taken.get(&name) {
            return Err((i, other, name));
        }
        taken.insert(name.clone(), i);
        names.push(name);
    }
    Ok(names)
}

/// Where a fat binary's host rewrite goes: its place in the generic artifact.
pub(crate) fn fat_output(stage: &Path, component: &str, item: &Item) -> PathBuf {
    stage
        .join(format!("{component}_generic"))
        .join(&item.prefix)
        .join(&item.rel)
}

pub(crate) fn split_fat(
    from: &Path,
    stage: &Path,
    component: &str,
    item: &Item,
    module: &str,
    compression: Compression,
    names: NameRules,
) -> Result<Done, ArtifactError> {
    let err = |source| ArtifactError::Transform {
        path: from.to_owned(),
        source: Box::new(source),
    };
    let file = std::fs::File::open(from).map_err(ArtifactError::io(from))?;
    let mode = file
        .metadata()
        .map_err(ArtifactError::io(from))?
        .permissions();
    let map = kpack_pipeline::map_file(&file, from).map_err(|source| ArtifactError::Source {
        path: from.to_owned(),
        source: Box::new(source),
    })?;
    let output = fat_output(stage, component, item);
    // A tarball's member may come before the directories the plan creates.
    if let Some(dir) = output.parent() {
        std::fs::create_dir_all(dir).map_err(ArtifactError::io(dir))?;
    }
    let depth = item.rel.matches('/').count();
    let search = format!("{}.kpack/{module}_@GFXARCH@.kpack", "../".repeat(depth));
    let kernel_name = format!("{}/{}", item.prefix, item.rel);
    let opts = TransformOptions {
        output: output.clone(),
        kpack_dir: PathBuf::new(),
        group: Some(module.to_owned()),
        kernel_name: Some(kernel_name.clone()),
        search_paths: vec![search],
        compression,
        names,
    };
    let plan = transform::plan(&map, &opts).map_err(err)?.releasing(&map);
    let wrappers = plan.wrappers();
    // The whole output tree is staged, so the host binary is written at its place in it.
    plan.write_host(&output, Some(mode)).map_err(err)?;
    let host_bytes = std::fs::metadata(&output)
        .map_err(ArtifactError::io(&output))?
        .len();
    let processor = |t: &str| {
        TargetId::parse(t)
            .map(|t| t.processor().to_owned())
            .unwrap_or_else(|_| t.to_owned())
    };
    let archives = plan
        .write_archives_into(
            |t| {
                stage
                    .join(format!("{component}_{}", processor(t)))
                    .join(&item.prefix)
                    .join(".kpack")
            },
            compression,
        )
        .map_err(err)?;
    Ok(Done {
        arch_files: archives
            .iter()
            .map(|a| (processor(&a.target), a.size, true))
            .collect(),
        generic_bytes: Some(host_bytes),
        code_objects: archives.iter().map(|a| a.entries).sum(),
        binary: Some(RecordBinary {
            path: kernel_name,
            prefix: item.prefix.clone(),
            module: module.to_owned(),
            wrappers,
        }),
        archives: archives.into_iter().map(|a| a.path).collect(),
    })
}
