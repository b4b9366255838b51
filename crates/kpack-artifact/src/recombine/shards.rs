//! Tarball shards: each artifact tarball recombine takes a package from, unpacked in one
//! pass into the output's stage, and what its members' headers say that the unpacked copy
//! does not hold (its links) or may not (its modes, on a Windows disk).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{Collected, PackagingConfig, provider_suffixes};
use crate::tarball;
use crate::{ArtifactError, TreeEntry};

/// What the headers of a tarball shard's members say that its unpacked copy does not hold
/// (its symbolic links) or may not (its files' modes, on a Windows disk), by the directory
/// each artifact tarball was unpacked into. A directory shard has none: its disk says.
#[derive(Default)]
pub(super) struct ShardRecords(BTreeMap<PathBuf, kpack_tar::Recorded>);

impl ShardRecords {
    /// The members recorded for the artifact directory `artifact` (none for a directory shard).
    pub(super) fn of(&self, artifact: &Path) -> &kpack_tar::Recorded {
        static NONE: kpack_tar::Recorded = kpack_tar::Recorded::new();
        self.0.get(artifact).unwrap_or(&NONE)
    }
}

/// The entries of the prefix tree `prefix` of the artifact `artifact` (none when it is not a
/// directory), by path below the prefix: what its disk holds, with the symbolic links
/// `recorded` (keyed by path below the artifact) in place of whatever the disk holds there.
pub(super) fn prefix_tree(
    artifact: &Path,
    prefix: &str,
    recorded: &kpack_tar::Recorded,
) -> Result<BTreeMap<String, TreeEntry>, ArtifactError> {
    let root = artifact.join(prefix);
    let mut tree: BTreeMap<String, TreeEntry> = if root.is_dir() {
        crate::walk_tree(&root)?.into_iter().collect()
    } else {
        BTreeMap::new()
    };
    let below = format!("{prefix}/");
    for (name, member) in recorded {
        if let (Some(rel), kpack_tar::RecordedMember::Symlink(target)) =
            (name.strip_prefix(&below), member)
        {
            tree.insert(rel.to_owned(), TreeEntry::Symlink(target.clone()));
        }
    }
    Ok(tree)
}

/// The bytes of `c`'s tarball shard artifacts (a directory shard's count nothing): how much
/// unpacking and packing its recombine does, to schedule the largest first.
pub(super) fn tarball_bytes(c: &Collected) -> u64 {
    let generic = c.generic.values();
    let arch = c.arch.values().flatten().map(|(_, path)| path);
    (generic.chain(arch))
        .filter_map(|path| std::fs::metadata(path).ok())
        .filter(|meta| meta.is_file())
        .map(|meta| meta.len())
        .sum()
}

/// Where the tarball shard artifacts recombine reads are unpacked: a directory beside the
/// staged packages (on their file system, so that their files move in by rename), swept
/// with them after a kill; per component, each tarball and its directory there.
pub(super) struct Unpacking {
    /// Removed with everything left in it when dropped.
    _unpacked: Option<tempfile::TempDir>,
    tarballs: BTreeMap<String, Vec<(PathBuf, PathBuf)>>,
}

impl Unpacking {
    /// The tarballs of `component` to unpack and the directory each goes to.
    pub(super) fn of(&self, component: &str) -> &[(PathBuf, PathBuf)] {
        self.tarballs.get(component).map_or(&[], Vec::as_slice)
    }
}

