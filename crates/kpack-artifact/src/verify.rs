//! `kpack verify`: proves that split or recombined artifacts lost nothing.
//!
//! Checks, each failure one line naming the file and what was expected:
//! 1. every sub-directory is an artifact: a valid `artifact_manifest.txt` (and a valid
//!    record when present);
//! 2. generic artifacts hold no linked fat binary (relocatable objects and `ar` archives
//!    keep their device code by design), no `.kpack` archive, and no file the split's
//!    database handlers claim for an architecture;
//! 3. every marker resolves: for each target the artifacts provide (the archives whose name
//!    matches the search path with `@GFXARCH@` expanded, resolved relative to the binary's
//!    directory in the overlay of all artifacts), the archive declares that target and holds
//!    `kernel_name#i` for every wrapper `i`; every binary resolves at least one archive, and
//!    every archive is reached by some marker;
//! 4. per-arch and group artifacts hold only archives, `.kpm` indexes and database files,
//!    all of their own architectures;
//! 5. every archive opens and validates; every `.kpm` decodes and names existing archives;
//! 6. no installed path (below a manifest prefix: every prefix installs at one root) is a
//!    file or symlink in two artifacts, or a directory in one and not in another: the
//!    packages install side by side;
//! 7. the generic artifact's `.kpm` indexes (required once a component has a group
//!    package) list exactly the archives present across the component's other artifacts:
//!    each target with its file, size, kernel count and package, `prefix` the directory
//!    holding `.kpack/` relative to the install root;
//! 8. with the original (unsplit) artifacts, strict identity: every original code object
//!    is read back byte for byte through the marker of the rewritten binary, every other
//!    original file (database files included) is present byte for byte, every symlink
//!    with its link text, and every rewritten binary equals the host rewrite of its
//!    original (so it is the original outside the device-code ranges, byte for byte).
//!    The original is an artifact directory (what `split` took), or a directory of them,
//!    directly or one level down (one directory per shard) ([`original_artifacts`]); a
//!    rewritten binary must equal the rewrite of at least one shard's original (the
//!    primary's, after recombine).
//!
//! Artifacts (checked and original) may be directories or tarballs ([`crate::tarball`]);
//! tarballs are read unpacked in a temporary directory, and failure lines name them as
//! `<tarball>/<member>`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kpack_archive::Archive;
use kpack_archive::kpm::{KpmEntry, KpmManifest};
use kpack_archive::marker::MarkerMetadata;

use crate::handlers::{self, Handler, parse_family, parse_target};
use crate::index::{self, IndexedArchive};
use crate::{ArtifactError, ArtifactKind, ArtifactRecord, TreeEntry, manifest};
use kpack_pipeline::source::{self, DeviceCode, Visitor};
use kpack_pipeline::transform::{self, HostState};

/// Options of [`verify`].
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The original artifacts, for the strict identity check.
    pub original: Option<PathBuf>,
    /// Worker threads; 0 = one per core.
    pub threads: usize,
}

/// What [`verify`] checked and found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    /// Artifacts checked.
    pub artifacts: usize,
    /// Host binaries with a marker checked.
    pub binaries: usize,
    /// Archives opened and validated.
    pub archives: usize,
    /// Code objects read back through markers (with `--original`).
    pub code_objects: usize,
    /// Original regular files checked (with `--original`).
    pub original_files: usize,
    /// One line per problem found.
    pub failures: Vec<String>,
}

