//! `kpack verify`: proves that split or recombined artifacts lost nothing, and that installed
//! trees and archives are intact (fsck, without the originals).
//!
//! Checks, each failure one line naming the file and what was expected:
//! 1. every sub-directory is an artifact: a valid `artifact_manifest.txt` (and a valid
//!    record when present);
//! 2. generic artifacts hold no linked fat binary (relocatable objects and `ar` archives
//!    keep their device code by design), no `.kpack` archive, and no file the split's
//!    database handlers claim for an architecture;
//! 3. every wrapper of a kpacked ELF binary reaches its marker: the loader puts its pointer
//!    on the marker's first byte ([`kpack_elf::marker_offset`], the rule `verify-elf` and
//!    `restore` apply), each that does not a failure naming the file, the wrapper, its offset
//!    and where the pointer lands; every marker resolves: for each target the artifacts
//!    provide (the archives whose name matches the search path with `@GFXARCH@` expanded,
//!    resolved relative to the binary's
//!    directory in the overlay of all artifacts), the archive declares that target and holds
//!    `kernel_name#i` for every wrapper `i`; every binary resolves at least one archive, and
//!    every archive is reached by some marker;
//! 4. per-arch and group artifacts hold only archives, `.kpm` indexes and database files,
//!    all of their own architectures: those their record names, or without one (the
//!    reference's artifacts) those their archives declare and the component's indexes assign
//!    them, never what the directory name seems to say (`verify/arches.rs`);
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
//!    with its link text, and every rewritten binary keeps what its original means
//!    (`verify/host.rs`: every section but the device code byte for byte, the wrapper slots
//!    and the relocations that fill them aside; as many wrappers, each reaching the marker
//!    by check 3), whichever
//!    tool rewrote it (kpack or the reference); a PE image must be kpack's rewrite of it.
//!    The original is an artifact directory (what `split` took), or a directory of them,
//!    directly or one level down (one directory per shard) ([`original_artifacts`]); a
//!    rewritten binary must keep what at least one shard's original means (the
//!    primary's, after recombine), or is reported with the first differing offset.
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
//! stream passes (listed in a first pass, read in a second; the checked tarballs one per
//! worker, then the originals one per worker, each original fat binary's bundles decoded on
//! every worker), each member spooled to a temporary file of its worker in `$TMPDIR` while
//! it is checked and removed before the next, so the temporary space is a member per
//! worker, the largest at most (a kpack temporary, swept by the next run after a kill).
//! What the cross-file checks need of a file is kept as it is read: an archive's
//! targets and entries, an index, a marker, and with `--original` the SHA-256 of every file and
//! code object, against which the originals are compared as they are read in turn. Failure
//! lines name a tarball's members as `<tarball>/<member>`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use kpack_archive::kpm::KpmManifest;
use kpack_hostbin::marker::MarkerMetadata;

use crate::integrity::Failure;
use crate::recombine::Sharing;
use crate::search_path::{Pattern, beside};
use crate::{ArtifactError, ArtifactKind, TreeEntry};
use kpack_package::handlers::{self, Handler, parse_target};
use kpack_package::index::IndexedArchive;

mod arches;
mod files;
mod host;
mod indexes;
mod listing;
mod original;

pub use original::original_artifacts;

