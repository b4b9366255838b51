//! The host rewrite: a fat binary becomes a host-only binary whose wrappers point at a
//! `.rocm_kpack_ref` marker (reference spec §2), done without the reference's bugs (§9 B1–B10).
//!
//! [`plan`] computes the whole output layout from the input bytes and the encoded marker,
//! refusing what it cannot do safely; [`Rewrite::write_to`] then streams the output (kept
//! ranges of the input, a few patched records, the appended tables), so a 1.3 GB input is
//! never copied into memory.
//!
//! # Layout
//! Let `V`, `N`, `O` be `.hip_fatbin`'s address, size and offset, `P` = 4096, `A = ceilP(V)`,
//! `E = floorP(V+N)`, `AO = O + (A - V)`, `Z = E - A` (0 when the section spans no whole page).
//! * File bytes `[AO, AO+Z)` are removed; the bytes of the section that stay in the file (the
//!   partial pages at either end) are zeroed. The section becomes `SHT_NOBITS`, keeping its
//!   address, size and `sh_offset = O`.
//! * The `PT_LOAD` holding the section is split at `V+N`: piece 1 keeps its start, is
//!   file-backed up to `A` and spans memory up to `V+N` (the removed pages become its
//!   zero-filled `p_memsz` tail, like `.bss`); piece 2 starts at `V+N`, file-backed from the
//!   kept tail. No piece has `p_filesz == 0` next to another at the same offset (the
//!   reference's "NOBITS collision"); when nothing of the segment follows the section in the
//!   file, piece 1 keeps the whole original `p_memsz`, `.bss` tail included (B6).
//! * Every later file offset moves down by `Z`, a multiple of the page, so `p_offset ≡
//!   p_vaddr (mod 4096)` holds; a `PT_LOAD` whose larger `p_align` that breaks gets
//!   `p_align = 4096` (valid, B5).
//! * One new read-only `PT_LOAD`, one free page above every segment (see Stripping), maps, when
//!   the program header table cannot grow in place, the new table at its start (where
//!   linkers put a segment's headers), then the marker. The table moves at most once; the old
//!   one is zeroed, so no dead copy remains (B1/B7). In executables (`ET_EXEC`
//!   or with `PT_INTERP`) a moved table is placed so that `p_vaddr - p_offset` of its segment
//!   equals that of the first `PT_LOAD`: kernels before 5.18 compute `AT_PHDR` from that (B8).
//!   This may need zero padding up to the address the first segment's offset implies.
//! * `.shstrtab` (with the new name) and the section header table (with the new
//!   `.rocm_kpack_ref` entry) are re-emitted once at the end; their old bytes are dropped
//!   when they ended the file and zeroed otherwise.
//! * Each wrapper gets magic HIPK, version 1, `reserved1` = its index (all 8 bytes, B4) and
//!   its pointer set to the marker, in the file and in whatever fills it at load time: a
//!   `R_X86_64_RELATIVE` addend, an `R_X86_64_64` converted to `R_X86_64_RELATIVE`, the
//!   in-file addend of `SHT_REL`/`SHT_RELR`, or the in-file pointer of a non-PIE executable (B2).
//!
//! Two segments may share the page holding `V+N` (piece 1's zero fill, piece 2's file
//! content); loaders map the later segment over it, as they do for `.data`/`.bss` pages.
//!
//! # Stripping
//! Splitting the segment adds a program header, and the table never has room to grow where
//! it is, so it moves. GNU `strip`/`objcopy` (BFD) re-lay a stripped file out and place a
//! moved table at the current file offset, not page-aligned, which slides its segment's
//! start into the page below: the new segment therefore sits one page above the others, and
//! a transformed file stays loadable after `strip` (in executables BFD's placement no longer
//! keeps the old-kernel `AT_PHDR` rule; kernels since 5.18 do not need it). `eu-strip`
//! (libelf) fills what no section covers between sections and so erases a moved table: strip
//! with it before transforming. `patchelf` edits transformed files correctly.
//!
//! # Refused
//! Not x86-64 (B3), relocatable objects (their device code is linked later), files without a
//! `.hip_fatbin` with content, already kpacked files ([`RewriteError::AlreadyKpacked`]),
//! wrappers whose pointer kind is not understood, and any other relocation that reads or
//! writes `.hip_fatbin` (the code would see zero pages).

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::ElfError;
use crate::consts::*;
use crate::elf::{ElfFile, ProgramHeader, RelocKind, RelocationEntries, SectionHeader, reloc_kind};
use crate::fatbin::{
    FatBinaryKind, HIPK_MAGIC, MARKER_SECTION, PointerSource, WRAPPER_POINTER_OFFSET, WrapperMagic,
    inspect_elf,
};

