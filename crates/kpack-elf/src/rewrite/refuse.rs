//! What a rewrite refuses before it changes anything ("Refused" in the module doc), and
//! where `.hip_fatbin` and its whole pages are.

use std::ops::Range;

use object::elf::{
    ET_DYN, ET_EXEC, ET_REL, PN_XNUM, PT_LOAD, SHF_ALLOC, SHT_DYNSYM, SHT_REL, SHT_RELA, SHT_RELR,
    SHT_SYMTAB,
};

use super::{Cut, RewriteError, align_up, layout};
use crate::elf::{ElfFile, PHDR_SIZE, ProgramHeader, RelocationEntries};
use crate::fatbin::{FatBinary, FatbinSection, MARKER_SECTION, inspect_elf};
use crate::machine;
use crate::machine::{Machine, RelocKind, reloc_kind};
use crate::verify::verify;
use kpack_hostbin::{FatBinaryKind, WRAPPER_POINTER_OFFSET};

/// Refuses wrapper offsets that are not one per wrapper or fall outside the new contents.
pub(super) fn check_move(
    fat: &FatBinary,
    contents_len: u64,
    bundle_offsets: &[u64],
) -> Result<(), RewriteError> {
    if bundle_offsets.len() != fat.wrappers.len() {
        return Err(layout(format!(
            "{} bundle offsets given for {} wrappers",
            bundle_offsets.len(),
            fat.wrappers.len()
        )));
    }
    match fat
        .wrappers
        .iter()
        .zip(bundle_offsets)
        .find(|&(_, &o)| o >= contents_len)
    {
        Some((w, o)) => Err(RewriteError::Wrapper {
            index: w.index,
            offset: w.offset,
            problem: format!(
                "its bundle offset {o:#x} is outside the new .hip_fatbin contents ({contents_len} bytes)"
            ),
        }),
        None => Ok(()),
    }
}

/// Refuses what cannot be rewritten (see "Refused" in the module doc): returns the fat
/// binary, its `.hip_fatbin` and its machine.
pub(super) fn check_rewritable(
    elf: &ElfFile<'_>,
) -> Result<(FatBinary, FatbinSection, &'static Machine), RewriteError> {
    let h = elf.header();
    if h.e_type == ET_REL {
        return Err(RewriteError::Relocatable);
    }
    if h.e_type != ET_EXEC && h.e_type != ET_DYN {
        return Err(RewriteError::NotLinked(h.e_type));
    }
    let machine =
        machine::machine(h.e_machine).ok_or(RewriteError::UnsupportedMachine(h.e_machine))?;
    let fat = inspect_elf(elf)?;
    match fat.kind {
        FatBinaryKind::Kpacked => return Err(RewriteError::AlreadyKpacked),
        FatBinaryKind::Fat => {}
        FatBinaryKind::Rdc | FatBinaryKind::HostOnly => return Err(RewriteError::NotFat),
        FatBinaryKind::DebugOnly => return Err(RewriteError::DebugOnly),
    }
    if h.e_phnum == PN_XNUM {
        return Err(layout("extended segment numbering (e_phnum == PN_XNUM)"));
    }
    // The plan reasons from the input's layout; one the verifier rejects (misaligned
    // sections, overlapping segments …) would make the output wrong in ways it cannot see.
    verify(elf.data()).map_err(|issues| RewriteError::MalformedInput { issues })?;
    let fatbin = fat.fatbin.clone().ok_or(RewriteError::NotFat)?;
    if fat.wrappers.is_empty() {
        return Err(RewriteError::NoWrappers {
            section: fatbin.section_index,
        });
    }
    Ok((fat, fatbin, machine))
}

/// `.hip_fatbin` in memory and in the file, and the `PT_LOAD` that maps it.
pub(super) struct Fatbin<'e> {
    /// Section index.
    pub(super) section: usize,
    /// `V`: its address.
    pub(super) vaddr: u64,
    /// `V + N`: the address just past it.
    pub(super) end: u64,
    /// `O`: its file offset.
    pub(super) offset: u64,
    /// `N`: its size.
    pub(super) size: u64,
    /// The `PT_LOAD` holding it, file-backed and at a consistent offset.
    pub(super) segment: &'e ProgramHeader,
    /// `P`: the page the layout respects.
    pub(super) page: u64,
}

