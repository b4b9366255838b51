//! The accounting: every byte of every input file attributed to one part, a (kind, target)
//! pair.
//!
//! The numbers come from [`kpack_pipeline::inspect::inspect_mapped`], the same walk `kpack inspect`
//! reports, so the per-target code-object counts and sizes are inspect's by construction.
//! What this module adds is where those objects sit on disk:
//!
//! * a code object in an uncompressed bundle, a bare code object, an `-fgpu-rdc` bitcode
//!   section or an LLVM OffloadBinary image takes exactly its bytes;
//! * the code objects of a compressed (CCOB) bundle share the bundle's stored bytes in
//!   proportion to their uncompressed sizes (one zstd stream has no per-object boundaries);
//! * a `.kpack` archive's blobs go to the architecture of the first entry that uses them
//!   (identical code objects share one blob);
//! * a file a kernel-database handler claims (rocBLAS Tensile files, MIOpen databases, …) is
//!   a `database` file of that handler's target, its embedded device code under the code's
//!   own targets;
//! * whatever is left of a file is `host` (ELF host code, headers, the host bundle entry),
//!   of a `.kpack` archive its index, and of any other file `other`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_package::handlers::Handler;
use kpack_pipeline::inspect::{self, BundleReport, Details, FileReport};
use kpack_pipeline::source::FileKind;
use serde::Serialize;

use crate::UsageError;

/// What a part of a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartKind {
    /// Device code objects inside a fat binary, bundle or bare code object.
    DeviceCode,
    /// A kernel-database file (claimed by a handler), or its embedded code objects.
    Database,
    /// A `.kpack` archive's blobs (per target) or its index (no target).
    KpackArchive,
    /// Everything else of a file holding device code: host code, headers, host entries.
    Host,
    /// Files that hold no device code and belong to no target.
    Other,
}

impl PartKind {
    /// The name used in the JSON and the page.
    pub fn name(self) -> &'static str {
        match self {
            PartKind::DeviceCode => "device-code",
            PartKind::Database => "database",
            PartKind::KpackArchive => "kpack-archive",
            PartKind::Host => "host",
            PartKind::Other => "other",
        }
    }
}

/// One part of a file: its bytes of one kind and target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    /// What the bytes are.
    pub kind: PartKind,
    /// The GPU target (canonical id, or a family such as `gfx11xx` for databases); `None`
    /// for host code, archive indexes and other files.
    pub target: Option<String>,
    /// Bytes of the file on disk.
    pub disk_bytes: u64,
    /// Device code objects, counted as `kpack inspect` counts them.
    pub count: u64,
    /// Their uncompressed size, as `kpack inspect` totals it.
    pub bytes: u64,
}

/// One input file.
#[derive(Debug, Clone, Serialize)]
pub struct FileUsage {
    /// The path as given (or found under a directory).
    pub path: String,
    /// What the file is, as `kpack inspect` names it.
    pub file_kind: &'static str,
    /// The kernel-database handler claiming the file, if any.
    pub handler: Option<&'static str>,
    /// Its size on disk.
    pub disk_bytes: u64,
    /// Its parts, largest first; their `disk_bytes` add up to the file's.
    pub parts: Vec<Part>,
}

/// Per-target sums over every file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetUsage {
    /// The target.
    pub target: String,
    /// Code objects (equal to the sum of `kpack inspect --json`'s `totals[].count`).
    pub count: u64,
    /// Their uncompressed bytes (equal to the sum of inspect's `totals[].bytes`).
    pub bytes: u64,
    /// Bytes on disk, every kind.
    pub disk_bytes: u64,
}

/// Per-kind sums over every file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindUsage {
    /// The kind.
    pub kind: PartKind,
    /// Bytes on disk.
    pub disk_bytes: u64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    /// Bytes on disk of every input file.
    pub disk_bytes: u64,
    /// Per target, sorted by target.
    pub targets: Vec<TargetUsage>,
    /// Per kind, in [`PartKind`] order, kinds without bytes left out.
    pub kinds: Vec<KindUsage>,
    /// Every input file, in input order.
    pub files: Vec<FileUsage>,
}