/// The most zero padding a rewrite may add to an executable to place its program header
/// table (see [`plan`]); beyond it the input is refused rather than bloated.
pub const MAX_PADDING: u64 = 64 << 20;

/// The page size the layout keeps congruence for (x86-64).
pub const PAGE: u64 = 4096;

/// Why a file cannot be rewritten. The input is never modified.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    #[error(transparent)]
    Elf(#[from] ElfError),
    #[error("e_machine is {0}: only x86-64 (62) binaries can be rewritten")]
    NotX86_64(u16),
    #[error(
        "relocatable object (ET_REL): its device code is linked into the final binary later; transform that instead"
    )]
    Relocatable,
    #[error("e_type {0} is neither ET_EXEC nor ET_DYN")]
    NotLinked(u16),
    #[error("already kpacked: the file has HIPK wrappers or a .rocm_kpack_ref section")]
    AlreadyKpacked,
    #[error("no device code: the file has no .hip_fatbin section with contents")]
    NotFat,
    #[error(".hip_fatbin [{section}] has no .hipFatBinSegment wrappers pointing at it")]
    NoWrappers { section: usize },
    #[error("wrapper {index} at offset {offset:#x}: {problem}")]
    Wrapper {
        index: usize,
        offset: u64,
        problem: String,
    },
    #[error("layout not supported: {0}")]
    Layout(String),
    #[error("the input is malformed, so rewriting it is not safe: {}", issues.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    MalformedInput {
        issues: Vec<crate::verify::VerifyIssue>,
    },
    #[error(
        "relocation section [{section}] entry {entry}: {problem}; removing .hip_fatbin would break it"
    )]
    FatbinReferenced {
        section: usize,
        entry: usize,
        problem: String,
    },
}

/// What a rewrite does, in numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteSummary {
    pub input_len: u64,
    pub output_len: u64,
    /// File bytes of `.hip_fatbin` removed (whole pages).
    pub removed: u64,
    pub marker_vaddr: u64,
    pub marker_offset: u64,
    /// Whether the program header table was moved into the new segment.
    pub phdr_moved: bool,
    pub wrappers: usize,
}

/// One run of output bytes.
#[derive(Debug, Clone)]
enum Piece {
    /// Input bytes `start..end`, with the patches that fall inside applied.
    Input {
        start: u64,
        end: u64,
    },
    Zeros(u64),
    Bytes(Vec<u8>),
}

/// A computed rewrite: apply it with [`Rewrite::write_to`] to the same input bytes.
#[derive(Debug, Clone)]
pub struct Rewrite {
    pieces: Vec<Piece>,
    /// Replacement bytes keyed by input offset; never overlapping, always inside a kept range.
    patches: BTreeMap<u64, Vec<u8>>,
    pub summary: RewriteSummary,
}

