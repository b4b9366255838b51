//! What verify keeps of each file, read once (checks 2, 4 and 5, and what checks 3, 7 and 8
//! need of it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use kpack_archive::Archive;
use kpack_archive::kpm::KpmManifest;
use kpack_hostbin::marker::MarkerMetadata;
use kpack_pipeline::transform::{self, HostState};

use super::listing::as_member;
use super::{ArchiveFacts, ArtifactInfo, Facts, FileCheck, digest};
use crate::ArtifactKind;
use crate::integrity::{self, Failure};
use kpack_package::handlers::{self, Handler};
use kpack_package::index::{self, IndexedArchive};

/// A mapped file as an [`Archive`]'s backing.
struct Mapped(kpack_pipeline::FileBytes);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

pub(super) fn map(path: &Path) -> Result<kpack_pipeline::FileBytes, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    kpack_pipeline::map_file(&f, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A copy of the spooled member `spooled` (whose bytes are `bytes`) beside it in its spool
/// directory, which outlives the member's spool file ([`super::Facts::rewritten`]).
fn keep(spooled: &Path, bytes: &[u8]) -> Result<PathBuf, String> {
    static KEPT: AtomicUsize = AtomicUsize::new(0);
    let kept = spooled.with_file_name(format!("kept-{}", KEPT.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&kept, bytes)
        .map(|()| kept.clone())
        .map_err(|e| format!("cannot keep a copy in {}: {e}", kept.display()))
}

/// The facts of the file `rel` (an overlay path) of artifact `info`, read at `disk` (the file
/// itself, or the spooled member), every message naming it as `<artifact>/<rel>`.
pub(super) fn file_facts(info: &ArtifactInfo, rel: &str, disk: &Path, digests: bool) -> Facts {
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
            Ok(HostState::Kpacked) => {
                read_marker(&bytes, shown, out);
                if digests && info.tarball && kpack_elf::is_elf(&bytes) {
                    match keep(path, &bytes) {
                        Ok(kept) => facts.rewritten = Some(kept),
                        Err(e) => out.failures.push(format!("{shown_text}: {e}")),
                    }
                }
            }
            Ok(_) => {}
            Err(e) => out.failures.push(format!("{shown_text}: {e}")),
        }
        return facts;
    }
    // Check 4 (whether these are the artifact's architectures) is made once every file is
    // read ([`super::arches`]): an artifact without a record takes its architectures from its
    // archives and its component's indexes.
    if in_kpack_dir && name.ends_with(".kpack") {
        read_archive(info, rel, bytes, shown, digests, &mut facts);
    } else if !(in_kpack_dir && name.ends_with(".kpm")) {
        match handlers::classify(&Handler::ALL, rel) {
            None => facts.check.failures.push(format!(
                "{shown_text}: not an archive, index or database file; a per-arch artifact holds no host code"
            )),
            Some(arch) => facts.database = Some(arch),
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
    let read = integrity::check_archive(&x, shown, digests);
    let mut entries: HashMap<_, _> = read
        .read
        .into_iter()
        .map(|(binary, arch, sha)| ((binary, arch), sha))
        .collect();
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

/// Notes the marker of the kpacked host binary `bytes`, or why it does not read; and each
/// wrapper of an ELF file whose pointer the loader does not put on the marker.
fn read_marker(bytes: &[u8], shown: &Path, out: &mut FileCheck) {
    match transform::kpacked_marker(bytes) {
        Ok(Some(kpacked)) => {
            match MarkerMetadata::decode(&kpacked.bytes) {
                Ok((meta, _)) => out.binary = Some((meta, kpacked.wrappers)),
                Err(e) => out.typed.push(Failure::marker(shown, kpacked.offset, &e)),
            }
            // A PE image does not parse as ELF: its wrappers are not judged here.
            let elf = kpack_elf::ElfFile::parse(bytes).ok();
            let fat = elf.as_ref().and_then(|e| kpack_elf::inspect_elf(e).ok());
            if let Some((elf, fat)) = elf.zip(fat) {
                for miss in super::host::wrappers_missing_the_marker(&elf, &fat) {
                    out.failures.push(format!("{}: {miss}", shown.display()));
                }
            }
        }
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
