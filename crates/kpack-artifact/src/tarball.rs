//! Artifacts as tarballs (`<name>.tar.zst`, `.tar.xz`, `.tar`), as TheRock's CI stores them,
//! at the edges of split, recombine and verify. The tar rules themselves (which members are
//! refused, how output is made reproducible) live in `kpack-tar`.
//!
//! * Input: wherever an artifact directory is accepted, a tarball of one is too (its
//!   members relative to the artifact root: `artifact_manifest.txt`, `<prefix>/…`). `split`
//!   streams it (see [`crate::split`]); `recombine` unpacks each tarball shard artifact it
//!   reads, in one pass, beside the output's stage, component by component, whose files are
//!   then moved into package directories or packed into package tarballs from there (see
//!   [`crate::recombine`]); `verify` streams each tarball (once to
//!   list it, once to read its files), spooling one member at a time per tarball to a kpack
//!   temporary in `$TMPDIR` (swept by the next run after a kill); the output's tarballs, then
//!   the originals, are read one per worker, so its temporary space is a member per worker,
//!   the largest at most (see [`crate::verify`]).
//! * Output: with [`OutputFormat::TarZst`], every artifact written to the staging directory is
//!   packed into `<name>.tar.zst` there ([`pack_staged`]), synced to the disk before any is
//!   published ([`sync`]: split syncs all at once, [`sync_packed`]; recombine each
//!   component's while the others are recombined), and published with the rest.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::{ArtifactError, TreeEntry, manifest};

/// How split and recombine write artifacts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// One directory per artifact.
    #[default]
    Dir,
    /// One reproducible `<name>.tar.zst` per artifact.
    TarZst,
}

impl From<kpack_tar::TarError> for ArtifactError {
    fn from(e: kpack_tar::TarError) -> Self {
        ArtifactError::Tar(Box::new(e))
    }
}

/// Whether `path` names an artifact tarball rather than a directory.
pub fn is_tarball(path: &Path) -> bool {
    path.is_file()
}

/// The artifacts directly in `dir`: sub-directories holding an `artifact_manifest.txt`, and
/// tarballs (named by their stem), sorted by name; hidden entries are skipped. An artifact
/// present both ways is an error.
pub fn artifacts_in(dir: &Path) -> Result<Vec<(String, PathBuf)>, ArtifactError> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for e in std::fs::read_dir(dir).map_err(ArtifactError::io(dir))? {
        let e = e.map_err(ArtifactError::io(dir))?;
        let path = e.path();
        let Some(file_name) = e.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if file_name.starts_with('.') {
            continue;
        }
        let name = if path.is_dir() && path.join(manifest::MANIFEST).is_file() {
            file_name
        } else if let Some(stem) = kpack_tar::stem(&file_name).filter(|_| path.is_file()) {
            stem.to_owned()
        } else {
            continue;
        };
        found.push((name, path));
    }
    found.sort();
    if let Some(w) = found.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(ArtifactError::invalid(
            &w[1].1,
            format!(
                "artifact {} is also {}; keep one of them",
                w[0].0,
                w[0].1.display()
            ),
        ));
    }
    Ok(found)
}

/// A kpack temporary directory in `$TMPDIR` (where verify spools tarball members), after
/// sweeping there what killed runs left.
pub(crate) fn temp_dir() -> Result<tempfile::TempDir, ArtifactError> {
    let dir = std::env::temp_dir();
    // Housekeeping: a leftover we may not remove (another user's) must not stop the job.
    let _ = kpack_fs::sweep(&dir);
    kpack_fs::temp_dir_in(&dir).map_err(ArtifactError::io(dir))
}

/// Packs each artifact directory `stage/<name>` into `stage/<name>.tar.zst` and removes the
/// directory, on `threads` workers (so the extra space is that many artifacts' tarballs).
/// Each tarball is packed alone, its members in the directory's sorted order, so its bytes
/// do not depend on the thread count. `recorded` holds, by artifact name, the modes and
/// links the caller knows and the staged copy may have lost (a Windows disk's), which the
/// tarball carries instead of the disk's.
pub(crate) fn pack_staged(
    stage: &Path,
    names: &[String],
    format: OutputFormat,
    threads: usize,
    recorded: &HashMap<String, kpack_tar::Recorded>,
) -> Result<(), ArtifactError> {
    if format == OutputFormat::Dir {
        return Ok(());
    }
    let opts = kpack_tar::PackOptions::from_env();
    let none = kpack_tar::Recorded::new();
    kpack_concurrency::threads::map(names, threads, |_, name| {
        let dir = stage.join(name);
        let out = stage.join(format!("{name}.tar.zst"));
        kpack_tar::pack_dir_recorded(&dir, &out, opts, recorded.get(name).unwrap_or(&none))?;
        kpack_fs::remove_tree(&dir).map_err(ArtifactError::io(&dir))
    })?;
    Ok(())
}

/// Syncs every tarball packed into `stage` ([`pack_staged`]) to the disk, on `threads`
/// workers, so that a power loss after they are published cannot leave one partial: once
/// every output is written, just before publishing (the disk has written most of them
/// back by then).
pub(crate) fn sync_packed(stage: &Path, threads: usize) -> Result<(), ArtifactError> {
    let mut packed = Vec::new();
    for e in std::fs::read_dir(stage).map_err(ArtifactError::io(stage))? {
        let path = e.map_err(ArtifactError::io(stage))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(".tar.zst") && path.is_file() {
            packed.push(path);
        }
    }
    packed.sort();
    kpack_concurrency::threads::map(&packed, threads, |_, path| sync(path))?;
    Ok(())
}

/// Syncs the file `path` (a packed tarball) to the disk.
pub(crate) fn sync(path: &Path) -> Result<(), ArtifactError> {
    // Opened for writing (nothing is written): Windows flushes no read-only handle.
    let file = std::fs::OpenOptions::new().write(true).open(path);
    let file = file.map_err(ArtifactError::io(path))?;
    file.sync_all().map_err(ArtifactError::io(path))
}

/// The path of artifact `name` in `out` in either format, when one exists.
pub(crate) fn existing(out: &Path, name: &str) -> Option<PathBuf> {
    [name.to_owned(), format!("{name}.tar.zst")]
        .into_iter()
        .map(|n| out.join(n))
        .find(|p| p.exists())
}

/// The entries below `prefix` among a tarball's `members`, as [`crate::walk_tree`] lists
/// the same tree unpacked: paths relative to the prefix, sorted component-wise, the
/// directories a tarball may leave implicit included.
pub(crate) fn tree_below(
    members: &[(String, TreeEntry)],
    prefix: &str,
) -> Vec<(String, TreeEntry)> {
    let mut below: BTreeMap<Vec<&str>, TreeEntry> = BTreeMap::new();
    for (path, entry) in members {
        let Some(rel) = path.strip_prefix(prefix).and_then(|r| r.strip_prefix('/')) else {
            continue;
        };
        let parts: Vec<&str> = rel.split('/').collect();
        for n in 1..parts.len() {
            below.entry(parts[..n].to_vec()).or_insert(TreeEntry::Dir);
        }
        below.insert(parts, entry.clone());
    }
    below
        .into_iter()
        .map(|(parts, entry)| (parts.join("/"), entry))
        .collect()
}
