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
//!
//! # Modules
//! [`plan_edit`] runs the phases in order; each has its module: `refuse` (what is refused,
//! and where `.hip_fatbin` and its whole pages are), `split` (the cut and the split
//! `PT_LOAD`), `marker_segment` (the new segment and the program header table), `wrappers`,
//! `sections` (section headers and their numbering), `assemble` (the output as pieces).
//! [`crate::restore`] shares the placement and the assembly.

pub(crate) mod assemble;
pub(crate) mod marker_segment;
pub(crate) mod refuse;
pub(crate) mod sections;
pub(crate) mod split;
pub(crate) mod wrappers;

use std::io::{self, Write};

use object::LittleEndian as LE;
use object::elf::{ProgramHeader64, SectionHeader64};
use object::endian::{U32, U64};
use object::pod::bytes_of;

use crate::elf::{ElfFile, PHDR_SIZE, ProgramHeader, SHDR_SIZE, SectionHeader};
use crate::fatbin::FatBinary;
use crate::machine::Machine;
use crate::{ElfError, machine};
use assemble::{check_patches_in_kept_input, finish};
use kpack_hostbin::splice::{Overlap, Patches, Piece, Splice};
use kpack_hostbin::{HIPK_MAGIC, VerifyIssue, WrapperMagic};
use marker_segment::place_marker_segment;
use refuse::{
    Fatbin, check_move, check_relocations, check_rewritable, cut_whole_pages, locate_fatbin,
};
use sections::rewrite_section_headers;
use split::{drop_trailing_tables, freed_pages_hole, split_fatbin_segment, zero_kept_fatbin_bytes};
use wrappers::{point_wrappers, point_wrappers_at_bundles};

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
