//! The `.kpm` index of a recombined component: which package provides which architecture.
//!
//! `recombine` writes one index per module (the archives' group name, `lib_libdemo.so.1`)
//! into the component's **generic** package, at `<dir>/.kpack/<module>.kpm` next to where
//! the archives install (`dir` is usually the install root). It lists every architecture
//! packaged in any group, each with its archive file name, size, kernel count and the
//! package providing it (spec §6 keys, plus `package`). `prefix` is `dir` relative to the
//! install root, `.` for the root itself, never the artifact's staging path: every manifest
//! prefix of an artifact is a staging directory whose contents install at the install root.
//!
//! The runtime probes `@GFXARCH@` file names first (per-target archives, or the per-target
//! links to a group archive of `recombine --group-archives`); kpack's runtime then reads the
//! index to find a multi-target archive installed without per-target names. [`resolve`]
//! uses it to tell a user which package to install for a GPU the installed packages do not
//! cover.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_archive::Archive;
use kpack_archive::kpm::{KpmEntry, KpmManifest};
use kpack_target::TargetId;

use crate::PackageError;

/// The directory holding archives, at any depth of an install tree.
pub const KPACK_DIR: &str = ".kpack";

/// For an installed path `<dir>/.kpack/<name>.kpack`, `dir` (empty at the install root).
pub fn archive_dir(rel: &str) -> Option<&str> {
    let (dir, name) = rel.rsplit_once('/')?;
    if !name.ends_with(".kpack") {
        return None;
    }
    match dir.strip_suffix(KPACK_DIR) {
        Some("") => Some(""),
        Some(parent) => parent.strip_suffix('/'),
        None => None,
    }
}

/// True for the installed path of a portable SPIR-V archive,
/// `<dir>/.kpack/<module>_amdgcnspirv.kpack`.
pub fn is_portable_archive(rel: &str) -> bool {
    archive_dir(rel).is_some()
        && rel
            .strip_suffix(".kpack")
            .is_some_and(|stem| stem.ends_with(&format!("_{}", kpack_target::SPIRV)))
}

/// The index of `module` for archives in `<dir>/.kpack/`: its installed path.
pub fn index_path(dir: &str, module: &str) -> String {
    if dir.is_empty() {
        format!("{KPACK_DIR}/{module}.kpm")
    } else {
        format!("{dir}/{KPACK_DIR}/{module}.kpm")
    }
}

/// An archive as the index lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedArchive {
    /// The installed directory holding its `.kpack/` (see [`archive_dir`]).
    pub dir: String,
    /// The archive's group name: the module the index is named after.
    pub module: String,
    /// The target the archive holds.
    pub target: String,
    /// The index's entry for it.
    pub entry: KpmEntry,
}

/// Describes the archive at `path`, installed at `rel` by `package`: one entry per target
/// it declares (a split writes one target per archive; a group archive of `recombine
/// --group-archives` holds several, each then listed with this file, its size and that
/// target's kernel count).
pub fn describe_archive(
    path: &Path,
    rel: &str,
    package: &str,
) -> Result<Vec<IndexedArchive>, PackageError> {
    let a = Archive::open(path).map_err(PackageError::archive(path))?;
    let size = std::fs::metadata(path)
        .map_err(PackageError::io(path))?
        .len();
    describe_opened(&a, size, path, rel, package)
}

/// [`describe_archive`] of an archive already open, `size` bytes long; `path` names it in
/// errors.
pub fn describe_opened(
    a: &Archive,
    size: u64,
    path: &Path,
    rel: &str,
    package: &str,
) -> Result<Vec<IndexedArchive>, PackageError> {
    let dir = archive_dir(rel)
        .ok_or_else(|| PackageError::invalid(path, "not an archive in a .kpack directory"))?;
    if a.gfx_arches().is_empty() {
        return Err(PackageError::invalid(
            path,
            "expected at least one architecture in gfx_arches, found none",
        ));
    }
    let mut kernels: BTreeMap<&str, u64> = BTreeMap::new();
    for (_, arch, _) in a.entries() {
        *kernels.entry(arch).or_default() += 1;
    }
    Ok(a.gfx_arches()
        .iter()
        .map(|target| IndexedArchive {
            dir: dir.to_owned(),
            module: a.group_name().to_owned(),
            target: target.clone(),
            entry: KpmEntry {
                file: rel.rsplit('/').next().unwrap_or(rel).to_owned(),
                size,
                kernel_count: kernels.get(target.as_str()).copied().unwrap_or(0),
                package: Some(package.to_owned()),
            },
        })
        .collect())
}

