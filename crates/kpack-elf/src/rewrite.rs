//! The host rewrite: a fat binary becomes a host-only binary whose wrappers point at a
//! `.rocm_kpack_ref` marker (reference spec §2), done without the reference's bugs (§9 B1–B10).
//!
//! [`plan`] computes the whole output layout from the input bytes and the encoded marker,
//! refusing what it cannot do safely; [`Rewrite::write_to`] then streams the output (kept
//! ranges of the input, a few patched records, the appended tables), so a 1.3 GB input is
//! never copied into memory.
//!
//! # Layout
//! Let `V`, `N`, `O` be `.hip_fatbin`'s address, size and offset, `P` the page
//! ([`machine::page_size`]: 4096 on x86-64, the largest `PT_LOAD` `p_align` on aarch64 and
//! ppc64, 64 KiB by default there), `A = ceilP(V)`,
//! `E = floorP(V+N)`, `AO = O + (A - V)`, `Z = E - A` (0 when the section spans no whole page).
//! * File bytes `[AO, AO+Z)` are removed; the bytes of the section that stay in the file (the
//!   partial pages at either end) are zeroed. The section becomes `SHT_NOBITS`, keeping its
//!   address, size and `sh_offset = O` (but in executables, see Executables).
//! * The `PT_LOAD` holding the section is split at `V+N`: piece 1 keeps its start, is
//!   file-backed up to `A` and spans memory up to `V+N` (the removed pages become its
//!   zero-filled `p_memsz` tail, like `.bss`); piece 2 starts at `V+N`, file-backed from the
//!   kept tail. No piece has `p_filesz == 0` next to another at the same offset (the
//!   reference's "NOBITS collision"); when nothing of the segment follows the section in the
//!   file, piece 1 keeps the whole original `p_memsz`, `.bss` tail included (B6).
//! * Every later file offset moves down by `Z`, a multiple of the page, so `p_offset ≡
//!   p_vaddr (mod P)` holds; a `PT_LOAD` whose larger `p_align` that breaks gets
//!   `p_align = P` (valid, B5; only x86-64 has a `p_align` above `P`).
//! * One new read-only `PT_LOAD`, one free page above every segment (see Stripping), maps, when
//!   the program header table cannot grow in place, the new table at its start (where
//!   linkers put a segment's headers), then the marker. The table moves at most once; the old
//!   one is zeroed, so no dead copy remains (B1/B7). In executables (`ET_EXEC`
//!   or with `PT_INTERP`) a moved table is placed so that `p_vaddr - p_offset` of its segment
//!   equals that of the first `PT_LOAD`: kernels before 5.18 compute `AT_PHDR` from that (B8).
//!   Above every segment that needs zero padding up to the address the first segment's offset
//!   implies, about the device code removed; executables therefore place it in
//!   `.hip_fatbin`'s first freed pages (see Executables), and are refused when that does
//!   not fit and the padding would exceed [`MAX_PADDING`].
//!
//! * `.shstrtab` (with the new name) and the section header table (with the new
//!   `.rocm_kpack_ref` entry) are re-emitted once at the end; their old bytes are dropped
//!   when they ended the file and zeroed otherwise. Extended section numbering (more than
//!   65,279 sections, as lld writes with `-ffunction-sections`) is kept: from
//!   `SHN_LORESERVE` sections on, `e_shnum` is 0 and section 0's `sh_size` holds the count
//!   (the added section may make a file cross that limit), and a name table index from
//!   `SHN_LORESERVE` on is section 0's `sh_link` with `e_shstrndx` `SHN_XINDEX`; a restore
//!   numbers its sections by the same rule, so a file below the limit gets its own back.
//! * Each wrapper gets magic HIPK, version 1, `reserved1` = its index (all 8 bytes, B4) and
//!   its pointer set to the marker, in the file and in whatever fills it at load time: a
//!   `*_RELATIVE` addend, an absolute 64-bit one (`R_X86_64_64`, `R_AARCH64_ABS64`,
//!   `R_PPC64_ADDR64`) converted to the machine's `*_RELATIVE`, the
//!   in-file addend of `SHT_REL`/`SHT_RELR`, or the in-file pointer of a non-PIE executable (B2).
//!
//! Two segments may share the page holding `V+N` (piece 1's zero fill, piece 2's file
//! content); loaders map the later segment over it, as they do for `.data`/`.bss` pages.
//!
//! # Executables: the new segment in `.hip_fatbin`'s first pages
//! The new segment must keep the first `PT_LOAD`'s `p_vaddr - p_offset` (`d_first`);
//! `.hip_fatbin`'s segment has `d_seg` (the same with GNU ld; lld shifts each segment by a
//! partial page, so `d_seg` is a few pages more). When the segment's memory after the
//! section is file content (no `.bss` tail), and whole pages of the section are left over
//! after the new segment's `S` bytes (rounded up to pages: the moved table, ending with a
//! spare `PT_NULL` entry, then the marker right after it) and `|d_first - d_seg|`, a
//! `transform` puts the new segment at `V' = A + max(0, d_first - d_seg)`, file offset
//! `V' - d_first = AO + max(0, d_seg - d_first)`: no padding, and the file shrinks by
//! `Z - S - |d_first - d_seg|`. Only `[V' - d_first + S, AO+Z)` is cut.
//! * Piece 1 ends in the file at `AO` and in memory at `V'` (zero-filled from `A`), and is
//!   left out when empty; the file bytes from `AO` to the new segment (`d_seg - d_first`
//!   when positive) are zeros no segment maps. The new segment takes `.hip_fatbin`'s
//!   segment's flags, is file-backed over its `S` bytes (zeros after the marker) and spans
//!   memory up to `V+N`, where piece 2 starts.
//! * `.hip_fatbin` (`SHT_NOBITS`) keeps only the range from the marker's end to `V+N`
//!   (`sh_addralign` 1): it lies in the new segment, after the marker. Its first bytes
//!   (from `V`) are piece 1's zero-filled tail and the new segment's table and marker.
//! * The spare entry is the room a restore needs: it drops `PT_NULL` entries and adds its
//!   segment, so the table keeps its size and place.
//!
//! Shared libraries, `prune` and executables where this does not fit keep the segment
//! above every other.
//!
//! # Stripping
//! Splitting the segment adds a program header, and the table never has room to grow where
//! it is, so it moves. GNU `strip`/`objcopy` (BFD) re-lay a stripped file out and place a
//! moved table at the current file offset, not page-aligned, which slides its segment's
//! start into the page below: the new segment therefore sits one page above the others, and
//! a transformed file stays loadable after `strip` (in executables BFD's placement no longer
//! keeps the old-kernel `AT_PHDR` rule; kernels since 5.18 do not need it).
//!
//! BFD (binutils 2.40, `assign_file_positions_for_load_sections`) lays a segment holding the
//! table out as: the table at the current offset `off` (the end of the previous segment's
//! last section), then its sections in `p_paddr` order from the next offset congruent to
//! the first one's address; the segment's `p_vaddr` slides down by that padding `pad`
//! while its `p_paddr` stays. A section keeps its address only if it directly follows the
//! table (BFD then reports its lma "adjusted" by `pad`, harmlessly): so the marker follows
//! the table with no gap, and no `SHT_NOBITS` section may precede it in the segment (BFD
//! would give it file space first). A section after the marker is placed by its lma
//! against the segment's `p_paddr`, `pad` short in memory, unless it too directly follows
//! (lma "adjusted" again): hence `.hip_fatbin` starting at the marker's end. Executables'
//! new segment and table then keep their addresses minus `pad` (< `P`): the old-kernel
//! rule still holds when the previous segment's last section ends within the page below
//! `A`, and `d_seg = d_first`: BFD gives the table's segment the previous one's
//! `p_vaddr - p_offset`, so with lld's layout (`d_seg > d_first`) a stripped executable's table no
//! longer keeps the rule whatever the rewrite does (the marker still keeps its address;
//! the verifier reports the rule, and restore refuses such a file). A payload aligned after
//! the table (`prune`) does not keep its address. `eu-strip`
//! (libelf) fills what no section covers between sections and so erases a moved table: strip
//! with it before transforming. `patchelf` edits transformed files correctly.
//!
//! # Moving the device code instead of removing it (`kpack prune`)
//! [`plan_edit`] with [`FatbinEdit::Move`] lays the file out the same way, with new
//! `.hip_fatbin` contents (the pruned bundles, streamed in by the caller) in the new segment
//! in place of the marker, at the section's alignment. `.hip_fatbin`'s header moves there
//! (`SHT_PROGBITS`, its new address, offset and size; no section is added), its old range
//! becomes piece 1's zero-filled tail, and every wrapper keeps its magic, version and
//! `reserved1` and points at its bundle in the new contents. A section in the new segment
//! is also what lets BFD re-lay it out after `strip`, as for the marker.
//!
//! # Refused
//! Machines other than x86-64, aarch64 and ppc64 (little-endian), relocatable objects (their device code is linked later), files without a
//! `.hip_fatbin` with content, separated debug files ([`RewriteError::DebugOnly`]), already
//! kpacked files ([`RewriteError::AlreadyKpacked`]),
//! wrappers whose pointer kind is not understood, any other relocation that reads or
//! writes `.hip_fatbin` (the code would see zero pages), and extended segment numbering
//! (`e_phnum == PN_XNUM`).