impl Rewrite {
    /// Streams the output; `input` must be the bytes given to [`plan`].
    pub fn write_to<W: Write>(&self, input: &[u8], mut w: W) -> io::Result<()> {
        static ZEROS: [u8; 65536] = [0; 65536];
        for piece in &self.pieces {
            match piece {
                Piece::Input { start, end } => {
                    let mut at = *start;
                    for (&p, bytes) in self.patches.range(*start..*end) {
                        w.write_all(&input[at as usize..p as usize])?;
                        w.write_all(bytes)?;
                        at = p + bytes.len() as u64;
                    }
                    w.write_all(&input[at as usize..*end as usize])?;
                }
                Piece::Zeros(len) => {
                    let mut n = *len;
                    while n > 0 {
                        let k = n.min(ZEROS.len() as u64);
                        w.write_all(&ZEROS[..k as usize])?;
                        n -= k;
                    }
                }
                Piece::Bytes(b) => w.write_all(b)?,
            }
        }
        w.flush()
    }

    /// The output in memory (for small files, tests and fuzzing).
    pub fn to_vec(&self, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.summary.output_len as usize);
        self.write_to(input, &mut out)
            .expect("writing to a Vec cannot fail");
        out
    }
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

fn layout(msg: impl Into<String>) -> RewriteError {
    RewriteError::Layout(msg.into())
}

/// Where the removed range is and how offsets move.
#[derive(Clone, Copy)]
struct Cut {
    /// Input offset of the first removed byte.
    at: u64,
    /// Bytes removed (multiple of the page, possibly 0).
    len: u64,
}

impl Cut {
    fn shift(&self, off: u64) -> u64 {
        if off >= self.at + self.len {
            off - self.len
        } else if off > self.at {
            self.at
        } else {
            off
        }
    }
    fn overlaps(&self, start: u64, len: u64) -> bool {
        len > 0 && self.len > 0 && start < self.at + self.len && self.at < start + len
    }
}

struct Patches(BTreeMap<u64, Vec<u8>>);

impl Patches {
    fn add(&mut self, at: u64, bytes: Vec<u8>) -> Result<(), RewriteError> {
        let end = at + bytes.len() as u64;
        let clash = self
            .0
            .range(..end)
            .next_back()
            .is_some_and(|(&p, b)| p + b.len() as u64 > at);
        if clash {
            return Err(layout(format!("two edits overlap at file offset {at:#x}")));
        }
        self.0.insert(at, bytes);
        Ok(())
    }
}

fn phdr_bytes(p: &ProgramHeader) -> [u8; 56] {
    let mut b = [0u8; 56];
    b[0..4].copy_from_slice(&p.p_type.to_le_bytes());
    b[4..8].copy_from_slice(&p.p_flags.to_le_bytes());
    b[8..16].copy_from_slice(&p.p_offset.to_le_bytes());
    b[16..24].copy_from_slice(&p.p_vaddr.to_le_bytes());
    b[24..32].copy_from_slice(&p.p_paddr.to_le_bytes());
    b[32..40].copy_from_slice(&p.p_filesz.to_le_bytes());
    b[40..48].copy_from_slice(&p.p_memsz.to_le_bytes());
    b[48..56].copy_from_slice(&p.p_align.to_le_bytes());
    b
}

fn shdr_bytes(s: &SectionHeader) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[0..4].copy_from_slice(&s.sh_name.to_le_bytes());
    b[4..8].copy_from_slice(&s.sh_type.to_le_bytes());
    b[8..16].copy_from_slice(&s.sh_flags.to_le_bytes());
    b[16..24].copy_from_slice(&s.sh_addr.to_le_bytes());
    b[24..32].copy_from_slice(&s.sh_offset.to_le_bytes());
    b[32..40].copy_from_slice(&s.sh_size.to_le_bytes());
    b[40..44].copy_from_slice(&s.sh_link.to_le_bytes());
    b[44..48].copy_from_slice(&s.sh_info.to_le_bytes());
    b[48..56].copy_from_slice(&s.sh_addralign.to_le_bytes());
    b[56..64].copy_from_slice(&s.sh_entsize.to_le_bytes());
    b
}

