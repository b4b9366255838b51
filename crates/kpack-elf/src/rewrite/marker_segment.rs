//! The new read-only segment: where it goes, the marker (or new `.hip_fatbin` contents) in
//! it, and the program header table, grown in place or moved to its start ("Stripping" in
//! the module doc).

use object::elf::{PF_R, PT_LOAD, PT_NULL, PT_PHDR};

use super::split::{Hole, KeptInput};
use super::{Cut, MAX_PADDING, RewriteError, align_up, layout, phdr_bytes};
use crate::elf::{ElfFile, PHDR_SIZE, ProgramHeader, SHDR_SIZE};
use kpack_hostbin::splice::Patches;

/// The new read-only `PT_LOAD` after the kept input (or, in an executable, in the `hole`
/// of `.hip_fatbin`'s first pages): the moved program header table (if it cannot grow in
/// place), then the marker or the new `.hip_fatbin` contents.
pub(crate) struct MarkerSegment {
    /// File offset of the segment in the output.
    pub(crate) offset: u64,
    /// Address of the segment.
    pub(super) vaddr: u64,
    /// Offset of the marker (or new contents) inside the segment (after a moved table).
    pub(super) marker_in_segment: u64,
    /// Length of the table and payload (the hole's pages after them are zeros).
    pub(crate) len: u64,
    /// The pages of `.hip_fatbin` the segment fills, if it is not after the kept input.
    pub(super) hole: Option<Hole>,
    /// Output offset where the kept input and the segment end.
    pub(crate) end: u64,
    /// The program header table, when it moved into this segment.
    pub(super) moved_table: Option<Vec<u8>>,
    /// `e_phoff` of the output.
    pub(super) phoff: u64,
    /// `e_phnum` of the output.
    pub(super) phnum: u64,
}

impl MarkerSegment {
    pub(crate) fn marker_vaddr(&self) -> u64 {
        self.vaddr + self.marker_in_segment
    }
    pub(crate) fn marker_offset(&self) -> u64 {
        self.offset + self.marker_in_segment
    }
}

/// Places the marker's segment in the `hole` if there is one, else one free page above
/// every segment (see Stripping in the module doc), adds it to `phdrs` in address order,
/// and writes the program header table: grown in place when it fits, else moved to the
/// segment's start (the old one zeroed).
pub(crate) fn place_marker_segment(
    elf: &ElfFile<'_>,
    mut phdrs: Vec<ProgramHeader>,
    cut: Cut,
    kept: &KeptInput,
    (payload_len, payload_align): (u64, u64),
    (page, hole): (u64, Option<Hole>),
    patches: &mut Patches,
) -> Result<MarkerSegment, RewriteError> {
    let h = elf.header();
    let max_end = phdrs
        .iter()
        .filter(|q| q.p_type == PT_LOAD)
        .map(|q| q.p_vaddr.saturating_add(q.p_memsz))
        .max()
        .unwrap_or(0);
    let in_place = phdr_fits_in_place(elf, cut, (phdrs.len() as u64 + 1) * PHDR_SIZE);
    // A table moved into the hole ends with a spare `PT_NULL` entry (see Executables).
    let spare = hole.is_some() && !in_place;
    let phnum = phdrs.len() as u64 + 1 + u64::from(spare);
    let table_len = phnum * PHDR_SIZE;

    // The moved table comes first (where linkers put it, and where objcopy/strip expect a
    // segment's headers: elsewhere they re-lay the segment out wrongly), then the marker.
    let table_in_segment = if in_place { 0 } else { align_up(table_len, 8) };
    let (offset, vaddr, marker_in_segment, filesz, memsz, end) = match &hole {
        // The hole starts on a page: the marker follows the table and its spare entry
        // (with nothing between them, see Stripping).
        Some(hole) => {
            let marker_in_segment = align_up(table_in_segment, payload_align);
            if marker_in_segment + payload_len > hole.len {
                return Err(layout("the segment does not fit the freed pages"));
            }
            (
                hole.at,
                hole.vaddr,
                marker_in_segment,
                hole.len,
                hole.end - hole.vaddr,
                kept.len,
            )
        }
        None => {
            let len = table_in_segment + payload_len;
            let (offset, vaddr) = segment_position(
                elf,
                kept.len,
                max_end,
                in_place,
                page,
                (table_in_segment, payload_align),
            )?;
            (offset, vaddr, table_in_segment, len, len, offset + len)
        }
    };
    let at = phdrs
        .iter()
        .position(|q| q.p_type == PT_LOAD && q.p_vaddr > vaddr)
        .or_else(|| {
            phdrs
                .iter()
                .rposition(|q| q.p_type == PT_LOAD)
                .map(|i| i + 1)
        })
        .ok_or_else(|| layout("no PT_LOAD"))?;
    phdrs.insert(
        at,
        ProgramHeader {
            index: 0,
            p_type: PT_LOAD,
            p_flags: hole.as_ref().map_or(PF_R, |h| h.flags),
            p_offset: offset,
            p_vaddr: vaddr,
            p_paddr: vaddr,
            p_filesz: filesz,
            p_memsz: memsz,
            p_align: page,
        },
    );
    if spare {
        phdrs.push(ProgramHeader {
            index: 0,
            p_type: PT_NULL,
            p_flags: 0,
            p_offset: 0,
            p_vaddr: 0,
            p_paddr: 0,
            p_filesz: 0,
            p_memsz: 0,
            p_align: 0,
        });
    }
    let phoff = if in_place {
        cut.shift(h.e_phoff)
    } else {
        offset
    };
    for q in phdrs.iter_mut().filter(|q| q.p_type == PT_PHDR) {
        q.p_offset = phoff;
        q.p_filesz = table_len;
        q.p_memsz = table_len;
        if !in_place {
            q.p_vaddr = vaddr;
            q.p_paddr = vaddr;
        }
    }
    let table: Vec<u8> = phdrs.iter().flat_map(phdr_bytes).collect();
    let moved_table = if in_place {
        patches.add(h.e_phoff, table)?;
        None
    } else {
        let old_table = h.e_phoff..h.e_phoff + u64::from(h.e_phnum) * PHDR_SIZE;
        if !old_table.is_empty() {
            patches.zero(old_table)?;
        }
        Some(table)
    };
    Ok(MarkerSegment {
        offset,
        vaddr,
        marker_in_segment,
        len: marker_in_segment + payload_len,
        hole,
        end,
        moved_table,
        phoff,
        phnum,
    })
}

