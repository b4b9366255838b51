//! The PE host rewrite: a fat image becomes a kpacked one.
//!
//! The layout follows the reference's PE variant (spec §2.4) where it is an ABI and improves
//! on it where it is not:
//! * the marker goes in a new section `.kpackrf` (`MEM_READ | CNT_INITIALIZED_DATA`,
//!   `VirtualSize` = marker length, raw size rounded to `FileAlignment`), placed after the
//!   last section in memory (`SectionAlignment`) and after the last section's bytes in the
//!   file; its header takes the slack after the section table, below `SizeOfHeaders`;
//!   `NumberOfSections` and `SizeOfImage` grow accordingly;
//! * each wrapper becomes `HIPK`, version 1, pointer = `ImageBase + RVA(.kpackrf)`,
//!   `reserved1` = its slot; the `IMAGE_REL_BASED_DIR64` fix-ups of the pointers stay valid;
//! * the device code goes: the fat-binary section keeps its RVA and `VirtualSize` (written
//!   out as `SizeOfRawData` when it was 0, which loaders read as "as long as its bytes"; nothing
//!   in memory moves, so no RVA, relocation or directory changes) but loses **all** its file
//!   bytes (`SizeOfRawData` = `PointerToRawData` = 0, `CNT_UNINITIALIZED_DATA`: the loader
//!   maps zeros, like `.bss`), where the reference only cuts whole 4 KiB RVA pages out and
//!   leaves the remainder mapped at a wrong RVA. The bytes removed are `SizeOfRawData`, a
//!   multiple of `FileAlignment`, so every later file offset stays aligned: sections'
//!   `PointerToRawData`, the debug directory's `PointerToRawData`, `PointerToSymbolTable`
//!   (mingw keeps its COFF symbols and string table after the sections) move with their
//!   bytes;
//! * `CheckSum` is recomputed when the input had one (0 means "none", and stays 0);
//! * an Authenticode-signed image (a certificate table) is refused: any edit invalidates the
//!   signature, and re-signing is the publisher's job;
//! * a base relocation inside the device code, or a pointer into it other than a wrapper's,
//!   is refused: it would read zeros after the rewrite.
//!
//! The output is planned entirely before anything is written ([`plan`]) and streamed from the
//! input ([`PeRewrite::write_to`]); [`crate::verify()`] checks it.

use std::io::{self, Write};

use kpack_hostbin::splice::{Overlap, Patches, Piece, Splice};
use kpack_hostbin::{FatBinaryKind, HIPK_MAGIC, WRAPPER_POINTER_OFFSET, WRAPPER_SIZE};

use crate::fatbin::{FATBIN_SECTIONS, MARKER_SECTION, WRAPPER_SECTIONS, find, inspect_pe};
use crate::pe::{
    Checksum, DIRECTORY_SECURITY, IMAGE_REL_BASED_DIR64, PeFile, SECTION_HEADER_SIZE, Section,
    align_up, field, u32_at, u64_at,
};
use crate::{PeError, PeFatBinary};

/// `IMAGE_SCN_CNT_INITIALIZED_DATA`.
const CNT_INITIALIZED_DATA: u32 = 0x40;
/// `IMAGE_SCN_CNT_UNINITIALIZED_DATA`.
const CNT_UNINITIALIZED_DATA: u32 = 0x80;
/// `IMAGE_SCN_MEM_READ`.
const MEM_READ: u32 = 0x4000_0000;

/// Why an image cannot be rewritten. Nothing is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeRewriteError {
    /// The image does not parse.
    #[error(transparent)]
    Pe(#[from] PeError),
    /// Already transformed by kpack.
    #[error("already kpacked: the image has HIPK wrappers, a .kpackrf section or no device bytes")]
    AlreadyKpacked,
    /// No fat-binary section.
    #[error("no device code: the image has no .hip_fat / .hip_fatbin section")]
    NotFat,
    /// No wrappers.
    #[error(
        "section [{section}] {name} has no .hipFatB / .hipFatBinSegment wrappers pointing at it"
    )]
    NoWrappers {
        /// Index of the fat-binary section.
        section: usize,
        /// Its name.
        name: String,
    },
    /// An Authenticode-signed image.
    #[error(
        "the image is Authenticode-signed (certificate table at file offset {offset:#x}, {size:#x} bytes): removing its device code would invalidate the signature; transform the unsigned build and sign the result"
    )]
    Signed {
        /// The certificate table's file offset.
        offset: u64,
        /// Its size.
        size: u64,
    },
    /// A layout the rewrite cannot produce safely.
    #[error("layout not supported: {0}")]
    Layout(String),
    /// The input fails the verifier's layout checks, so a layout planned from it could be
    /// wrong.
    #[error("the input is malformed, so rewriting it is not safe: {}", issues.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    MalformedInput {
        /// Every problem found.
        issues: Vec<kpack_hostbin::VerifyIssue>,
    },
    /// Something other than a wrapper refers to the device code.
    #[error(
        "base relocation entry at offset {entry_offset:#x} (RVA {rva:#x}): {problem}; removing the device code would break it"
    )]
    FatbinReferenced {
        /// File offset of the relocation entry.
        entry_offset: u64,
        /// The RVA it patches.
        rva: u64,
        /// What it does to the device code.
        problem: String,
    },
}