use std::io::{self, Write};
use std::ops::Range;

use object::LittleEndian as LE;
use object::elf::{
    ET_DYN, ET_EXEC, ET_REL, FileHeader64, PF_R, PF_X, PN_XNUM, PT_LOAD, PT_NULL, PT_PHDR,
    ProgramHeader64, Rel64, Rela64, SHF_ALLOC, SHF_EXECINSTR, SHN_LORESERVE, SHN_XINDEX,
    SHT_DYNSYM, SHT_NOBITS, SHT_NULL, SHT_PROGBITS, SHT_REL, SHT_RELA, SHT_RELR, SHT_SYMTAB,
    SectionHeader64,
};
use object::endian::{U32, U64};
use object::pod::bytes_of;

use crate::ElfError;
use crate::elf::{
    ElfFile, PHDR_SIZE, ProgramHeader, REL_SIZE, RELA_SIZE, RelocationEntries, SHDR_SIZE,
    SectionHeader,
};
use crate::fatbin::{
    FatBinary, FatbinSection, MARKER_SECTION, PointerSource, Wrapper, inspect_elf,
};
use crate::machine::{self, Machine, RelocKind, reloc_kind};
use crate::verify::verify;
use kpack_hostbin::bytes::record;
use kpack_hostbin::splice::{Overlap, Patches, Piece, Splice};
use kpack_hostbin::{
    FatBinaryKind, HIPF_MAGIC, HIPK_MAGIC, VerifyIssue, WRAPPER_POINTER_OFFSET, WrapperMagic,
};