impl VerifyReport {
    /// No failures.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

struct ArtifactInfo {
    name: String,
    component: String,
    dir: PathBuf,
    kind: ArtifactKind,
    /// Architectures (processors or families) a non-generic artifact may hold.
    arches: Option<BTreeSet<String>>,
    handlers: Vec<Handler>,
}

/// Every entry of every artifact, by `<prefix>/<relpath>`: (artifact index, kind).
type Overlay = BTreeMap<String, Vec<(usize, TreeEntry)>>;

struct Ctx {
    artifacts: Vec<ArtifactInfo>,
    overlay: Overlay,
    /// Archives opened so far, with their mappings (see [`Ctx::release_archives`]).
    archives: Mutex<HashMap<PathBuf, Option<MappedArchive>>>,
}

/// An open archive and the mapping it reads.
type MappedArchive = (Arc<Archive>, Arc<kpack_pipeline::FileBytes>);

/// An archive's mapping shared with the [`Archive`] reading it.
struct SharedMap(Arc<kpack_pipeline::FileBytes>);

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Ctx {
    fn path(&self, artifact: usize, rel: &str) -> PathBuf {
        self.artifacts[artifact].dir.join(rel)
    }

    fn archive(&self, path: &Path) -> Option<Arc<Archive>> {
        let mut cache = self.archives.lock().expect("archive cache");
        let open = || {
            let file = std::fs::File::open(path).ok()?;
            let map = Arc::new(kpack_pipeline::map_file(&file, path).ok()?);
            let archive = Archive::from_backing(SharedMap(map.clone())).ok()?;
            Some((Arc::new(archive), map))
        };
        cache
            .entry(path.to_owned())
            .or_insert_with(open)
            .as_ref()
            .map(|(a, _)| a.clone())
    }

    /// Drops the pages of the archive at `path` from the resident set: reading back every
    /// code object of a library touches all of its archives (locating the frames alone
    /// faults in most pages), which would otherwise stay resident until verify ends (see
    /// [`kpack_pipeline::FileBytes::release`]).
    fn release_archive(&self, path: &Path) {
        let cache = self.archives.lock().expect("archive cache");
        if let Some(Some((_, map))) = cache.get(path) {
            map.release(map);
        }
    }

    /// The archives a marker search path reaches from the binary at `bin` (an overlay path):
    /// (target, overlay path, artifact index).
    fn resolve(&self, bin: &str, search: &str) -> Result<Vec<(String, String, usize)>, String> {
        let mut parts: Vec<&str> = bin.split('/').collect();
        parts.pop();
        for c in search.split('/') {
            match c {
                "" | "." => {}
                ".." => {
                    parts
                        .pop()
                        .ok_or(format!("search path {search:?} leaves the install tree"))?;
                }
                c => parts.push(c),
            }
        }
        let file = parts.pop().unwrap_or_default();
        let Some((pre, post)) = file.split_once("@GFXARCH@") else {
            return Err(format!(
                "search path {search:?} has no @GFXARCH@ in its file name"
            ));
        };
        let dir = parts.join("/");
        let from = format!("{dir}/");
        let mut found = Vec::new();
        for (path, entries) in self.overlay.range(from.clone()..) {
            let Some(name) = path.strip_prefix(&from) else {
                break;
            };
            if name.contains('/') {
                continue;
            }
            let Some(target) = name
                .strip_prefix(pre)
                .and_then(|n| n.strip_suffix(post))
                .filter(|t| !t.is_empty())
            else {
                continue;
            };
            for (a, e) in entries {
                if *e == TreeEntry::File && self.artifacts[*a].kind != ArtifactKind::Generic {
                    found.push((target.to_owned(), path.clone(), *a));
                }
            }
        }
        Ok(found)
    }
}

/// Verifies the artifacts under `dir`. I/O errors on the top directory are errors; every
/// problem inside is a failure line of the report.
pub fn verify(dir: &Path, opts: &VerifyOptions) -> Result<VerifyReport, ArtifactError> {
    let view = crate::tarball::view(dir)?;
    let dir = view.path();
    let original = opts
        .original
        .as_deref()
        .map(crate::tarball::view)
        .transpose()?;
    let mut report = VerifyReport::default();
    let mut failures = Vec::new();
    let mut artifacts = Vec::new();
    for d in crate::sorted_subdirs(dir)? {
        let name = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        if let Err(e) = manifest::read(&d) {
            failures.push(format!("{}: {e}", d.display()));
            continue;
        }
        let record = match ArtifactRecord::read(&d) {
            Ok(r) => r,
            Err(e) => {
                failures.push(e.to_string());
                None
            }
        };
        let suffix = crate::split_artifact_name(&name).map(|(_, s)| s);
        let kind = match (&record, suffix) {
            (Some(r), _) => r.kind.clone(),
            (None, Some("generic")) => ArtifactKind::Generic,
            (None, _) => ArtifactKind::Arch,
        };
        let arches = match (&record, suffix) {
            (Some(r), _) if kind != ArtifactKind::Generic => {
                Some(r.architectures.iter().cloned().collect())
            }
            (None, Some(s)) if parse_family(s).is_some() || parse_target(s).is_some() => {
                Some(BTreeSet::from([s.to_owned()]))
            }
            _ => None,
        };
        let handlers = record
            .as_ref()
            .map(|r| {
                r.split_databases
                    .iter()
                    .filter_map(|h| Handler::from_name(h))
                    .collect()
            })
            .unwrap_or_default();
        let component = match (&record, crate::split_artifact_name(&name)) {
            (Some(r), _) => r.component.clone(),
            (None, Some((c, _))) => c.to_owned(),
            (None, None) => name.clone(),
        };
        artifacts.push(ArtifactInfo {
            name,
            component,
            dir: d,
            kind,
            arches,
            handlers,
        });
    }
    report.artifacts = artifacts.len();
    let mut overlay: Overlay = BTreeMap::new();
    // Per artifact: (prefix, path below it, entry).
    let mut installed: Vec<Vec<(String, String, TreeEntry)>> = Vec::new();
    for (i, a) in artifacts.iter().enumerate() {
        let mut entries_of = Vec::new();
        for prefix in manifest::read(&a.dir).unwrap_or_default() {
            let root = a.dir.join(&prefix);
            if !root.is_dir() {
                continue;
            }
            match crate::walk_tree(&root) {
                Ok(entries) => {
                    for (rel, e) in entries {
                        overlay
                            .entry(format!("{prefix}/{rel}"))
                            .or_default()
                            .push((i, e.clone()));
                        entries_of.push((prefix.clone(), rel, e));
                    }
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
        installed.push(entries_of);
    }
    // Check 6.
    for line in crate::recombine::shared_paths(artifacts.iter().zip(&installed).map(|(a, es)| {
        let es = es
            .iter()
            .map(|(_, rel, e)| (rel.as_str(), *e == TreeEntry::Dir));
        (a.name.as_str(), es)
    })) {
        failures.push(format!("packages do not install side by side: {line}"));
    }
    check_indexes(&artifacts, &installed, &mut failures);
    let ctx = Ctx {
        artifacts,
        overlay,
        archives: Mutex::new(HashMap::new()),
    };
    let threads = crate::thread_count(opts.threads);

    // Per-file checks (2, 4, 5) and the markers found (3).
    let files: Vec<(&String, usize)> = ctx
        .overlay
        .iter()
        .flat_map(|(p, es)| {
            es.iter()
                .filter(|(_, e)| *e == TreeEntry::File)
                .map(move |(a, _)| (p, *a))
        })
        .collect();
    let checked = crate::parallel_map(&files, threads, |_, (rel, a)| {
        Ok::<_, ArtifactError>(check_file(&ctx, rel, *a))
    })?;
    let mut binaries: Vec<(String, usize, MarkerMetadata, Vec<usize>)> = Vec::new();
    for c in checked {
        failures.extend(c.failures);
        report.archives += usize::from(c.archive);
        if let Some((rel, a, meta, wrappers)) = c.binary {
            binaries.push((rel, a, meta, wrappers));
        }
    }
    report.binaries = binaries.len();
    let mut reached: BTreeSet<(String, usize)> = BTreeSet::new();
    for (rel, _, meta, wrappers) in &binaries {
        let mut any = false;
        for search in &meta.search_paths {
            let found = match ctx.resolve(rel, search) {
                Ok(f) => f,
                Err(e) => {
                    failures.push(format!("{rel}: {e}"));
                    continue;
                }
            };
            for (target, path, a) in found {
                any = true;
                reached.insert((path.clone(), a));
                let full = ctx.path(a, &path);
                let Some(archive) = ctx.archive(&full) else {
                    continue; // reported by the per-file check
                };
                if archive.gfx_arches() != [target.clone()] {
                    failures.push(format!(
                        "{}: named for {target} but declares gfx_arches {:?}",
                        full.display(),
                        archive.gfx_arches()
                    ));
                }
                for w in wrappers {
                    let key = kpack_archive::binary_key(&meta.kernel_name, *w as u32);
                    if !archive.contains(&key, &target) {
                        failures.push(format!(
                            "{}: no entry {key} for {target} (marker of {rel})",
                            full.display()
                        ));
                    }
                }
            }
        }
        if !any {
            failures.push(format!(
                "{rel}: its marker ({:?}) resolves to no archive in these artifacts",
                meta.search_paths
            ));
        }
    }
    for (rel, entries) in &ctx.overlay {
        for (a, e) in entries {
            if *e == TreeEntry::File
                && rel.ends_with(".kpack")
                && ctx.artifacts[*a].kind != ArtifactKind::Generic
                && !reached.contains(&(rel.clone(), *a))
            {
                failures.push(format!(
                    "{}: no binary's marker reaches this archive",
                    ctx.path(*a, rel).display()
                ));
            }
        }
    }

    if let Some(original) = &original {
        identity(&ctx, original.path(), threads, &mut report, &mut failures)?;
    }
    let mut failures: Vec<String> = failures
        .iter()
        .map(|f| match &original {
            Some(o) => o.shown(&view.shown(f)),
            None => view.shown(f),
        })
        .collect();
    failures.sort();
    failures.dedup();
    report.failures = failures;
    Ok(report)
}

/// Check 7: per component, the indexes of its generic artifact against the archives of its
/// other artifacts.
fn check_indexes(
    artifacts: &[ArtifactInfo],
    installed: &[Vec<(String, String, TreeEntry)>],
    failures: &mut Vec<String>,
) {
    let components: BTreeSet<&str> = artifacts.iter().map(|a| a.component.as_str()).collect();
    for component in components {
        let of = || {
            artifacts
                .iter()
                .zip(installed)
                .filter(move |(a, _)| a.component == component)
        };
        // (prefix, installed path) → the index found, with its shown path.
        let mut found: BTreeMap<(String, String), (PathBuf, Option<KpmManifest>)> = BTreeMap::new();
        let mut generic_dir = None;
        for (a, entries) in of().filter(|(a, _)| a.kind == ArtifactKind::Generic) {
            generic_dir.get_or_insert((a.name.as_str(), &a.dir));
            for (prefix, rel, e) in entries {
                let in_kpack_dir = rel
                    .rsplit('/')
                    .nth(1)
                    .is_some_and(|d| d == index::KPACK_DIR);
                if *e == TreeEntry::File && rel.ends_with(".kpm") && in_kpack_dir {
                    let path = a.dir.join(prefix).join(rel);
                    let manifest = match index::read(&path) {
                        Ok(m) => Some(m),
                        Err(e) => {
                            failures.push(e.to_string());
                            None
                        }
                    };
                    found.insert((prefix.clone(), rel.clone()), (path, manifest));
                }
            }
        }
        let required = of().any(|(a, _)| a.kind == ArtifactKind::Group);
        if !required && found.is_empty() {
            continue;
        }
        let mut archives: BTreeMap<&str, Vec<IndexedArchive>> = BTreeMap::new();
        for (a, entries) in of().filter(|(a, _)| a.kind != ArtifactKind::Generic) {
            for (prefix, rel, e) in entries {
                if *e != TreeEntry::File || index::archive_dir(rel).is_none() {
                    continue;
                }
                // An archive that does not open is reported by the per-file check.
                if let Ok(x) = index::describe_archive(&a.dir.join(prefix).join(rel), rel, &a.name)
                {
                    archives.entry(prefix).or_default().push(x);
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
            failures.push(format!("{shown}: {field} is {g:?}, expected {w:?}"));
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

#[derive(Default)]
struct FileCheck {
    failures: Vec<String>,
    archive: bool,
    binary: Option<(String, usize, MarkerMetadata, Vec<usize>)>,
}

fn map(path: &Path) -> Result<kpack_pipeline::FileBytes, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    kpack_pipeline::map_file(&f, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The marker and HIPK wrapper indices of a kpacked binary.
fn marker_of(bytes: &[u8]) -> Result<Option<(MarkerMetadata, Vec<usize>)>, String> {
    let Some(kpacked) = transform::kpacked_marker(bytes).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let (meta, _) = MarkerMetadata::decode(&kpacked.bytes).map_err(|e| format!("marker: {e}"))?;
    Ok(Some((meta, kpacked.wrappers)))
}

fn check_file(ctx: &Ctx, rel: &str, a: usize) -> FileCheck {
    let mut out = FileCheck::default();
    let info = &ctx.artifacts[a];
    let path = ctx.path(a, rel);
    let shown = path.display();
    let in_kpack_dir = rel.split('/').any(|c| c == ".kpack");
    let name = rel.rsplit('/').next().unwrap_or(rel);
    // `rel` is `<prefix>/<relpath>`; handlers look at the relpath, which they find by its
    // own markers (`library`, `miopen/db`, …), so the prefix does not disturb them.
    if info.kind == ArtifactKind::Generic {
        if name.ends_with(".kpack") {
            out.failures
                .push(format!("{shown}: a .kpack archive in a generic artifact"));
        }
        if let Some(arch) = handlers::classify(&info.handlers, rel) {
            out.failures.push(format!(
                "{shown}: a database file of {} left in the generic artifact",
                arch.target
            ));
        }
        let bytes = match map(&path) {
            Ok(b) => b,
            Err(e) => {
                out.failures.push(e);
                return out;
            }
        };
        match transform::check(&bytes) {
            Ok(HostState::Fat) => out.failures.push(format!(
                "{shown}: a fat binary left in a generic artifact (its device code was not split out)"
            )),
            Ok(HostState::Kpacked) => match marker_of(&bytes) {
                Ok(Some((meta, wrappers))) => {
                    out.binary = Some((rel.to_owned(), a, meta, wrappers))
                }
                Ok(None) => {}
                Err(e) => out.failures.push(format!("{shown}: {e}")),
            },
            Ok(_) => {}
            Err(e) => out.failures.push(format!("{shown}: {e}")),
        }
        return out;
    }
    let arches = info.arches.as_ref();
    let allowed = |arch: &str| arches.is_none_or(|s| s.contains(arch));
    if in_kpack_dir && name.ends_with(".kpack") {
        out.archive = true;
        match Archive::open(&path).and_then(|x| x.validate().map(|()| x)) {
            Err(e) => out.failures.push(format!("{shown}: invalid archive: {e}")),
            Ok(x) => {
                for t in x.gfx_arches() {
                    let proc = parse_target(t).map(|t| t.processor().to_owned());
                    if !proc.as_deref().is_some_and(allowed) {
                        out.failures.push(format!(
                            "{shown}: holds {t}, not an architecture of {} ({:?})",
                            info.name,
                            arches.map(|s| s.iter().collect::<Vec<_>>())
                        ));
                    }
                }
            }
        }
    } else if in_kpack_dir && name.ends_with(".kpm") {
        match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| KpmManifest::decode(&b).map_err(|e| e.to_string()))
        {
            Err(e) => out.failures.push(format!("{shown}: invalid index: {e}")),
            Ok(m) => {
                for (t, e) in &m.kpack_files {
                    let file = path.with_file_name(&e.file);
                    let size = std::fs::metadata(&file).map(|m| m.len()).ok();
                    if size != Some(e.size) {
                        out.failures.push(format!(
                            "{shown}: lists {} for {t} with {} bytes, found {size:?}",
                            e.file, e.size
                        ));
                    }
                }
            }
        }
    } else {
        match handlers::classify(&Handler::ALL, rel) {
            None => out.failures.push(format!(
                "{shown}: not an archive, index or database file; a per-arch artifact holds no host code"
            )),
            Some(arch) if !allowed(&arch.artifact) => out.failures.push(format!(
                "{shown}: a file of {} in {}",
                arch.target, info.name
            )),
            Some(_) => {}
        }
    }
    out
}

/// Compares written bytes with an expected buffer without holding a copy.
struct Compare<'a> {
    expected: &'a [u8],
    pos: usize,
    equal: bool,
}

impl Write for Compare<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let end = self.pos + buf.len();
        if self.equal && self.expected.get(self.pos..end) != Some(buf) {
            self.equal = false;
        }
        self.pos = end;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Recover<'c> {
    ctx: &'c Ctx,
    rel: &'c str,
    out_bin: &'c str,
    meta: &'c MarkerMetadata,
    checked: usize,
    failures: Vec<String>,
}

impl Visitor for Recover<'_> {
    fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), kpack_pipeline::SourceError> {
        let target = code.target().to_string();
        let mut archives = Vec::new();
        for search in &self.meta.search_paths {
            if let Ok(found) = self.ctx.resolve(self.out_bin, search) {
                archives.extend(found.into_iter().filter(|(t, _, _)| *t == target));
            }
        }
        for &w in code.wrappers {
            let key = kpack_archive::binary_key(&self.meta.kernel_name, w as u32);
            let recovered = archives.iter().any(|(_, path, a)| {
                self.ctx
                    .archive(&self.ctx.path(*a, path))
                    .and_then(|x| x.get(&key, &target).ok().map(|d| d[..] == *code.data))
                    .unwrap_or(false)
            });
            if recovered {
                self.checked += 1;
            } else {
                self.failures.push(format!(
                    "{}: code object {key} for {target} is not recovered byte for byte",
                    self.rel
                ));
            }
        }
        for (_, path, a) in &archives {
            self.ctx.release_archive(&self.ctx.path(*a, path));
        }
        Ok(())
    }
}

/// The original artifacts `--original` names, as (name, directory), sorted: `original` itself
/// when it is an artifact (the path `kpack split` took), else the artifacts directly under it
/// (the directory holding them, what `split --batch` took), else one level further down (one
/// directory per shard). Empty when there are none.
pub fn original_artifacts(original: &Path) -> Result<Vec<(String, PathBuf)>, ArtifactError> {
    if original.join(manifest::MANIFEST).is_file() {
        let name = std::path::absolute(original)
            .map_err(ArtifactError::io(original))?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(vec![(name, original.to_owned())]);
    }
    let direct = crate::artifact_dirs(original)?;
    if !direct.is_empty() {
        return Ok(direct);
    }
    crate::artifact_dirs_nested(original)
}

fn identity(
    ctx: &Ctx,
    original: &Path,
    threads: usize,
    report: &mut VerifyReport,
    failures: &mut Vec<String>,
) -> Result<(), ArtifactError> {
    let originals = original_artifacts(original)?;
    if originals.is_empty() {
        failures.push(format!(
            "{}: no original artifacts found",
            original.display()
        ));
        return Ok(());
    }
    let mut items: Vec<(PathBuf, String, TreeEntry)> = Vec::new();
    for (_, dir) in &originals {
        for prefix in manifest::read(dir)? {
            let root = dir.join(&prefix);
            if root.is_dir() {
                for (rel, e) in crate::walk_tree(&root)? {
                    items.push((root.join(&rel), format!("{prefix}/{rel}"), e));
                }
            }
        }
    }
    struct Outcome {
        file: bool,
        failures: Vec<String>,
        checked: usize,
        /// For a rewritten binary: (overlay path, whether this original reproduces it).
        host: Option<(String, bool)>,
    }
    let outcomes = crate::parallel_map(&items, threads, |_, (path, rel, e)| {
        let mut o = Outcome {
            file: *e == TreeEntry::File,
            failures: Vec::new(),
            checked: 0,
            host: None,
        };
        let outputs = ctx.overlay.get(rel).map(Vec::as_slice).unwrap_or_default();
        match e {
            TreeEntry::Dir => {}
            TreeEntry::Symlink(t) => {
                if !outputs.iter().any(|(_, x)| x == e) {
                    o.failures
                        .push(format!("{rel}: symlink to {} not preserved", t.display()));
                }
            }
            TreeEntry::File => {
                let bytes = match map(path) {
                    Ok(b) => b,
                    Err(err) => {
                        o.failures.push(err);
                        return Ok::<_, ArtifactError>(o);
                    }
                };
                let fat = transform::check(&bytes).ok() == Some(HostState::Fat);
                let copies: Vec<usize> = outputs
                    .iter()
                    .filter(|(_, x)| *x == TreeEntry::File)
                    .map(|(a, _)| *a)
                    .collect();
                if copies.is_empty() {
                    o.failures.push(format!("{rel}: missing from the output"));
                    return Ok(o);
                }
                if !fat {
                    let same = copies
                        .iter()
                        .any(|a| map(&ctx.path(*a, rel)).is_ok_and(|b| b[..] == bytes[..]));
                    if !same {
                        o.failures.push(format!("{rel}: differs from the original"));
                    }
                    return Ok(o);
                }
                let out_path = ctx.path(copies[0], rel);
                let out = match map(&out_path) {
                    Ok(b) => b,
                    Err(err) => {
                        o.failures.push(err);
                        return Ok(o);
                    }
                };
                let meta = match marker_of(&out) {
                    Ok(Some((m, _))) => m,
                    Ok(None) => {
                        o.failures
                            .push(format!("{rel}: the output is not a kpacked binary"));
                        return Ok(o);
                    }
                    Err(err) => {
                        o.failures.push(format!("{}: {err}", out_path.display()));
                        return Ok(o);
                    }
                };
                let mut recover = Recover {
                    ctx,
                    rel,
                    out_bin: rel,
                    meta: &meta,
                    checked: 0,
                    failures: Vec::new(),
                };
                if let Err(err) = source::walk_mapped(&bytes, &mut recover) {
                    o.failures.push(format!("{rel}: original: {err}"));
                }
                o.checked += recover.checked;
                o.failures.extend(recover.failures);
                let same = meta
                    .encode()
                    .ok()
                    .and_then(|m| transform::plan_host(&bytes, &m).ok())
                    .is_some_and(|rw| {
                        let mut cmp = Compare {
                            expected: &out,
                            pos: 0,
                            equal: true,
                        };
                        rw.write_to(&bytes, &mut cmp).is_ok() && cmp.equal && cmp.pos == out.len()
                    });
                o.host = Some((rel.clone(), same));
            }
        }
        Ok(o)
    })?;
    let mut host: BTreeMap<String, bool> = BTreeMap::new();
    for o in outcomes {
        failures.extend(o.failures);
        report.code_objects += o.checked;
        report.original_files += usize::from(o.file);
        if let Some((rel, same)) = o.host {
            *host.entry(rel).or_default() |= same;
        }
    }
    for (rel, same) in host {
        if !same {
            failures.push(format!(
                "{rel}: the rewritten binary differs from its original outside the device code"
            ));
        }
    }
    Ok(())
}
