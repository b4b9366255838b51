//! Check 8 of a rewritten ELF binary against its original: by what the rewrite means, not by
//! who wrote it. Any transformer's output (kpack's, the reference's) passes when:
//! * the ELF header's `e_ident`, `e_type`, `e_machine`, `e_entry` and `e_flags` are the
//!   original's;
//! * every section of the original but `.hip_fatbin` (the device code) and the section name
//!   table (which gains the marker's name) is there at the same index with the same name,
//!   type, flags, address, size, link, info, alignment and entry size, and with the same
//!   bytes, but the wrapper slots (`.hipFatBinSegment`) and the relocation entries that fill
//!   the wrappers' pointers (in either file); the only section added is the marker;
//! * as many wrappers as the original's, each of whose pointers the loader puts on the
//!   marker ([`kpack_elf::marker_offset`]: the RELA addend, the in-place value of REL, RELR
//!   or a non-PIE executable, whatever the file stores in the slot); that last part is
//!   checked of every kpacked binary, with an original or not ([`wrappers_missing_the_marker`],
//!   check 3), and reported there once.
//!
//! Sections are compared where each file has them (a rewrite moves file offsets down by the
//! device code it removes); the headers and tables that describe the layout (program and
//! section headers) are not, and neither are bytes no section covers. Whether the code
//! objects come back is the caller's part of check 8.

use kpack_elf::{
    ElfFile, FATBIN_SECTION, MARKER_SECTION, PointerSource, SectionHeader, WRAPPER_SECTION,
};

/// How a rewritten binary differs from its original where a rewrite must keep it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum HostChange {
    /// One of the two does not parse or inspect as ELF.
    #[error("the {which} does not read as ELF: {problem}")]
    Unreadable {
        /// `original` or `rewritten binary`.
        which: &'static str,
        /// Why.
        problem: String,
    },
    /// An ELF header field differs.
    #[error("ELF header field {field} is {got:#x}, the original's {want:#x}")]
    Header {
        /// The field.
        field: &'static str,
        /// The rewritten binary's value.
        got: u64,
        /// The original's.
        want: u64,
    },
    /// A section of the original is missing or has another name at its index.
    #[error("section {index} ({name}) of the original is missing (found {found})")]
    SectionMissing {
        /// The section index.
        index: usize,
        /// The original's name.
        name: String,
        /// What the rewritten binary has there.
        found: String,
    },
    /// A section header field differs.
    #[error("section {index} ({name}): {field} is {got:#x}, the original's {want:#x}")]
    SectionField {
        /// The section index.
        index: usize,
        /// Its name.
        name: String,
        /// The field.
        field: &'static str,
        /// The rewritten binary's value.
        got: u64,
        /// The original's.
        want: u64,
    },
    /// A section's bytes differ outside the wrappers and their relocations.
    #[error(
        "section {index} ({name}) differs from the original's at offset {offset:#x} (the original's {original_offset:#x})"
    )]
    Bytes {
        /// The section index.
        index: usize,
        /// Its name.
        name: String,
        /// The first differing byte's offset in the rewritten binary.
        offset: u64,
        /// The same byte's offset in the original.
        original_offset: u64,
    },
    /// A section that is neither the original's nor the marker.
    #[error("section {index} ({name}) at offset {offset:#x} is not in the original")]
    SectionAdded {
        /// The section index.
        index: usize,
        /// Its name.
        name: String,
        /// Its offset.
        offset: u64,
    },
    /// Another number of wrappers than the original's.
    #[error("{got} wrappers, the original {want}")]
    WrapperCount {
        /// The rewritten binary's.
        got: usize,
        /// The original's.
        want: usize,
    },
    /// A wrapper whose pointer the loader does not put on the marker.
    #[error("wrapper {index} at offset {offset:#x}: {problem}")]
    WrapperMisses {
        /// The wrapper's slot.
        index: usize,
        /// Its file offset.
        offset: u64,
        /// Where the pointer lands instead, and why ([`kpack_elf::Misdirected`]).
        problem: String,
    },
}

