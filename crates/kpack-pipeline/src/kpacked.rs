//! A kpacked binary explains itself: the marker each wrapper points at (kernel name, search
//! paths) and, per wrapper and target, which archive the runtime would load its code object
//! from, or why none ([`Resolver`]).
//!
//! The lookup is the runtime's own ([`kpack_runtime::Cache`]): search paths resolved against
//! the binary's directory, `ROCM_KPACK_PATH` / `ROCM_KPACK_PATH_PREFIX` honoured (not
//! `ROCM_KPACK_DISABLE`: explaining is the point), `@GFXARCH@` expanded per target and its
//! feature subsets, archives that lack a kernel fallen through. Which targets exist is not
//! something the runtime asks (it is given the GPU's); here they are the `gfx_arches` of the
//! archives found where the search paths' `@GFXARCH@` could point
//! ([`kpack_runtime::files_matching`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_elf::FatBinary;
use kpack_hostbin::marker::MarkerMetadata;
use kpack_runtime::{Cache, Config, LoadError};

use crate::error::{SourceError, io_error};

/// The marker one wrapper points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrapperMarker {
    /// The wrapper's slot.
    pub wrapper: usize,
    /// The runtime's `co_index`: the wrapper's `reserved1`.
    pub co_index: u32,
    /// What the marker says.
    pub metadata: MarkerMetadata,
}

/// Why a wrapper's marker cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("wrapper {wrapper} at file offset {offset:#x}: {problem}")]
pub struct MarkerError {
    /// The wrapper's slot.
    pub wrapper: usize,
    /// The wrapper's file offset.
    pub offset: u64,
    /// What is wrong.
    pub problem: String,
    /// Whether the marker is there but the loader puts the wrapper's pointer outside it
    /// ([`kpack_elf::Misdirected`]), which a restore repairs.
    pub misdirected: bool,
}

/// The marker each wrapper of the kpacked `fat` (inspected from `bytes`) points at, in slot
/// order; one result per wrapper. A wrapper's pointer is where the loader puts it
/// ([`kpack_elf::marker_offset`]), whatever the file stores in its place.
pub fn wrapper_markers(bytes: &[u8], fat: &FatBinary) -> Vec<Result<WrapperMarker, MarkerError>> {
    let elf = kpack_elf::ElfFile::parse(bytes);
    fat.wrappers
        .iter()
        .map(|w| {
            let problem = |p: String| MarkerError {
                wrapper: w.index,
                offset: w.offset,
                problem: p,
                misdirected: false,
            };
            let elf = elf
                .as_ref()
                .map_err(|e| problem(format!("the file does not parse: {e}")))?;
            let marker = fat
                .marker
                .as_ref()
                .ok_or_else(|| problem("the file has no .rocm_kpack_ref section".into()))?;
            let section = marker
                .bytes(bytes)
                .ok_or_else(|| problem(".rocm_kpack_ref lies outside the file".into()))?;
            let at = kpack_elf::marker_offset(elf, fat, w).map_err(|m| MarkerError {
                misdirected: fat.marker.as_ref().is_some_and(|m| m.alloc),
                ..problem(m.to_string())
            })?;
            let (metadata, _) = MarkerMetadata::decode(&section[at as usize..]).map_err(|e| {
                problem(format!(
                    "the marker at file offset {:#x}: {e}",
                    marker.offset + at
                ))
            })?;
            let co_index = u32::try_from(w.reserved1)
                .map_err(|_| problem(format!("reserved1 {:#x} is not a u32", w.reserved1)))?;
            Ok(WrapperMarker {
                wrapper: w.index,
                co_index,
                metadata,
            })
        })
        .collect()
}

/// The marker record of the kpacked `fat` when its `.rocm_kpack_ref` holds exactly one, as
/// kpack and the reference write it: the record every wrapper of the file was meant to reach.
pub fn sole_marker(bytes: &[u8], fat: &FatBinary) -> Option<MarkerMetadata> {
    let section = fat.marker.as_ref()?.bytes(bytes)?;
    match MarkerMetadata::decode(section) {
        Ok((metadata, used)) if used == section.len() => Some(metadata),
        _ => None,
    }
}

