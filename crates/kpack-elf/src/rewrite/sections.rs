//! The output's section headers, their numbering (extended numbering included) and the
//! ELF header that records them.

use object::LittleEndian as LE;
use object::elf::{
    FileHeader64, SHF_ALLOC, SHN_LORESERVE, SHN_XINDEX, SHT_NOBITS, SHT_NULL, SHT_PROGBITS,
};
use object::pod::bytes_of;

use super::marker_segment::MarkerSegment;
use super::refuse::Fatbin;
use super::split::KeptInput;
use super::{Cut, FatbinEdit, RewriteError, align_up, layout};
use crate::ElfError;
use crate::elf::{ElfFile, SectionHeader};
use crate::fatbin::MARKER_SECTION;
use kpack_hostbin::bytes::record;
use kpack_hostbin::splice::Patches;

/// The output's section headers and where they and their names go.
pub(crate) struct SectionTable {
    pub(crate) headers: Vec<SectionHeader>,
    /// Output offset of the re-emitted `.shstrtab`.
    pub(crate) names_offset: u64,
    /// Whether `.rocm_kpack_ref` was added (its name ends the re-emitted `.shstrtab`).
    pub(crate) marker_added: bool,
    /// Output offset of the section header table (`e_shoff`).
    pub(crate) table_offset: u64,
}

/// The output's section headers: `.hip_fatbin` becomes `SHT_NOBITS` (or, moved, covers its
/// new contents), offsets move by the cut, `.shstrtab` (with the marker's name) moves after
/// the new segment, and `.rocm_kpack_ref` is added for a marker. (No section covers a moved
/// program header table: GNU strip would count the table twice and misplace the marker.)
pub(super) fn rewrite_section_headers(
    elf: &ElfFile<'_>,
    fatbin: &Fatbin<'_>,
    cut: Cut,
    kept: &KeptInput,
    segment: &MarkerSegment,
    edit: &FatbinEdit<'_>,
) -> Result<SectionTable, RewriteError> {
    let shstr = &kept.shstr;
    let marker = matches!(edit, FatbinEdit::Kpack { .. });
    let added_name = if marker {
        MARKER_SECTION.len() as u64 + 1
    } else {
        0
    };
    if u32::try_from(shstr.sh_size + added_name).is_err() {
        return Err(layout(".shstrtab too large"));
    }
    let names_offset = segment.end;
    let table_offset = align_up(names_offset + shstr.sh_size + added_name, 8);
    // Without their names, which the table does not hold (a test executable of rocPRIM has
    // 27 MB of them), with room for the marker's.
    let mut headers: Vec<SectionHeader> = Vec::with_capacity(elf.section_headers().len() + 1);
    headers.extend(elf.section_headers().iter().map(|s| SectionHeader {
        name: String::new(),
        ..*s
    }));
    for s in &mut headers {
        if s.index == fatbin.section {
            if marker {
                s.sh_type = SHT_NOBITS;
                // In the hole layout the section is the new segment's memory after the
                // marker (see Stripping).
                if let Some(hole) = &segment.hole {
                    let from = segment.marker_vaddr() + edit.payload_len();
                    s.sh_addr = from;
                    s.sh_size = hole.end - from;
                    s.sh_offset = segment.marker_offset() + edit.payload_len();
                    s.sh_addralign = 1;
                }
            } else {
                s.sh_addr = segment.marker_vaddr();
                s.sh_offset = segment.marker_offset();
                s.sh_size = edit.payload_len();
            }
        } else if s.index == shstr.index {
            s.sh_offset = names_offset;
            s.sh_size += added_name;
        } else if s.sh_type != SHT_NULL {
            s.sh_offset = cut.shift(s.sh_offset);
        }
    }
    if marker {
        headers.push(SectionHeader {
            index: headers.len(),
            name: MARKER_SECTION.to_owned(),
            sh_name: shstr.sh_size as u32,
            sh_type: SHT_PROGBITS,
            sh_flags: u64::from(SHF_ALLOC),
            sh_addr: segment.marker_vaddr(),
            sh_offset: segment.marker_offset(),
            sh_size: edit.payload_len(),
            sh_link: 0,
            sh_info: 0,
            sh_addralign: 1,
            sh_entsize: 0,
        });
    }
    if u32::try_from(headers.len()).is_err() {
        return Err(layout("too many sections"));
    }
    Ok(SectionTable {
        headers,
        names_offset,
        marker_added: marker,
        table_offset,
    })
}

/// The output's `e_shoff`, `e_shnum` and `e_shstrndx`.
#[derive(Debug, Clone, Copy)]
pub(super) struct SectionNumbering {
    pub(super) shoff: u64,
    pub(super) shnum: u16,
    pub(super) shstrndx: u16,
}

/// Numbers the output's sections (ELF gABI extended section numbering): a count of
/// `SHN_LORESERVE` (0xff00) or more is stored in section 0's `sh_size` with `e_shnum` 0,
/// a name table index of `SHN_LORESERVE` or more in section 0's `sh_link` with
/// `e_shstrndx` `SHN_XINDEX`. Section 0's fields are cleared only when the input used
/// them and the output no longer needs them (a restore back below the limit), so other
/// files keep their bytes.
pub(super) fn number_sections(
    elf: &ElfFile<'_>,
    kept: &KeptInput,
    headers: &mut [SectionHeader],
) -> Result<SectionNumbering, RewriteError> {
    let h = elf.header();
    let count = headers.len() as u64;
    let shstrndx = kept.shstr.index as u64;
    let reserved = u64::from(SHN_LORESERVE);
    let first = headers.first_mut().ok_or_else(|| layout("no section 0"))?;
    if (count >= reserved || shstrndx >= reserved) && first.sh_type != SHT_NULL {
        return Err(layout(
            "extended section numbering without a null section 0",
        ));
    }
    let shnum = if count >= reserved {
        first.sh_size = count;
        0
    } else {
        if h.e_shnum == 0 {
            first.sh_size = 0;
        }
        count as u16
    };
    let e_shstrndx = if shstrndx >= reserved {
        first.sh_link = shstrndx as u32;
        SHN_XINDEX
    } else {
        if h.e_shstrndx == SHN_XINDEX {
            first.sh_link = 0;
        }
        shstrndx as u16
    };
    Ok(SectionNumbering {
        shoff: 0,
        shnum,
        shstrndx: e_shstrndx,
    })
}

/// The ELF header with the new program and section header tables.
pub(super) fn patch_elf_header(
    data: &[u8],
    segment: &MarkerSegment,
    sections: SectionNumbering,
    patches: &mut Patches,
) -> Result<(), RewriteError> {
    let mut header: FileHeader64<LE> = *record(data, 0, "ELF header").map_err(ElfError::from)?;
    header.e_phoff.set(LE, segment.phoff);
    header.e_shoff.set(LE, sections.shoff);
    header.e_phnum.set(LE, segment.phnum as u16);
    header.e_shnum.set(LE, sections.shnum);
    header.e_shstrndx.set(LE, sections.shstrndx);
    Ok(patches.add(0, bytes_of(&header).to_vec())?)
}
