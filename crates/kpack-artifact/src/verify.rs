//! `kpack verify`: proves that split or recombined artifacts lost nothing, and that installed
//! trees and archives are intact (fsck, without the originals).
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
//!    file or symlink in two artifacts (but the portable SPIR-V archive, a regular file
//!    every group holding `amdgcnspirv` ships), or a directory in one and not in another:
//!    the packages install side by side;
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
//! 9. a per-target archive name may be a relative link, within its package, to the group
//!    archive `recombine --group-archives` writes, which must declare that target (a
//!    dangling or absolute link is a failure); markers reach archives through such links.
//! 10. every entry of every archive is read through its digest check
//!     ([`crate::integrity::check_archive`]), each damaged one a failure naming file, binary
//!     key, arch and byte offset; an archive without digests is listed as unproven (a
//!     warning); an index or marker that does not read is named with its file and offset;
//! 11. every entry of a target a marker reaches is named by some binary's marker: a marker
//!     whose `kernel_name` was damaged into another binary's leaves its own entries unnamed.
//!
//! Without artifacts, `path` is an installed tree (packages installed into one prefix), a
//! tree of archives, or one archive ([`verify`] tells them apart by content): checked as one
//! artifact holding anything, by checks 3, 5, 9, 10, 11 and, for its indexes, 7 against the
//! archives installed ([`check_installed_indexes`]).
//!
//! Artifacts (checked and original) may be directories or tarballs ([`crate::tarball`]).
//! Every file is read once: a directory's in place (in parallel), a tarball's as its
//! stream passes (listed in a first pass, read in a second), each member spooled to one
//! temporary file in `$TMPDIR` while it is checked and removed before the next, so the
//! temporary space is the largest member (a kpack temporary, swept by the next run after a
//! kill). What the cross-file checks need of a file is kept as it is read: an archive's
//! targets and entries, an index, a marker, and with `--original` the SHA-256 of every file and
//! code object, against which the originals are compared as they are read in turn. Failure
//! lines name a tarball's members as `<tarball>/<member>`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use kpack_archive::Archive;
use kpack_archive::kpm::{KpmEntry, KpmManifest};
use kpack_hostbin::marker::MarkerMetadata;

use crate::integrity::{self, Failure};
use crate::recombine::Sharing;
use crate::{ArtifactError, ArtifactKind, ArtifactRecord, TreeEntry, manifest};
use kpack_package::handlers::{self, Handler, parse_family, parse_target};
use kpack_package::index::{self, IndexedArchive};
use kpack_pipeline::source::{self, DeviceCode, Visitor};
use kpack_pipeline::transform::{self, HostState};
use kpack_tar::MemberKind;

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
    /// Artifacts checked (0 for an installed tree or an archive).
    pub artifacts: usize,
    /// Host binaries with a marker checked.
    pub binaries: usize,
    /// Archives opened and validated.
    pub archives: usize,
    /// Archive entries read, each checked against its digest when its archive has digests.
    pub entries: usize,
    /// Archives that carry no digests (written before digests existed): every entry decoded
    /// and the TOC validates, but their bytes could not be proven. A warning, not a failure.
    pub unproven: Vec<PathBuf>,
    /// Code objects read back through markers (with `--original`).
    pub code_objects: usize,
    /// Original regular files checked (with `--original`).
    pub original_files: usize,
    /// Every problem found, sorted.
    #[serde(serialize_with = "crate::integrity::with_messages")]
    pub failures: Vec<Failure>,
}

impl VerifyReport {
    /// No failures.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// The failures as the lines `kpack verify` prints.
    pub fn lines(&self) -> Vec<String> {
        self.failures.iter().map(ToString::to_string).collect()
    }

    /// Adds what `other` checked and found (another path of one `kpack verify`).
    pub fn merge(&mut self, other: VerifyReport) {
        self.artifacts += other.artifacts;
        self.binaries += other.binaries;
        self.archives += other.archives;
        self.entries += other.entries;
        self.unproven.extend(other.unproven);
        self.code_objects += other.code_objects;
        self.original_files += other.original_files;
        self.failures.extend(other.failures);
    }
}

struct ArtifactInfo {
    name: String,
    component: String,
    /// The artifact directory, or its tarball (whose members then show as
    /// `<tarball>/<member>`).
    dir: PathBuf,
    /// Read from a tarball.
    tarball: bool,
    /// Its manifest's prefixes.
    prefixes: Vec<String>,
    kind: ArtifactKind,
    /// Architectures (processors or families) a non-generic artifact may hold.
    arches: Option<BTreeSet<String>>,
    /// An installed tree (or an archive), not an artifact: it holds anything, binaries and
    /// archives side by side.
    installed: bool,
    /// A group package's architecture group (the name of its group archives).
    group: Option<String>,
    handlers: Vec<Handler>,
}

/// Every entry of every artifact, by `<prefix>/<relpath>`: (artifact index, kind).
type Overlay = BTreeMap<String, Vec<(usize, TreeEntry)>>;