/// Chooses the artifacts read from here on (by name, so those of tarball shards can be
/// chosen before any is read) and gives each tarball among them a directory beside the
/// stage root `root`, which replaces it in `components` (noted in `unpacked_from` for
/// errors); nothing is unpacked yet ([`unpack`]).
pub(super) fn place_tarball_shards(
    components: &mut BTreeMap<String, Collected>,
    config: &PackagingConfig,
    root: &Path,
    unpacked_from: &mut Vec<(String, String)>,
) -> Result<Unpacking, ArtifactError> {
    let v = config.validation;
    let mut chosen: Vec<(&str, &str, &mut PathBuf)> = Vec::new();
    for (component, c) in components.iter_mut() {
        // The arch artifacts some group takes (from the first shard providing each).
        let grouped: BTreeSet<String> = (config.architecture_groups.iter())
            .flat_map(|g| &g.architectures)
            .flat_map(|a| provider_suffixes(c, a))
            .collect();
        let generic = c.generic.iter_mut().filter(|(shard, _)| {
            v.verify_generic_artifacts_match || **shard == config.primary_shard
        });
        let arch = (c.arch.iter_mut())
            .filter(|(suffix, _)| grouped.contains(*suffix))
            .filter_map(|(_, from)| from.first_mut())
            .map(|(shard, path)| (&*shard, path));
        chosen.extend(
            generic
                .chain(arch)
                .filter(|(_, path)| tarball::is_tarball(path))
                .map(|(shard, path)| (component.as_str(), shard.as_str(), path)),
        );
    }
    let mut tarballs: BTreeMap<String, Vec<(PathBuf, PathBuf)>> = BTreeMap::new();
    if chosen.is_empty() {
        return Ok(Unpacking {
            _unpacked: None,
            tarballs,
        });
    }
    let beside = kpack_fs::parent_dir(root);
    let unpacked = kpack_fs::temp_dir_in(beside).map_err(ArtifactError::io(beside))?;
    for (component, shard, path) in chosen {
        let name = (path.file_name().and_then(|n| n.to_str()))
            .and_then(kpack_tar::stem)
            .ok_or_else(|| {
                ArtifactError::invalid(&*path, "expected <artifact>.tar.zst or .tar.xz")
            })?;
        let dir = unpacked.path().join(shard).join(name);
        let shown = |p: &Path| p.to_string_lossy().into_owned();
        unpacked_from.push((shown(&dir), shown(path)));
        let tarball = std::mem::replace(path, dir.clone());
        tarballs
            .entry(component.to_owned())
            .or_default()
            .push((tarball, dir));
    }
    Ok(Unpacking {
        _unpacked: Some(unpacked),
        tarballs,
    })
}

/// Unpacks each of `tarballs` into its directory, one per worker of `threads`; returns their
/// members' links and modes by directory.
pub(super) fn unpack(
    tarballs: &[(PathBuf, PathBuf)],
    threads: usize,
) -> Result<ShardRecords, ArtifactError> {
    let recorded = kpack_concurrency::threads::map(tarballs, threads, |_, (path, dir)| {
        unpack_shard_member(path, dir)
    })?;
    let dirs = tarballs.iter().map(|(_, dir)| dir.clone());
    Ok(ShardRecords(dirs.zip(recorded).collect()))
}

/// Unpacks the artifact tarball `path` into the artifact directory `to` (in the output's
/// stage) and returns its members' modes and symbolic links as their headers say (the links
/// are not made on disk: the packages take them from there). Read as one stream, into the
/// place its files are packed or moved from into the packages: no temporary copy outside
/// the output.
fn unpack_shard_member(path: &Path, to: &Path) -> Result<kpack_tar::Recorded, ArtifactError> {
    std::fs::create_dir_all(to).map_err(ArtifactError::io(to))?;
    let mut recorded = kpack_tar::Recorded::new();
    kpack_tar::open::<kpack_tar::TarError>(path, |member, content| {
        use kpack_tar::{MemberKind, RecordedMember};
        let name = member.path.clone();
        match &member.kind {
            MemberKind::Symlink(target) => {
                recorded.insert(name, RecordedMember::Symlink(target.into()));
                return Ok(());
            }
            MemberKind::File { mode, .. } => {
                recorded.insert(name, RecordedMember::Mode(*mode));
            }
            MemberKind::Dir => {}
        }
        kpack_tar::write_member(member, content, to)
    })?;
    Ok(recorded)
}