/// Accounts for `files` (directories already expanded; each member of a wheel or tarball
/// is a file of its own, `<container>!<member>`, its size the member's), calling `progress`
/// after each one. A file that cannot be read or parsed fails the whole report: its numbers
/// would be wrong.
pub fn collect(files: &[PathBuf], progress: &mut dyn FnMut()) -> Result<Usage, UsageError> {
    let mut out = Vec::with_capacity(files.len());
    for path in files {
        kpack_inputs::read(path, true, &mut |input| {
            out.push(input_usage(input)?);
            Ok::<_, UsageError>(())
        })?;
        progress();
    }
    Ok(Usage::from_files(out))
}

fn input_usage(input: &kpack_inputs::Input<'_>) -> Result<FileUsage, UsageError> {
    let shown = input.shown.display().to_string();
    let report =
        inspect::inspect_mapped(&shown, input.bytes).map_err(|e| e.in_file(input.shown))?;
    // A member's path inside its wheel or tarball is already prefix-relative.
    let database = match input.member {
        Some(member) => database_target(Path::new(member)),
        None => database_target(&std::fs::canonicalize(input.path).map_err(|source| {
            UsageError::Io {
                path: input.path.to_owned(),
                source,
            }
        })?),
    };
    Ok(attribute(report, input.bytes.len() as u64, database))
}

/// The handler and target of a kernel-database file. Handlers look for their directory
/// names (`rocblas/<version>/library`, `miopen/db`) from the start of a prefix-relative
/// path; the prefix is not known here, so every suffix of the absolute path is tried.
fn database_target(path: &Path) -> Option<(&'static str, String)> {
    let text = path.to_string_lossy();
    let parts: Vec<&str> = text.split('/').filter(|p| !p.is_empty()).collect();
    (0..parts.len()).find_map(|from| {
        let rel = parts[from..].join("/");
        Handler::ALL
            .iter()
            .find_map(|h| h.classify(&rel).map(|arch| (h.name(), arch.target)))
    })
}