/// A SHA-256 digest, which is how the outputs' bytes are compared with the originals':
/// each output file is read once, wherever it comes from (a directory or a tarball's
/// stream). SHA-256 rather than a faster non-cryptographic hash: the bytes may be
/// adversarial, and with the CPU's SHA extensions it runs at GB/s.
type Digest = [u8; 32];

fn digest(bytes: &[u8]) -> Digest {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).into()
}

/// What verify keeps of one regular file of a checked artifact, read once: in place, or
/// from the one temporary file a tarball member is spooled to.
#[derive(Default)]
struct Facts {
    check: FileCheck,
    size: u64,
    /// The file's digest (with `--original` only).
    digest: Option<Digest>,
    /// An archive that opened and validated: its targets and entries.
    archive: Option<ArchiveFacts>,
    /// A `.kpm` in a `.kpack` directory, decoded, or the failure.
    index: Option<Result<KpmManifest, Failure>>,
    /// A non-generic artifact's archive as its index entry, per manifest prefix it is below.
    described: Vec<(String, IndexedArchive)>,
}

struct ArchiveFacts {
    gfx_arches: Vec<String>,
    /// (kernel name, target) → the digest of the code object (with `--original` only).
    entries: HashMap<(String, String), Option<Digest>>,
}

struct Ctx {
    artifacts: Vec<ArtifactInfo>,
    overlay: Overlay,
    /// By (artifact, overlay path).
    facts: HashMap<(usize, String), Facts>,
}

impl Ctx {
    fn path(&self, artifact: usize, rel: &str) -> PathBuf {
        self.artifacts[artifact].dir.join(rel)
    }

    fn facts(&self, artifact: usize, rel: &str) -> Option<&Facts> {
        self.facts.get(&(artifact, rel.to_owned()))
    }

    fn archive(&self, artifact: usize, rel: &str) -> Option<&ArchiveFacts> {
        self.facts(artifact, rel)?.archive.as_ref()
    }

    /// The regular file the symlink at overlay path `link` of artifact `a` names, as an
    /// overlay path, if it is one of the same artifact: a package's links must resolve
    /// within it, relative to their directory, so that the tree can be copied anywhere.
    fn follow(&self, link: &str, a: usize) -> Result<String, String> {
        let Some((_, TreeEntry::Symlink(text))) = self
            .overlay
            .get(link)
            .and_then(|es| es.iter().find(|(i, _)| *i == a))
        else {
            return Err("not a symlink".into());
        };
        let text = text.to_string_lossy();
        if text.starts_with('/') {
            return Err(format!(
                "an absolute link to {text} (links must be relative to stay valid in a copied tree)"
            ));
        }
        let to = beside(link, &text)
            .ok_or(format!("a link to {text}, which leaves the install tree"))?
            .join("/");
        let kind = self
            .overlay
            .get(&to)
            .and_then(|es| es.iter().find(|(i, _)| *i == a));
        match kind {
            Some((_, TreeEntry::File)) => Ok(to),
            Some(_) => Err(format!("a link to {text}, which is not a regular file")),
            None => Err(format!(
                "a dangling link to {text} (no such file in {})",
                self.artifacts[a].name
            )),
        }
    }

    /// The archives a marker search path reaches from the binary at `bin` (an overlay path):
    /// (target, overlay path as named, overlay path of the archive file, artifact index). A
    /// per-target name may be a link to a group archive ([`Ctx::follow`]); a dangling link
    /// reaches nothing (the link check reports it).
    fn resolve(
        &self,
        bin: &str,
        search: &str,
    ) -> Result<Vec<(String, String, String, usize)>, String> {
        let mut parts =
            beside(bin, search).ok_or(format!("search path {search:?} leaves the install tree"))?;
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
                let info = &self.artifacts[*a];
                if info.kind == ArtifactKind::Generic {
                    continue;
                }
                // What a runtime puts in place of @GFXARCH@ is a target (or, in a recombined
                // artifact, its group's name): a longer name is another module's archive
                // (`merge_@GFXARCH@.kpack` also matches `merge_sort_gfx1010.kpack`).
                // Installed artifacts name their group archives otherwise (checked below).
                if parse_target(target).is_none()
                    && info.group.as_deref() != Some(target)
                    && !info.installed
                {
                    continue;
                }
                let file = match e {
                    TreeEntry::File => path.clone(),
                    TreeEntry::Symlink(_) => match self.follow(path, *a) {
                        Ok(file) => file,
                        Err(_) => continue,
                    },
                    TreeEntry::Dir => continue,
                };
                found.push((target.to_owned(), path.clone(), file, *a));
            }
        }
        Ok(found)
    }
}

/// The overlay path `rel` names relative to the directory of the overlay path `from`, as
/// components (`.` and `..` resolved); `None` if it leaves the tree.
fn beside<'a>(from: &'a str, rel: &'a str) -> Option<Vec<&'a str>> {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts)
}

/// The entries below a directory, relative to it (as [`crate::walk_tree`] lists them).
type Tree = Vec<(String, TreeEntry)>;

/// One artifact's manifest, record and installed entries, listed without reading its files
/// (a tarball's members are listed in one pass of its stream).
struct Listing {
    prefixes: Result<Vec<String>, ArtifactError>,
    record: Result<Option<ArtifactRecord>, ArtifactError>,
    /// Per prefix: the entries below it (relative to it), or why they could not be listed.
    entries: Vec<(String, Result<Tree, ArtifactError>)>,
}

