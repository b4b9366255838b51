//! `.hip_fatbin`'s pages cut from the file and its `PT_LOAD` split around them ("Layout"
//! and "Executables" in the module doc), and the old tables that ended the file.

use std::ops::Range;

use object::elf::{PF_X, PN_XNUM, PT_LOAD, SHF_ALLOC, SHF_EXECINSTR};

use super::refuse::{Fatbin, nothing_else_in};
use super::{Cut, RewriteError, align_up, layout};
use crate::elf::{ElfFile, PHDR_SIZE, ProgramHeader, SHDR_SIZE, SectionHeader};
use kpack_hostbin::splice::Patches;

/// The first whole pages of `.hip_fatbin`, kept in the file to hold an executable's new
/// segment (see "Executables" in the module doc).
pub(crate) struct Hole {
    /// Input (and output) offset of the new segment: `AO` plus `gap`.
    pub(super) at: u64,
    /// Its address: `A`, or above when `.hip_fatbin`'s segment's `p_vaddr - p_offset` is
    /// below the first `PT_LOAD`'s.
    pub(super) vaddr: u64,
    /// Zero bytes kept in the file before the segment, from `AO`: as many as
    /// `.hip_fatbin`'s segment's `p_vaddr - p_offset` exceeds the first `PT_LOAD`'s.
    pub(super) gap: u64,
    /// Bytes of the segment: whole pages; with `gap` and the address shift, fewer than the
    /// whole pages of `.hip_fatbin`.
    pub(super) len: u64,
    /// The end of `.hip_fatbin`, where the new segment's memory ends.
    pub(super) end: u64,
    /// The flags of `.hip_fatbin`'s segment, which the new segment takes.
    pub(super) flags: u32,
}

/// The hole for an executable's new segment (table with a spare `PT_NULL` entry, payload)
/// in the whole pages of `.hip_fatbin`, if they hold it, the shift between the first
/// `PT_LOAD`'s `p_vaddr - p_offset` and that of `.hip_fatbin`'s segment, and pages to
/// spare: there the segment keeps the first one's, so the old-kernel `AT_PHDR` rule holds
/// with no padding. Shared libraries, and executables where it does not fit, keep
/// the segment above every other. The segment's memory after `.hip_fatbin` must be file
/// content (piece 2), not a `.bss` tail.
pub(super) fn freed_pages_hole(
    elf: &ElfFile<'_>,
    fatbin: &Fatbin<'_>,
    pages: Cut,
    (payload_len, payload_align): (u64, u64),
) -> Result<Option<Hole>, RewriteError> {
    if !elf.is_executable() || pages.len == 0 {
        return Ok(None);
    }
    let first = elf
        .program_headers()
        .iter()
        .find(|p| p.p_type == PT_LOAD)
        .ok_or_else(|| layout("no PT_LOAD"))?;
    let seg = fatbin.segment;
    // The new segment keeps the first `PT_LOAD`'s `p_vaddr - p_offset`; when `.hip_fatbin`'s
    // segment has another one (lld shifts each segment by a partial page), the segment
    // starts that much above `A` (in memory) or `AO` (in the file, after zeros).
    let diff = first
        .p_vaddr
        .wrapping_sub(first.p_offset)
        .wrapping_sub(seg.p_vaddr.wrapping_sub(seg.p_offset)) as i64;
    let (shift, gap) = if diff >= 0 {
        (diff.unsigned_abs(), 0)
    } else {
        (0, diff.unsigned_abs())
    };
    if !shift.is_multiple_of(fatbin.page) || !gap.is_multiple_of(fatbin.page) {
        return Ok(None);
    }
    let tail_filesz = seg.p_filesz - (fatbin.end - seg.p_vaddr);
    if tail_filesz == 0 && seg.p_memsz != seg.p_filesz {
        return Ok(None);
    }
    // Up to two entries more (the split piece and the new segment), and the spare
    // `PT_NULL` one a restore turns into its segment, so that its table stays where it is.
    let table = (elf.program_headers().len() as u64 + 3) * PHDR_SIZE;
    let need = align_up(align_up(table, 8), payload_align).saturating_add(payload_len);
    let len = align_up(need, fatbin.page);
    // Some whole pages are left for the cut.
    if len.saturating_add(shift).saturating_add(gap) >= pages.len {
        return Ok(None);
    }
    Ok(Some(Hole {
        at: pages.at + gap,
        vaddr: align_up(fatbin.vaddr, fatbin.page) + shift,
        gap,
        len,
        end: fatbin.end,
        flags: seg.p_flags,
    }))
}

/// Zeroes the bytes of `.hip_fatbin` that stay in the file (the partial pages at either
/// end of its whole `pages`).
pub(super) fn zero_kept_fatbin_bytes(
    fatbin: &Fatbin<'_>,
    pages: Cut,
    patches: &mut Patches,
) -> Result<(), RewriteError> {
    let prefix = fatbin.offset..pages.at;
    let suffix = pages.at + pages.len..fatbin.offset + fatbin.size;
    for range in [prefix, suffix] {
        if !range.is_empty() {
            patches.zero(range)?;
        }
    }
    Ok(())
}