impl From<Overlap> for PeRewriteError {
    fn from(e: Overlap) -> Self {
        PeRewriteError::Layout(e.to_string())
    }
}

/// What a rewrite does, in numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeRewriteSummary {
    /// Length of the input file.
    pub input_len: u64,
    /// Length of the output file.
    pub output_len: u64,
    /// File bytes of device code removed (the fat-binary section's `SizeOfRawData`).
    pub removed: u64,
    /// Address of `.kpackrf` at the preferred base (`ImageBase + RVA`), where every wrapper
    /// now points.
    pub marker_vaddr: u64,
    /// File offset of `.kpackrf` in the output.
    pub marker_offset: u64,
    /// Wrappers repointed at the marker.
    pub wrappers: usize,
    /// The new `CheckSum`, when the input had one.
    pub checksum: Option<u32>,
}

/// A computed rewrite: apply it with [`PeRewrite::write_to`] to the same input bytes.
#[derive(Debug, Clone)]
pub struct PeRewrite {
    splice: Splice,
    /// What the rewrite does, in numbers.
    pub summary: PeRewriteSummary,
}

impl PeRewrite {
    /// Streams the output; `input` must be the bytes given to [`plan`].
    pub fn write_to<W: Write>(&self, input: &[u8], w: W) -> io::Result<()> {
        self.splice.write_to(input, w)
    }

    /// The output in memory (for small files, tests and fuzzing).
    pub fn to_vec(&self, input: &[u8]) -> Vec<u8> {
        self.splice.to_vec(input)
    }
}

fn layout(msg: impl Into<String>) -> PeRewriteError {
    PeRewriteError::Layout(msg.into())
}

/// `v` as a 32-bit header field named `what`, or the refusal of a layout that outgrows it.
fn fits_u32(what: &str, v: u64) -> Result<u32, PeRewriteError> {
    u32::try_from(v).map_err(|_| layout(format!("{what} {v:#x} does not fit in 32 bits")))
}

fn le32(v: u32) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// Plans the rewrite of the image `data` with `marker` (the msgpack marker bytes) as the
/// `.kpackrf` content. Nothing is written; every refusal happens here.
///
/// The phases, in order (as the ELF rewrite's `plan_edit`): refuse what cannot be rewritten,
/// find the file bytes to cut, place `.kpackrf`, patch the headers and the debug directory,
/// point the wrappers at the marker, assemble the output from kept input and new bytes, and
/// set the checksum.
pub fn plan(data: &[u8], marker: &[u8]) -> Result<PeRewrite, PeRewriteError> {
    let pe = PeFile::parse(data)?;
    let (fat, fatbin) = check_rewritable(data, &pe)?;
    let cut = cut_device_code(&pe, fatbin)?;
    let placed = place_marker_section(data, &pe, cut, marker.len() as u64)?;
    let mut patches = Patches::default();
    let checksum_at = patch_headers(&pe, fatbin, &placed, &mut patches)?;
    patches.add(placed.header_at, placed.section_header(marker.len()))?;
    patch_debug_pointers(data, &pe, &placed, &mut patches)?;
    let pointer = pe.image_base.wrapping_add(placed.rva.into());
    point_wrappers(&fat, pointer, &mut patches)?;
    let mut splice = Splice {
        pieces: assemble(data.len() as u64, &placed, marker),
        patches,
    };
    let checksum = if pe.checksum != 0 {
        Some(set_checksum(data, &mut splice, checksum_at)?)
    } else {
        None
    };
    let output_len = splice.len();
    Ok(PeRewrite {
        splice,
        summary: PeRewriteSummary {
            input_len: data.len() as u64,
            output_len,
            removed: placed.cut.len(),
            marker_vaddr: pointer,
            marker_offset: placed.offset,
            wrappers: fat.wrappers.len(),
            checksum,
        },
    })
}