/// The most zero padding a rewrite may add to an executable to place its program header
/// table above every segment, when `.hip_fatbin`'s freed pages cannot hold it (see the
/// module doc); beyond it the input is refused rather than bloated.
pub const MAX_PADDING: u64 = 64 << 20;

/// Why a file cannot be rewritten. The input is never modified.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RewriteError {
    /// The input does not parse as ELF (or its fat-binary parts do not).
    #[error(transparent)]
    Elf(#[from] ElfError),
    /// A machine the rewrite does not support (B3).
    #[error("e_machine is {0}: only {supported} binaries can be rewritten", supported = machine::supported_machines())]
    UnsupportedMachine(u16),
    /// A relocatable object (`ET_REL`).
    #[error(
        "relocatable object (ET_REL): its device code is linked into the final binary later; transform that instead"
    )]
    Relocatable,
    /// Neither an executable nor a shared object.
    #[error("e_type {0} is neither ET_EXEC nor ET_DYN")]
    NotLinked(u16),
    /// Already transformed by kpack.
    #[error("already kpacked: the file has HIPK wrappers or a .rocm_kpack_ref section")]
    AlreadyKpacked,
    /// A restore of a file that is not kpacked.
    #[error("not kpacked: the file has no HIPK wrappers or .rocm_kpack_ref section to restore")]
    NotKpacked,
    /// No `.hip_fatbin` with contents.
    #[error("no device code: the file has no .hip_fatbin section with contents")]
    NotFat,
    /// A separated debug file ([`FatBinaryKind::DebugOnly`]).
    #[error(
        "a separated debug file (objcopy --only-keep-debug): its .hip_fatbin and .hipFatBinSegment are SHT_NOBITS, it holds no device code"
    )]
    DebugOnly,
    /// A `.hip_fatbin` that no wrapper registers.
    #[error(".hip_fatbin [{section}] has no .hipFatBinSegment wrappers pointing at it")]
    NoWrappers {
        /// The index of `.hip_fatbin`.
        section: usize,
    },
    /// A wrapper that cannot be pointed at the marker.
    #[error("wrapper {index} at offset {offset:#x}: {problem}")]
    Wrapper {
        /// The wrapper's slot in `.hipFatBinSegment`.
        index: usize,
        /// The wrapper's file offset.
        offset: u64,
        /// What is wrong with it.
        problem: String,
    },
    /// A layout the rewrite cannot produce safely.
    #[error("layout not supported: {0}")]
    Layout(String),
    /// The input fails [`verify`], so a layout planned from it could be wrong.
    #[error("the input is malformed, so rewriting it is not safe: {}", issues.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    MalformedInput {
        /// Every problem [`verify`] found.
        issues: Vec<VerifyIssue>,
    },
    /// A relocation other than a wrapper pointer reads or writes `.hip_fatbin`.
    #[error(
        "relocation section [{section}] entry {entry}: {problem}; removing .hip_fatbin would break it"
    )]
    FatbinReferenced {
        /// The relocation section's index.
        section: usize,
        /// The entry (the word, for `SHT_RELR`).
        entry: usize,
        /// What the relocation does to `.hip_fatbin`.
        problem: String,
    },
}

/// What a rewrite does, in numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteSummary {
    /// Length of the input file.
    pub input_len: u64,
    /// Length of the output file.
    pub output_len: u64,
    /// File bytes of `.hip_fatbin` removed (whole pages).
    pub removed: u64,
    /// Address of `.rocm_kpack_ref`, where every wrapper now points; for
    /// [`FatbinEdit::Move`] and [`FatbinEdit::Replace`], of the new `.hip_fatbin` contents.
    pub marker_vaddr: u64,
    /// File offset of `.rocm_kpack_ref` (or the new `.hip_fatbin` contents) in the output.
    pub marker_offset: u64,
    /// Whether the program header table was moved into the new segment.
    pub phdr_moved: bool,
    /// Wrappers repointed at the marker.
    pub wrappers: usize,
}

