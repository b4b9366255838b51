//! The archive cache and the lookup of `kpack_load_code_object` (spec §4.4–4.6, §4.8).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use kpack_archive::{Archive, ArchiveError, CompressionScheme, binary_key};
use kpack_hostbin::marker::MarkerMetadata;

use crate::config::Config;
use crate::paths;
use crate::sync::{self, Arc, AtomicU64, Mutex, Ordering, RwLock};
use crate::target::{TargetIndex, canonical, compatible_targets};
use crate::{ErrorCode, LoadError};

/// Archives opened for code-object loads, kept open for the cache's lifetime, with the
/// resolution of search paths and the outcome of every probe.
///
/// The cache is `Send + Sync`: one per process serves every thread. A load holds the cache's
/// lock only to look its paths up (shared) or to resolve and probe paths it has not seen
/// (exclusive); the kernel is read or decoded with no lock held.
pub struct Cache {
    config: Config,
    state: RwLock<State>,
    decoded: Mutex<DecodedObjects>,
    /// `none` entries whose bytes matched their digest, by (archive, blob ordinal).
    verified: Mutex<HashSet<(usize, u32)>>,
    counters: Counters,
}

/// How many bytes of decoded (zstd) code objects a cache keeps, so that a warm load, the same
/// code object for a second GPU of the same target or a library loaded twice, is a copy
/// rather than a decode. A process loads each object once per device, so this holds the
/// objects of a few devices' worth of libraries, not every archive.
pub const DECODED_CACHE_BYTES: usize = 64 << 20;

/// Decoded code objects by (archive, blob ordinal), the oldest dropped first once over budget.
struct DecodedObjects {
    budget: usize,
    bytes: usize,
    objects: HashMap<(usize, u32), std::sync::Arc<[u8]>>,
    order: VecDeque<(usize, u32)>,
}

impl DecodedObjects {
    fn with_budget(budget: usize) -> Self {
        DecodedObjects {
            budget,
            bytes: 0,
            objects: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn get(&self, key: &(usize, u32)) -> Option<std::sync::Arc<[u8]>> {
        self.objects.get(key).cloned()
    }

    fn insert(&mut self, key: (usize, u32), object: std::sync::Arc<[u8]>) {
        if object.len() > self.budget || self.objects.contains_key(&key) {
            return;
        }
        self.bytes += object.len();
        self.objects.insert(key, object);
        self.order.push_back(key);
        while self.bytes > self.budget {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(o) = self.objects.remove(&old) {
                self.bytes -= o.len();
            }
        }
    }
}

/// A code object as a load hands it out: borrowed from a `none` archive's mapping, or shared
/// with the decoded-object cache.
enum Fetched<'a> {
    Mapped(Cow<'a, [u8]>),
    Decoded(std::sync::Arc<[u8]>),
}

impl Deref for Fetched<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Fetched::Mapped(b) => b,
            Fetched::Decoded(b) => b,
        }
    }
}

#[derive(Default)]
struct State {
    /// `(binary directory, embedded search path)` → the resolved path, `@GFXARCH@` kept.
    resolved: HashMap<(PathBuf, String), PathBuf>,
    /// Concrete archive path → what probing it found. Never removed: see the crate docs.
    probes: HashMap<PathBuf, Probe>,
    /// Canonical path → open archive, so two spellings of one file share it.
    open: HashMap<PathBuf, Arc<CachedArchive>>,
    /// `.kpm` index path → its targets (canonical spelling) and archive file names; empty
    /// when there is none or it does not decode. Never removed, like `probes`.
    indexes: HashMap<PathBuf, HashMap<String, String>>,
}

#[derive(Clone)]
enum Probe {
    Archive(Arc<CachedArchive>),
    /// Nothing there, or not a regular file.
    Missing,
    /// A file that failed to open as an archive.
    Failed(LoadError),
}

impl Probe {
    fn is_transient(&self) -> bool {
        matches!(self, Probe::Failed(e) if matches!(e.code(), ErrorCode::IoError | ErrorCode::OutOfMemory))
    }
}

struct CachedArchive {
    path: PathBuf,
    archive: Archive,
    targets: TargetIndex,
}

#[derive(Default)]
struct Counters {
    resolutions: AtomicU64,
    probes: AtomicU64,
    opened: AtomicU64,
    decodes: AtomicU64,
}