/// Refuses an image that is not fat, is already kpacked, is malformed or signed, has no
/// wrappers, or has references into the device code other than its wrappers' relocated
/// pointers; returns its fat-binary parts and the fat-binary section.
fn check_rewritable<'p>(
    data: &[u8],
    pe: &'p PeFile<'_>,
) -> Result<(PeFatBinary, &'p Section), PeRewriteError> {
    let fat = inspect_pe(pe)?;
    match fat.kind {
        FatBinaryKind::Kpacked => return Err(PeRewriteError::AlreadyKpacked),
        FatBinaryKind::Fat => {}
        _ => return Err(PeRewriteError::NotFat),
    }
    crate::verify::verify_layout(data)
        .map_err(|issues| PeRewriteError::MalformedInput { issues })?;
    if let Some(cert) = pe.directory(DIRECTORY_SECURITY) {
        return Err(PeRewriteError::Signed {
            offset: cert.rva.into(),
            size: cert.size.into(),
        });
    }
    let fatbin = find(pe, &FATBIN_SECTIONS).ok_or(PeRewriteError::NotFat)?;
    let wrapper_section = find(pe, &WRAPPER_SECTIONS).filter(|_| !fat.wrappers.is_empty());
    let Some(wrapper_section) = wrapper_section else {
        return Err(PeRewriteError::NoWrappers {
            section: fatbin.index,
            name: fatbin.name.clone(),
        });
    };
    check_relocations(pe, fatbin, wrapper_section)?;
    // A rebased image would leave such a pointer at the preferred base's address.
    if fat.relocatable
        && let Some(w) = fat.wrappers.iter().find(|w| !w.relocated)
    {
        return Err(layout(format!(
            "wrapper {} at {:#x}: the image has base relocations but none for its pointer",
            w.index, w.offset
        )));
    }
    Ok((fat, fatbin))
}

/// The file bytes removed: the fat-binary section's whole raw data.
#[derive(Debug, Clone, Copy)]
struct Cut {
    start: u64,
    end: u64,
}

impl Cut {
    fn len(self) -> u64 {
        self.end - self.start
    }

    /// An input offset's place once the cut bytes are gone.
    fn moved(self, x: u64) -> u64 {
        if x >= self.end { x - self.len() } else { x }
    }
}

/// The sections that have file bytes.
fn with_data<'p>(pe: &'p PeFile<'_>) -> impl Iterator<Item = &'p Section> {
    pe.sections.iter().filter(|s| s.raw_size != 0)
}

/// The fat-binary section's file bytes, checked to be aligned and to hold nothing else: no
/// other section's bytes, no headers, no part of the COFF symbol and string tables.
fn cut_device_code(pe: &PeFile<'_>, fatbin: &Section) -> Result<Cut, PeRewriteError> {
    let fa = u64::from(pe.file_alignment);
    let cut_start = u64::from(fatbin.raw_offset);
    let removed = u64::from(fatbin.raw_size);
    if !cut_start.is_multiple_of(fa) || !removed.is_multiple_of(fa) {
        return Err(layout(format!(
            "section [{}] {}: PointerToRawData {cut_start:#x} / SizeOfRawData {removed:#x} are not multiples of FileAlignment {fa:#x}",
            fatbin.index, fatbin.name
        )));
    }
    let cut_end = cut_start + removed;
    let headers_end = u64::from(pe.size_of_headers);
    if let Some(s) = with_data(pe).find(|s| u64::from(s.raw_offset) < headers_end) {
        return Err(layout(format!(
            "section [{}] {}: its bytes at {:#x} lie inside the headers (SizeOfHeaders {headers_end:#x})",
            s.index, s.name, s.raw_offset
        )));
    }
    if let Some(s) = with_data(pe).find(|s| {
        s.index != fatbin.index
            && u64::from(s.raw_offset) < cut_end
            && u64::from(s.raw_offset) + u64::from(s.raw_size) > cut_start
    }) {
        return Err(layout(format!(
            "section [{}] {} shares file bytes with the device code",
            s.index, s.name
        )));
    }
    // The COFF symbols and strings move as one block: sharing bytes with the headers or a
    // section, a part of them would move (or go with the device code) without the rest.
    if let Some(symbols) = pe.coff_symbols()? {
        let (start, end) = (symbols.start, symbols.end);
        let shared = with_data(pe)
            .find(|s| {
                u64::from(s.raw_offset) < end
                    && u64::from(s.raw_offset) + u64::from(s.raw_size) > start
            })
            .map(|s| format!("section [{}] {}", s.index, s.name));
        if let Some(other) = shared.or_else(|| (start < headers_end).then(|| "the headers".into()))
        {
            return Err(layout(format!(
                "the COFF symbol and string tables at {start:#x}..{end:#x} share file bytes with {other}"
            )));
        }
    }
    Ok(Cut {
        start: cut_start,
        end: cut_end,
    })
}