/// Builds a file's parts from its inspect report.
fn attribute(
    report: FileReport,
    disk_bytes: u64,
    database: Option<(&'static str, String)>,
) -> FileUsage {
    let device_kind = if database.is_some() {
        PartKind::Database
    } else if report.kind == FileKind::KpackArchive.name() {
        PartKind::KpackArchive
    } else {
        PartKind::DeviceCode
    };
    let mut parts = Parts::default();
    match &report.details {
        Details::Elf(elf) => {
            bundles(&mut parts, device_kind, &elf.bundles);
            rdc(&mut parts, device_kind, &elf.rdc_sections);
            images(&mut parts, device_kind, &elf.offload_images);
        }
        Details::Ar { members } => {
            for m in members {
                bundles(&mut parts, device_kind, &m.bundles);
                rdc(&mut parts, device_kind, &m.rdc_sections);
                images(&mut parts, device_kind, &m.offload_images);
            }
        }
        Details::Offload { offload_images } => images(&mut parts, device_kind, offload_images),
        Details::Bundles { bundles: b } => bundles(&mut parts, device_kind, b),
        Details::CodeObject(co) => parts.add(device_kind, Some(&co.target), co.size),
        Details::Archive(archive) => {
            let mut seen = std::collections::BTreeSet::new();
            for e in &archive.entries {
                if seen.insert(e.ordinal) {
                    parts.add(device_kind, Some(&e.arch), e.stored_size);
                }
            }
        }
        Details::None {} => {}
    }
    for t in &report.totals {
        let part = parts.entry(device_kind, Some(&t.target));
        part.count += t.count;
        part.bytes += t.bytes;
    }
    let attributed: u64 = parts.0.values().map(|p| p.disk_bytes).sum();
    let rest = disk_bytes.saturating_sub(attributed);
    let (rest_kind, rest_target) = match (&database, report.kind) {
        (Some((_, target)), _) => (PartKind::Database, Some(target.as_str())),
        (None, k) if k == FileKind::KpackArchive.name() => (PartKind::KpackArchive, None),
        (None, k) if k == FileKind::Other.name() => (PartKind::Other, None),
        (None, _) => (PartKind::Host, None),
    };
    parts.add(rest_kind, rest_target, rest);
    let mut parts: Vec<Part> = parts
        .0
        .into_values()
        .filter(|p| p.disk_bytes > 0 || p.count > 0)
        .collect();
    parts.sort_by(|a, b| {
        b.disk_bytes
            .cmp(&a.disk_bytes)
            .then_with(|| (a.kind, &a.target).cmp(&(b.kind, &b.target)))
    });
    FileUsage {
        path: report.path,
        file_kind: report.kind,
        handler: database.map(|(h, _)| h),
        disk_bytes,
        parts,
    }
}

fn bundles(parts: &mut Parts, kind: PartKind, bundles: &[BundleReport]) {
    for b in bundles {
        let compressed = b.format != "uncompressed";
        for e in &b.entries {
            let Some(target) = &e.target else { continue };
            let disk = if compressed {
                // Share of the stored bytes in proportion to the uncompressed size.
                (u128::from(e.size) * u128::from(b.size) / u128::from(b.uncompressed_size.max(1)))
                    as u64
            } else {
                e.size
            };
            parts.add(kind, Some(target), disk);
        }
    }
}

fn images(parts: &mut Parts, kind: PartKind, images: &[inspect::OffloadImageReport]) {
    for image in images {
        if let Some(target) = &image.target {
            parts.add(kind, Some(target), image.size);
        }
    }
}

fn rdc(parts: &mut Parts, kind: PartKind, sections: &[inspect::RdcReport]) {
    for s in sections {
        let target = kpack_target::BundleId::parse(&s.bundle_id)
            .ok()
            .and_then(|id| id.target().map(|t| t.to_string()));
        if let Some(target) = target {
            parts.add(kind, Some(&target), s.size);
        }
    }
}

#[derive(Default)]
struct Parts(BTreeMap<(PartKind, Option<String>), Part>);

impl Parts {
    fn entry(&mut self, kind: PartKind, target: Option<&str>) -> &mut Part {
        let target = target.map(str::to_owned);
        self.0
            .entry((kind, target.clone()))
            .or_insert_with(|| Part {
                kind,
                target,
                disk_bytes: 0,
                count: 0,
                bytes: 0,
            })
    }

    fn add(&mut self, kind: PartKind, target: Option<&str>, disk_bytes: u64) {
        self.entry(kind, target).disk_bytes += disk_bytes;
    }
}

impl Usage {
    /// Sums the files' parts per target and per kind.
    pub fn from_files(files: Vec<FileUsage>) -> Usage {
        let mut targets: BTreeMap<&str, TargetUsage> = BTreeMap::new();
        let mut kinds: BTreeMap<PartKind, u64> = BTreeMap::new();
        for part in files.iter().flat_map(|f| &f.parts) {
            *kinds.entry(part.kind).or_default() += part.disk_bytes;
            if let Some(target) = &part.target {
                let t = targets.entry(target).or_insert_with(|| TargetUsage {
                    target: target.clone(),
                    count: 0,
                    bytes: 0,
                    disk_bytes: 0,
                });
                t.count += part.count;
                t.bytes += part.bytes;
                t.disk_bytes += part.disk_bytes;
            }
        }
        Usage {
            disk_bytes: files.iter().map(|f| f.disk_bytes).sum(),
            targets: targets.into_values().collect(),
            kinds: kinds
                .into_iter()
                .filter(|(_, b)| *b > 0)
                .map(|(kind, disk_bytes)| KindUsage { kind, disk_bytes })
                .collect(),
            files,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensile_file_under_any_prefix_is_a_database_of_its_target() {
        let found = database_target(Path::new(
            "/tmp/x/usr/lib/x86_64-linux-gnu/rocblas/5/library/Kernels.so-000-gfx90a-xnack+.hsaco",
        ));
        assert_eq!(found, Some(("rocblas", "gfx90a:xnack+".to_owned())));
        assert_eq!(
            database_target(Path::new("/home/rocblas/build/libfoo.so")),
            None
        );
    }
}