/// What a rewrite does with `.hip_fatbin` and the wrappers pointing into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FatbinEdit<'a> {
    /// `transform`: the device code leaves the file; every wrapper becomes HIPK and points
    /// at a new `.rocm_kpack_ref` section holding these (encoded marker) bytes.
    Kpack {
        /// The encoded `.rocm_kpack_ref` contents.
        marker: &'a [u8],
    },
    /// `prune`: `.hip_fatbin` gets new contents of `contents_len` bytes (streamed to
    /// [`Rewrite::write_with_contents`]) in the new segment; every wrapper keeps its
    /// magic, version and `reserved1` and points at `bundle_offsets[i]` (wrapper `i`)
    /// within the new contents.
    Move {
        /// Length of the new contents.
        contents_len: u64,
        /// Where each wrapper points within the new contents, in slot order.
        bundle_offsets: Vec<u64>,
    },
    /// `prune` of a small section, where moving would free no more than it costs: the new
    /// contents (at most the section's size) replace `.hip_fatbin`'s first bytes in place
    /// (the rest zeroed, `sh_size` set to `contents_len`), wrappers as for `Move`; nothing
    /// else in the file moves.
    Replace {
        /// Length of the new contents.
        contents_len: u64,
        /// Where each wrapper points within the new contents, in slot order.
        bundle_offsets: Vec<u64>,
    },
}

impl FatbinEdit<'_> {
    /// Length of what the new segment holds after the program header table.
    fn payload_len(&self) -> u64 {
        match self {
            FatbinEdit::Kpack { marker } => marker.len() as u64,
            FatbinEdit::Move { contents_len, .. } | FatbinEdit::Replace { contents_len, .. } => {
                *contents_len
            }
        }
    }
}

/// A computed rewrite: apply it with [`Rewrite::write_to`] to the same input bytes.
#[derive(Debug, Clone)]
pub struct Rewrite {
    splice: Splice,
    /// What the rewrite does, in numbers.
    pub summary: RewriteSummary,
}

impl Rewrite {
    /// Streams the output; `input` must be the bytes given to [`plan`]. A rewrite with new
    /// `.hip_fatbin` contents needs [`Rewrite::write_with_contents`].
    pub fn write_to<W: Write>(&self, input: &[u8], w: W) -> io::Result<()> {
        self.splice.write_to(input, w)
    }

    /// Streams the output of a [`FatbinEdit::Move`] or [`FatbinEdit::Replace`] rewrite,
    /// reading the new `.hip_fatbin` contents (`contents_len` bytes) from `contents`.
    pub fn write_with_contents<W: Write>(
        &self,
        input: &[u8],
        contents: &mut dyn kpack_hostbin::splice::Contents,
        w: W,
    ) -> io::Result<()> {
        self.splice.write_with_contents(input, contents, w)
    }

    /// The output in memory (for small files, tests and fuzzing).
    pub fn to_vec(&self, input: &[u8]) -> Vec<u8> {
        self.splice.to_vec(input)
    }

    /// The output of a [`FatbinEdit::Move`] rewrite in memory, with its new contents.
    pub fn to_vec_with_contents(&self, input: &[u8], contents: &[u8]) -> Vec<u8> {
        self.splice.to_vec_with_contents(input, contents)
    }
}

pub(crate) fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

pub(crate) fn layout(msg: impl Into<String>) -> RewriteError {
    RewriteError::Layout(msg.into())
}

/// Where the removed range is and how offsets move.
#[derive(Clone, Copy)]
pub(crate) struct Cut {
    /// Input offset of the first removed byte.
    at: u64,
    /// Bytes removed (multiple of the page, possibly 0).
    len: u64,
}

impl Cut {
    /// Nothing removed (a restore): the program header table grows in place only where it
    /// has room in its segment (a kpacked executable's, see [`freed_pages_hole`]).
    pub(crate) const NONE: Cut = Cut { at: 0, len: 0 };