/// One archive found where a search path's `@GFXARCH@` could point.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FoundArchive {
    /// Its path (absolute, as the runtime resolved it).
    pub path: PathBuf,
    /// Its `gfx_arches` (empty when it cannot be read).
    pub gfx_arches: Vec<String>,
    /// Why it cannot be read as an archive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the runtime would find for a wrapper and target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Outcome {
    /// The code object, in this archive under this spelling of the target (a less specific
    /// one when the runtime falls back: `gfx90a` for `gfx90a:xnack-`).
    Found {
        /// The archive (absolute path).
        archive: PathBuf,
        /// The archive's target that matched.
        arch: String,
    },
    /// No archive at any path tried.
    NoArchive,
    /// Archives were found, none lists the target (or a compatible one).
    NoTarget,
    /// An archive lists the target but not the kernel.
    NoKernel {
        /// That archive.
        archive: PathBuf,
        /// The TOC key looked up (`kernel_name#co_index`).
        key: String,
    },
    /// An archive failed to open or decode.
    Broken {
        /// The archive error.
        message: String,
    },
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Found { archive, arch } => {
                write!(f, "found in {} (as {arch})", archive.display())
            }
            Outcome::NoArchive => write!(f, "no archive found at the paths tried"),
            Outcome::NoTarget => write!(f, "no archive found lists the target"),
            Outcome::NoKernel { archive, key } => {
                write!(f, "{} lacks the kernel {key}", archive.display())
            }
            Outcome::Broken { message } => write!(f, "{message}"),
        }
    }
}

/// Where the runtime would load one wrapper's code object for one target from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Resolution {
    /// The target asked for.
    pub target: String,
    /// What the runtime finds.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The archive paths tried, in the runtime's order.
    pub tried: Vec<PathBuf>,
}

/// The runtime's lookup for one kpacked binary.
pub struct Resolver {
    binary: PathBuf,
    cache: Cache,
}

impl Resolver {
    /// Closes every archive the lookups opened (and drops their decoded code objects), so
    /// that the mapped archive pages read so far leave this process's resident set: a
    /// restore reads whole archives, one wrapper at a time, and calls this after each.
    pub fn close_archives(&mut self) {
        self.cache = Cache::with_decoded_budget(self.cache.config().clone(), 0);
    }
}

impl Resolver {
    /// A resolver for the binary at `binary` (made absolute: the runtime resolves search paths
    /// against the directory it was loaded from). With `kpack_dirs`, those directories replace
    /// every search path (as `ROCM_KPACK_PATH` does), each searched for the file names of
    /// the markers' search paths; otherwise the environment is honoured as by the runtime.
    pub fn new(
        binary: &Path,
        kpack_dirs: &[PathBuf],
        markers: &[WrapperMarker],
    ) -> Result<Resolver, SourceError> {
        let binary = std::path::absolute(binary).map_err(io_error(binary))?;
        let mut config = Config::from_env();
        config.disabled = false;
        config.debug = false;
        if !kpack_dirs.is_empty() {
            let mut names: Vec<&str> = Vec::new();
            for m in markers {
                for p in &m.metadata.search_paths {
                    let name = p.rsplit('/').next().unwrap_or(p);
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            config.override_paths = kpack_dirs
                .iter()
                .flat_map(|d| names.iter().map(move |n| d.join(n)))
                .collect();
        }
        // Each code object is looked up once: keeping decoded ones would only cost memory.
        let resolver = Resolver {
            binary,
            cache: Cache::with_decoded_budget(config.clone(), 0),
        };
        // A tree transformed or split for Windows names its archives with a target's `:`
        // spelled `@` (`kpack_target::file_name_spelling`), which the Linux runtime does not
        // look for; a tool reading such a tree here looks for that spelling.
        let windows_named = resolver
            .patterns(markers)
            .iter()
            .flat_map(|p| kpack_runtime::files_matching(p))
            .any(|f| {
                f.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.contains(kpack_target::WINDOWS_FEATURE_SEPARATOR))
            });
        if !windows_named {
            return Ok(resolver);
        }
        config.windows_archive_names = true;
        Ok(Resolver {
            cache: Cache::with_decoded_budget(config, 0),
            ..resolver
        })
    }

    /// The binary, as the lookup sees it.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The search paths of `markers` before `@GFXARCH@` expansion, without repeats.
    pub fn patterns(&self, markers: &[WrapperMarker]) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for m in markers {
            for p in self.cache.patterns(&m.metadata, &self.binary) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The archives the search paths of `markers` can lead to, in path order, each with its
    /// targets (or why it cannot be read).
    pub fn archives(&self, markers: &[WrapperMarker]) -> Vec<FoundArchive> {
        let mut out: Vec<FoundArchive> = Vec::new();
        for pattern in self.patterns(markers) {
            for path in kpack_runtime::files_matching(&pattern) {
                if out.iter().any(|a| a.path == path) {
                    continue;
                }
                let (gfx_arches, error) = match kpack_archive::Archive::open(&path) {
                    Ok(a) => (a.gfx_arches().to_vec(), None),
                    Err(e) => (Vec::new(), Some(e.to_string())),
                };
                out.push(FoundArchive {
                    path,
                    gfx_arches,
                    error,
                });
            }
        }
        out
    }

    /// Every target the `archives` list, by canonical spelling (features sorted), each with
    /// the spelling of the first archive listing it.
    pub fn targets(archives: &[FoundArchive]) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for a in archives {
            for t in &a.gfx_arches {
                out.entry(kpack_runtime::target::canonical(t))
                    .or_insert_with(|| t.clone());
            }
        }
        out
    }

    /// Looks wrapper `marker`'s code object for `target` up as the runtime does and hands
    /// its bytes to `f`.
    pub fn lookup<R>(
        &self,
        marker: &WrapperMarker,
        target: &str,
        f: impl FnOnce(&[u8]) -> R,
    ) -> (Resolution, Option<R>) {
        let isas = [target];
        let tried = self
            .cache
            .search_paths(&marker.metadata, &self.binary, &isas);
        let result = self.cache.load_with(
            &marker.metadata,
            &self.binary,
            marker.co_index,
            &isas,
            |found| {
                let located = Outcome::Found {
                    archive: found.archive.to_owned(),
                    arch: found.arch.to_owned(),
                };
                (located, f(found.bytes))
            },
        );
        let (outcome, value) = match result {
            Ok((located, value)) => (located, Some(value)),
            Err(e) => (
                match e {
                    LoadError::ArchiveNotFound { .. } => Outcome::NoArchive,
                    LoadError::ArchNotFound { .. } => Outcome::NoTarget,
                    LoadError::KernelNotFound { archive, key, .. } => {
                        Outcome::NoKernel { archive, key }
                    }
                    other => Outcome::Broken {
                        message: other.to_string(),
                    },
                },
                None,
            ),
        };
        (
            Resolution {
                target: target.to_owned(),
                outcome,
                tried,
            },
            value,
        )
    }
}

/// What `kpack inspect --resolve` says about one kpacked binary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ResolveReport {
    /// The binary, absolute.
    pub binary: PathBuf,
    /// The search paths before `@GFXARCH@` expansion.
    pub patterns: Vec<PathBuf>,
    /// The archives found where they can point.
    pub archives: Vec<FoundArchive>,
    /// Per wrapper, in slot order.
    pub wrappers: Vec<WrapperResolution>,
}

