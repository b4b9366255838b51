//! The ELF header and the program and section header tables, read and validated before
//! anything else (extended numbering through section 0 included), and the sections named.

use object::LittleEndian as LE;
use object::elf::{
    ELFCLASS32, ELFCLASS64, ELFDATA2LSB, ELFDATA2MSB, FileHeader64, PN_XNUM, ProgramHeader64,
    SHN_UNDEF, SHN_XINDEX, SHT_STRTAB, SectionHeader64,
};

use super::{ElfHeader, PHDR_SIZE, ProgramHeader, SHDR_SIZE, SectionHeader, is_elf};
use crate::ElfError;
use kpack_hostbin::bytes::{c_str, record, records, slice};

pub(super) fn parse_header(data: &[u8]) -> Result<ElfHeader, ElfError> {
    if !is_elf(data) {
        return Err(ElfError::NotElf {
            found: data.iter().take(4).copied().collect(),
        });
    }
    match data.get(4).copied() {
        Some(ELFCLASS64) => {}
        Some(ELFCLASS32) => return Err(ElfError::Elf32),
        Some(other) => return Err(ElfError::InvalidClass(other)),
        None => {}
    }
    match data.get(5).copied() {
        Some(ELFDATA2LSB) => {}
        Some(ELFDATA2MSB) => return Err(ElfError::BigEndian),
        Some(other) => return Err(ElfError::InvalidDataEncoding(other)),
        None => {}
    }
    let h: &FileHeader64<LE> = record(data, 0, "ELF header")?;
    let id = &h.e_ident;
    let mut ident = [0u8; 16];
    ident[..4].copy_from_slice(&id.magic);
    ident[4..9].copy_from_slice(&[id.class, id.data, id.version, id.os_abi, id.abi_version]);
    ident[9..].copy_from_slice(&id.padding);
    Ok(ElfHeader {
        ident,
        e_type: h.e_type.get(LE),
        e_machine: h.e_machine.get(LE),
        e_version: h.e_version.get(LE),
        e_entry: h.e_entry.get(LE),
        e_phoff: h.e_phoff.get(LE),
        e_shoff: h.e_shoff.get(LE),
        e_flags: h.e_flags.get(LE),
        e_ehsize: h.e_ehsize.get(LE),
        e_phentsize: h.e_phentsize.get(LE),
        e_phnum: h.e_phnum.get(LE),
        e_shentsize: h.e_shentsize.get(LE),
        e_shnum: h.e_shnum.get(LE),
        e_shstrndx: h.e_shstrndx.get(LE),
    })
}

fn bad_field(field: &'static str, found: u64, expected: &'static str) -> ElfError {
    ElfError::BadHeaderField {
        offset: 0,
        field,
        found,
        expected,
    }
}

/// Section headers without names yet (names need `e_shstrndx`, which may itself
/// live in section 0).
pub(super) fn read_section_table(
    data: &[u8],
    header: &ElfHeader,
) -> Result<Vec<SectionHeader>, ElfError> {
    if header.e_shoff == 0 {
        if header.e_shnum != 0 {
            return Err(bad_field(
                "e_shnum",
                header.e_shnum.into(),
                "0 when e_shoff is 0",
            ));
        }
        return Ok(Vec::new());
    }
    if u64::from(header.e_shentsize) != SHDR_SIZE {
        return Err(bad_field("e_shentsize", header.e_shentsize.into(), "64"));
    }
    let first: &SectionHeader64<LE> = record(data, header.e_shoff, "section header 0")?;
    // Extended numbering: with e_shnum == 0 the count is section 0's sh_size.
    let count = if header.e_shnum == 0 {
        first.sh_size.get(LE)
    } else {
        u64::from(header.e_shnum)
    };
    if count.checked_mul(SHDR_SIZE).is_none() {
        return Err(bad_field(
            "section count",
            count,
            "a table that fits in the file",
        ));
    }
    let table: &[SectionHeader64<LE>] =
        records(data, header.e_shoff, count, "section header table")?;
    Ok(table
        .iter()
        .enumerate()
        .map(|(index, s)| SectionHeader {
            index,
            name: String::new(),
            sh_name: s.sh_name.get(LE),
            sh_type: s.sh_type.get(LE),
            sh_flags: s.sh_flags.get(LE),
            sh_addr: s.sh_addr.get(LE),
            sh_offset: s.sh_offset.get(LE),
            sh_size: s.sh_size.get(LE),
            sh_link: s.sh_link.get(LE),
            sh_info: s.sh_info.get(LE),
            sh_addralign: s.sh_addralign.get(LE),
            sh_entsize: s.sh_entsize.get(LE),
        })
        .collect())
}