use files::file_facts;
use indexes::{check_index_sizes, check_indexes, check_installed_indexes};
use listing::{
    Entries, checked_artifacts, each_spooled_member, holds_artifacts, installed_tree, list_artifact,
};

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
    /// A per-arch or group artifact's database file: the architecture it is for.
    database: Option<handlers::DbArch>,
    /// With `--original`, a kpacked ELF binary of a tarball, kept whole in a file of the
    /// spool directory (not in memory: a distribution's rewritten binaries are gigabytes):
    /// check 8 compares it with its original after the tarball's stream has passed
    /// ([`host`]).
    rewritten: Option<PathBuf>,
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
        let pattern = Pattern::of(bin, search)?;
        let from = format!("{}/", pattern.dir);
        let mut found = Vec::new();
        for (path, entries) in self.overlay.range(from.clone()..) {
            let Some(name) = path.strip_prefix(&from) else {
                break;
            };
            if name.contains('/') {
                continue;
            }
            let Some(spelled) = pattern.gfxarch(name) else {
                continue;
            };
            // Either spelling: a split for Windows writes the target's `:` as `@`.
            let target = &*kpack_target::from_file_name_spelling(spelled);
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

/// Verifies `path`: the split or recombined artifacts under it (directories or tarballs),
/// else an installed tree (packages installed into one prefix) or a tree of archives, else
/// one archive, told apart by content. I/O errors on the top directory are errors; every
/// problem inside is a failure of the report.
pub fn verify(path: &Path, opts: &VerifyOptions) -> Result<VerifyReport, ArtifactError> {
    let with_digests = opts.original.is_some();
    let mut report = VerifyReport::default();
    let mut failures = Vec::new();
    let tree = !holds_artifacts(path)?;
    let (artifacts, installed) = if tree {
        if opts.original.is_some() {
            return Err(ArtifactError::Usage(format!(
                "{}: --original compares split or recombined artifacts with theirs, and this \
                 is an installed tree or an archive",
                path.display()
            )));
        }
        let (info, entries) = installed_tree(path)?;
        (vec![info], vec![entries])
    } else {
        let listed = list_artifacts(path, &mut failures)?;
        report.artifacts = listed.0.len();
        listed
    };
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
    let spool_dir = crate::tarball::temp_dir()?;
    let facts = read_files(
        &artifacts,
        &overlay,
        with_digests,
        threads,
        spool_dir.path(),
    )?;
    check_index_sizes(&artifacts, &facts, &mut failures);
    check_indexes(&artifacts, &installed, &facts, &mut failures);
    check_installed_indexes(&artifacts, &facts, &mut failures);
    let ctx = Ctx {
        artifacts,
        overlay,
        facts,
    };
    arches::check(&ctx, &mut failures);
    let mut typed: Vec<Failure> = Vec::new();
    let mut binaries: Vec<(&str, usize, &MarkerMetadata, &[usize])> = Vec::new();
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
    let reached = check_markers(&ctx, &binaries, &mut failures);
    // A tree of archives alone has no markers to reach them.
    check_archives_reached(
        &ctx,
        &reached,
        !(tree && binaries.is_empty()),
        &mut failures,
    );
    if let Some(original) = &opts.original {
        original::identity(
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

/// The artifacts under `path` (check 1): each one's description and installed entries; what
/// does not list is a failure.
fn list_artifacts(
    path: &Path,
    failures: &mut Vec<String>,
) -> Result<(Vec<ArtifactInfo>, Vec<Entries>), ArtifactError> {
    let mut artifacts = Vec::new();
    let mut installed: Vec<Entries> = Vec::new();
    for (name, d, tarball) in checked_artifacts(path)? {
        let listing = list_artifact(&d, tarball)?;
        if let Err(e) = &listing.prefixes {
            failures.push(match e {
                ArtifactError::Io { .. } => format!("{}: {e}", d.display()),
                _ => e.to_string(),
            });
            continue;
        }
        let record = listing.record.unwrap_or_else(|e| {
            failures.push(e.to_string());
            None
        });
        let split_name = crate::split_artifact_name(&name);
        let kind = match (&record, split_name) {
            (Some(r), _) => r.kind.clone(),
            (None, Some((_, "generic"))) => ArtifactKind::Generic,
            (None, _) => ArtifactKind::Arch,
        };
        // Only a record says what a package's architectures are (see `arches`).
        let arches = record
            .as_ref()
            .filter(|_| kind != ArtifactKind::Generic)
            .map(|r| r.architectures.iter().cloned().collect());
        let handlers = record
            .as_ref()
            .map(|r| {
                r.split_databases
                    .iter()
                    .filter_map(|h| Handler::from_name(h))
                    .collect()
            })
            .unwrap_or_default();
        let component = match (&record, split_name) {
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
    Ok((artifacts, installed))
}

/// Every regular file read once (checks 2 and 5; what checks 3, 4, 7 and 8 need of it): a
/// directory artifact's in parallel, a tarball's as it streams past, tarballs in parallel.
fn read_files(
    artifacts: &[ArtifactInfo],
    overlay: &Overlay,
    with_digests: bool,
    threads: usize,
    spool_dir: &Path,
) -> Result<HashMap<(usize, String), Facts>, ArtifactError> {
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
    // The tarballs streamed on the workers, each spooling into a directory of its own.
    let tarballs: Vec<usize> = (0..artifacts.len())
        .filter(|&a| artifacts[a].tarball)
        .collect();
    let streamed = kpack_concurrency::threads::map(&tarballs, threads, |_, &a| {
        let info = &artifacts[a];
        let spool = spool_dir.join(a.to_string());
        std::fs::create_dir(&spool).map_err(ArtifactError::io(&spool))?;
        let mut read = Vec::new();
        each_spooled_member(
            &info.dir,
            &spool,
            &|member| tarball_files.contains(&(a, member)),
            &mut |member, spooled| {
                let facts = file_facts(info, member, spooled, with_digests);
                read.push(((a, member.to_owned()), facts));
                Ok(())
            },
        )?;
        Ok::<_, ArtifactError>(read)
    })?;
    facts.extend(streamed.into_iter().flatten());
    Ok(facts)
}

/// The archive files and names markers reach, by (overlay path, artifact).
type Reached = BTreeSet<(String, usize)>;

/// Checks 3 and 11: every marker resolves to archives that declare the target their name
/// carries and hold an entry for each wrapper, and every entry of a target a marker reaches
/// is named by some marker. Returns what the markers reach.
fn check_markers(
    ctx: &Ctx,
    binaries: &[(&str, usize, &MarkerMetadata, &[usize])],
    failures: &mut Vec<String>,
) -> Reached {
    let mut reached = Reached::new();
    // (artifact, archive file, target) a marker reached, and the (binary key, target) of each
    // entry a marker names there.
    let mut reached_targets: BTreeSet<(usize, String, String)> = BTreeSet::new();
    let mut claimed: BTreeSet<(usize, String, String, String)> = BTreeSet::new();
    for (rel, _, meta, wrappers) in binaries {
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
                        "{}: named for {target} but declares gfx_arches {}",
                        ctx.path(a, &named).display(),
                        archive.gfx_arches.join(", ")
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
                "{rel}: its marker (search paths {}) resolves to no archive in these artifacts",
                meta.search_paths.join(", ")
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
    reached
}

/// Checks 3 and 9 of the archives: every per-target link resolves, and (when markers are
/// expected) every archive of a package is reached by some marker.
fn check_archives_reached(
    ctx: &Ctx,
    reached: &Reached,
    markers_expected: bool,
    failures: &mut Vec<String>,
) {
    for (rel, entries) in &ctx.overlay {
        for (a, e) in entries {
            if let TreeEntry::Symlink(_) = e {
                if rel.ends_with(".kpack") && ctx.artifacts[*a].kind != ArtifactKind::Generic {
                    check_link(ctx, rel, *a, failures);
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
        .any(|t| kpack_target::archive_stem(name, t).is_some());
    if !names_a_target {
        failures.push(format!(
            "{}: links to {file}, which declares gfx_arches {}, none of them the target of this name",
            shown.display(),
            archive.gfx_arches.join(", ")
        ));
    }
}
