//! What verify lists before it reads a file: the artifacts under the path, each one's
//! manifest, record and entries (a tarball's in one pass of its stream), an installed tree as
//! one artifact, and the spooling of tarball members read one at a time.

use std::io::Read;
use std::path::{Path, PathBuf};

use kpack_tar::MemberKind;

use super::ArtifactInfo;
use crate::{ArtifactError, ArtifactKind, ArtifactRecord, TreeEntry, manifest};

/// The entries below a directory, relative to it (as [`crate::walk_tree`] lists them).
pub(super) type Tree = Vec<(String, TreeEntry)>;

/// One artifact's manifest, record and installed entries, listed without reading its files
/// (a tarball's members are listed in one pass of its stream).
pub(super) struct Listing {
    pub(super) prefixes: Result<Vec<String>, ArtifactError>,
    pub(super) record: Result<Option<ArtifactRecord>, ArtifactError>,
    /// Per prefix: the entries below it (relative to it), or why they could not be listed.
    pub(super) entries: Vec<(String, Result<Tree, ArtifactError>)>,
}

/// The largest `kpack_artifact.json` accepted from a tarball (a few hundred bytes in practice).
pub(super) const MAX_RECORD: u64 = 1 << 20;

pub(super) fn list_artifact(path: &Path, tarball: bool) -> Result<Listing, ArtifactError> {
    if !tarball {
        let prefixes = manifest::read(path);
        let entries = prefixes
            .as_ref()
            .map(|ps| {
                ps.iter()
                    .filter(|p| path.join(p).is_dir())
                    .map(|p| (p.clone(), crate::walk_tree(&path.join(p))))
                    .collect()
            })
            .unwrap_or_default();
        return Ok(Listing {
            prefixes,
            record: ArtifactRecord::read(path),
            entries,
        });
    }
    let mut members: Vec<(String, TreeEntry)> = Vec::new();
    let mut prefixes = None;
    let mut record = Ok(None);
    kpack_tar::open(path, |m, content| -> Result<(), ArtifactError> {
        let shown = path.join(&m.path);
        members.push((
            m.path.clone(),
            match &m.kind {
                MemberKind::Dir => TreeEntry::Dir,
                MemberKind::Symlink(t) => TreeEntry::Symlink(PathBuf::from(t)),
                MemberKind::File { size, .. } => {
                    if m.path == manifest::MANIFEST {
                        prefixes = Some(manifest::read_member(content, *size, &shown));
                    } else if m.path == crate::RECORD {
                        let mut bytes = Vec::new();
                        record = content
                            .take(MAX_RECORD)
                            .read_to_end(&mut bytes)
                            .map_err(ArtifactError::io(&shown))
                            .and_then(|_| ArtifactRecord::parse(&bytes, &shown).map(Some));
                    }
                    TreeEntry::File
                }
            },
        ));
        Ok(())
    })?;
    let prefixes = prefixes.unwrap_or_else(|| {
        Err(ArtifactError::invalid(
            path.join(manifest::MANIFEST),
            "missing: no manifest at the top of the tarball",
        ))
    });
    let entries = prefixes
        .as_ref()
        .map(|ps| {
            ps.iter()
                .map(|p| (p.clone(), Ok(crate::tarball::tree_below(&members, p))))
                .filter(|(_, e)| e.as_ref().is_ok_and(|e| !e.is_empty()))
                .collect()
        })
        .unwrap_or_default();
    Ok(Listing {
        prefixes,
        record,
        entries,
    })
}

/// The artifacts under `dir` as (name, path, is a tarball), sorted by name: every
/// sub-directory that is not hidden, and every tarball; `dir` itself when it is a tarball.
pub(super) fn checked_artifacts(dir: &Path) -> Result<Vec<(String, PathBuf, bool)>, ArtifactError> {
    if crate::tarball::is_tarball(dir) {
        return Ok(vec![(tarball_stem(dir)?, dir.to_owned(), true)]);
    }
    let mut found: Vec<(String, PathBuf, bool)> = Vec::new();
    for d in crate::sorted_subdirs(dir)? {
        let name = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !name.starts_with('.') {
            found.push((name, d, false));
        }
    }
    for (name, path) in crate::tarball::artifacts_in(dir)? {
        if crate::tarball::is_tarball(&path) {
            found.push((name, path, true));
        }
    }
    found.sort();
    Ok(found)
}

pub(super) fn tarball_stem(path: &Path) -> Result<String, ArtifactError> {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(kpack_tar::stem)
        .map(str::to_owned)
        .ok_or_else(|| ArtifactError::invalid(path, "expected <artifact>.tar.zst, .tar.xz or .tar"))
}

/// Streams the tarball `path` once, spooling each regular member `wanted` selects into one
/// temporary file (removed before the next), and calls `visit` with the member's path and
/// the spooled file. So the temporary space is the largest member.
pub(super) fn each_spooled_member(
    path: &Path,
    spool_dir: &Path,
    wanted: &dyn Fn(&str) -> bool,
    visit: &mut dyn FnMut(&str, &Path) -> Result<(), ArtifactError>,
) -> Result<(), ArtifactError> {
    let spool = spool_dir.join("member");
    kpack_tar::open(path, |m, content| -> Result<(), ArtifactError> {
        let MemberKind::File { mode, .. } = m.kind else {
            return Ok(());
        };
        if !wanted(&m.path) {
            return Ok(());
        }
        kpack_tar::write_file(content, &spool, mode)?;
        let result = visit(&m.path, &spool);
        std::fs::remove_file(&spool).map_err(ArtifactError::io(&spool))?;
        result
    })?;
    Ok(())
}

/// `text` with the spooled file's path written as the member it holds.
pub(super) fn as_member(text: &str, spool: &Path, shown: &Path) -> String {
    text.replace(&*spool.to_string_lossy(), &shown.to_string_lossy())
}

/// Whether `path` holds split or recombined artifacts (an artifact tarball, or a directory
/// holding artifact directories or tarballs), rather than an installed tree, a tree of
/// archives or one archive (a file that starts with the archive magic).
pub(super) fn holds_artifacts(path: &Path) -> Result<bool, ArtifactError> {
    if path.is_dir() {
        return Ok(!crate::tarball::artifacts_in(path)?.is_empty());
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .map_err(ArtifactError::io(path));
    Ok(read.is_err() || magic != kpack_archive::MAGIC)
}

/// An installed tree (or one archive) as the one artifact verify checks: installed at its
/// own name below its parent, so that every path shows as the user's.
pub(super) fn installed_tree(path: &Path) -> Result<(ArtifactInfo, Entries), ArtifactError> {
    let abs = std::path::absolute(path).map_err(ArtifactError::io(path))?;
    let name_of = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let (root, entries) = if abs.is_dir() {
        (abs.clone(), crate::walk_tree(&abs)?)
    } else {
        let parent = abs.parent().unwrap_or(&abs).to_owned();
        (parent, vec![(name_of(&abs), TreeEntry::File)])
    };
    let prefix = name_of(&root);
    let info = ArtifactInfo {
        name: prefix.clone(),
        component: prefix.clone(),
        dir: root.parent().unwrap_or(&root).to_owned(),
        tarball: false,
        prefixes: vec![prefix.clone()],
        kind: ArtifactKind::Arch,
        arches: None,
        group: None,
        handlers: Vec::new(),
        installed: true,
    };
    let entries = entries
        .into_iter()
        .map(|(rel, e)| (prefix.clone(), rel, e))
        .collect();
    Ok((info, entries))
}

/// An artifact's installed entries: (prefix, path below it, entry).
pub(super) type Entries = Vec<(String, String, TreeEntry)>;