/// The indexes of `component` listing `archives`, by installed path; targets sorted. Two
/// archives of one module for the same target (from two packages) are reported, one line
/// each, as the error.
pub fn build(
    component: &str,
    archives: impl IntoIterator<Item = IndexedArchive>,
) -> Result<BTreeMap<String, KpmManifest>, Vec<String>> {
    let mut by_index: BTreeMap<String, (String, BTreeMap<String, KpmEntry>)> = BTreeMap::new();
    let mut problems = Vec::new();
    for a in archives {
        let path = index_path(&a.dir, &a.module);
        let (_, files) = by_index
            .entry(path.clone())
            .or_insert_with(|| (a.dir.clone(), BTreeMap::new()));
        if let Some(first) = files.get(&a.target) {
            // Every group a configuration places SPIR-V in ships the same archive: the
            // index names the package whose name sorts first, whatever order the packages
            // come in (recombine's is the configuration's, verify's the directory's).
            if a.target == kpack_target::SPIRV && first.file == a.entry.file {
                if a.entry.package < first.package {
                    files.insert(a.target, a.entry);
                }
                continue;
            }
            problems.push(format!(
                "{path}: {} is provided by both {} ({}) and {} ({})",
                a.target,
                first.package.as_deref().unwrap_or("?"),
                first.file,
                a.entry.package.as_deref().unwrap_or("?"),
                a.entry.file
            ));
        } else {
            files.insert(a.target, a.entry);
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(by_index
        .into_iter()
        .map(|(path, (dir, files))| {
            let manifest = KpmManifest {
                format_version: 1,
                component_name: component.to_owned(),
                prefix: if dir.is_empty() { ".".to_owned() } else { dir },
                kpack_files: files.into_iter().collect(),
            };
            (path, manifest)
        })
        .collect())
}

/// The `.kpm` indexes at or below `path`: the file itself, or every `*.kpm` directly inside
/// a `.kpack` directory of the tree, sorted.
pub fn find_indexes(path: &Path) -> Result<Vec<PathBuf>, PackageError> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut found = Vec::new();
    for e in kpack_fs::walk(path) {
        let e = e?;
        let in_kpack_dir = e.rel.parent().and_then(Path::file_name) == Some(KPACK_DIR.as_ref());
        let named_kpm = e
            .rel
            .file_name()
            .is_some_and(|n| n.as_encoded_bytes().ends_with(b".kpm"));
        if e.file_type.is_file() && in_kpack_dir && named_kpm {
            found.push(e.path);
        }
    }
    Ok(found)
}

/// Reads and decodes an index. Every target must be a GPU target and every file an
/// archive's name beside the index: [`resolve`] would otherwise pass over a damaged
/// target (telling the user no package serves the GPU) or look for a file elsewhere.
pub fn read(path: &Path) -> Result<KpmManifest, PackageError> {
    let bytes = std::fs::read(path).map_err(PackageError::io(path))?;
    let index = KpmManifest::decode(&bytes)
        .map_err(|e| PackageError::invalid(path, format!("invalid index: {e}")))?;
    for (target, entry) in &index.kpack_files {
        if crate::handlers::parse_target(target).is_none() {
            return Err(PackageError::invalid(
                path,
                format!(
                    "invalid index: kpack_files entry {target}: expected a GPU target (gfx90a:xnack+)"
                ),
            ));
        }
        let file = &entry.file;
        if file.contains(['/', '\\']) || !file.ends_with(".kpack") || file == ".kpack" {
            return Err(PackageError::invalid(
                path,
                format!(
                    "invalid index: kpack_files entry {target}: file {file}: expected the name of a .kpack archive beside the index"
                ),
            ));
        }
    }
    Ok(index)
}

/// What one index says about a GPU.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Resolution {
    /// The index file.
    pub index: PathBuf,
    /// The component whose generic package holds the index.
    pub component: String,
    /// The index's module (its file stem).
    pub module: String,
    /// The index's target the runtime would load for the GPU (most specific first, as the
    /// runtime probes), if any.
    pub target: Option<String>,
    /// The archive the runtime would open for it, if any.
    pub file: Option<String>,
    /// The package to install for it (absent in legacy indexes).
    pub package: Option<String>,
    /// The archive is present next to the index (the package is installed).
    pub installed: bool,
    /// Every target the index lists.
    pub available: Vec<String>,
}

/// Parses a GPU as the user or the HIP runtime names it: `gfx90a:xnack+` or the ISA name
/// `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`.
pub fn parse_gpu(gpu: &str) -> Result<TargetId, PackageError> {
    let bare = gpu.strip_prefix("amdgcn-amd-amdhsa--").unwrap_or(gpu);
    crate::handlers::parse_target(bare).ok_or_else(|| {
        PackageError::Usage(format!(
            "{gpu} is not a GPU: expected a target such as gfx90a, gfx90a:xnack+ or \
             amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"
        ))
    })
}

/// Which entry of the index at `path` serves `gpu`: the first of the targets the GPU runs
/// ([`TargetId::runnable_targets`]: every subset of its features, most specific first, then
/// its generic processor's, then the portable SPIR-V) the index lists.
pub fn resolve(path: &Path, index: &KpmManifest, gpu: &TargetId) -> Resolution {
    let found = gpu.runnable_targets().into_iter().find_map(|c| {
        index
            .kpack_files
            .iter()
            .find(|(t, _)| TargetId::parse(t).is_ok_and(|t| t == c))
    });
    Resolution {
        index: path.to_owned(),
        component: index.component_name.clone(),
        module: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        target: found.map(|(t, _)| t.clone()),
        file: found.map(|(_, e)| e.file.clone()),
        package: found.and_then(|(_, e)| e.package.clone()),
        installed: found.is_some_and(|(_, e)| path.with_file_name(&e.file).is_file()),
        available: index.kpack_files.iter().map(|(t, _)| t.clone()).collect(),
    }
}