/// Where `.kpackrf` goes: after every section's bytes in the file, after every section in
/// memory, its header right after the section table.
#[derive(Debug)]
struct MarkerPlacement {
    cut: Cut,
    /// End of the last section's bytes in the input: what follows (the COFF symbols, say)
    /// comes after the marker in the output.
    sections_end: u64,
    /// `.kpackrf`'s file offset in the output.
    offset: u64,
    /// Its `SizeOfRawData`: the marker's length rounded up to `FileAlignment`.
    raw_len: u64,
    /// Its RVA.
    rva: u32,
    /// The output's `SizeOfImage`.
    size_of_image: u32,
    /// File offset of its section header, in the slack after the section table.
    header_at: u64,
}

impl MarkerPlacement {
    /// Zeros between the kept sections' bytes and the marker.
    fn padding(&self) -> u64 {
        self.offset - self.cut.moved(self.sections_end)
    }

    /// An input offset's place in the output.
    fn relocated(&self, x: u64) -> u64 {
        let inserted = if x >= self.sections_end {
            self.padding() + self.raw_len
        } else {
            0
        };
        self.cut.moved(x) + inserted
    }

    /// The `.kpackrf` section header for a marker of `marker_len` bytes.
    fn section_header(&self, marker_len: usize) -> Vec<u8> {
        let mut header = Vec::with_capacity(SECTION_HEADER_SIZE as usize);
        let mut name = [0u8; 8];
        name[..MARKER_SECTION.len()].copy_from_slice(MARKER_SECTION.as_bytes());
        header.extend_from_slice(&name);
        header.extend_from_slice(&(marker_len as u32).to_le_bytes());
        header.extend_from_slice(&self.rva.to_le_bytes());
        header.extend_from_slice(&(self.raw_len as u32).to_le_bytes());
        // `offset` was checked to fit in 32 bits when placed.
        header.extend_from_slice(&(self.offset as u32).to_le_bytes());
        header.extend_from_slice(&[0; 12]);
        header.extend_from_slice(&(MEM_READ | CNT_INITIALIZED_DATA).to_le_bytes());
        header
    }
}

/// Places `.kpackrf` for a marker of `marker_len` bytes, refusing a layout whose fields
/// would not fit or whose section table has no free slot after it.
fn place_marker_section(
    data: &[u8],
    pe: &PeFile<'_>,
    cut: Cut,
    marker_len: u64,
) -> Result<MarkerPlacement, PeRewriteError> {
    let fa = u64::from(pe.file_alignment);
    let sa = u64::from(pe.section_alignment);
    let headers_end = u64::from(pe.size_of_headers);
    let sections_end = with_data(pe)
        .map(|s| u64::from(s.raw_offset) + u64::from(s.raw_size))
        .max()
        .unwrap_or(headers_end);
    let offset = align_up(cut.moved(sections_end), fa);
    let memory_end = pe
        .sections
        .iter()
        .map(|s| u64::from(s.rva) + u64::from(s.memory_len()))
        .max()
        .unwrap_or(0);
    let rva = align_up(memory_end.max(headers_end), sa);
    let size_of_image = fits_u32("SizeOfImage", rva + align_up(marker_len, sa))?;
    let rva = fits_u32("the .kpackrf RVA", rva)?;
    fits_u32("the .kpackrf file offset", offset)?;

    // The new section header goes right after the table, in the slack below SizeOfHeaders.
    let table_end = pe.section_table_offset + pe.sections.len() as u64 * SECTION_HEADER_SIZE;
    if table_end + SECTION_HEADER_SIZE > headers_end {
        return Err(layout(format!(
            "no room for the .kpackrf section header: the section table ends at {table_end:#x}, SizeOfHeaders is {headers_end:#x}"
        )));
    }
    let header_slot =
        kpack_hostbin::bytes::slice(data, table_end, SECTION_HEADER_SIZE, "section table slack")
            .map_err(PeError::from)?;
    if header_slot.iter().any(|&b| b != 0) {
        return Err(layout(format!(
            "the {SECTION_HEADER_SIZE} bytes after the section table at {table_end:#x} are in use"
        )));
    }
    Ok(MarkerPlacement {
        cut,
        sections_end,
        offset,
        raw_len: align_up(marker_len, fa),
        rva,
        size_of_image,
        header_at: table_end,
    })
}