/// Plans the rewrite of `data` with `marker` (the encoded `.rocm_kpack_ref` contents).
pub fn plan(data: &[u8], marker: &[u8]) -> Result<Rewrite, RewriteError> {
    let elf = ElfFile::parse(data)?;
    let h = elf.header().clone();
    if h.e_type == ET_REL {
        return Err(RewriteError::Relocatable);
    }
    if h.e_type != ET_EXEC && h.e_type != ET_DYN {
        return Err(RewriteError::NotLinked(h.e_type));
    }
    if h.e_machine != EM_X86_64 {
        return Err(RewriteError::NotX86_64(h.e_machine));
    }
    let fat = inspect_elf(&elf)?;
    match fat.kind {
        FatBinaryKind::Kpacked => return Err(RewriteError::AlreadyKpacked),
        FatBinaryKind::Fat => {}
        FatBinaryKind::Rdc | FatBinaryKind::HostOnly => return Err(RewriteError::NotFat),
    }
    if h.e_shnum == 0 || h.e_phnum == PN_XNUM || h.e_shstrndx == SHN_XINDEX {
        return Err(layout("extended section or segment numbering"));
    }
    // The plan below reasons from the input's layout; one the verifier rejects (misaligned
    // sections, overlapping segments …) would make the output wrong in ways it cannot see.
    crate::verify::verify(data).map_err(|issues| RewriteError::MalformedInput { issues })?;
    let fsec = fat.fatbin.as_ref().ok_or(RewriteError::NotFat)?;
    if fat.wrappers.is_empty() {
        return Err(RewriteError::NoWrappers {
            section: fsec.section_index,
        });
    }
    let (v, n, o) = (fsec.vaddr, fsec.size, fsec.offset);
    let v_end = v
        .checked_add(n)
        .ok_or_else(|| layout(".hip_fatbin address range overflows"))?;
    let fatbin_hdr = &elf.section_headers()[fsec.section_index];
    if fatbin_hdr.sh_flags & SHF_ALLOC == 0 || n == 0 {
        return Err(layout(
            ".hip_fatbin is not an allocated section with contents",
        ));
    }
    let phdrs = elf.program_headers();
    let shdrs = elf.section_headers();

    // The PT_LOAD holding the section, file-backed and at a consistent offset.
    let loads: Vec<&ProgramHeader> = phdrs.iter().filter(|p| p.p_type == PT_LOAD).collect();
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
    if seg.p_vaddr % PAGE != seg.p_offset % PAGE {
        return Err(layout(format!(
            "PT_LOAD [{}] offset and address are not page-congruent",
            seg.index
        )));
    }

    let a = align_up(v, PAGE);
    let e = v_end / PAGE * PAGE;
    let cut = Cut {
        at: o + (a.min(v_end) - v),
        len: e.saturating_sub(a),
    };

    for p in phdrs {
        if p.index != seg.index && cut.overlaps(p.p_offset, p.p_filesz) {
            return Err(layout(format!(
                "program header [{}] (type {:#x}) covers .hip_fatbin's file bytes",
                p.index, p.p_type
            )));
        }
    }
    for s in shdrs {
        if s.index != fsec.section_index
            && s.has_file_data()
            && cut.overlaps(s.sh_offset, s.sh_size)
        {
            return Err(layout(format!(
                "section [{}] {} overlaps .hip_fatbin's file bytes",
                s.index, s.name
            )));
        }
    }
    if marker_exists(shdrs) {
        return Err(RewriteError::AlreadyKpacked);
    }

    let mut patches = Patches(BTreeMap::new());
    check_relocations(&elf, &fat, v, v_end, fsec.section_index)?;

    // Zero the section's bytes that stay in the file.
    let keep_prefix = cut.at - o;
    let keep_suffix = (o + n) - (cut.at + cut.len);
    if keep_prefix > 0 {
        patches.add(o, vec![0; keep_prefix as usize])?;
    }
    if keep_suffix > 0 {
        patches.add(cut.at + cut.len, vec![0; keep_suffix as usize])?;
    }

    // New program headers (marker segment added below).
    let mut new_phdrs: Vec<ProgramHeader> = Vec::with_capacity(phdrs.len() + 2);
    for p in phdrs {
        if p.index == seg.index && cut.len > 0 {
            let head = v_end - seg.p_vaddr;
            let mut piece1 = p.clone();
            piece1.p_filesz = a - seg.p_vaddr;
            let tail_filesz = seg.p_filesz - head;
            if tail_filesz == 0 {
                piece1.p_memsz = seg.p_memsz;
                new_phdrs.push(piece1);
            } else {
                piece1.p_memsz = head;
                let piece2 = ProgramHeader {
                    index: 0,
                    p_type: PT_LOAD,
                    p_flags: p.p_flags,
                    p_offset: seg.p_offset + head - cut.len,
                    p_vaddr: v_end,
                    p_paddr: seg.p_paddr.wrapping_add(head),
                    p_filesz: tail_filesz,
                    p_memsz: seg.p_memsz - head,
                    p_align: p.p_align,
                };
                new_phdrs.push(drop_exec_without_code(piece1, shdrs));
                new_phdrs.push(drop_exec_without_code(piece2, shdrs));
            }
        } else {
            let mut q = p.clone();
            q.p_offset = cut.shift(p.p_offset);
            new_phdrs.push(q);
        }
    }
    for q in new_phdrs.iter_mut().filter(|q| q.p_type == PT_LOAD) {
        if q.p_align > PAGE && q.p_offset % q.p_align != q.p_vaddr % q.p_align {
            q.p_align = PAGE;
        }
    }
    let last_load = new_phdrs
        .iter()
        .rposition(|q| q.p_type == PT_LOAD)
        .ok_or_else(|| layout("no PT_LOAD"))?;
    let max_end = new_phdrs
        .iter()
        .filter(|q| q.p_type == PT_LOAD)
        .map(|q| q.p_vaddr.saturating_add(q.p_memsz))
        .max()
        .unwrap_or(0);
    let count = new_phdrs.len() as u64 + 1;
    if count >= u64::from(PN_XNUM) {
        return Err(layout("too many program headers"));
    }
    let old_table = h.e_phoff..h.e_phoff + u64::from(h.e_phnum) * PHDR_SIZE;
    let in_place = phdr_fits_in_place(&elf, cut, count * PHDR_SIZE);

    // Drop the old section header table and .shstrtab when they end the file.
    let shstr = elf
        .shstrndx()
        .map(|i| shdrs[i].clone())
        .ok_or_else(|| layout("no section name table"))?;
    if shstr.sh_flags & SHF_ALLOC != 0 {
        return Err(layout(".shstrtab is allocated"));
    }
    let sht_range = h.e_shoff..h.e_shoff + shdrs.len() as u64 * SHDR_SIZE;
    let mut end = data.len() as u64;
    let mut dropped_sht = false;
    let mut dropped_shstr = false;
    for _ in 0..2 {
        let trailing = |r: &std::ops::Range<u64>, end: u64, except: Option<usize>| {
            r.start >= cut.at + cut.len
                && r.end <= end
                && end - r.end < 8
                && nothing_else_in(&elf, r.start..end, except)
        };
        if !dropped_sht && trailing(&sht_range, end, None) {
            end = sht_range.start;
            dropped_sht = true;
        }
        let shstr_range = shstr.sh_offset..shstr.sh_offset + shstr.sh_size;
        if !dropped_shstr && trailing(&shstr_range, end, Some(shstr.index)) {
            end = shstr_range.start;
            dropped_shstr = true;
        }
    }
    if !dropped_sht {
        patches.add(
            sht_range.start,
            vec![0; (sht_range.end - sht_range.start) as usize],
        )?;
    }
    if !dropped_shstr && shstr.sh_size > 0 {
        patches.add(shstr.sh_offset, vec![0; shstr.sh_size as usize])?;
    }
    let kept_len = end - cut.len;

    // The new segment: the moved program header table first (where linkers put it, and
    // where objcopy/strip expect a segment's headers: elsewhere they re-lay the segment out
    // wrongly), then the marker.
    let table_len = count * PHDR_SIZE;
    let marker_in_seg = if in_place { 0 } else { align_up(table_len, 8) };
    let seg_len = marker_in_seg + marker.len() as u64;
    let is_exec = h.e_type == ET_EXEC || phdrs.iter().any(|p| p.p_type == PT_INTERP);
    let mut new_off = align_up(kept_len, PAGE);
    // One page is left free below the new segment. GNU strip/objcopy re-lay the file out and
    // start a segment holding the program header table right after the previous segment's
    // file bytes, not page-aligned, so the segment slides down into the page below its
    // address; that page must belong to no other segment.
    let mut new_vaddr = align_up(max_end, PAGE) + PAGE;
    if is_exec && !in_place {
        let first = loads[0];
        let delta = first.p_vaddr.wrapping_sub(first.p_offset);
        if !delta.is_multiple_of(PAGE) {
            return Err(layout("first PT_LOAD is not page-congruent"));
        }
        new_vaddr = new_vaddr.max(delta.wrapping_add(new_off));
        new_off = new_vaddr.wrapping_sub(delta);
        if new_off < kept_len {
            return Err(layout("no room for the program header table"));
        }
        // The placement old kernels need pads the file up to the address span of the
        // segments; a huge .bss would turn that into gigabytes of zeros.
        if new_off - kept_len > MAX_PADDING {
            return Err(layout(format!(
                "keeping the program header table where kernels before 5.18 look for it \
                 would pad the file with {} bytes (segments span up to {max_end:#x})",
                new_off - kept_len
            )));
        }
    }
    let marker_seg = ProgramHeader {
        index: 0,
        p_type: PT_LOAD,
        p_flags: PF_R,
        p_offset: new_off,
        p_vaddr: new_vaddr,
        p_paddr: new_vaddr,
        p_filesz: seg_len,
        p_memsz: seg_len,
        p_align: PAGE,
    };
    new_phdrs.insert(last_load + 1, marker_seg);
    let marker_vaddr = new_vaddr + marker_in_seg;
    let marker_off = new_off + marker_in_seg;
    let new_phoff = if in_place {
        cut.shift(h.e_phoff)
    } else {
        new_off
    };
    for q in new_phdrs.iter_mut().filter(|q| q.p_type == PT_PHDR) {
        q.p_offset = new_phoff;
        q.p_filesz = table_len;
        q.p_memsz = table_len;
        if !in_place {
            q.p_vaddr = new_vaddr;
            q.p_paddr = new_vaddr;
        }
    }
    let table: Vec<u8> = new_phdrs.iter().flat_map(phdr_bytes).collect();
    if in_place {
        patches.add(h.e_phoff, table.clone())?;
    } else if !old_table.is_empty() {
        patches.add(
            old_table.start,
            vec![0; (old_table.end - old_table.start) as usize],
        )?;
    }

    // Wrappers and their pointers.
    for w in &fat.wrappers {
        let problem = |m: &str| RewriteError::Wrapper {
            index: w.index,
            offset: w.offset,
            problem: m.to_owned(),
        };
        if w.magic != WrapperMagic::Hipf {
            return Err(problem("magic is not HIPF"));
        }
        let mut rec = Vec::with_capacity(24);
        rec.extend_from_slice(&HIPK_MAGIC.to_le_bytes());
        rec.extend_from_slice(&1u32.to_le_bytes());
        rec.extend_from_slice(&marker_vaddr.to_le_bytes());
        rec.extend_from_slice(&(w.index as u64).to_le_bytes());
        patches.add(w.offset, rec)?;
        match &w.pointer {
            PointerSource::InPlace(_) => {
                if h.e_type == ET_DYN {
                    return Err(problem(
                        "no relocation fills the pointer of a position-independent file",
                    ));
                }
            }
            PointerSource::Rela {
                section_index,
                entry_index,
                r_type,
                ..
            } => {
                check_pointer_kind(h.e_machine, *r_type).map_err(|m| problem(&m))?;
                let at = shdrs[*section_index].sh_offset + *entry_index as u64 * RELA_SIZE + 8;
                let mut b = Vec::with_capacity(16);
                b.extend_from_slice(&u64::from(R_X86_64_RELATIVE).to_le_bytes());
                b.extend_from_slice(&marker_vaddr.to_le_bytes());
                patches.add(at, b)?;
            }
            PointerSource::Rel {
                section_index,
                entry_index,
                r_type,
                ..
            } => {
                check_pointer_kind(h.e_machine, *r_type).map_err(|m| problem(&m))?;
                let at = shdrs[*section_index].sh_offset + *entry_index as u64 * REL_SIZE + 8;
                patches.add(at, u64::from(R_X86_64_RELATIVE).to_le_bytes().to_vec())?;
            }
            PointerSource::Relr { .. } => {}
        }
    }

    // Section headers: the marker's. (A section covering a moved program header table
    // would make GNU strip count the table twice and misplace the marker.)
    let added = [(
        MARKER_SECTION,
        marker_vaddr,
        marker_off,
        marker.len() as u64,
        1u64,
    )];
    let added_names: u64 = added.iter().map(|a| a.0.len() as u64 + 1).sum();
    if u32::try_from(shstr.sh_size + added_names).is_err() {
        return Err(layout(".shstrtab too large"));
    }
    let shstr_new_off = new_off + seg_len;
    let sht_off = align_up(shstr_new_off + shstr.sh_size + added_names, 8);
    let mut new_shdrs: Vec<SectionHeader> = shdrs.to_vec();
    for s in &mut new_shdrs {
        if s.index == fsec.section_index {
            s.sh_type = SHT_NOBITS;
        } else if s.index == shstr.index {
            s.sh_offset = shstr_new_off;
            s.sh_size += added_names;
        } else if s.sh_type != SHT_NULL {
            s.sh_offset = cut.shift(s.sh_offset);
        }
    }
    let mut name_off = shstr.sh_size;
    for &(name, addr, offset, size, align) in &added {
        new_shdrs.push(SectionHeader {
            index: new_shdrs.len(),
            name: name.to_owned(),
            sh_name: name_off as u32,
            sh_type: SHT_PROGBITS,
            sh_flags: SHF_ALLOC,
            sh_addr: addr,
            sh_offset: offset,
            sh_size: size,
            sh_link: 0,
            sh_info: 0,
            sh_addralign: align,
            sh_entsize: 0,
        });
        name_off += name.len() as u64 + 1;
    }
    let shnum = new_shdrs.len() as u64;
    if shnum >= u64::from(SHN_LORESERVE) {
        return Err(layout("too many sections"));
    }

    // ELF header.
    let mut eh = data[..EHDR_SIZE as usize].to_vec();
    eh[32..40].copy_from_slice(&new_phoff.to_le_bytes());
    eh[40..48].copy_from_slice(&sht_off.to_le_bytes());
    eh[56..58].copy_from_slice(&(count as u16).to_le_bytes());
    eh[60..62].copy_from_slice(&(shnum as u16).to_le_bytes());
    patches.add(0, eh)?;

    // Assemble.
    let mut pieces = Vec::new();
    if cut.len > 0 {
        pieces.push(Piece::Input {
            start: 0,
            end: cut.at,
        });
        pieces.push(Piece::Input {
            start: cut.at + cut.len,
            end,
        });
    } else {
        pieces.push(Piece::Input { start: 0, end });
    }
    pieces.push(Piece::Zeros(new_off - kept_len));
    let mut seg_bytes = Vec::with_capacity(seg_len as usize);
    if !in_place {
        seg_bytes.extend_from_slice(&table);
        seg_bytes.resize(marker_in_seg as usize, 0);
    }
    seg_bytes.extend_from_slice(marker);
    pieces.push(Piece::Bytes(seg_bytes));
    let old_names = elf.section_data(&shstr)?;
    let mut names = old_names.to_vec();
    for &(name, ..) in &added {
        names.extend_from_slice(name.as_bytes());
        names.push(0);
    }
    let names_len = names.len() as u64;
    pieces.push(Piece::Bytes(names));
    pieces.push(Piece::Zeros(sht_off - (shstr_new_off + names_len)));
    pieces.push(Piece::Bytes(
        new_shdrs.iter().flat_map(shdr_bytes).collect(),
    ));

    // Patches must lie inside kept input.
    for (&at, b) in &patches.0 {
        let e = at + b.len() as u64;
        if e > end || cut.overlaps(at, b.len() as u64) {
            return Err(layout(format!(
                "an edit at file offset {at:#x} falls in removed bytes"
            )));
        }
    }
    let output_len = sht_off + shnum * SHDR_SIZE;
    Ok(Rewrite {
        pieces,
        patches: patches.0,
        summary: RewriteSummary {
            input_len: data.len() as u64,
            output_len,
            removed: cut.len,
            marker_vaddr,
            marker_offset: marker_off,
            phdr_moved: !in_place,
            wrappers: fat.wrappers.len(),
        },
    })
}

