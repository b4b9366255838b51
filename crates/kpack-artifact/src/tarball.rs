//! Artifacts as tarballs (`<name>.tar.zst`, `.tar.xz`, `.tar`), as TheRock's CI stores them,
//! at the edges of split, recombine and verify. The tar rules themselves (which members are
//! refused, how output is made reproducible) live in `kpack-tar`.
//!
//! * Input: wherever an artifact directory is accepted, a tarball of one is too (its
//!   members relative to the artifact root: `artifact_manifest.txt`, `<prefix>/…`). `split`
//!   streams it (see [`crate::split_tar`]); `recombine` unpacks each tarball shard artifact
//!   it reads, in one pass, into the output's stage, whose files are then moved into the
//!   packages (see [`crate::recombine`]); `verify` reads artifacts through a [`View`]: a
//!   temporary directory where artifact directories appear as links to the originals and
//!   tarballs unpacked, so its temporary space is the unpacked size of the tarball artifacts
//!   (only those). The view is a kpack temporary in `$TMPDIR`, which the next verify sweeps
//!   when a run was killed.
//! * Output: with [`OutputFormat::TarZst`], every artifact written to the staging directory is
//!   packed into `<name>.tar.zst` there ([`pack_staged`]), and published with the rest.

use std::path::{Path, PathBuf};

use crate::{ArtifactError, manifest};

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
                "artifact {:?} is also {}; keep one of them",
                w[0].0,
                w[0].1.display()
            ),
        ));
    }
    Ok(found)
}

/// A directory tree of artifacts equivalent to a path that may hold tarballs.
pub(crate) struct View {
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
    /// (artifact path in the view, the path the user gave), for messages.
    given: Vec<(String, String)>,
}

impl View {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `text` with the view's artifact paths written as the user gave them (`DIR/<name>` for
    /// a directory, `DIR/<name>.tar.zst` for a tarball), so messages name real files.
    pub(crate) fn shown(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (view, given) in &self.given {
            for end in ["/", ":"] {
                text = text.replace(&format!("{view}{end}"), &format!("{given}{end}"));
            }
        }
        text
    }
}

/// `path` as a directory of artifacts (or of shard directories holding artifacts), with
/// every tarball found there unpacked: `path` itself when it holds no tarball, a
/// temporary directory otherwise (removed when the view is dropped). `path` may also be a
/// tarball, which becomes a directory holding that one artifact.
pub(crate) fn view(path: &Path) -> Result<View, ArtifactError> {
    let unchanged = || View {
        path: path.to_owned(),
        _temp: None,
        given: Vec::new(),
    };
    if is_tarball(path) {
        let temp = temp_dir()?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(kpack_tar::stem)
            .ok_or_else(|| {
                ArtifactError::invalid(path, "expected <artifact>.tar.zst, .tar.xz or .tar")
            })?;
        let to = temp.path().join(name);
        kpack_tar::unpack(path, &to)?;
        return Ok(View {
            path: temp.path().to_owned(),
            given: vec![(to.display().to_string(), path.display().to_string())],
            _temp: Some(temp),
        });
    }
    if !path.is_dir() {
        return Ok(unchanged());
    }
    // Level 1: artifacts, or shard directories of artifacts.
    let top = artifacts_in(path)?;
    let mut shards = Vec::new();
    for d in crate::sorted_subdirs(path)? {
        let hidden = d
            .file_name()
            .and_then(|n| n.to_str())
            .is_none_or(|n| n.starts_with('.'));
        if !hidden && !d.join(manifest::MANIFEST).is_file() {
            shards.push((d.clone(), artifacts_in(&d)?));
        }
    }
    let any_tarball = top
        .iter()
        .chain(shards.iter().flat_map(|(_, a)| a))
        .any(|(_, p)| is_tarball(p));
    if !any_tarball {
        return Ok(unchanged());
    }
    let temp = temp_dir()?;
    let mut given = Vec::new();
    let mut place = |artifacts: &[(String, PathBuf)], into: &Path| -> Result<(), ArtifactError> {
        std::fs::create_dir_all(into).map_err(ArtifactError::io(into))?;
        for (name, from) in artifacts {
            let to = into.join(name);
            given.push((to.display().to_string(), from.display().to_string()));
            if is_tarball(from) {
                kpack_tar::unpack(from, &to)?;
            } else {
                let from = std::fs::canonicalize(from).map_err(ArtifactError::io(from))?;
                std::os::unix::fs::symlink(&from, &to).map_err(ArtifactError::io(&to))?;
            }
        }
        Ok(())
    };
    place(&top, temp.path())?;
    for (shard, artifacts) in &shards {
        let name = shard.file_name().expect("a sub-directory has a name");
        place(artifacts, &temp.path().join(name))?;
    }
    Ok(View {
        path: temp.path().to_owned(),
        _temp: Some(temp),
        given,
    })
}

/// A kpack temporary directory in `$TMPDIR`, after sweeping there what killed runs left.
fn temp_dir() -> Result<tempfile::TempDir, ArtifactError> {
    let dir = std::env::temp_dir();
    // Housekeeping: a leftover we may not remove (another user's) must not stop the job.
    let _ = kpack_fs::sweep(&dir);
    kpack_fs::temp_dir_in(&dir).map_err(ArtifactError::io(dir))
}

/// Packs each artifact directory `stage/<name>` into `stage/<name>.tar.zst` and removes the
/// directory (one at a time, so the extra space is one artifact's tarball).
pub(crate) fn pack_staged(
    stage: &Path,
    names: impl IntoIterator<Item = impl AsRef<str>>,
    format: OutputFormat,
) -> Result<(), ArtifactError> {
    if format == OutputFormat::Dir {
        return Ok(());
    }
    let opts = kpack_tar::PackOptions::from_env();
    for name in names {
        let name = name.as_ref();
        let dir = stage.join(name);
        kpack_tar::pack_dir(&dir, &stage.join(format!("{name}.tar.zst")), opts)?;
        std::fs::remove_dir_all(&dir).map_err(ArtifactError::io(&dir))?;
    }
    Ok(())
}

/// The path of artifact `name` in `out` in either format, when one exists.
pub(crate) fn existing(out: &Path, name: &str) -> Option<PathBuf> {
    [name.to_owned(), format!("{name}.tar.zst")]
        .into_iter()
        .map(|n| out.join(n))
        .find(|p| p.exists())
}