/// Finds the `PT_LOAD` holding `.hip_fatbin`, refusing sections that are not mapped from
/// the file by exactly that segment.
pub(super) fn locate_fatbin<'e>(
    elf: &'e ElfFile<'_>,
    fsec: &FatbinSection,
    page: u64,
) -> Result<Fatbin<'e>, RewriteError> {
    let (v, n, o) = (fsec.vaddr, fsec.size, fsec.offset);
    let v_end = v
        .checked_add(n)
        .ok_or_else(|| layout(".hip_fatbin address range overflows"))?;
    let fatbin_hdr = &elf.section_headers()[fsec.section_index];
    if fatbin_hdr.sh_flags & u64::from(SHF_ALLOC) == 0 || n == 0 {
        return Err(layout(
            ".hip_fatbin is not an allocated section with contents",
        ));
    }
    let loads: Vec<&ProgramHeader> = elf
        .program_headers()
        .iter()
        .filter(|p| p.p_type == PT_LOAD)
        .collect();
    let seg = loads
        .iter()
        .find(|p| {
            p.p_offset <= o
                && o + n <= p.p_offset + p.p_filesz
                && v.wrapping_sub(p.p_vaddr) == o - p.p_offset
        })
        .copied()
        .ok_or_else(|| layout(".hip_fatbin is not file-backed by one PT_LOAD at its address"))?;
    for p in &loads {
        if p.index != seg.index && v < p.p_vaddr.saturating_add(p.p_memsz) && p.p_vaddr < v_end {
            return Err(layout(format!(
                "PT_LOAD [{}] overlaps .hip_fatbin in memory",
                p.index
            )));
        }
    }
    if seg.p_vaddr % page != seg.p_offset % page {
        return Err(layout(format!(
            "PT_LOAD [{}] offset and address are not page-congruent",
            seg.index
        )));
    }
    Ok(Fatbin {
        section: fsec.section_index,
        vaddr: v,
        end: v_end,
        offset: o,
        size: n,
        segment: seg,
        page,
    })
}

/// The whole pages of `.hip_fatbin` to remove from the file (`[AO, AO+Z)`), refusing
/// when any other segment or section has bytes there, or the file is already kpacked.
pub(super) fn cut_whole_pages(elf: &ElfFile<'_>, fatbin: &Fatbin<'_>) -> Result<Cut, RewriteError> {
    let a = align_up(fatbin.vaddr, fatbin.page);
    let e = fatbin.end / fatbin.page * fatbin.page;
    let cut = Cut {
        at: fatbin.offset + (a.min(fatbin.end) - fatbin.vaddr),
        len: e.saturating_sub(a),
    };
    for p in elf.program_headers() {
        if p.index != fatbin.segment.index && cut.overlaps(p.p_offset, p.p_filesz) {
            return Err(layout(format!(
                "program header [{}] (type {:#x}) covers .hip_fatbin's file bytes",
                p.index, p.p_type
            )));
        }
    }
    let shdrs = elf.section_headers();
    for s in shdrs {
        if s.index != fatbin.section && s.has_file_data() && cut.overlaps(s.sh_offset, s.sh_size) {
            return Err(layout(format!(
                "section [{}] {} overlaps .hip_fatbin's file bytes",
                s.index, s.name
            )));
        }
    }
    if shdrs.iter().any(|s| s.name == MARKER_SECTION) {
        return Err(RewriteError::AlreadyKpacked);
    }
    Ok(cut)
}

/// True if nothing but section `except` has file bytes in `range` (the section header table
/// itself is not a section).
pub(super) fn nothing_else_in(elf: &ElfFile<'_>, range: Range<u64>, except: Option<usize>) -> bool {
    let hits = |start: u64, len: u64| len > 0 && start < range.end && range.start < start + len;
    let sections_clear = elf
        .section_headers()
        .iter()
        .all(|s| Some(s.index) == except || !s.has_file_data() || !hits(s.sh_offset, s.sh_size));
    let segments_clear = elf
        .program_headers()
        .iter()
        .all(|p| !hits(p.p_offset, p.p_filesz));
    let h = elf.header();
    let phdrs_clear = !hits(h.e_phoff, u64::from(h.e_phnum) * PHDR_SIZE);
    sections_clear && segments_clear && phdrs_clear
}

