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
//! Output is staged under temporary names and published together ([`kpack_fs::Stage`]), so
//! a failed or killed run leaves nothing under the final names, and the next run to the same
//! output sweeps what a killed one left.
//!
//! Depends on `kpack-archive`, `kpack-concurrency`, `kpack-elf`, `kpack-fs`, `kpack-hostbin`,
//! `kpack-package`, `kpack-pipeline`, `kpack-tar` and `kpack-target` (the layering:
//! docs/CONTRIBUTING.md).

#![warn(missing_docs)]

pub mod integrity;
pub mod manifest;
pub mod recombine;
mod search_path;
pub mod split;
pub mod tarball;
pub mod verify;

use std::path::{Path, PathBuf};

use kpack_pipeline::SourceError;
use kpack_pipeline::transform::TransformError;

/// The record file of every artifact kpack writes.
pub const RECORD: &str = "kpack_artifact.json";

/// Why a split, recombine or verify could not run. Nothing is left behind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// An `artifact_manifest.txt` is malformed.
    #[error("{}:{line}: {problem}", path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// The line (1-based).
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// A fat binary could not be transformed.
    #[error("{}: {source}", path.display())]
    Transform {
        /// The binary.
        path: PathBuf,
        /// Why.
        source: Box<TransformError>,
    },
    /// A file's device code could not be read.
    #[error("{}: {source}", path.display())]
    Source {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<SourceError>,
    },
    /// An archive could not be read or written.
    #[error("{}: {source}", path.display())]
    Archive {
        /// The archive.
        path: PathBuf,
        /// Why.
        source: Box<kpack_archive::ArchiveError>,
    },
    /// An input or output is not what it must be.
    #[error("{}: {problem}", path.display())]
    Invalid {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A tarball artifact could not be read or written.
    #[error(transparent)]
    Tar(Box<kpack_tar::TarError>),
    /// An output would have a name Windows cannot hold, and it is meant for Windows.
    #[error(transparent)]
    Name(#[from] kpack_fs::NameError),
    /// The request itself is invalid (a bad component name, a missing option).
    #[error("{0}")]
    Usage(String),
    /// A packaging configuration that does not parse or does not make sense.
    #[error("{}: {source}", path.display())]
    Config {
        /// The configuration file.
        path: PathBuf,
        /// What is wrong with it.
        source: recombine::ConfigError,
    },
    /// A recombine validation failed; one line per problem.
    #[error("{what}:\n{}", .problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Validation {
        /// The validation.
        what: &'static str,
        /// One line per problem.
        problems: Vec<String>,
    },
}

impl ArtifactError {
    /// `self` with every path it names, and the text of its problems, passed through `fix`:
    /// how errors about a temporary copy of a tarball member (spooled or unpacked) come to
    /// name the member as `<tarball>/<member>`.
    pub(crate) fn shown_as(self, fix: &dyn Fn(&str) -> String) -> ArtifactError {
        use ArtifactError as E;
        let path = |p: PathBuf| PathBuf::from(fix(&p.to_string_lossy()));
        match self {
            E::Io { path: p, source } => E::Io {
                path: path(p),
                source,
            },
            E::Manifest {
                path: p,
                line,
                problem,
            } => E::Manifest {
                path: path(p),
                line,
                problem: fix(&problem),
            },
            E::Transform { path: p, source } => E::Transform {
                path: path(p),
                source,
            },
            E::Source { path: p, source } => E::Source {
                path: path(p),
                source,
            },
            E::Archive { path: p, source } => E::Archive {
                path: path(p),
                source,
            },
            E::Invalid { path: p, problem } => E::Invalid {
                path: path(p),
                problem: fix(&problem),
            },
            E::Validation { what, problems } => E::Validation {
                what,
                problems: problems.iter().map(|p| fix(p)).collect(),
            },
            E::Tar(t) => match *t {
                kpack_tar::TarError::Io { path: p, source } => {
                    E::Tar(Box::new(kpack_tar::TarError::Io {
                        path: path(p),
                        source,
                    }))
                }
                other => E::Tar(Box::new(other)),
            },
            other => other,
        }
    }
}

impl From<kpack_package::PackageError> for ArtifactError {
    fn from(e: kpack_package::PackageError) -> Self {
        use kpack_package::PackageError as P;
        match e {
            P::Io { path, source } => ArtifactError::Io { path, source },
            P::Archive { path, source } => ArtifactError::Archive { path, source },
            P::Invalid { path, problem } => ArtifactError::Invalid { path, problem },
            P::Usage(problem) => ArtifactError::Usage(problem),
        }
    }
}

impl From<kpack_fs::WalkError> for ArtifactError {
    fn from(e: kpack_fs::WalkError) -> Self {
        ArtifactError::Io {
            path: e.path,
            source: e.source,
        }
    }
}