pub(super) fn resolve_phnum(header: &ElfHeader, shdrs: &[SectionHeader]) -> Result<u64, ElfError> {
    if header.e_phnum != PN_XNUM {
        return Ok(header.e_phnum.into());
    }
    shdrs
        .first()
        .map(|s| u64::from(s.sh_info))
        .ok_or_else(|| bad_field("e_phnum", PN_XNUM.into(), "PN_XNUM only with a section 0"))
}

pub(super) fn read_program_table(
    data: &[u8],
    header: &ElfHeader,
    count: u64,
) -> Result<Vec<ProgramHeader>, ElfError> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if u64::from(header.e_phentsize) != PHDR_SIZE {
        return Err(bad_field("e_phentsize", header.e_phentsize.into(), "56"));
    }
    // count <= 2^32, so the table size cannot overflow.
    let table: &[ProgramHeader64<LE>] =
        records(data, header.e_phoff, count, "program header table")?;
    Ok(table
        .iter()
        .enumerate()
        .map(|(index, p)| ProgramHeader {
            index,
            p_type: p.p_type.get(LE),
            p_flags: p.p_flags.get(LE),
            p_offset: p.p_offset.get(LE),
            p_vaddr: p.p_vaddr.get(LE),
            p_paddr: p.p_paddr.get(LE),
            p_filesz: p.p_filesz.get(LE),
            p_memsz: p.p_memsz.get(LE),
            p_align: p.p_align.get(LE),
        })
        .collect())
}

pub(super) fn resolve_shstrndx(
    header: &ElfHeader,
    shdrs: &[SectionHeader],
) -> Result<Option<usize>, ElfError> {
    let index = match header.e_shstrndx {
        SHN_UNDEF => return Ok(None),
        SHN_XINDEX => shdrs.first().map_or(0, |s| u64::from(s.sh_link)),
        n => u64::from(n),
    };
    match usize::try_from(index).ok().filter(|&i| i < shdrs.len()) {
        Some(i) => Ok(Some(i)),
        None => Err(ElfError::BadSectionIndex {
            what: "e_shstrndx".to_string(),
            index,
            count: shdrs.len(),
        }),
    }
}

pub(super) fn name_sections(
    data: &[u8],
    mut shdrs: Vec<SectionHeader>,
    shstrndx: Option<usize>,
) -> Result<Vec<SectionHeader>, ElfError> {
    let Some(strndx) = shstrndx else {
        return Ok(shdrs);
    };
    let strtab = shdrs
        .get(strndx)
        .cloned()
        .ok_or_else(|| bad_field("e_shstrndx", strndx as u64, "a valid section index"))?;
    if strtab.sh_type != SHT_STRTAB {
        return Err(ElfError::BadSectionType {
            index: strndx,
            name: String::new(),
            found: strtab.sh_type,
            expected: "SHT_STRTAB for the section name table (e_shstrndx)",
        });
    }
    let table = slice(
        data,
        strtab.sh_offset,
        strtab.sh_size,
        &format!("section name table [{strndx}]"),
    )?;
    for section in &mut shdrs {
        let name = c_str(table, section.sh_name.into()).ok_or_else(|| ElfError::BadString {
            table: strndx,
            table_offset: strtab.sh_offset,
            index: section.sh_name.into(),
            size: strtab.sh_size,
            what: format!("the name of section [{}]", section.index),
        })?;
        section.name = String::from_utf8_lossy(name).into_owned();
    }
    Ok(shdrs)
}