/// File-system work a cache has done since it was created (all of it on cold paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Search paths resolved against a binary's directory (`canonicalize` calls).
    pub resolutions: u64,
    /// Concrete archive paths probed (`canonicalize`, `stat`, maybe `open`).
    pub probes: u64,
    /// Archives opened and indexed.
    pub archives_opened: u64,
    /// zstd code objects decoded (a warm load of a decoded object decodes nothing).
    pub decodes: u64,
}

/// The code object a load found.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// Borrowed from the archive's mapping (scheme `none`) or freshly decoded (zstd).
    pub bytes: &'a [u8],
    /// The archive it came from (canonical path).
    pub archive: &'a Path,
    /// The archive's spelling of the target that matched.
    pub arch: &'a str,
}

impl Cache {
    /// An empty cache that resolves search paths with `config`.
    pub fn new(config: Config) -> Cache {
        Cache {
            config,
            state: RwLock::new(State::default()),
            decoded: Mutex::new(DecodedObjects::with_budget(DECODED_CACHE_BYTES)),
            verified: Mutex::new(HashSet::new()),
            counters: Counters::default(),
        }
    }

    /// An empty cache that keeps at most `bytes` of decoded code objects (a tool that loads
    /// each object once, such as `kpack restore`, keeps none).
    pub fn with_decoded_budget(config: Config, bytes: usize) -> Cache {
        Cache {
            decoded: Mutex::new(DecodedObjects::with_budget(bytes)),
            ..Cache::new(config)
        }
    }

    /// A cache configured from the process environment, read now and never again.
    pub fn from_env() -> Cache {
        Self::new(Config::from_env())
    }