/// Patches the file and optional headers and the section table for the new layout:
/// `NumberOfSections`, `PointerToSymbolTable`, the data sizes, `SizeOfImage`, the
/// fat-binary section made uninitialized data, the later sections' `PointerToRawData`.
/// `CheckSum` is zeroed; returns its offset.
fn patch_headers(
    pe: &PeFile<'_>,
    fatbin: &Section,
    placed: &MarkerPlacement,
    patches: &mut Patches,
) -> Result<u64, PeRewriteError> {
    let fa = u64::from(pe.file_alignment);
    let file_header = pe.nt_offset + 4;
    let count = u16::try_from(pe.sections.len() + 1)
        .map_err(|_| layout("NumberOfSections would exceed 65535"))?;
    patches.add(
        file_header + field::NUMBER_OF_SECTIONS,
        count.to_le_bytes().to_vec(),
    )?;
    if pe.symbol_table != 0 {
        let at = fits_u32(
            "PointerToSymbolTable",
            placed.relocated(pe.symbol_table.into()),
        )?;
        patches.add(file_header + field::POINTER_TO_SYMBOL_TABLE, le32(at))?;
    }
    let opt = pe.optional_offset;
    let initialized = (u64::from(pe.initialized_size).saturating_sub(placed.cut.len())
        + placed.raw_len)
        .min(u32::MAX.into()) as u32;
    // A `VirtualSize` of 0 means the section is `SizeOfRawData` long in memory: once its file
    // bytes are gone that length must be written out, or the section would vanish from memory.
    let fat_virtual_size = match fatbin.virtual_size {
        0 => fatbin.raw_size,
        size => size,
    };
    let uninitialized = (u64::from(pe.uninitialized_size) + align_up(fat_virtual_size.into(), fa))
        .min(u32::MAX.into()) as u32;
    patches.add(opt + field::SIZE_OF_INITIALIZED_DATA, le32(initialized))?;
    patches.add(opt + field::SIZE_OF_UNINITIALIZED_DATA, le32(uninitialized))?;
    patches.add(opt + field::SIZE_OF_IMAGE, le32(placed.size_of_image))?;
    let checksum_at = opt + field::CHECKSUM;
    // Zero while the checksum is computed; set at the end when the input had one.
    patches.add(checksum_at, le32(0))?;
    for s in &pe.sections {
        let h = s.header_offset;
        if s.index == fatbin.index {
            patches.add(h + field::VIRTUAL_SIZE, le32(fat_virtual_size))?;
            patches.add(h + field::SIZE_OF_RAW_DATA, le32(0))?;
            patches.add(h + field::POINTER_TO_RAW_DATA, le32(0))?;
            let c = (s.characteristics & !CNT_INITIALIZED_DATA) | CNT_UNINITIALIZED_DATA;
            patches.add(h + field::CHARACTERISTICS, le32(c))?;
        } else if s.raw_size != 0 && u64::from(s.raw_offset) >= placed.cut.end {
            let at = fits_u32("PointerToRawData", placed.relocated(s.raw_offset.into()))?;
            patches.add(h + field::POINTER_TO_RAW_DATA, le32(at))?;
        }
    }
    Ok(checksum_at)
}

/// Moves the debug directory's `PointerToRawData` fields with their bytes; refuses one that
/// points into the device code.
fn patch_debug_pointers(
    data: &[u8],
    pe: &PeFile<'_>,
    placed: &MarkerPlacement,
    patches: &mut Patches,
) -> Result<(), PeRewriteError> {
    let cut = placed.cut;
    for at in pe.debug_data_pointers()? {
        let old = u32_at(data, at, "debug directory PointerToRawData")?;
        if u64::from(old) >= cut.start && u64::from(old) < cut.end {
            return Err(layout(format!(
                "the debug directory entry at {:#x} points into the device code",
                at - 24
            )));
        }
        if old != 0 {
            let moved = fits_u32("debug PointerToRawData", placed.relocated(old.into()))?;
            patches.add(at, le32(moved))?;
        }
    }
    Ok(())
}