/// The program headers with `.hip_fatbin`'s `PT_LOAD` split at `V+N` and every later
/// offset moved down by the cut (the marker's segment is added later); with a `hole`,
/// piece 1 ends at `A`, where the new segment takes over (and is left out when empty).
pub(super) fn split_fatbin_segment(
    elf: &ElfFile<'_>,
    fatbin: &Fatbin<'_>,
    cut: Cut,
    hole: Option<&Hole>,
) -> Result<Vec<ProgramHeader>, RewriteError> {
    let phdrs = elf.program_headers();
    let shdrs = elf.section_headers();
    let seg = fatbin.segment;
    let mut new_phdrs: Vec<ProgramHeader> = Vec::with_capacity(phdrs.len() + 2);
    for p in phdrs {
        if p.index == seg.index && (cut.len > 0 || hole.is_some()) {
            let head = fatbin.end - seg.p_vaddr;
            let tail_filesz = seg.p_filesz - head;
            let mut piece1 = p.clone();
            piece1.p_filesz = align_up(fatbin.vaddr, fatbin.page) - seg.p_vaddr;
            // Piece 1's memory: up to the hole's segment, else over the section and, when
            // nothing of the segment follows it in the file, the segment's `.bss` tail (B6).
            piece1.p_memsz = match hole {
                Some(h) => h.vaddr - seg.p_vaddr,
                None if tail_filesz == 0 => seg.p_memsz,
                None => head,
            };
            if tail_filesz == 0 {
                if piece1.p_memsz > 0 {
                    new_phdrs.push(piece1);
                }
            } else {
                let piece2 = ProgramHeader {
                    index: 0,
                    p_type: PT_LOAD,
                    p_flags: p.p_flags,
                    p_offset: seg.p_offset + head - cut.len,
                    p_vaddr: fatbin.end,
                    p_paddr: seg.p_paddr.wrapping_add(head),
                    p_filesz: tail_filesz,
                    p_memsz: seg.p_memsz - head,
                    p_align: p.p_align,
                };
                if piece1.p_memsz > 0 {
                    new_phdrs.push(drop_exec_without_code(piece1, shdrs));
                }
                new_phdrs.push(drop_exec_without_code(piece2, shdrs));
            }
        } else {
            let mut q = p.clone();
            q.p_offset = cut.shift(p.p_offset);
            new_phdrs.push(q);
        }
    }
    for q in new_phdrs.iter_mut().filter(|q| q.p_type == PT_LOAD) {
        if q.p_align > fatbin.page && q.p_offset % q.p_align != q.p_vaddr % q.p_align {
            q.p_align = fatbin.page;
        }
    }
    // One more for the marker's segment.
    if new_phdrs.len() as u64 + 1 >= u64::from(PN_XNUM) {
        return Err(layout("too many program headers"));
    }
    Ok(new_phdrs)
}

/// What of the input's end is kept: the old section name table (re-emitted at the end)
/// and where the kept input ends.
pub(crate) struct KeptInput {
    /// The section name table, as in the input.
    pub(crate) shstr: SectionHeader,
    /// Input offset where the kept input ends (the old section header table and
    /// `.shstrtab` are dropped when they ended the file).
    pub(crate) end: u64,
    /// Length of the kept input in the output (`end` less the cut).
    pub(crate) len: u64,
}

/// Drops the old section header table and `.shstrtab` when they end the file, and zeroes
/// them otherwise; both are re-emitted at the end.
pub(crate) fn drop_trailing_tables(
    elf: &ElfFile<'_>,
    cut: Cut,
    patches: &mut Patches,
) -> Result<KeptInput, RewriteError> {
    let h = elf.header();
    let shdrs = elf.section_headers();
    let shstr = elf
        .shstrndx()
        .map(|i| shdrs[i].clone())
        .ok_or_else(|| layout("no section name table"))?;
    if shstr.sh_flags & u64::from(SHF_ALLOC) != 0 {
        return Err(layout(".shstrtab is allocated"));
    }
    let sht_range = h.e_shoff..h.e_shoff + shdrs.len() as u64 * SHDR_SIZE;
    let shstr_range = shstr.sh_offset..shstr.sh_offset + shstr.sh_size;
    let mut end = elf.data().len() as u64;
    let mut dropped_sht = false;
    let mut dropped_shstr = false;
    // Either may end the file with the other just before it.
    for _ in 0..2 {
        let trailing = |r: &Range<u64>, end: u64, except: Option<usize>| {
            r.start >= cut.at + cut.len
                && r.end <= end
                && end - r.end < 8
                && nothing_else_in(elf, r.start..end, except)
        };
        if !dropped_sht && trailing(&sht_range, end, None) {
            end = sht_range.start;
            dropped_sht = true;
        }
        if !dropped_shstr && trailing(&shstr_range, end, Some(shstr.index)) {
            end = shstr_range.start;
            dropped_shstr = true;
        }
    }
    if !dropped_sht {
        patches.zero(sht_range)?;
    }
    if !dropped_shstr && shstr.sh_size > 0 {
        patches.zero(shstr_range)?;
    }
    Ok(KeptInput {
        shstr,
        end,
        len: end - cut.len,
    })
}

/// A split piece keeps `PF_X` only if it still holds code: a piece of an `R E` segment that
/// holds only `.eh_frame` data needs no execute permission (and `eu-elflint` flags one that has it).
fn drop_exec_without_code(mut piece: ProgramHeader, shdrs: &[SectionHeader]) -> ProgramHeader {
    let end = piece.p_vaddr + piece.p_memsz;
    let has_code = shdrs.iter().any(|s| {
        s.sh_flags & u64::from(SHF_EXECINSTR) != 0
            && s.sh_size > 0
            && s.sh_addr < end
            && piece.p_vaddr < s.sh_addr.saturating_add(s.sh_size)
    });
    if !has_code {
        piece.p_flags &= !PF_X;
    }
    piece
}
