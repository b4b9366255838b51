//! TheRock build artifacts: split (map), recombine (reduce) and verify.
//!
//! An artifact directory holds `artifact_manifest.txt` (one install prefix per line, spec
//! §5.1) and those prefix trees. CI builds ROCm in shards, each for a set of GPU targets;
//! every shard's artifacts are [split](split) into a generic artifact `C_generic` (host
//! code only: host-only binaries, with markers, and arch-less files) and one `C_<arch>` per
//! GPU processor found (`.kpack` archives and that processor's database files). The shards'
//! outputs are then [recombined](recombine) into per-group packages, and [verify] proves
//! that nothing was lost.
//!
//! Every artifact written carries a small record, [`RECORD`] (`kpack_artifact.json`), next
//! to its manifest: which component it belongs to, whether it is generic, per-arch or a
//! group, and (generic) whether the component is generic-only and which fat binaries were
//! rewritten. The generic record holds nothing that depends on the shard's targets.
//!
//! Output is written under a temporary directory and renamed into place, so a failed or
//! killed run leaves nothing under the final names.

pub mod handlers;
pub mod manifest;
pub mod recombine;
pub mod split;
mod split_tar;
pub mod tarball;
pub mod verify;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use kpack_pipeline::SourceError;
use kpack_pipeline::transform::TransformError;

/// The record file of every artifact kpack writes.
pub const RECORD: &str = "kpack_artifact.json";

/// Why a split, recombine or verify could not run. Nothing is left behind.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: {problem}", path.display())]
    Manifest {
        path: PathBuf,
        line: usize,
        problem: String,
    },
    #[error("{}: {source}", path.display())]
    Transform {
        path: PathBuf,
        source: Box<TransformError>,
    },
    #[error("{}: {source}", path.display())]
    Source {
        path: PathBuf,
        source: Box<SourceError>,
    },
    #[error("{}: {source}", path.display())]
    Archive {
        path: PathBuf,
        source: Box<kpack_archive::ArchiveError>,
    },
    #[error("{}: {problem}", path.display())]
    Invalid { path: PathBuf, problem: String },
    #[error(transparent)]
    Tar(Box<kpack_tar::TarError>),
    #[error("{0}")]
    Usage(String),
    /// A recombine validation failed; one line per problem.
    #[error("{what}:\n{}", .problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Validation {
        what: &'static str,
        problems: Vec<String>,
    },
}

impl ArtifactError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ArtifactError {
        let path = path.into();
        move |source| ArtifactError::Io { path, source }
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, problem: impl Into<String>) -> ArtifactError {
        ArtifactError::Invalid {
            path: path.into(),
            problem: problem.into(),
        }
    }
}

/// What an artifact is, as its record says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    Generic,
    Arch,
    Group,
}

/// A fat binary rewritten by the split, as the generic record lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordBinary {
    /// `<prefix>/<relpath>`: the marker's kernel name.
    pub path: String,
    /// The install prefix holding it.
    pub prefix: String,
    /// Its archives' name stem: `<module>_<target>.kpack`.
    pub module: String,
    pub wrappers: usize,
}

/// The content of [`RECORD`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArtifactRecord {
    pub format_version: u32,
    pub component: String,
    pub kind: ArtifactKind,
    /// Generic: no device code anywhere in the component, so there are no per-arch artifacts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub generic_only: bool,
    /// Generic: the database handlers the split used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub split_databases: Vec<String>,
    /// Generic: the rewritten fat binaries, sorted by path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binaries: Vec<RecordBinary>,
    /// Group: the group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Arch and group: the processors (or families) whose files the artifact holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub architectures: Vec<String>,
}