/// A split piece keeps `PF_X` only if it still holds code: a piece of an `R E` segment that
/// holds only `.eh_frame` data needs no execute permission (and `eu-elflint` flags one that has it).
fn drop_exec_without_code(mut piece: ProgramHeader, shdrs: &[SectionHeader]) -> ProgramHeader {
    let end = piece.p_vaddr + piece.p_memsz;
    let has_code = shdrs.iter().any(|s| {
        s.sh_flags & SHF_EXECINSTR != 0
            && s.sh_size > 0
            && s.sh_addr < end
            && piece.p_vaddr < s.sh_addr.saturating_add(s.sh_size)
    });
    if !has_code {
        piece.p_flags &= !PF_X;
    }
    piece
}

fn marker_exists(shdrs: &[SectionHeader]) -> bool {
    shdrs.iter().any(|s| s.name == MARKER_SECTION)
}

/// True if nothing but section `except` has file bytes in `range` (the section header table
/// itself is not a section).
fn nothing_else_in(elf: &ElfFile<'_>, range: std::ops::Range<u64>, except: Option<usize>) -> bool {
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

/// Whether a table of `need` bytes fits at `e_phoff`: before any later file content and
/// inside the `PT_LOAD` that maps the current table.
fn phdr_fits_in_place(elf: &ElfFile<'_>, cut: Cut, need: u64) -> bool {
    let h = elf.header();
    let start = h.e_phoff;
    let Some(end) = start.checked_add(need) else {
        return false;
    };
    if cut.overlaps(start, need) || start >= cut.at {
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
    sections && sht && covered && segments && end <= cut.at
}

fn check_pointer_kind(machine: u16, r_type: u32) -> Result<(), String> {
    match reloc_kind(machine, r_type) {
        RelocKind::Relative | RelocKind::Absolute64 => Ok(()),
        RelocKind::Other => Err(format!(
            "its pointer is filled by relocation type {r_type}, expected R_X86_64_RELATIVE or R_X86_64_64"
        )),
    }
}

/// Refuses any loader relocation, other than the wrapper pointers, that writes into or
/// points into `[v, v_end)`.
fn check_relocations(
    elf: &ElfFile<'_>,
    fat: &crate::FatBinary,
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
        if !matches!(s.sh_type, SHT_RELA | SHT_REL | SHT_RELR) || s.sh_flags & SHF_ALLOC == 0 {
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