    fn is_none(&self) -> bool {
        self.at == 0 && self.len == 0
    }

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

impl From<Overlap> for RewriteError {
    fn from(e: Overlap) -> Self {
        layout(e.to_string())
    }
}

fn phdr_bytes(p: &ProgramHeader) -> [u8; PHDR_SIZE as usize] {
    let record = ProgramHeader64::<LE> {
        p_type: U32::new(LE, p.p_type),
        p_flags: U32::new(LE, p.p_flags),
        p_offset: U64::new(LE, p.p_offset),
        p_vaddr: U64::new(LE, p.p_vaddr),
        p_paddr: U64::new(LE, p.p_paddr),
        p_filesz: U64::new(LE, p.p_filesz),
        p_memsz: U64::new(LE, p.p_memsz),
        p_align: U64::new(LE, p.p_align),
    };
    let mut out = [0; PHDR_SIZE as usize];
    out.copy_from_slice(bytes_of(&record));
    out
}

pub(crate) fn shdr_bytes(s: &SectionHeader) -> [u8; SHDR_SIZE as usize] {
    let record = SectionHeader64::<LE> {
        sh_name: U32::new(LE, s.sh_name),
        sh_type: U32::new(LE, s.sh_type),
        sh_flags: U64::new(LE, s.sh_flags),
        sh_addr: U64::new(LE, s.sh_addr),
        sh_offset: U64::new(LE, s.sh_offset),
        sh_size: U64::new(LE, s.sh_size),
        sh_link: U32::new(LE, s.sh_link),
        sh_info: U32::new(LE, s.sh_info),
        sh_addralign: U64::new(LE, s.sh_addralign),
        sh_entsize: U64::new(LE, s.sh_entsize),
    };
    let mut out = [0; SHDR_SIZE as usize];
    out.copy_from_slice(bytes_of(&record));
    out
}

/// Plans the rewrite of `data` with `marker` (the encoded `.rocm_kpack_ref` contents):
/// [`plan_edit`] with [`FatbinEdit::Kpack`].
pub fn plan(data: &[u8], marker: &[u8]) -> Result<Rewrite, RewriteError> {
    plan_edit(data, &FatbinEdit::Kpack { marker })
}

/// Plans the rewrite of `data` that `edit` describes.
///
/// The phases follow the module doc's layout, in order: refuse what cannot be rewritten,
/// find the pages of `.hip_fatbin` to cut, split its `PT_LOAD`, drop the tables that end
/// the file, place the new segment (marker or new contents and, if it must move, the
/// program header table), point the wrappers at the marker or their bundles, re-emit the
/// section headers and the ELF header, and assemble the output from kept input and new
/// bytes.
pub fn plan_edit(data: &[u8], edit: &FatbinEdit<'_>) -> Result<Rewrite, RewriteError> {
    let elf = ElfFile::parse(data)?;
    let (fat, fatbin_section, machine) = check_rewritable(&elf)?;
    let page = machine::page_size(machine.e_machine, elf.program_headers());
    let fatbin = locate_fatbin(&elf, &fatbin_section, page)?;
    if let FatbinEdit::Move {
        contents_len,
        bundle_offsets,
    }
    | FatbinEdit::Replace {
        contents_len,
        bundle_offsets,
    } = edit
    {
        check_move(&fat, *contents_len, bundle_offsets)?;
    }
    let pages = cut_whole_pages(&elf, &fatbin)?;
    check_relocations(&elf, &fat, fatbin.vaddr, fatbin.end, fatbin.section)?;
    if let FatbinEdit::Replace {
        contents_len,
        bundle_offsets,
    } = edit
    {
        return plan_replace(&elf, &fat, machine, &fatbin, *contents_len, bundle_offsets);
    }

    let mut patches = Patches::default();
    zero_kept_fatbin_bytes(&fatbin, pages, &mut patches)?;
    // The new contents keep `.hip_fatbin`'s alignment (bundles start 4096-aligned).
    let payload_align = match edit {
        FatbinEdit::Kpack { .. } => 1,
        FatbinEdit::Move { .. } | FatbinEdit::Replace { .. } => elf.section_headers()
            [fatbin.section]
            .sh_addralign
            .clamp(1, page),
    };
    let payload = (edit.payload_len(), payload_align);
    // Only a marker goes in the hole: a payload aligned after the table would not keep
    // its address through strip (see Stripping).
    let hole = match edit {
        FatbinEdit::Kpack { .. } => freed_pages_hole(&elf, &fatbin, pages, payload)?,
        _ => None,
    };
    let cut = match &hole {
        Some(h) => Cut {
            at: h.at + h.len,
            len: pages.at + pages.len - (h.at + h.len),
        },
        None => pages,
    };
    let phdrs = split_fatbin_segment(&elf, &fatbin, cut, hole.as_ref())?;
    let kept = drop_trailing_tables(&elf, cut, &mut patches)?;
    let segment =
        place_marker_segment(&elf, phdrs, cut, &kept, payload, (page, hole), &mut patches)?;
    let to = segment.marker_vaddr();
    match edit {
        FatbinEdit::Kpack { .. } => point_wrappers(
            &elf,
            &fat,
            machine,
            WrapperMagic::Hipf,
            |w| (HIPK_MAGIC, 1, to, w.index as u64),
            &mut patches,
        )?,
        FatbinEdit::Move { bundle_offsets, .. } | FatbinEdit::Replace { bundle_offsets, .. } => {
            point_wrappers_at_bundles(&elf, &fat, machine, to, bundle_offsets, &mut patches)?
        }
    }
    let sections = rewrite_section_headers(&elf, &fatbin, cut, &kept, &segment, edit)?;
    let payload = match edit {
        FatbinEdit::Kpack { marker } => Piece::Bytes(marker.to_vec()),
        FatbinEdit::Move { contents_len, .. } | FatbinEdit::Replace { contents_len, .. } => {
            Piece::Contents(*contents_len)
        }
    };
    let wrappers = fat.wrappers.len();
    finish(
        &elf, cut, &kept, &segment, sections, patches, payload, wrappers,
    )
}

/// The last steps of a rewrite (and of a restore, [`crate::restore`]): the ELF header, the
/// output as pieces around the new segment's `payload`, the check that every edit lies in
/// kept input, and the summary.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish(
    elf: &ElfFile<'_>,
    cut: Cut,
    kept: &KeptInput,
    segment: &MarkerSegment,
    mut sections: SectionTable,
    mut patches: Patches,
    payload: Piece,
    wrappers: usize,
) -> Result<Rewrite, RewriteError> {
    let data = elf.data();
    let numbering = SectionNumbering {
        shoff: sections.table_offset,
        ..number_sections(elf, kept, &mut sections.headers)?
    };
    let sections = &sections;
    patch_elf_header(data, segment, numbering, &mut patches)?;
    let pieces = assemble(elf, cut, kept, segment, sections, payload)?;
    // The input the output leaves out: the cut, and the freed pages the segment fills.
    let dropped = match &segment.hole {
        Some(h) => Cut {
            at: h.at - h.gap,
            len: h.gap + h.len + cut.len,
        },
        None => cut,
    };
    check_patches_in_kept_input(&patches, dropped, kept.end)?;
    Ok(Rewrite {
        splice: Splice { pieces, patches },
        summary: RewriteSummary {
            input_len: data.len() as u64,
            output_len: sections.table_offset + sections.headers.len() as u64 * SHDR_SIZE,
            removed: cut.len,
            marker_vaddr: segment.marker_vaddr(),
            marker_offset: segment.marker_offset(),
            phdr_moved: segment.moved_table.is_some(),
            wrappers,
        },
    })
}