/// One wrapper's lookups.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WrapperResolution {
    /// The wrapper's slot.
    pub wrapper: usize,
    /// The TOC key its code objects are stored under (`kernel_name#co_index`).
    pub key: Option<String>,
    /// Why its marker cannot be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marker_error: Option<String>,
    /// Per target asked for (or, when none was, every target of the archives found).
    pub targets: Vec<Resolution>,
}

/// [`resolve`] of the file at `path`: `None` when it is not a kpacked ELF file.
pub fn resolve_file(path: &Path, targets: &[String]) -> Result<Option<ResolveReport>, SourceError> {
    let file = std::fs::File::open(path).map_err(io_error(path))?;
    let map = crate::map_file(&file, path)?;
    if !kpack_elf::is_elf(&map) {
        return Ok(None);
    }
    let fat = kpack_elf::inspect(&map)?;
    if fat.kind != kpack_elf::FatBinaryKind::Kpacked {
        return Ok(None);
    }
    resolve(path, &map, &fat, targets).map(Some)
}

/// Resolves every wrapper of the kpacked binary at `path` (`bytes`, inspected as `fat`) for
/// `targets` (or every target of the archives found), as the runtime would.
pub fn resolve(
    path: &Path,
    bytes: &[u8],
    fat: &FatBinary,
    targets: &[String],
) -> Result<ResolveReport, SourceError> {
    let markers = wrapper_markers(bytes, fat);
    let good: Vec<WrapperMarker> = markers.iter().filter_map(|m| m.clone().ok()).collect();
    let resolver = Resolver::new(path, &[], &good)?;
    let archives = resolver.archives(&good);
    let targets: Vec<String> = if targets.is_empty() {
        Resolver::targets(&archives).into_values().collect()
    } else {
        targets.to_vec()
    };
    let wrappers = markers
        .into_iter()
        .map(|m| match m {
            Ok(m) => WrapperResolution {
                wrapper: m.wrapper,
                key: Some(kpack_archive::binary_key(
                    &m.metadata.kernel_name,
                    m.co_index,
                )),
                marker_error: None,
                targets: targets
                    .iter()
                    .map(|t| resolver.lookup(&m, t, |_| ()).0)
                    .collect(),
            },
            Err(e) => WrapperResolution {
                wrapper: e.wrapper,
                key: None,
                marker_error: Some(e.to_string()),
                targets: Vec::new(),
            },
        })
        .collect();
    Ok(ResolveReport {
        binary: resolver.binary().to_owned(),
        patterns: resolver.patterns(&good),
        archives,
        wrappers,
    })
}
