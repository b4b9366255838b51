//! `verify_generic_artifacts_match`: whether two shards' generic artifacts of one component
//! are interchangeable.

use std::path::Path;

use crate::{ArtifactError, ArtifactRecord, RECORD, TreeEntry, manifest};

/// How two generic artifacts of one component (from different shards) differ, one line per
/// difference; empty when they are interchangeable.
///
/// Interchangeable means: the same manifest and record; the same entries (files,
/// directories, symlinks with the same link text, files with the same permissions); files
/// byte-identical, except rewritten binaries, which must have the same marker, the same
/// wrappers (index, magic, version, `reserved1`) and the same sections (names, types,
/// flags, sizes) apart from the size of `.hip_fatbin`. A shard with other targets has
/// another device-code size, and everything the linker placed after `.hip_fatbin` moves
/// with it (measured on the hipcc shards: `.text`, `.dynsym`, `.rela.dyn`, `.dynamic`,
/// `.eh_frame` differ while `.rodata`, `.got`, `.symtab` do not), so host bytes are
/// compared whole only where the layouts agree: two rewritten binaries whose `.hip_fatbin`
/// have the same address and size must be byte-identical.
pub fn compare_generic(a: &Path, b: &Path) -> Result<Vec<String>, ArtifactError> {
    let none = kpack_tar::Recorded::new();
    compare_recorded((a, &none), (b, &none))
}

/// [`compare_generic`] of two artifacts with the symbolic links recorded for their members
/// (a tarball shard's, which its unpacked copy does not hold; see `super::ShardRecords`).
pub(super) fn compare_recorded(
    (a, recorded_a): (&Path, &kpack_tar::Recorded),
    (b, recorded_b): (&Path, &kpack_tar::Recorded),
) -> Result<Vec<String>, ArtifactError> {
    let mut diffs = Vec::new();
    let (ma, mb) = (manifest::read(a)?, manifest::read(b)?);
    if ma != mb {
        diffs.push(format!(
            "manifests differ: prefixes {} vs {}",
            ma.join(", "),
            mb.join(", ")
        ));
        return Ok(diffs);
    }
    if ArtifactRecord::read(a)? != ArtifactRecord::read(b)? {
        diffs.push(format!("{RECORD} differs"));
    }
    for prefix in &ma {
        let (ra, rb) = (a.join(prefix), b.join(prefix));
        let ta = super::prefix_tree(a, prefix, recorded_a)?;
        let tb = super::prefix_tree(b, prefix, recorded_b)?;
        for (rel, ea) in &ta {
            let at = format!("{prefix}/{rel}");
            let Some(eb) = tb.get(rel) else {
                diffs.push(format!("{at}: only in the first"));
                continue;
            };
            if ea != eb {
                diffs.push(format!("{at}: {} vs {}", described(ea), described(eb)));
                continue;
            }
            if *ea == TreeEntry::File {
                if let Some(d) = compare_files(&ra.join(rel), &rb.join(rel))? {
                    diffs.push(format!("{at}: {d}"));
                }
            }
        }
        for rel in tb.keys().filter(|r| !ta.contains_key(*r)) {
            diffs.push(format!("{prefix}/{rel}: only in the second"));
        }
    }
    Ok(diffs)
}

/// The shape of a rewritten binary that must not depend on the shard's targets.
#[derive(Debug, PartialEq, Eq)]
struct HostShape {
    marker: Vec<u8>,
    wrappers: Vec<(usize, String, u32, u64)>,
    sections: Vec<(String, u32, u64, u64)>,
    fatbin: Option<(u64, u64)>,
}

fn host_shape(bytes: &[u8]) -> Option<HostShape> {
    let elf = kpack_elf::ElfFile::parse(bytes).ok()?;
    let fat = kpack_elf::inspect_elf(&elf).ok()?;
    if fat.kind != kpack_elf::FatBinaryKind::Kpacked {
        return None;
    }
    let marker = fat.marker.as_ref()?.bytes(bytes)?.to_vec();
    Some(HostShape {
        marker,
        wrappers: fat
            .wrappers
            .iter()
            .map(|w| (w.index, w.magic.to_string(), w.version, w.reserved1))
            .collect(),
        sections: elf
            .section_headers()
            .iter()
            .map(|s| {
                let size = if s.name == kpack_elf::FATBIN_SECTION {
                    0
                } else {
                    s.sh_size
                };
                (s.name.clone(), s.sh_type, s.sh_flags, size)
            })
            .collect(),
        fatbin: elf
            .section_by_name(kpack_elf::FATBIN_SECTION)
            .map(|s| (s.sh_addr, s.sh_size)),
    })
}

fn compare_files(a: &Path, b: &Path) -> Result<Option<String>, ArtifactError> {
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| kpack_fs::mode(&m))
            .map_err(ArtifactError::io(p))
    };
    let (mode_a, mode_b) = (mode(a)?, mode(b)?);
    if mode_a != mode_b {
        return Ok(Some(format!("mode {mode_a:o} vs {mode_b:o}")));
    }
    let open = |p: &Path| -> Result<kpack_pipeline::FileBytes, ArtifactError> {
        let f = std::fs::File::open(p).map_err(ArtifactError::io(p))?;
        kpack_pipeline::map_file(&f, p).map_err(|source| ArtifactError::Source {
            path: p.to_owned(),
            source: Box::new(source),
        })
    };
    let (ba, bb) = (open(a)?, open(b)?);
    if ba[..] == bb[..] {
        return Ok(None);
    }
    Ok(Some(match (host_shape(&ba), host_shape(&bb)) {
        (Some(sa), Some(sb)) => {
            if sa.marker != sb.marker {
                "markers differ".to_owned()
            } else if sa.wrappers != sb.wrappers {
                wrappers_differ(&sa.wrappers, &sb.wrappers)
            } else if sa.sections != sb.sections {
                "section tables differ beyond .hip_fatbin's size".to_owned()
            } else if sa.fatbin == sb.fatbin {
                "host bytes differ although the layouts agree".to_owned()
            } else {
                return Ok(None);
            }
        }
        _ => "contents differ".to_owned(),
    }))
}

/// What a tree entry is, in words.
fn described(e: &TreeEntry) -> String {
    match e {
        TreeEntry::Dir => "a directory".to_owned(),
        TreeEntry::File => "a regular file".to_owned(),
        TreeEntry::Symlink(t) => format!("a symlink to {}", t.display()),
    }
}

/// The first way two binaries' wrappers (index, magic, version, `reserved1`) differ.
fn wrappers_differ(a: &[(usize, String, u32, u64)], b: &[(usize, String, u32, u64)]) -> String {
    match a.iter().zip(b).find(|(x, y)| x != y) {
        Some((x, y)) => format!(
            "wrapper {} differs: magic {}, version {}, reserved1 {:#x} vs magic {}, version {}, reserved1 {:#x}",
            x.0, x.1, x.2, x.3, y.1, y.2, y.3
        ),
        None => format!("{} wrappers vs {}", a.len(), b.len()),
    }
}