impl ArtifactRecord {
    pub fn read(dir: &Path) -> Result<Option<ArtifactRecord>, ArtifactError> {
        let path = dir.join(RECORD);
        match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ArtifactError::io(&path)(e)),
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| ArtifactError::invalid(&path, e.to_string())),
        }
    }

    pub fn write(&self, dir: &Path) -> Result<(), ArtifactError> {
        let path = dir.join(RECORD);
        let mut text = serde_json::to_string_pretty(self).expect("the record serialises");
        text.push('\n');
        std::fs::write(&path, text).map_err(ArtifactError::io(&path))
    }
}

/// One entry of a prefix tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeEntry {
    Dir,
    /// A symlink and its link text.
    Symlink(PathBuf),
    File,
}

/// Every entry below `root` as (`/`-separated relative path, kind), sorted by path bytes
/// component-wise (a directory's entries right after it); symlinks are not followed.
pub fn walk_tree(root: &Path) -> Result<Vec<(String, TreeEntry)>, ArtifactError> {
    fn visit(
        root: &Path,
        rel: &str,
        out: &mut Vec<(String, TreeEntry)>,
    ) -> Result<(), ArtifactError> {
        let dir = if rel.is_empty() {
            root.to_owned()
        } else {
            root.join(rel)
        };
        let mut entries = std::fs::read_dir(&dir)
            .and_then(|rd| rd.collect::<Result<Vec<_>, _>>())
            .map_err(ArtifactError::io(&dir))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name();
            let name = name
                .to_str()
                .ok_or_else(|| ArtifactError::invalid(e.path(), "file name is not UTF-8"))?;
            let path = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            let kind = e.file_type().map_err(ArtifactError::io(e.path()))?;
            if kind.is_symlink() {
                let target = std::fs::read_link(e.path()).map_err(ArtifactError::io(e.path()))?;
                out.push((path, TreeEntry::Symlink(target)));
            } else if kind.is_dir() {
                out.push((path.clone(), TreeEntry::Dir));
                visit(root, &path, out)?;
            } else if kind.is_file() {
                out.push((path, TreeEntry::File));
            } else {
                return Err(ArtifactError::invalid(
                    e.path(),
                    "neither a regular file, a directory nor a symlink",
                ));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    visit(root, "", &mut out)?;
    Ok(out)
}

/// Sub-directories of `dir` holding an `artifact_manifest.txt`, sorted by name.
pub fn artifact_dirs(dir: &Path) -> Result<Vec<(String, PathBuf)>, ArtifactError> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).map_err(ArtifactError::io(dir))? {
        let e = e.map_err(ArtifactError::io(dir))?;
        let path = e.path();
        if path.is_dir() && path.join(manifest::MANIFEST).is_file() {
            if let Some(name) = e.file_name().to_str() {
                found.push((name.to_owned(), path));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Artifact directories one level further down (`DIR/<shard>/<artifact>`), sorted.
pub fn artifact_dirs_nested(dir: &Path) -> Result<Vec<(String, PathBuf)>, ArtifactError> {
    let mut found = Vec::new();
    for d in sorted_subdirs(dir)? {
        found.extend(artifact_dirs(&d)?);
    }
    Ok(found)
}

/// The sub-directories of `dir`, sorted by path.
pub(crate) fn sorted_subdirs(dir: &Path) -> Result<Vec<PathBuf>, ArtifactError> {
    let mut subdirs = Vec::new();
    for e in std::fs::read_dir(dir).map_err(ArtifactError::io(dir))? {
        let path = e.map_err(ArtifactError::io(dir))?.path();
        if path.is_dir() {
            subdirs.push(path);
        }
    }
    subdirs.sort();
    Ok(subdirs)
}

/// Output staged in a temporary directory, moved into place by [`Staging::commit`] and
/// removed when dropped uncommitted (any error, or a panic).
pub(crate) struct Staging {
    dir: PathBuf,
    out: PathBuf,
    /// The output directory did not exist: the whole staging directory becomes it.
    whole: bool,
    done: bool,
}

impl Staging {
    /// Stages output for `out`: beside it when it does not exist yet (one rename makes it
    /// appear whole), inside it otherwise (each artifact renamed in turn).
    pub(crate) fn new(out: &Path, what: &str) -> Result<Staging, ArtifactError> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let tag = format!(
            ".kpack-{what}-tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let whole = !out.exists();
        let dir = if whole {
            let parent = match out.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
                _ => PathBuf::from("."),
            };
            std::fs::create_dir_all(&parent).map_err(ArtifactError::io(&parent))?;
            let name = out.file_name().ok_or_else(|| {
                ArtifactError::Usage(format!("{}: no directory name", out.display()))
            })?;
            parent.join(format!(".{}{tag}", name.to_string_lossy()))
        } else {
            out.join(tag)
        };
        std::fs::create_dir(&dir).map_err(ArtifactError::io(&dir))?;
        Ok(Staging {
            dir,
            out: out.to_owned(),
            whole,
            done: false,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// Moves the staged artifacts into the output directory; an artifact that already
    /// exists there is an error, found before anything is moved.
    pub(crate) fn commit(mut self) -> Result<(), ArtifactError> {
        if self.whole {
            std::fs::rename(&self.dir, &self.out).map_err(ArtifactError::io(&self.out))?;
        } else {
            let mut names: Vec<_> = std::fs::read_dir(&self.dir)
                .and_then(|rd| rd.map(|e| e.map(|e| e.file_name())).collect())
                .map_err(ArtifactError::io(&self.dir))?;
            names.sort();
            if let Some(n) = names.iter().find(|n| self.out.join(n).exists()) {
                return Err(ArtifactError::invalid(
                    self.out.join(n),
                    "already exists; refusing to overwrite an artifact",
                ));
            }
            for n in &names {
                let to = self.out.join(n);
                std::fs::rename(self.dir.join(n), &to).map_err(ArtifactError::io(&to))?;
            }
            std::fs::remove_dir(&self.dir).map_err(ArtifactError::io(&self.dir))?;
        }
        self.done = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The number of worker threads for `requested` (0 = one per core).
pub(crate) fn thread_count(requested: usize) -> usize {
    if requested > 0 {
        requested
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Runs `f` over `items` on `threads` workers; results come back in item order, and on
/// failure the error of the first failing item (in item order) is returned, so the outcome
/// never depends on scheduling. Workers stop taking items after a failure.
pub(crate) fn parallel_map<T: Sync, R: Send, E: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(usize, &T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: Vec<Mutex<Option<Result<R, E>>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= items.len() || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = f(i, &items[i]);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    *slots[i].lock().expect("no worker panics holding a slot") = Some(r);
                }
            });
        }
    });
    let mut out = Vec::with_capacity(items.len());
    let mut first_error = None;
    for slot in slots {
        match slot.into_inner().expect("no worker panics holding a slot") {
            Some(Ok(r)) if first_error.is_none() => out.push(r),
            Some(Err(e)) if first_error.is_none() => first_error = Some(e),
            _ => {}
        }
    }
    match first_error {
        Some(e) => Err(e),
        None if out.len() == items.len() => Ok(out),
        None => unreachable!("items are skipped only after a failure"),
    }
}

/// Copies a regular file (contents and permissions; `copy_file_range` underneath), creating
/// the destination's directory.
pub(crate) fn copy_file(from: &Path, to: &Path) -> Result<u64, ArtifactError> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(ArtifactError::io(dir))?;
    }
    std::fs::copy(from, to).map_err(|e| ArtifactError::Io {
        path: from.to_owned(),
        source: e,
    })
}

/// Re-creates a symlink with the same link text.
pub(crate) fn copy_symlink(target: &Path, to: &Path) -> Result<(), ArtifactError> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(ArtifactError::io(dir))?;
    }
    std::os::unix::fs::symlink(target, to).map_err(ArtifactError::io(to))
}

/// `<component>_<suffix>`, split at the last `_`.
pub fn split_artifact_name(name: &str) -> Option<(&str, &str)> {
    name.rsplit_once('_')
        .filter(|(c, s)| !c.is_empty() && !s.is_empty())
}