/// The largest `kpack_artifact.json` accepted from a tarball (a few hundred bytes in practice).
const MAX_RECORD: u64 = 1 << 20;

fn list_artifact(path: &Path, tarball: bool) -> Result<Listing, ArtifactError> {
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
fn checked_artifacts(dir: &Path) -> Result<Vec<(String, PathBuf, bool)>, ArtifactError> {
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

fn tarball_stem(path: &Path) -> Result<String, ArtifactError> {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(kpack_tar::stem)
        .map(str::to_owned)
        .ok_or_else(|| ArtifactError::invalid(path, "expected <artifact>.tar.zst, .tar.xz or .tar"))
}

/// Streams the tarball `path` once, spooling each regular member `wanted` selects into one
/// temporary file (removed before the next), and calls `visit` with the member's path and
/// the spooled file. So the temporary space is the largest member.
fn each_spooled_member(
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
fn as_member(text: &str, spool: &Path, shown: &Path) -> String {
    text.replace(&*spool.to_string_lossy(), &shown.to_string_lossy())
}

/// Whether `path` holds split or recombined artifacts (an artifact tarball, or a directory
/// holding artifact directories or tarballs), rather than an installed tree, a tree of
/// archives or one archive (a file that starts with the archive magic).
fn holds_artifacts(path: &Path) -> Result<bool, ArtifactError> {
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
fn installed_tree(path: &Path) -> Result<(ArtifactInfo, Entries), ArtifactError> {
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
type Entries = Vec<(String, String, TreeEntry)>;

/// Verifies `path`: the split or recombined artifacts under it (directories or tarballs),
/// else an installed tree (packages installed into one prefix) or a tree of archives, else
/// one archive, told apart by content. I/O errors on the top directory are errors; every
/// problem inside is a failure of the report.
pub fn verify(path: &Path, opts: &VerifyOptions) -> Result<VerifyReport, ArtifactError> {
    let with_digests = opts.original.is_some();
    let mut report = VerifyReport::default();
    let mut failures = Vec::new();
    let mut artifacts = Vec::new();
    let mut installed: Vec<Entries> = Vec::new();
    let tree = !holds_artifacts(path)?;
    if tree {
        if opts.original.is_some() {
            return Err(ArtifactError::Usage(format!(
                "{}: --original compares split or recombined artifacts with theirs, and this \
                 is an installed tree or an archive",
                path.display()
            )));
        }
        let (info, entries) = installed_tree(path)?;
        artifacts.push(info);
        installed.push(entries);
    }
    for (name, d, tarball) in if tree {
        Vec::new()
    } else {
        checked_artifacts(path)?
    } {
        let listing = list_artifact(&d, tarball)?;
        if let Err(e) = &listing.prefixes {
            failures.push(match e {
                ArtifactError::Io { .. } => format!("{}: {e}", d.display()),
                _ => e.to_string(),
            });
            continue;
        }
        let record = match listing.record {
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
        let mut entries_of = Vec::new();
        for (prefix, entries) in listing.entries {
            match entries {
                Ok(entries) => {
                    entries_of.extend(entries.into_iter().map(|(rel, e)| (prefix.clone(), rel, e)))
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
        installed.push(entries_of);
        artifacts.push(ArtifactInfo {
            prefixes: listing.prefixes.unwrap_or_default(),
            name,
            component,
            dir: d,
            tarball,
            kind,
            arches,
            group: record.as_ref().and_then(|r| r.group.clone()),
            handlers,
            installed: false,
        });
    }
    report.artifacts = if tree { 0 } else { artifacts.len() };
    let mut overlay: Overlay = BTreeMap::new();
    for (i, entries) in installed.iter().enumerate() {
        for (prefix, rel, e) in entries {
            overlay
                .entry(format!("{prefix}/{rel}"))
                .or_default()
                .push((i, e.clone()));
        }
    }
    // Check 6.
    for line in crate::recombine::shared_paths(artifacts.iter().zip(&installed).map(|(a, es)| {
        let es = es.iter().map(|(_, rel, e)| {
            let sharing = Sharing::of(rel, *e == TreeEntry::Dir, *e == TreeEntry::File);
            (rel.as_str(), sharing)
        });
        (a.name.as_str(), es)
    })) {
        failures.push(format!("packages do not install side by side: {line}"));
    }
    let threads = kpack_concurrency::threads::count(opts.threads);

    // Every regular file read once (checks 2, 4, 5; what checks 3, 7 and 8 need of it):
    // a directory artifact's in parallel, a tarball's as it streams past.
    let files: Vec<(String, usize)> = overlay
        .iter()
        .flat_map(|(p, es)| {
            es.iter()
                .filter(|(_, e)| *e == TreeEntry::File)
                .map(move |(a, _)| (p.clone(), *a))
        })
        .collect();
    let in_place: Vec<&(String, usize)> = files
        .iter()
        .filter(|(_, a)| !artifacts[*a].tarball)
        .collect();
    let read = kpack_concurrency::threads::map(&in_place, threads, |_, (rel, a)| {
        let path = artifacts[*a].dir.join(rel);
        Ok::<_, ArtifactError>(file_facts(&artifacts[*a], rel, &path, with_digests))
    })?;
    let mut facts: HashMap<(usize, String), Facts> = in_place
        .iter()
        .map(|(rel, a)| (*a, rel.clone()))
        .zip(read)
        .collect();
    let tarball_files: BTreeSet<(usize, &str)> = files
        .iter()
        .filter(|(_, a)| artifacts[*a].tarball)
        .map(|(rel, a)| (*a, rel.as_str()))
        .collect();
    let spool_dir = crate::tarball::temp_dir()?;
    for (a, info) in artifacts.iter().enumerate().filter(|(_, i)| i.tarball) {
        each_spooled_member(
            &info.dir,
            spool_dir.path(),
            &|member| tarball_files.contains(&(a, member)),
            &mut |member, spool| {
                facts.insert(
                    (a, member.to_owned()),
                    file_facts(info, member, spool, with_digests),
                );
                Ok(())
            },
        )?;
    }
    check_index_sizes(&artifacts, &facts, &mut failures);
    check_indexes(&artifacts, &installed, &facts, &mut failures);
    check_installed_indexes(&artifacts, &facts, &mut failures);
    let ctx = Ctx {
        artifacts,
        overlay,
        facts,
    };

    let mut binaries: Vec<(&str, usize, &MarkerMetadata, &[usize])> = Vec::new();
    let mut typed: Vec<Failure> = Vec::new();
    for ((a, rel), f) in &ctx.facts {
        failures.extend(f.check.failures.iter().cloned());
        typed.extend(f.check.typed.iter().cloned());
        report.archives += usize::from(f.check.archive);
        report.entries += f.check.entries;
        if f.check.unproven {
            report.unproven.push(ctx.path(*a, rel));
        }
        if let Some((meta, wrappers)) = &f.check.binary {
            binaries.push((rel, *a, meta, wrappers));
        }
    }
    binaries.sort_by_key(|b| (b.0, b.1));
    report.binaries = binaries.len();
    report.unproven.sort();
    let mut reached: BTreeSet<(String, usize)> = BTreeSet::new();
    // (artifact, archive file, target) a marker reached, and the (binary key, target) of each
    // entry a marker names there.
    let mut reached_targets: BTreeSet<(usize, String, String)> = BTreeSet::new();
    let mut claimed: BTreeSet<(usize, String, String, String)> = BTreeSet::new();
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
            for (target, named, path, a) in found {
                any = true;
                reached.insert((named.clone(), a));
                reached.insert((path.clone(), a));
                let full = ctx.path(a, &path);
                let Some(archive) = ctx.archive(a, &path) else {
                    continue; // reported by the per-file check
                };
                if !archive.gfx_arches.contains(&target) {
                    // A group archive is reached through its targets' links, not its name
                    // (which, installed, names no target).
                    let info = &ctx.artifacts[a];
                    if info.group.as_deref() == Some(target.as_str())
                        || (info.installed && parse_target(&target).is_none())
                    {
                        continue;
                    }
                    failures.push(format!(
                        "{}: named for {target} but declares gfx_arches {:?}",
                        ctx.path(a, &named).display(),
                        archive.gfx_arches
                    ));
                    continue;
                }
                reached_targets.insert((a, path.clone(), target.clone()));
                for w in *wrappers {
                    let key = kpack_archive::binary_key(&meta.kernel_name, *w as u32);
                    claimed.insert((a, path.clone(), key.clone(), target.clone()));
                    if !archive.entries.contains_key(&(key.clone(), target.clone())) {
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
    // A marker whose kernel_name was damaged into another binary's names that binary's
    // entries, and the entries of its own that it no longer names are left over.
    for (a, path, target) in &reached_targets {
        let Some(archive) = ctx.archive(*a, path) else {
            continue;
        };
        let mut orphans: Vec<&str> = archive
            .entries
            .keys()
            .filter(|(key, arch)| {
                arch == target && !claimed.contains(&(*a, path.clone(), key.clone(), arch.clone()))
            })
            .map(|(key, _)| key.as_str())
            .collect();
        orphans.sort_unstable();
        for key in orphans {
            failures.push(format!(
                "{}: entry {key} for {target} is named by no binary's marker (a binary's \
                 marker names another key, or the archive holds code no binary loads)",
                ctx.path(*a, path).display()
            ));
        }
    }
    // A tree of archives alone has no markers to reach them.
    let markers_expected = !(tree && binaries.is_empty());
    for (rel, entries) in &ctx.overlay {
        for (a, e) in entries {
            if let TreeEntry::Symlink(_) = e {
                if rel.ends_with(".kpack") && ctx.artifacts[*a].kind != ArtifactKind::Generic {
                    check_link(&ctx, rel, *a, &mut failures);
                }
            }
            if *e == TreeEntry::File
                && rel.ends_with(".kpack")
                && ctx.artifacts[*a].kind != ArtifactKind::Generic
                && markers_expected
                && !reached.contains(&(rel.clone(), *a))
            {
                failures.push(format!(
                    "{}: no binary's marker reaches this archive",
                    ctx.path(*a, rel).display()
                ));
            }
        }
    }

    if let Some(original) = &opts.original {
        identity(
            &ctx,
            original,
            spool_dir.path(),
            threads,
            &mut report,
            &mut failures,
        )?;
    }
    typed.extend(failures.into_iter().map(Failure::check));
    typed.sort();
    typed.dedup();
    report.failures = typed;
    Ok(report)
}

/// Check 9: a per-target archive name that is a link (to a group archive) resolves, within
/// its package, to an archive declaring the target the name carries.
fn check_link(ctx: &Ctx, rel: &str, a: usize, failures: &mut Vec<String>) {
    let shown = ctx.path(a, rel);
    let file = match ctx.follow(rel, a) {
        Ok(file) => file,
        Err(e) => return failures.push(format!("{}: {e}", shown.display())),
    };
    let Some(archive) = ctx.archive(a, &file) else {
        return; // reported by the per-file check
    };
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let names_a_target = archive
        .gfx_arches
        .iter()
        .any(|t| name.ends_with(&format!("_{t}.kpack")));
    if !names_a_target {
        failures.push(format!(
            "{}: links to {file}, which declares gfx_arches {:?}, none of them the target of this name",
            shown.display(),
            archive.gfx_arches
        ));
    }
}

/// Check 7: per component, the indexes of its generic artifact against the archives of its
/// other artifacts.
fn check_indexes(
    artifacts: &[ArtifactInfo],
    installed: &[Vec<(String, String, TreeEntry)>],
    facts: &HashMap<(usize, String), Facts>,
    failures: &mut Vec<String>,
) {
    let facts_of = |i: usize, prefix: &str, rel: &str| facts.get(&(i, format!("{prefix}/{rel}")));
    let components: BTreeSet<&str> = artifacts.iter().map(|a| a.component.as_str()).collect();
    for component in components {
        let of = || {
            artifacts
                .iter()
                .enumerate()
                .zip(installed)
                .filter(move |((_, a), _)| a.component == component)
        };
        // (prefix, installed path) → the index found, with its shown path.
        let mut found: BTreeMap<(String, String), (PathBuf, Option<KpmManifest>)> = BTreeMap::new();
        let mut generic_dir = None;
        for ((i, a), entries) in of().filter(|((_, a), _)| a.kind == ArtifactKind::Generic) {
            generic_dir.get_or_insert((a.name.as_str(), &a.dir));
            for (prefix, rel, e) in entries {
                let in_kpack_dir = rel
                    .rsplit('/')
                    .nth(1)
                    .is_some_and(|d| d == index::KPACK_DIR);
                if *e == TreeEntry::File && rel.ends_with(".kpm") && in_kpack_dir {
                    let path = a.dir.join(prefix).join(rel);
                    let manifest = match facts_of(i, prefix, rel).and_then(|f| f.index.as_ref()) {
                        Some(Ok(m)) => Some(m.clone()),
                        // Reported by the per-file check.
                        Some(Err(_)) | None => None,
                    };
                    found.insert((prefix.clone(), rel.clone()), (path, manifest));
                }
            }
        }
        let required = of().any(|((_, a), _)| a.kind == ArtifactKind::Group);
        if !required && found.is_empty() {
            continue;
        }
        let mut archives: BTreeMap<&str, Vec<IndexedArchive>> = BTreeMap::new();
        for ((i, _), entries) in of().filter(|((_, a), _)| a.kind != ArtifactKind::Generic) {
            for (prefix, rel, e) in entries {
                if *e != TreeEntry::File || index::archive_dir(rel).is_none() {
                    continue;
                }
                // An archive that does not open is reported by the per-file check.
                let described = facts_of(i, prefix, rel)
                    .into_iter()
                    .flat_map(|f| &f.described);
                for (_, x) in described.filter(|(p, _)| p == prefix) {
                    archives.entry(prefix).or_default().push(x.clone());
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

/// Check 5's size check of every `.kpm` against the archives beside it in its artifact.
fn check_index_sizes(
    artifacts: &[ArtifactInfo],
    facts: &HashMap<(usize, String), Facts>,
    failures: &mut Vec<String>,
) {
    for ((a, rel), f) in facts {
        if artifacts[*a].kind == ArtifactKind::Generic || artifacts[*a].installed {
            continue;
        }
        let Some(Ok(m)) = &f.index else {
            continue;
        };
        let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
        for (t, e) in &m.kpack_files {
            let size = facts
                .get(&(*a, format!("{dir}/{}", e.file)))
                .map(|f| f.size);
            if size != Some(e.size) {
                failures.push(format!(
                    "{}: lists {} for {t} with {} bytes, found {size:?}",
                    artifacts[*a].dir.join(rel).display(),
                    e.file,
                    e.size
                ));
            }
        }
    }
}

/// Check 7 of an installed tree: each `.kpm` against the archives installed beside it. The
/// packages are gone, so an index may list targets whose package is not installed; but a
/// target it lists whose archive is present must be that archive's, with its size and
/// kernel count, and every archive present must be listed by its module's index.
fn check_installed_indexes(
    artifacts: &[ArtifactInfo],
    facts: &HashMap<(usize, String), Facts>,
    failures: &mut Vec<String>,
) {
    let index_at = |a: usize, rel: &str| match facts.get(&(a, rel.to_owned())) {
        Some(Facts {
            index: Some(Ok(m)), ..
        }) => Some(m),
        _ => None,
    };
    for ((a, rel), f) in facts {
        let info = &artifacts[*a];
        if !info.installed {
            continue;
        }
        let shown = info.dir.join(rel);
        if let Some(Ok(m)) = &f.index {
            let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
            for (t, e) in &m.kpack_files {
                let Some(present) = facts.get(&(*a, format!("{dir}/{}", e.file))) else {
                    continue; // its package is not installed
                };
                let found = present.described.iter().find(|(_, d)| d.target == *t);
                let matches = found.is_some_and(|(_, d)| {
                    d.entry.size == e.size && d.entry.kernel_count == e.kernel_count
                });
                if !matches {
                    failures.push(format!(
                        "{}: lists {t} as {}, but the archive installed there {}",
                        shown.display(),
                        describe_entry(e),
                        match found {
                            Some((_, d)) => format!("holds {}", describe_entry(&d.entry)),
                            None => format!("does not declare {t}"),
                        }
                    ));
                }
            }
        }
        for (prefix, d) in &f.described {
            let index = format!("{prefix}/{}", index::index_path(&d.dir, &d.module));
            let listed =
                index_at(*a, &index).map(|m| m.kpack_files.iter().any(|(t, _)| *t == d.target));
            if listed == Some(false) {
                failures.push(format!(
                    "{}: does not list {}, which {} provides",
                    info.dir.join(&index).display(),
                    d.target,
                    shown.display()
                ));
            }
        }
    }
}

#[derive(Default)]
struct FileCheck {
    failures: Vec<String>,
    /// The typed failures (damage, files that do not read).
    typed: Vec<Failure>,
    archive: bool,
    /// Archive entries read.
    entries: usize,
    /// An archive without digests.
    unproven: bool,
    /// A kpacked binary's marker and HIPK wrapper indices.
    binary: Option<(MarkerMetadata, Vec<usize>)>,
}

/// A mapped file as an [`Archive`]'s backing.
struct Mapped(kpack_pipeline::FileBytes);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

fn map(path: &Path) -> Result<kpack_pipeline::FileBytes, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    kpack_pipeline::map_file(&f, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The facts of the file `rel` (an overlay path) of artifact `info`, read at `disk` (the file
/// itself, or the spooled member), every message naming it as `<artifact>/<rel>`.
fn file_facts(info: &ArtifactInfo, rel: &str, disk: &Path, digests: bool) -> Facts {
    let shown = info.dir.join(rel);
    let mut facts = read_facts(info, rel, disk, &shown, digests);
    if disk != shown {
        for f in &mut facts.check.failures {
            *f = as_member(f, disk, &shown);
        }
    }
    facts
}

fn read_facts(info: &ArtifactInfo, rel: &str, path: &Path, shown: &Path, digests: bool) -> Facts {
    let mut facts = Facts {
        size: std::fs::metadata(path).map(|m| m.len()).unwrap_or_default(),
        ..Facts::default()
    };
    let out = &mut facts.check;
    let shown_text = shown.display();
    let in_kpack_dir = rel.split('/').any(|c| c == ".kpack");
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let bytes = match map(path) {
        Ok(b) => b,
        Err(e) => {
            out.failures.push(e);
            return facts;
        }
    };
    if digests {
        facts.digest = Some(digest(&bytes));
    }
    if in_kpack_dir && name.ends_with(".kpm") {
        let index = KpmManifest::decode(&bytes).map_err(|e| Failure::index(shown, &e));
        if let Err(e) = &index {
            facts.check.typed.push(e.clone());
        }
        facts.index = Some(index);
    }
    if info.installed {
        // An installed tree holds anything: archives are told by their magic, kpacked
        // binaries by their markers, and nothing else is this check's business.
        if bytes.starts_with(&kpack_archive::MAGIC) {
            read_archive(info, rel, bytes, shown, digests, &mut facts);
        } else if facts.index.is_none() {
            read_marker(&bytes, shown, &mut facts.check);
        }
        return facts;
    }
    // `rel` is `<prefix>/<relpath>`; handlers look at the relpath, which they find by its
    // own markers (`library`, `miopen/db`, …), so the prefix does not disturb them.
    if info.kind == ArtifactKind::Generic {
        let out = &mut facts.check;
        if name.ends_with(".kpack") {
            out.failures.push(format!(
                "{shown_text}: a .kpack archive in a generic artifact"
            ));
        }
        if let Some(arch) = handlers::classify(&info.handlers, rel) {
            out.failures.push(format!(
                "{shown_text}: a database file of {} left in the generic artifact",
                arch.target
            ));
        }
        match transform::check(&bytes) {
            Ok(HostState::Fat) => out.failures.push(format!(
                "{shown_text}: a fat binary left in a generic artifact (its device code was not split out)"
            )),
            Ok(HostState::Kpacked) => read_marker(&bytes, shown, out),
            Ok(_) => {}
            Err(e) => out.failures.push(format!("{shown_text}: {e}")),
        }
        return facts;
    }
    let arches = info.arches.as_ref();
    let allowed = |arch: &str| arches.is_none_or(|s| s.contains(arch));
    if in_kpack_dir && name.ends_with(".kpack") {
        let Some(x) = read_archive(info, rel, bytes, shown, digests, &mut facts) else {
            return facts;
        };
        for t in x.gfx_arches() {
            let proc = parse_target(t).map(|t| t.processor().to_owned());
            if !proc.as_deref().is_some_and(allowed) {
                facts.check.failures.push(format!(
                    "{shown_text}: holds {t}, not an architecture of {} ({:?})",
                    info.name,
                    arches.map(|s| s.iter().collect::<Vec<_>>())
                ));
            }
        }
    } else if !(in_kpack_dir && name.ends_with(".kpm")) {
        match handlers::classify(&Handler::ALL, rel) {
            None => facts.check.failures.push(format!(
                "{shown_text}: not an archive, index or database file; a per-arch artifact holds no host code"
            )),
            Some(arch) if !allowed(&arch.artifact) => facts.check.failures.push(format!(
                "{shown_text}: a file of {} in {}",
                arch.target, info.name
            )),
            Some(_) => {}
        }
    }
    facts
}

/// Opens the archive `bytes` (check 5): reads every entry through the digest check, and
/// notes its facts; the archive, if it opened and validates, for further checks.
fn read_archive(
    info: &ArtifactInfo,
    rel: &str,
    bytes: kpack_pipeline::FileBytes,
    shown: &Path,
    digests: bool,
    facts: &mut Facts,
) -> Option<Archive> {
    facts.check.archive = true;
    let x = match Archive::from_backing(Mapped(bytes)) {
        Ok(x) => x,
        Err(e) => {
            facts.check.typed.push(Failure::archive(shown, &e));
            return None;
        }
    };
    facts.described = describe_below_prefixes(&x, facts.size, shown, rel, info);
    let mut entries = HashMap::new();
    let read = integrity::check_archive(&x, shown, |binary, arch, code| {
        let key = (binary.to_owned(), arch.to_owned());
        entries.insert(key, digests.then(|| digest(code)));
    });
    // A damaged entry is still in the archive: markers that name it resolve, and the
    // failure above says what is wrong with it.
    for (binary, arch, _) in x.entries() {
        let key = (binary.to_owned(), arch.to_owned());
        entries.entry(key).or_insert(None);
    }
    facts.check.entries = read.entries;
    facts.check.typed.extend(read.failures);
    facts.check.unproven = !x.has_digests();
    facts.archive = Some(ArchiveFacts {
        gfx_arches: x.gfx_arches().to_vec(),
        entries,
    });
    if let Err(e) = x.validate() {
        facts.check.typed.push(Failure::archive(shown, &e));
        return None;
    }
    Some(x)
}

/// Notes the marker of the kpacked host binary `bytes`, or why it does not read.
fn read_marker(bytes: &[u8], shown: &Path, out: &mut FileCheck) {
    match transform::kpacked_marker(bytes) {
        Ok(Some(kpacked)) => match MarkerMetadata::decode(&kpacked.bytes) {
            Ok((meta, _)) => out.binary = Some((meta, kpacked.wrappers)),
            Err(e) => out.typed.push(Failure::marker(shown, kpacked.offset, &e)),
        },
        Ok(None) => {}
        Err(e) => out.failures.push(format!("{}: {e}", shown.display())),
    }
}

/// The archive `x` as its index entry, for each prefix of its artifact it is installed
/// below (an archive that does not describe is reported by the other checks).
fn describe_below_prefixes(
    x: &Archive,
    size: u64,
    shown: &Path,
    rel: &str,
    info: &ArtifactInfo,
) -> Vec<(String, IndexedArchive)> {
    let prefixes = info.prefixes.iter();
    prefixes
        .filter_map(|p| {
            let below = rel.strip_prefix(p.as_str())?.strip_prefix('/')?;
            let d = index::describe_opened(x, size, shown, below, &info.name).ok()?;
            Some(d.into_iter().map(|d| (p.clone(), d)))
        })
        .flatten()
        .collect()
}

/// A writer that digests what is written to it, and counts it.
struct Digesting {
    sha: sha2::Sha256,
    len: u64,
}

impl Write for Digesting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(&mut self.sha, buf);
        self.len += buf.len() as u64;
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
                archives.extend(
                    found
                        .into_iter()
                        .filter(|(t, _, _, _)| *t == target)
                        .map(|(_, _, file, a)| (file, a)),
                );
            }
        }
        let want = digest(code.data);
        for &w in code.wrappers {
            let key = kpack_archive::binary_key(&self.meta.kernel_name, w as u32);
            let recovered = archives.iter().any(|(path, a)| {
                self.ctx.archive(*a, path).is_some_and(|x| {
                    x.entries.get(&(key.clone(), target.clone())) == Some(&Some(want))
                })
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
        Ok(())
    }
}

/// The original artifacts `--original` names, as (name, directory or tarball), sorted:
/// `original` itself when it is an artifact (the path `kpack split` took, a directory or a
/// tarball), else the artifacts directly under it (the directory holding them, what
/// `split --batch` took), else one level further down (one directory per shard). Empty
/// when there are none.
pub fn original_artifacts(original: &Path) -> Result<Vec<(String, PathBuf)>, ArtifactError> {
    if crate::tarball::is_tarball(original) {
        return Ok(vec![(tarball_stem(original)?, original.to_owned())]);
    }
    if original.join(manifest::MANIFEST).is_file() {
        let name = std::path::absolute(original)
            .map_err(ArtifactError::io(original))?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(vec![(name, original.to_owned())]);
    }
    let direct = crate::tarball::artifacts_in(original)?;
    if !direct.is_empty() {
        return Ok(direct);
    }
    let mut nested = Vec::new();
    for d in crate::sorted_subdirs(original)? {
        nested.extend(crate::tarball::artifacts_in(&d)?);
    }
    Ok(nested)
}

/// What one original entry's check found.
struct Outcome {
    file: bool,
    failures: Vec<String>,
    checked: usize,
    /// For a rewritten binary: (overlay path, whether this original reproduces it).
    host: Option<(String, bool)>,
}

/// Check 8 for the original entry `rel` (an overlay path), a file read at `disk`.
fn original_outcome(ctx: &Ctx, rel: &str, e: &TreeEntry, disk: Option<&Path>) -> Outcome {
    let mut o = Outcome {
        file: *e == TreeEntry::File,
        failures: Vec::new(),
        checked: 0,
        host: None,
    };
    let outputs = ctx.overlay.get(rel).map(Vec::as_slice).unwrap_or_default();
    match (e, disk) {
        (TreeEntry::Symlink(t), _) if !outputs.iter().any(|(_, x)| x == e) => {
            o.failures
                .push(format!("{rel}: symlink to {} not preserved", t.display()));
        }
        (TreeEntry::File, Some(path)) => {
            let bytes = match map(path) {
                Ok(b) => b,
                Err(err) => {
                    o.failures.push(err);
                    return o;
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
                return o;
            }
            if !fat {
                let want = Some(digest(&bytes));
                let same = copies
                    .iter()
                    .any(|a| ctx.facts(*a, rel).is_some_and(|f| f.digest == want));
                if !same {
                    o.failures.push(format!("{rel}: differs from the original"));
                }
                return o;
            }
            let Some(out) = ctx.facts(copies[0], rel) else {
                o.failures
                    .push(format!("{rel}: the output is not a kpacked binary"));
                return o;
            };
            let Some((meta, _)) = &out.check.binary else {
                o.failures
                    .push(format!("{rel}: the output is not a kpacked binary"));
                return o;
            };
            let mut recover = Recover {
                ctx,
                rel,
                out_bin: rel,
                meta,
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
                    let mut d = Digesting {
                        sha: sha2::Sha256::default(),
                        len: 0,
                    };
                    rw.write_to(&bytes, &mut d).is_ok()
                        && d.len == out.size
                        && out.digest == Some(sha2::Digest::finalize(d.sha).into())
                });
            o.host = Some((rel.to_owned(), same));
        }
        _ => {}
    }
    o
}

fn identity(
    ctx: &Ctx,
    original: &Path,
    spool_dir: &Path,
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
    // Entries read in place (everything of a directory, a tarball's directories and
    // symlinks), and per tarball the members to stream: (overlay path, times installed).
    let mut in_place: Vec<(Option<PathBuf>, String, TreeEntry)> = Vec::new();
    let mut streamed: Vec<(&Path, BTreeMap<String, usize>)> = Vec::new();
    for (_, path) in &originals {
        let tarball = crate::tarball::is_tarball(path);
        let listing = list_artifact(path, tarball)?;
        listing.prefixes?;
        let mut members = BTreeMap::new();
        for (prefix, entries) in listing.entries {
            for (rel, e) in entries? {
                let at = format!("{prefix}/{rel}");
                if tarball && e == TreeEntry::File {
                    *members.entry(at).or_default() += 1;
                } else {
                    let disk = (!tarball).then(|| path.join(&prefix).join(&rel));
                    in_place.push((disk, at, e));
                }
            }
        }
        if tarball {
            streamed.push((path, members));
        }
    }
    let mut outcomes = kpack_concurrency::threads::map(&in_place, threads, |_, (disk, rel, e)| {
        Ok::<_, ArtifactError>(original_outcome(ctx, rel, e, disk.as_deref()))
    })?;
    for (tarball, members) in &streamed {
        each_spooled_member(
            tarball,
            spool_dir,
            &|m| members.contains_key(m),
            &mut |member, spool| {
                let mut o = original_outcome(ctx, member, &TreeEntry::File, Some(spool));
                let shown = tarball.join(member);
                for f in &mut o.failures {
                    *f = as_member(f, spool, &shown);
                }
                for _ in 1..members[member] {
                    outcomes.push(Outcome {
                        file: o.file,
                        failures: o.failures.clone(),
                        checked: o.checked,
                        host: o.host.clone(),
                    });
                }
                outcomes.push(o);
                Ok(())
            },
        )?;
    }
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