    /// The configuration the cache was made with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> CacheStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CacheStats {
            resolutions: get(&self.counters.resolutions),
            probes: get(&self.counters.probes),
            archives_opened: get(&self.counters.opened),
            decodes: get(&self.counters.decodes),
        }
    }

    /// Finds the code object of wrapper `co_index` of the binary at `binary_path` for the
    /// first of `isas` (in priority order, each with or without the `amdgcn-amd-amdhsa--`
    /// prefix) that any archive has, and hands it to `f`. See the crate docs for the order of
    /// the search and the error reported when nothing is found.
    pub fn load_with<R>(
        &self,
        metadata: &MarkerMetadata,
        binary_path: &Path,
        co_index: u32,
        isas: &[&str],
        f: impl FnOnce(Found<'_>) -> R,
    ) -> Result<R, LoadError> {
        if self.config.disabled {
            self.log(format_args!("loading disabled by ROCM_KPACK_DISABLE"));
            return Err(LoadError::Disabled);
        }
        let key = binary_key(&metadata.kernel_name, co_index);
        let candidates: Vec<Vec<String>> = isas.iter().map(|isa| compatible_targets(isa)).collect();
        let paths = self.search_paths(metadata, binary_path, isas);
        let (archives, mut failure) = self.archives(&paths);
        if archives.is_empty() {
            self.log(format_args!(
                "no archive for {key} among {} paths",
                paths.len()
            ));
            return Err(failure.unwrap_or(LoadError::ArchiveNotFound { tried: paths }));
        }
        for target in candidates.iter().flatten() {
            for a in &archives {
                let Some(arch) = a.targets.find(target) else {
                    continue;
                };
                match self.fetch(a, &key, arch) {
                    Ok(bytes) => {
                        self.log(format_args!(
                            "{key}: {} bytes for {arch} from {}",
                            bytes.len(),
                            a.path.display()
                        ));
                        return Ok(f(Found {
                            bytes: &bytes,
                            archive: &a.path,
                            arch,
                        }));
                    }
                    Err(e) => {
                        // Fall through to the next archive and target (the reference stops).
                        self.log(format_args!(
                            "{key}: {arch} in {}: {e}; trying on",
                            a.path.display()
                        ));
                        let err = if e.kind() == kpack_archive::ErrorKind::KernelNotFound {
                            LoadError::KernelNotFound {
                                archive: a.path.clone(),
                                key: key.clone(),
                                arch: arch.to_owned(),
                            }
                        } else {
                            LoadError::from_archive(&e)
                        };
                        failure = Some(most_informative(failure, err));
                    }
                }
            }
        }
        self.log(format_args!("{key}: no archive has any target of {isas:?}"));
        Err(failure.unwrap_or_else(|| LoadError::ArchNotFound {
            requested: isas.iter().map(|s| s.to_string()).collect(),
        }))
    }

    /// [`Cache::load_with`], copying the code object out.
    pub fn load(
        &self,
        metadata: &MarkerMetadata,
        binary_path: &Path,
        co_index: u32,
        isas: &[&str],
    ) -> Result<Vec<u8>, LoadError> {
        self.load_with(metadata, binary_path, co_index, isas, |found| {
            found.bytes.to_vec()
        })
    }

    /// The code object `key` for `arch` from `a`: borrowed from the mapping for `none`
    /// archives; for zstd and unified (v2), from the decoded-object cache, else decoded
    /// (with no lock held) and remembered. Either way its digest is checked on its first load
    /// only: the file does not change under its map (see `Archive::open`), so a warm load of a
    /// `none` entry borrows the bytes already proven, as one of a zstd entry copies them.
    fn fetch<'a>(
        &self,
        a: &'a Arc<CachedArchive>,
        key: &str,
        arch: &str,
    ) -> Result<Fetched<'a>, ArchiveError> {
        let Some(info) = a.archive.info(key, arch) else {
            return a.archive.get(key, arch).map(Fetched::Mapped);
        };
        // Archives stay open as long as the cache, so their address names them.
        let id = (Arc::as_ptr(a) as usize, info.ordinal);
        if a.archive.compression_scheme() == CompressionScheme::None {
            if sync::lock(&self.verified).contains(&id) {
                let bytes = a.archive.stored_bytes(key, arch)?;
                return Ok(Fetched::Mapped(Cow::Borrowed(bytes)));
            }
            let bytes = a.archive.get(key, arch)?;
            sync::lock(&self.verified).insert(id);
            return Ok(Fetched::Mapped(bytes));
        }
        if let Some(hit) = sync::lock(&self.decoded).get(&id) {
            return Ok(Fetched::Decoded(hit));
        }
        let object: std::sync::Arc<[u8]> = a.archive.get(key, arch)?.into_owned().into();
        self.counters.decodes.fetch_add(1, Ordering::Relaxed);
        sync::lock(&self.decoded).insert(id, object.clone());
        Ok(Fetched::Decoded(object))
    }

    /// The archive paths a load of `metadata`'s kernels for `isas` from the binary at
    /// `binary_path` tries, in search order (`@GFXARCH@` expanded): what `kpack inspect
    /// --resolve` and `kpack restore` report when nothing is found.
    pub fn search_paths(
        &self,
        metadata: &MarkerMetadata,
        binary_path: &Path,
        isas: &[&str],
    ) -> Vec<PathBuf> {
        let candidates: Vec<Vec<String>> = isas.iter().map(|isa| compatible_targets(isa)).collect();
        let patterns = self.patterns(metadata, binary_path);
        let windows_names = self.config.windows_archive_names || cfg!(windows);
        let mut paths = expand(&patterns, &candidates, windows_names);
        for p in self.indexed(&patterns, &candidates) {
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        paths
    }

    /// The search paths before expansion: the override list, or the prefix list followed by
    /// the embedded paths resolved against the binary's directory (cached per directory and
    /// path).
    pub fn patterns(&self, metadata: &MarkerMetadata, binary_path: &Path) -> Vec<PathBuf> {
        if !self.config.override_paths.is_empty() {
            return self.config.override_paths.clone();
        }
        let dir = paths::binary_dir(binary_path.as_os_str());
        let lookup = |state: &State| -> Option<Vec<PathBuf>> {
            metadata
                .search_paths
                .iter()
                .map(|p| state.resolved.get(&(dir.clone(), p.clone())).cloned())
                .collect()
        };
        // The read guard must be gone before the write lock is taken, hence the `let`.
        let cached = lookup(&sync::read(&self.state));
        let embedded = match cached {
            Some(resolved) => resolved,
            None => {
                let mut state = sync::write(&self.state);
                for p in &metadata.search_paths {
                    state
                        .resolved
                        .entry((dir.clone(), p.clone()))
                        .or_insert_with(|| {
                            self.counters.resolutions.fetch_add(1, Ordering::Relaxed);
                            let resolved = paths::resolve(&dir, p);
                            self.log(format_args!(
                                "search path {p:?} resolves to {}",
                                resolved.display()
                            ));
                            resolved
                        });
                }
                lookup(&state).expect("every search path was just resolved")
            }
        };
        let mut all = self.config.prefix_paths.clone();
        all.extend(embedded);
        all
    }

    /// The archives that the `.kpm` index beside each `<module>_@GFXARCH@.kpack` pattern,
    /// `<module>.kpm` in the same directory, names for the candidate targets, in candidate
    /// order. This is how a multi-target archive installed without per-target names (a
    /// family device wheel: wheels cannot hold links) is found; they come after the
    /// per-target names, which win when both exist. Each index is read once per cache.
    fn indexed(&self, patterns: &[PathBuf], candidates: &[Vec<String>]) -> Vec<PathBuf> {
        let indexes: Vec<(PathBuf, &Path)> =
            patterns.iter().filter_map(|p| index_beside(p)).collect();
        if indexes.is_empty() {
            return Vec::new();
        }
        let lookup = |state: &State| -> Option<Vec<PathBuf>> {
            let mut out = Vec::new();
            for (index, dir) in &indexes {
                let files = state.indexes.get(index)?;
                for t in candidates.iter().flatten() {
                    if let Some(file) = files.get(&canonical(t)) {
                        out.push(dir.join(file));
                    }
                }
            }
            Some(out)
        };
        // The read guard must be gone before the write lock is taken, hence the `let`.
        let cached = lookup(&sync::read(&self.state));
        if let Some(found) = cached {
            return found;
        }
        let mut state = sync::write(&self.state);
        for (index, _) in &indexes {
            if !state.indexes.contains_key(index) {
                let files = self.read_index(index);
                state.indexes.insert(index.clone(), files);
            }
        }
        lookup(&state).expect("every index was just read")
    }

    /// The targets (canonical spelling) and archive file names of the index at `path`;
    /// empty when there is none. File names with a path separator, `.` or `..` are left out:
    /// an index names archives beside itself.
    fn read_index(&self, path: &Path) -> HashMap<String, String> {
        self.counters.probes.fetch_add(1, Ordering::Relaxed);
        let bytes = match std::fs::metadata(path) {
            Ok(m) if m.is_file() && m.len() <= MAX_INDEX_LEN => std::fs::read(path),
            Ok(_) => {
                self.log(format_args!(
                    "{}: not an index of at most {MAX_INDEX_LEN} bytes",
                    path.display()
                ));
                return HashMap::new();
            }
            Err(e) => Err(e),
        };
        let index = match bytes.map(|b| kpack_archive::kpm::KpmManifest::decode(&b)) {
            Ok(Ok(index)) => index,
            Ok(Err(e)) => {
                self.log(format_args!("{}: {e}", path.display()));
                return HashMap::new();
            }
            Err(_) => return HashMap::new(),
        };
        let plain = |f: &str| !f.is_empty() && f != "." && f != ".." && !f.contains(['/', '\\']);
        index
            .kpack_files
            .into_iter()
            .filter(|(_, e)| plain(&e.file))
            .map(|(t, e)| (canonical(&t), e.file))
            .collect()
    }

    /// The distinct archives behind `paths`, in path order, probing the paths not seen
    /// before; and the most informative failure to open one ([`most_informative`]).
    fn archives(&self, paths: &[PathBuf]) -> (Vec<Arc<CachedArchive>>, Option<LoadError>) {
        let collect = |state: &State| -> Option<Vec<Probe>> {
            paths.iter().map(|p| state.probes.get(p).cloned()).collect()
        };
        let cached = collect(&sync::read(&self.state));
        let probes = match cached {
            Some(probes) => probes,
            None => {
                let mut state = sync::write(&self.state);
                for p in paths {
                    if !state.probes.contains_key(p) {
                        let probe = self.probe(&mut state, p);
                        state.probes.insert(p.clone(), probe);
                    }
                }
                let probes = collect(&state).expect("every path was just probed");
                // An I/O failure may pass (a full address space, an NFS hiccup): forget it,
                // so the next load probes again. Content that is not an archive stays known.
                state.probes.retain(|_, probe| !probe.is_transient());
                probes
            }
        };
        let mut archives: Vec<Arc<CachedArchive>> = Vec::new();
        let mut failure = None;
        for probe in probes {
            match probe {
                Probe::Archive(a) if !archives.iter().any(|b| Arc::ptr_eq(&a, b)) => {
                    archives.push(a)
                }
                Probe::Failed(e) => failure = Some(most_informative(failure, e)),
                _ => {}
            }
        }
        (archives, failure)
    }

    fn probe(&self, state: &mut State, path: &Path) -> Probe {
        self.counters.probes.fetch_add(1, Ordering::Relaxed);
        let canonical = match std::fs::canonicalize(path) {
            Ok(c) if c.is_file() => c,
            _ => {
                self.log(format_args!("{}: no archive there", path.display()));
                return Probe::Missing;
            }
        };
        if let Some(a) = state.open.get(&canonical) {
            return Probe::Archive(a.clone());
        }
        match Archive::open(&canonical) {
            Ok(archive) => {
                self.counters.opened.fetch_add(1, Ordering::Relaxed);
                self.log(format_args!(
                    "opened {} ({:?}, {})",
                    canonical.display(),
                    archive.gfx_arches(),
                    archive.compression_scheme().name()
                ));
                let targets = TargetIndex::new(archive.gfx_arches().iter().map(String::as_str));
                let a = Arc::new(CachedArchive {
                    path: canonical.clone(),
                    archive,
                    targets,
                });
                state.open.insert(canonical, a.clone());
                Probe::Archive(a)
            }
            Err(e) => {
                self.log(format_args!("{e}"));
                Probe::Failed(LoadError::from_archive(&e))
            }
        }
    }

    fn log(&self, message: fmt::Arguments<'_>) {
        if self.config.debug {
            eprintln!("kpack: {message}");
        }
    }
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("config", &self.config)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// `patterns` with `@GFXARCH@` replaced by every candidate target (also spelled with its
/// features sorted, the order archive names use), in priority order, without repeats.
/// The largest `.kpm` index the runtime reads: one entry per target is a few hundred bytes.
const MAX_INDEX_LEN: u64 = 1 << 20;

/// For a search path whose file name is `<module>_@GFXARCH@.kpack`, the index
/// `<dir>/<module>.kpm` and `dir`.
fn index_beside(pattern: &Path) -> Option<(PathBuf, &Path)> {
    let name = pattern.file_name()?.to_str()?;
    let module = name.strip_suffix(&format!("_{}.kpack", paths::GFXARCH))?;
    let dir = pattern.parent()?;
    if module.is_empty() || paths::has_placeholder(dir) {
        return None;
    }
    Some((dir.join(format!("{module}.kpm")), dir))
}

fn expand(patterns: &[PathBuf], candidates: &[Vec<String>], windows_names: bool) -> Vec<PathBuf> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for pattern in patterns {
        if !paths::has_placeholder(pattern) {
            if seen.insert(pattern.clone()) {
                out.push(pattern.clone());
            }
            continue;
        }
        for target in candidates.iter().flatten() {
            let sorted = canonical(target);
            for spelling in [target.as_str(), sorted.as_str()] {
                // Archive names for Windows spell the features' `:` as `@` (NTFS refuses `:`,
                // and Win32 would read it as an alternate data stream): only that spelling
                // is tried there. Elsewhere the name is the target ID as it is.
                let spelling = kpack_target::file_name_spelling(spelling, windows_names);
                let p = paths::expand(pattern, &spelling);
                if seen.insert(p.clone()) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// Of two reasons nothing was found, the one that tells the caller most: damage to an archive
/// (what a good copy of that file fixes), then an archive that failed to open or decode
/// otherwise, then an archive lacking the kernel; the earlier one on ties.
fn most_informative(current: Option<LoadError>, new: LoadError) -> LoadError {
    let rank = |e: &LoadError| match e {
        LoadError::Archive {
            code: ErrorCode::IntegrityCheckFailed,
            ..
        } => 3,
        LoadError::Archive { .. } => 2,
        LoadError::KernelNotFound { .. } => 1,
        _ => 0,
    };
    match current {
        Some(c) if rank(&c) >= rank(&new) => c,
        _ => new,
    }
}

#[cfg(test)]
mod tests {
    use super::DecodedObjects;

    #[test]
    fn decoded_objects_drop_the_oldest_once_over_budget() {
        let mut cache = DecodedObjects::with_budget(10);
        cache.insert((1, 0), vec![0u8; 4].into());
        cache.insert((1, 1), vec![1u8; 4].into());
        assert!(cache.get(&(1, 0)).is_some() && cache.get(&(1, 1)).is_some());
        cache.insert((2, 0), vec![2u8; 4].into());
        assert!(cache.get(&(1, 0)).is_none(), "the oldest went");
        assert_eq!(cache.get(&(2, 0)).as_deref(), Some(&[2u8; 4][..]));
        assert_eq!(cache.bytes, 8);
        // An object larger than the whole budget is not kept.
        cache.insert((3, 0), vec![3u8; 11].into());
        assert!(cache.get(&(3, 0)).is_none());
    }
}