/// [`FatbinEdit::Replace`]: the new contents at `.hip_fatbin`'s offset, the rest of the
/// section zeroed, its `sh_size` and the wrappers patched; the layout does not change.
fn plan_replace(
    elf: &ElfFile<'_>,
    fat: &FatBinary,
    machine: &Machine,
    fatbin: &Fatbin<'_>,
    contents_len: u64,
    bundle_offsets: &[u64],
) -> Result<Rewrite, RewriteError> {
    if contents_len > fatbin.size {
        return Err(layout(format!(
            "the new .hip_fatbin contents ({contents_len} bytes) do not fit the section ({} bytes)",
            fatbin.size
        )));
    }
    let mut patches = Patches::default();
    let to = fatbin.vaddr;
    point_wrappers_at_bundles(elf, fat, machine, to, bundle_offsets, &mut patches)?;
    let start = fatbin.offset;
    let (contents_end, end) = (start + contents_len, start + fatbin.size);
    if contents_end < end {
        patches.zero(contents_end..end)?;
    }
    let mut header = elf.section_headers()[fatbin.section].clone();
    header.sh_size = contents_len;
    let at = elf.header().e_shoff + fatbin.section as u64 * SHDR_SIZE;
    patches.add(at, shdr_bytes(&header).to_vec())?;
    let data_len = elf.data().len() as u64;
    let pieces = vec![
        Piece::Input {
            start: 0,
            end: start,
        },
        Piece::Contents(contents_len),
        Piece::Input {
            start: contents_end,
            end: data_len,
        },
    ];
    let replaced = Cut {
        at: start,
        len: contents_len,
    };
    check_patches_in_kept_input(&patches, replaced, data_len)?;
    Ok(Rewrite {
        splice: Splice { pieces, patches },
        summary: RewriteSummary {
            input_len: data_len,
            output_len: data_len,
            removed: 0,
            marker_vaddr: to,
            marker_offset: start,
            phdr_moved: false,
            wrappers: fat.wrappers.len(),
        },
    })
}