/// The ways `rewritten` differs from `original` where a rewrite must keep it (see the
/// module doc); empty when it keeps everything.
pub(super) fn changes(original: &[u8], rewritten: &[u8]) -> Vec<HostChange> {
    let unreadable = |which| {
        move |e: kpack_elf::ElfError| HostChange::Unreadable {
            which,
            problem: e.to_string(),
        }
    };
    let parsed = ElfFile::parse(original)
        .map_err(unreadable("original"))
        .and_then(|o| {
            Ok((
                o,
                ElfFile::parse(rewritten).map_err(unreadable("rewritten binary"))?,
            ))
        });
    let (orig, rw) = match parsed {
        Ok(p) => p,
        Err(e) => return vec![e],
    };
    let inspected = kpack_elf::inspect_elf(&orig)
        .map_err(unreadable("original"))
        .and_then(|o| {
            Ok((
                o,
                kpack_elf::inspect_elf(&rw).map_err(unreadable("rewritten binary"))?,
            ))
        });
    let (ofat, rfat) = match inspected {
        Ok(p) => p,
        Err(e) => return vec![e],
    };
    let mut found = header_changes(&orig, &rw);
    found.extend(wrapper_changes(&ofat, &rfat));
    let (omasks, rmasks) = (wrapper_relocations(&ofat), wrapper_relocations(&rfat));
    let name_table = orig.shstrndx();
    for s in orig.section_headers().iter().skip(1) {
        if s.name == FATBIN_SECTION || Some(s.index) == name_table {
            continue;
        }
        let Some(r) = rw
            .section_headers()
            .get(s.index)
            .filter(|r| r.name == s.name)
        else {
            found.push(HostChange::SectionMissing {
                index: s.index,
                name: s.name.clone(),
                found: rw
                    .section_headers()
                    .get(s.index)
                    .map_or("no section".to_owned(), |r| format!("section {}", r.name)),
            });
            continue;
        };
        if let Some(c) = section_field_change(s, r) {
            found.push(c);
            continue;
        }
        if !s.has_file_data() || s.name == WRAPPER_SECTION {
            continue;
        }
        let masked = |at: usize| {
            let covers = |masks: &[(usize, usize, usize)]| {
                masks
                    .iter()
                    .any(|&(i, start, len)| i == s.index && (start..start + len).contains(&at))
            };
            covers(&omasks) || covers(&rmasks)
        };
        let (Ok(a), Ok(b)) = (orig.section_data(s), rw.section_data(r)) else {
            continue; // both sizes are the same; a section outside its file is inspect's error
        };
        if let Some(at) = (0..a.len()).find(|&i| a[i] != b[i] && !masked(i)) {
            found.push(HostChange::Bytes {
                index: s.index,
                name: s.name.clone(),
                offset: r.sh_offset + at as u64,
                original_offset: s.sh_offset + at as u64,
            });
        }
    }
    let added = rw
        .section_headers()
        .iter()
        .skip(orig.section_headers().len());
    for r in added.filter(|r| r.name != MARKER_SECTION) {
        found.push(HostChange::SectionAdded {
            index: r.index,
            name: r.name.clone(),
            offset: r.sh_offset,
        });
    }
    found
}

fn header_changes(orig: &ElfFile<'_>, rw: &ElfFile<'_>) -> Vec<HostChange> {
    let (o, r) = (orig.header(), rw.header());
    let ident = |h: &kpack_elf::ElfHeader| u64::from_le_bytes(h.ident[..8].try_into().unwrap());
    [
        ("e_ident", ident(r), ident(o)),
        ("e_type", r.e_type.into(), o.e_type.into()),
        ("e_machine", r.e_machine.into(), o.e_machine.into()),
        ("e_entry", r.e_entry, o.e_entry),
        ("e_flags", r.e_flags.into(), o.e_flags.into()),
    ]
    .into_iter()
    .filter(|(_, got, want)| got != want)
    .map(|(field, got, want)| HostChange::Header { field, got, want })
    .collect()
}

fn section_field_change(s: &SectionHeader, r: &SectionHeader) -> Option<HostChange> {
    let fields = [
        ("sh_type", r.sh_type.into(), s.sh_type.into()),
        ("sh_flags", r.sh_flags, s.sh_flags),
        ("sh_addr", r.sh_addr, s.sh_addr),
        ("sh_size", r.sh_size, s.sh_size),
        ("sh_link", r.sh_link.into(), s.sh_link.into()),
        ("sh_info", r.sh_info.into(), s.sh_info.into()),
        ("sh_addralign", r.sh_addralign, s.sh_addralign),
        ("sh_entsize", r.sh_entsize, s.sh_entsize),
    ];
    let (field, got, want) = fields.into_iter().find(|(_, got, want)| got != want)?;
    Some(HostChange::SectionField {
        index: s.index,
        name: s.name.clone(),
        field,
        got,
        want,
    })
}

/// The wrappers: as many as the original's (whether each reaches the marker is checked of
/// every kpacked binary, with an original or without: [`wrappers_missing_the_marker`]).
fn wrapper_changes(ofat: &kpack_elf::FatBinary, rfat: &kpack_elf::FatBinary) -> Vec<HostChange> {
    let mut found = Vec::new();
    if rfat.wrappers.len() != ofat.wrappers.len() {
        found.push(HostChange::WrapperCount {
            got: rfat.wrappers.len(),
            want: ofat.wrappers.len(),
        });
    }
    found
}

/// The wrappers of the kpacked `fat` whose pointer the loader does not put on the marker's
/// first byte ([`kpack_elf::marker_offset`]), each with where it lands and why: check 3's,
/// made of every kpacked ELF binary verify reads.
pub(super) fn wrappers_missing_the_marker(
    elf: &ElfFile<'_>,
    fat: &kpack_elf::FatBinary,
) -> Vec<HostChange> {
    let missing = fat.wrappers.iter().filter_map(|w| {
        let problem = match kpack_elf::marker_offset(elf, fat, w) {
            Ok(0) => return None,
            Ok(into) => format!(
                "at run time its pointer lands at load base + {:#x}, {into} bytes into the \
                 marker, not at its start",
                w.target.unwrap_or_default()
            ),
            Err(misdirected) => misdirected.to_string(),
        };
        Some(HostChange::WrapperMisses {
            index: w.index,
            offset: w.offset,
            problem,
        })
    });
    missing.collect()
}

/// The bytes of relocation records that fill wrapper pointers, which a rewrite changes:
/// (section index, offset in the section, length).
fn wrapper_relocations(fat: &kpack_elf::FatBinary) -> Vec<(usize, usize, usize)> {
    fat.wrappers
        .iter()
        .filter_map(|w| match w.pointer {
            PointerSource::InPlace(_) => None,
            PointerSource::Rela {
                section_index,
                entry_index,
                ..
            } => Some((section_index, entry_index * 24, 24)),
            PointerSource::Rel {
                section_index,
                entry_index,
                ..
            } => Some((section_index, entry_index * 16, 16)),
            PointerSource::Relr {
                section_index,
                word_index,
                ..
            } => Some((section_index, word_index * 8, 8)),
        })
        .collect()
}