pub(super) fn check_pointer_kind(machine: u16, r_type: u32) -> Result<(), String> {
    match reloc_kind(machine, r_type) {
        RelocKind::Relative | RelocKind::Absolute64 => Ok(()),
        RelocKind::Other => Err(format!(
            "its pointer is filled by relocation type {r_type}, expected the machine's RELATIVE or absolute 64-bit type"
        )),
    }
}

/// Refuses any loader relocation, other than the wrapper pointers, that writes into or
/// points into `[v, v_end)`.
pub(super) fn check_relocations(
    elf: &ElfFile<'_>,
    fat: &FatBinary,
    v: u64,
    v_end: u64,
    fatbin_index: usize,
) -> Result<(), RewriteError> {
    let pointer_slots: Vec<u64> = fat
        .wrappers
        .iter()
        .map(|w| w.vaddr.wrapping_add(WRAPPER_POINTER_OFFSET))
        .collect();
    let inside = |x: u64| x >= v && x < v_end;
    let machine = elf.header().e_machine;
    let data = elf.data();
    let in_file_value = |r_offset: u64| -> Option<u64> {
        let off = elf.vaddr_to_offset(r_offset)? as usize;
        let b = data.get(off..off.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    };
    for s in elf.section_headers() {
        if !matches!(s.sh_type, SHT_RELA | SHT_REL | SHT_RELR)
            || s.sh_flags & u64::from(SHF_ALLOC) == 0
        {
            continue;
        }
        let relocs = elf.relocation_section(s)?;
        let symtab = elf.section(u64::from(s.sh_link), "relocation sh_link").ok();
        let bad = |entry: usize, problem: String| RewriteError::FatbinReferenced {
            section: s.index,
            entry,
            problem,
        };
        let sym_in_fatbin = |r_sym: u32| -> Result<Option<u64>, RewriteError> {
            if r_sym == 0 {
                return Ok(None);
            }
            let Some(t) = symtab.filter(|t| matches!(t.sh_type, SHT_SYMTAB | SHT_DYNSYM)) else {
                return Ok(None);
            };
            let sym = elf.symbol(t, u64::from(r_sym))?;
            if usize::from(sym.st_shndx) == fatbin_index {
                return Ok(Some(sym.st_value));
            }
            Ok(elf.symbol_address(&sym)?.filter(|&x| inside(x)))
        };
        let check = |entry: usize,
                     r_offset: u64,
                     r_sym: u32,
                     r_type: Option<u32>,
                     addend: Option<i64>|
         -> Result<(), RewriteError> {
            if pointer_slots.contains(&r_offset) {
                return Ok(());
            }
            if inside(r_offset) {
                return Err(bad(
                    entry,
                    format!("writes to {r_offset:#x} inside .hip_fatbin"),
                ));
            }
            if let Some(addr) = sym_in_fatbin(r_sym)? {
                return Err(bad(
                    entry,
                    format!("refers to a symbol at {addr:#x} inside .hip_fatbin"),
                ));
            }
            let relative = r_type.is_none_or(|t| {
                matches!(
                    reloc_kind(machine, t),
                    RelocKind::Relative | RelocKind::Absolute64
                )
            });
            let value = match addend {
                Some(a) => Some(a as u64),
                None => in_file_value(r_offset),
            };
            if relative && r_sym == 0 && value.is_some_and(inside) {
                return Err(bad(
                    entry,
                    format!(
                        "relocates {r_offset:#x} to {:#x} inside .hip_fatbin",
                        value.unwrap_or(0)
                    ),
                ));
            }
            Ok(())
        };
        match &relocs.entries {
            RelocationEntries::Rela(v) => {
                for (i, r) in v.iter().enumerate() {
                    check(i, r.r_offset, r.r_sym, Some(r.r_type), Some(r.r_addend))?;
                }
            }
            RelocationEntries::Rel(v) => {
                for (i, r) in v.iter().enumerate() {
                    check(i, r.r_offset, r.r_sym, Some(r.r_type), None)?;
                }
            }
            RelocationEntries::Relr(v) => {
                for r in v {
                    check(r.word_index, r.r_offset, 0, None, None)?;
                }
            }
        }
    }
    Ok(())
}