/// The file offset and address of the marker's segment: right after the kept input (8-byte
/// aligned, and so that the payload at `payload_in_segment` is `payload_align`-aligned with
/// nothing between it and the table: BFD re-lays a segment out with its sections right after
/// its headers; at the same place in its page as in the file), one free page above `max_end` (GNU strip/objcopy re-lay the file out and start a
/// segment holding the program header table right after the previous segment's file bytes,
/// not page-aligned, so the segment slides down into the page below its address; that page
/// must belong to no other segment). In executables a moved table keeps the first
/// `PT_LOAD`'s `p_vaddr - p_offset`, which kernels before 5.18 use for `AT_PHDR` (B8).
fn segment_position(
    elf: &ElfFile<'_>,
    kept_len: u64,
    max_end: u64,
    in_place: bool,
    page: u64,
    (payload_in_segment, payload_align): (u64, u64),
) -> Result<(u64, u64), RewriteError> {
    // Only `p_offset ≡ p_vaddr (mod page)` is needed, not an aligned offset: the segment
    // starts at the next 8-byte boundary of the file and at the same place in its page, so
    // the file is not padded up to a page boundary (up to 64 KiB on aarch64 and ppc64).
    let mut offset =
        align_up(align_up(kept_len, 8) + payload_in_segment, payload_align) - payload_in_segment;
    let mut vaddr = align_up(max_end, page) + page + offset % page;
    if !elf.is_executable() || in_place {
        return Ok((offset, vaddr));
    }
    let first = elf
        .program_headers()
        .iter()
        .find(|p| p.p_type == PT_LOAD)
        .ok_or_else(|| layout("no PT_LOAD"))?;
    let delta = first.p_vaddr.wrapping_sub(first.p_offset);
    if !delta.is_multiple_of(page) {
        return Err(layout("first PT_LOAD is not page-congruent"));
    }
    vaddr = vaddr.max(delta.wrapping_add(offset));
    offset = vaddr.wrapping_sub(delta);
    if offset < kept_len {
        return Err(layout("no room for the program header table"));
    }
    // The placement old kernels need pads the file up to the address span of the
    // segments; a huge .bss would turn that into gigabytes of zeros.
    if offset - kept_len > MAX_PADDING {
        return Err(layout(format!(
            "keeping the program header table where kernels before 5.18 look for it \
             would pad the file with {} bytes (segments span up to {max_end:#x})",
            offset - kept_len
        )));
    }
    Ok((offset, vaddr))
}

/// Whether a table of `need` bytes fits at `e_phoff`: before any later file content and
/// inside the `PT_LOAD` that maps the current table.
fn phdr_fits_in_place(elf: &ElfFile<'_>, cut: Cut, need: u64) -> bool {
    let h = elf.header();
    let start = h.e_phoff;
    let Some(end) = start.checked_add(need) else {
        return false;
    };
    if cut.overlaps(start, need) || (start >= cut.at && !cut.is_none()) {
        return false;
    }
    let old_end = start + u64::from(h.e_phnum) * PHDR_SIZE;
    let clear = |s: u64, len: u64| {
        len == 0 || s + len <= old_end.min(start) || s >= end || s + len <= start
    };
    let sections = elf
        .section_headers()
        .iter()
        .all(|s| !s.has_file_data() || clear(s.sh_offset, s.sh_size));
    let sht = clear(h.e_shoff, elf.section_headers().len() as u64 * SHDR_SIZE);
    let covered = elf
        .program_headers()
        .iter()
        .any(|p| p.p_type == PT_LOAD && p.p_offset <= start && end <= p.p_offset + p.p_filesz);
    // Only segments that start inside the grown area matter; the table's own load does not.
    let segments = elf.program_headers().iter().all(|p| {
        p.p_type == PT_LOAD && p.p_offset <= start
            || p.p_type == PT_PHDR
            || clear(p.p_offset, p.p_filesz)
    });
    sections && sht && covered && segments && (end <= cut.at || cut.is_none())
}