/// Rewrites every wrapper as `HIPK`, version 1, pointing at `pointer` (`.kpackrf`), with its
/// slot in `reserved1`.
fn point_wrappers(
    fat: &PeFatBinary,
    pointer: u64,
    patches: &mut Patches,
) -> Result<(), PeRewriteError> {
    for w in &fat.wrappers {
        let mut rec = Vec::with_capacity(WRAPPER_SIZE as usize);
        rec.extend_from_slice(&HIPK_MAGIC.to_le_bytes());
        // Version 1, whatever the input said: the runtime takes no other.
        rec.extend_from_slice(&1u32.to_le_bytes());
        rec.extend_from_slice(&pointer.to_le_bytes());
        rec.extend_from_slice(&(w.index as u64).to_le_bytes());
        patches.add(w.offset, rec)?;
    }
    debug_assert_eq!(WRAPPER_POINTER_OFFSET, 8);
    Ok(())
}

/// The output as pieces: the input around the cut up to the end of the sections' bytes,
/// padding, the marker (padded to its raw size), and the rest of the input.
fn assemble(file_end: u64, placed: &MarkerPlacement, marker: &[u8]) -> Vec<Piece> {
    let mut content = marker.to_vec();
    content.resize(placed.raw_len as usize, 0);
    let mut pieces = vec![
        Piece::Input {
            start: 0,
            end: placed.cut.start,
        },
        Piece::Input {
            start: placed.cut.end,
            end: placed.sections_end,
        },
        Piece::Zeros(placed.padding()),
        Piece::Bytes(content),
        Piece::Input {
            start: placed.sections_end,
            end: file_end,
        },
    ];
    pieces.retain(|p| !p.is_empty());
    pieces
}

/// Computes the output's checksum (its `CheckSum` field zero) and patches it in at
/// `checksum_at`; returns it.
fn set_checksum(data: &[u8], splice: &mut Splice, checksum_at: u64) -> Result<u32, Overlap> {
    let mut sum = Checksum::default();
    let _ = splice.for_each_slice(data, &mut std::io::empty(), |b| {
        sum.update(b);
        Ok(())
    });
    let c = sum.finish();
    // Replace the zero placed by `patch_headers`.
    let mut fresh = Patches::default();
    for (at, b) in splice.patches.iter() {
        fresh.add(
            at,
            if at == checksum_at {
                le32(c)
            } else {
                b.to_vec()
            },
        )?;
    }
    splice.patches = fresh;
    Ok(c)
}

/// Refuses base relocations that patch the device code, and pointers other than the
/// wrappers' that lead into it.
fn check_relocations(
    pe: &PeFile<'_>,
    fatbin: &Section,
    wrappers: &Section,
) -> Result<(), PeRewriteError> {
    let fat_start = u64::from(fatbin.rva);
    let fat_end = fat_start + u64::from(fatbin.memory_len());
    let in_fat = |rva: u64| rva >= fat_start && rva < fat_end;
    let wrapper_start = u64::from(wrappers.rva);
    let wrapper_end = wrapper_start + u64::from(wrappers.virtual_size);
    for r in pe.base_relocations()? {
        let referenced = |problem: String| PeRewriteError::FatbinReferenced {
            entry_offset: r.entry_offset,
            rva: r.rva,
            problem,
        };
        if in_fat(r.rva) {
            return Err(referenced("it patches the device code".into()));
        }
        let is_wrapper_pointer = r.rva >= wrapper_start
            && r.rva < wrapper_end
            && (r.rva - wrapper_start) % WRAPPER_SIZE == WRAPPER_POINTER_OFFSET;
        if r.kind != IMAGE_REL_BASED_DIR64 || is_wrapper_pointer {
            continue;
        }
        let Some(at) = pe.rva_to_offset(r.rva, 8) else {
            continue;
        };
        let value = u64_at(pe.data(), at, "relocated pointer")?;
        if value.checked_sub(pe.image_base).is_some_and(in_fat) {
            return Err(referenced(format!(
                "the pointer there ({value:#x}) leads into the device code"
            )));
        }
    }
    Ok(())
}