impl From<kpack_fs::StageError> for ArtifactError {
    fn from(e: kpack_fs::StageError) -> Self {
        ArtifactError::Io {
            path: e.path,
            source: e.source,
        }
    }
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
    /// The host-code artifact `C_generic`.
    Generic,
    /// A per-architecture artifact `C_<processor>` written by a split.
    Arch,
    /// A per-group package `C_<group>` written by recombine.
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
    /// How many wrappers (code-object indices) the binary has.
    pub wrappers: usize,
}

/// The content of [`RECORD`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArtifactRecord {
    /// The record's format version (1).
    pub format_version: u32,
    /// The component the artifact belongs to.
    pub component: String,
    /// Generic, per-arch or group.
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
    /// Reads the record of the artifact `dir`; `None` when it has none.
    pub fn read(dir: &Path) -> Result<Option<ArtifactRecord>, ArtifactError> {
        let path = dir.join(RECORD);
        match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ArtifactError::io(&path)(e)),
            Ok(bytes) => Self::parse(&bytes, &path).map(Some),
        }
    }

    /// Parses a record's bytes; `path` names it in errors.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<ArtifactRecord, ArtifactError> {
        serde_json::from_slice(bytes).map_err(|e| ArtifactError::invalid(path, e.to_string()))
    }

    /// Writes the record into the artifact `dir`.
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
    /// A directory.
    Dir,
    /// A symlink and its link text.
    Symlink(PathBuf),
    /// A regular file.
    File,
}

/// Every entry below `root` as (`/`-separated relative path, kind), sorted by path bytes
/// component-wise (a directory's entries right after it); symlinks are not followed
/// ([`kpack_fs::walk`]). An entry that cannot be read is an error.
pub fn walk_tree(root: &Path) -> Result<Vec<(String, TreeEntry)>, ArtifactError> {
    let mut out = Vec::new();
    for e in kpack_fs::walk(root) {
        let e = e?;
        // Joined by `/` on every system (Windows walks give `\`-separated paths).
        let rel = kpack_fs::slash_path(&e.rel)
            .ok_or_else(|| ArtifactError::invalid(&e.path, "file name is not UTF-8"))?;
        let kind = if e.file_type.is_symlink() {
            let target = std::fs::read_link(&e.path).map_err(ArtifactError::io(&e.path))?;
            TreeEntry::Symlink(target)
        } else if e.file_type.is_dir() {
            TreeEntry::Dir
        } else if e.file_type.is_file() {
            TreeEntry::File
        } else {
            return Err(ArtifactError::invalid(
                e.path,
                "neither a regular file, a directory nor a symlink",
            ));
        };
        out.push((rel, kind));
    }
    Ok(out)
}

/// Sub-directories of `dir` holding an `artifact_manifest.txt`, sorted by name.
pub fn artifact_dirs(dir: &Path) -> Result<Vec<(String, PathBuf)>, ArtifactError> {
    let mut found = Vec::new();
    for path in sorted_subdirs(dir)? {
        if path.join(manifest::MANIFEST).is_file() {
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                found.push((name.to_owned(), path.clone()));
            }
        }
    }
    Ok(found)
}

/// The sub-directories of `dir`, sorted by name ([`kpack_fs::subdirs`]).
pub(crate) fn sorted_subdirs(dir: &Path) -> Result<Vec<PathBuf>, ArtifactError> {
    Ok(kpack_fs::subdirs(dir)?)
}

/// Where split and recombine write: every artifact of the run staged and published
/// together ([`kpack_fs::Stage::add_tree`]). A missing `out` appears whole in one rename;
/// into an existing `out`, the artifacts are renamed in turn, generic artifacts last (they
/// name the others' archives), and none may replace an artifact already there.
pub(crate) fn stage_output(out: &Path) -> Result<(kpack_fs::Stage, PathBuf), ArtifactError> {
    let mut stage = kpack_fs::Stage::new();
    let root = stage.add_tree(out, |name| {
        name.to_str().is_some_and(|n| n.ends_with("_generic"))
    })?;
    Ok((stage, root))
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

/// Moves the file `from` to `to` (one file system), creating `to`'s directory.
pub(crate) fn move_file(from: &Path, to: &Path) -> Result<(), ArtifactError> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(ArtifactError::io(dir))?;
    }
    std::fs::rename(from, to).map_err(ArtifactError::io(from))
}

/// Re-creates a symlink with the same link text.
pub(crate) fn copy_symlink(target: &Path, to: &Path) -> Result<(), ArtifactError> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(ArtifactError::io(dir))?;
    }
    kpack_fs::symlink(target, to).map_err(ArtifactError::io(to))
}

/// `<component>_<suffix>`, split at the last `_`.
pub fn split_artifact_name(name: &str) -> Option<(&str, &str)> {
    name.rsplit_once('_')
        .filter(|(c, s)| !c.is_empty() && !s.is_empty())
}