/// Refuses wrapper offsets that are not one per wrapper or fall outside the new contents.
fn check_move(
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
fn check_rewritable(
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
struct Fatbin<'e> {
    /// Section index.
    section: usize,
    /// `V`: its address.
    vaddr: u64,
    /// `V + N`: the address just past it.
    end: u64,
    /// `O`: its file offset.
    offset: u64,
    /// `N`: its size.
    size: u64,
    /// The `PT_LOAD` holding it, file-backed and at a consistent offset.
    segment: &'e ProgramHeader,
    /// `P`: the page the layout respects.
    page: u64,
}

/// Finds the `PT_LOAD` holding `.hip_fatbin`, refusing sections that are not mapped from
/// the file by exactly that segment.
fn locate_fatbin<'e>(
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
fn cut_whole_pages(elf: &ElfFile<'_>, fatbin: &Fatbin<'_>) -> Result<Cut, RewriteError> {
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

/// The first whole pages of `.hip_fatbin`, kept in the file to hold an executable's new
/// segment (see "Executables" in the module doc).
pub(crate) struct Hole {
    /// Input (and output) offset of the new segment: `AO` plus `gap`.
    at: u64,
    /// Its address: `A`, or above when `.hip_fatbin`'s segment's `p_vaddr - p_offset` is
    /// below the first `PT_LOAD`'s.
    vaddr: u64,
    /// Zero bytes kept in the file before the segment, from `AO`: as many as
    /// `.hip_fatbin`'s segment's `p_vaddr - p_offset` exceeds the first `PT_LOAD`'s.
    gap: u64,
    /// Bytes of the segment: whole pages; with `gap` and the address shift, fewer than the
    /// whole pages of `.hip_fatbin`.
    len: u64,
    /// The end of `.hip_fatbin`, where the new segment's memory ends.
    end: u64,
    /// The flags of `.hip_fatbin`'s segment, which the new segment takes.
    flags: u32,
}

/// The hole for an executable's new segment (table with a spare `PT_NULL` entry, payload)
/// in the whole pages of `.hip_fatbin`, if they hold it, the shift between the first
/// `PT_LOAD`'s `p_vaddr - p_offset` and that of `.hip_fatbin`'s segment, and pages to
/// spare: there the segment keeps the first one's, so the old-kernel `AT_PHDR` rule holds
/// with no padding. Shared libraries, and executables where it does not fit, keep
/// the segment above every other. The segment's memory after `.hip_fatbin` must be file
/// content (piece 2), not a `.bss` tail.
fn freed_pages_hole(
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
fn zero_kept_fatbin_bytes(
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
fn split_fatbin_segment(
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

/// The new read-only `PT_LOAD` after the kept input (or, in an executable, in the `hole`
/// of `.hip_fatbin`'s first pages): the moved program header table (if it cannot grow in
/// place), then the marker or the new `.hip_fatbin` contents.
pub(crate) struct MarkerSegment {
    /// File offset of the segment in the output.
    pub(crate) offset: u64,
    /// Address of the segment.
    vaddr: u64,
    /// Offset of the marker (or new contents) inside the segment (after a moved table).
    marker_in_segment: u64,
    /// Length of the table and payload (the hole's pages after them are zeros).
    pub(crate) len: u64,
    /// The pages of `.hip_fatbin` the segment fills, if it is not after the kept input.
    hole: Option<Hole>,
    /// Output offset where the kept input and the segment end.
    pub(crate) end: u64,
    /// The program header table, when it moved into this segment.
    moved_table: Option<Vec<u8>>,
    /// `e_phoff` of the output.
    phoff: u64,
    /// `e_phnum` of the output.
    phnum: u64,
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

/// Each wrapper keeps its magic (HIPF), version and `reserved1` and points at
/// `contents + bundle_offsets[i]`.
fn point_wrappers_at_bundles(
    elf: &ElfFile<'_>,
    fat: &FatBinary,
    machine: &Machine,
    contents: u64,
    bundle_offsets: &[u64],
    patches: &mut Patches,
) -> Result<(), RewriteError> {
    let record = |w: &Wrapper| {
        let pointer = contents + bundle_offsets[w.index];
        (HIPF_MAGIC, w.version, pointer, w.reserved1)
    };
    point_wrappers(elf, fat, machine, WrapperMagic::Hipf, record, patches)
}

/// Each (HIPF) wrapper gets the `(magic, version, pointer, reserved1)` that `new_record`
/// gives it (for transform: HIPK, 1, the marker, its index, B4), the pointer set in the file
/// and in the relocation that fills it at load time (B2).
pub(crate) fn point_wrappers(
    elf: &ElfFile<'_>,
    fat: &FatBinary,
    machine: &Machine,
    expected: WrapperMagic,
    new_record: impl Fn(&Wrapper) -> (u32, u32, u64, u64),
    patches: &mut Patches,
) -> Result<(), RewriteError> {
    let h = elf.header();
    let shdrs = elf.section_headers();
    for w in &fat.wrappers {
        let problem = |m: &str| RewriteError::Wrapper {
            index: w.index,
            offset: w.offset,
            problem: m.to_owned(),
        };
        if w.magic != expected {
            let name = if expected == WrapperMagic::Hipk {
                "HIPK"
            } else {
                "HIPF"
            };
            return Err(problem(&format!("magic is not {name}")));
        }
        let (magic, version, pointer, reserved1) = new_record(w);
        let mut rec = Vec::with_capacity(24);
        rec.extend_from_slice(&magic.to_le_bytes());
        rec.extend_from_slice(&version.to_le_bytes());
        rec.extend_from_slice(&pointer.to_le_bytes());
        rec.extend_from_slice(&reserved1.to_le_bytes());
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
                let at = shdrs[*section_index].sh_offset + *entry_index as u64 * RELA_SIZE;
                let mut rela: Rela64<LE> =
                    *record(elf.data(), at, "wrapper relocation").map_err(ElfError::from)?;
                rela.r_info = Rela64::r_info(LE, false, 0, machine.relative);
                rela.r_addend.set(LE, pointer as i64);
                patches.add(at, bytes_of(&rela).to_vec())?;
            }
            PointerSource::Rel {
                section_index,
                entry_index,
                r_type,
                ..
            } => {
                check_pointer_kind(h.e_machine, *r_type).map_err(|m| problem(&m))?;
                let at = shdrs[*section_index].sh_offset + *entry_index as u64 * REL_SIZE;
                let mut rel: Rel64<LE> =
                    *record(elf.data(), at, "wrapper relocation").map_err(ElfError::from)?;
                rel.r_info = Rel64::r_info(LE, 0, machine.relative);
                patches.add(at, bytes_of(&rel).to_vec())?;
            }
            PointerSource::Relr { .. } => {}
        }
    }
    Ok(())
}

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
fn rewrite_section_headers(
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
    let mut headers: Vec<SectionHeader> = elf.section_headers().to_vec();
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
struct SectionNumbering {
    shoff: u64,
    shnum: u16,
    shstrndx: u16,
}

/// Numbers the output's sections (ELF gABI extended section numbering): a count of
/// `SHN_LORESERVE` (0xff00) or more is stored in section 0's `sh_size` with `e_shnum` 0,
/// a name table index of `SHN_LORESERVE` or more in section 0's `sh_link` with
/// `e_shstrndx` `SHN_XINDEX`. Section 0's fields are cleared only when the input used
/// them and the output no longer needs them (a restore back below the limit), so other
/// files keep their bytes.
fn number_sections(
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
fn patch_elf_header(
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

/// The output as pieces: the kept input around the cut, zero padding up to the new
/// segment, the segment (its payload streamed for new `.hip_fatbin` contents), the
/// re-emitted `.shstrtab` and the section header table.
fn assemble(
    elf: &ElfFile<'_>,
    cut: Cut,
    kept: &KeptInput,
    segment: &MarkerSegment,
    sections: &SectionTable,
    payload: Piece,
) -> Result<Vec<Piece>, RewriteError> {
    let mut segment_bytes = Vec::with_capacity(segment.len as usize);
    if let Some(table) = &segment.moved_table {
        segment_bytes.extend_from_slice(table);
    }
    segment_bytes.resize(segment.marker_in_segment as usize, 0);
    let segment_pieces = [Piece::Bytes(segment_bytes), payload];
    let mut pieces = Vec::new();
    match &segment.hole {
        Some(hole) => {
            pieces.push(Piece::Input {
                start: 0,
                end: hole.at - hole.gap,
            });
            if hole.gap > 0 {
                pieces.push(Piece::Zeros(hole.gap));
            }
            pieces.extend(segment_pieces);
            pieces.push(Piece::Zeros(hole.len - segment.len));
            pieces.push(Piece::Input {
                start: cut.at + cut.len,
                end: kept.end,
            });
        }
        None => {
            if cut.len > 0 {
                pieces.push(Piece::Input {
                    start: 0,
                    end: cut.at,
                });
                pieces.push(Piece::Input {
                    start: cut.at + cut.len,
                    end: kept.end,
                });
            } else {
                pieces.push(Piece::Input {
                    start: 0,
                    end: kept.end,
                });
            }
            pieces.push(Piece::Zeros(segment.offset - kept.len));
            pieces.extend(segment_pieces);
        }
    }
    let mut names = elf.section_data(&kept.shstr)?.to_vec();
    if sections.marker_added {
        names.extend_from_slice(MARKER_SECTION.as_bytes());
        names.push(0);
    }
    let names_end = sections.names_offset + names.len() as u64;
    pieces.push(Piece::Bytes(names));
    pieces.push(Piece::Zeros(sections.table_offset - names_end));
    pieces.push(Piece::Bytes(
        sections.headers.iter().flat_map(shdr_bytes).collect(),
    ));
    Ok(pieces)
}

/// Every edit must lie inside kept input.
fn check_patches_in_kept_input(
    patches: &Patches,
    cut: Cut,
    kept_end: u64,
) -> Result<(), RewriteError> {
    for (at, b) in patches.iter() {
        let e = at + b.len() as u64;
        if e > kept_end || cut.overlaps(at, b.len() as u64) {
            return Err(layout(format!(
                "an edit at file offset {at:#x} falls in removed bytes"
            )));
        }
    }
    Ok(())
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

/// True if nothing but section `except` has file bytes in `range` (the section header table
/// itself is not a section).
fn nothing_else_in(elf: &ElfFile<'_>, range: Range<u64>, except: Option<usize>) -> bool {
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

fn check_pointer_kind(machine: u16, r_type: u32) -> Result<(), String> {
    match reloc_kind(machine, r_type) {
        RelocKind::Relative | RelocKind::Absolute64 => Ok(()),
        RelocKind::Other => Err(format!(
            "its pointer is filled by relocation type {r_type}, expected the machine's RELATIVE or absolute 64-bit type"
        )),
    }
}

/// Refuses any loader relocation, other than the wrapper pointers, that writes into or
/// points into `[v, v_end)`.
fn check_relocations(
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
