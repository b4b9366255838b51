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

use crate::PeError;
use crate::fatbin::{FATBIN_SECTIONS, MARKER_SECTION, WRAPPER_SECTIONS, inspect_pe};
use crate::pe::{
    Checksum, DIRECTORY_SECURITY, IMAGE_REL_BASED_DIR64, PeFile, SECTION_HEADER_SIZE, Section,
    align_up, field, u32_at, u64_at,
};

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

/// Plans the rewrite of the image `data` with `marker` (the msgpack marker bytes) as the
/// `.kpackrf` content. Nothing is written; every refusal happens here.
pub fn plan(data: &[u8], marker: &[u8]) -> Result<PeRewrite, PeRewriteError> {
    let pe = PeFile::parse(data)?;
    let fat = inspect_pe(&pe)?;
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
    let fatbin = find(&pe, &FATBIN_SECTIONS).ok_or(PeRewriteError::NotFat)?;
    let wrapper_section = find(&pe, &WRAPPER_SECTIONS).filter(|_| !fat.wrappers.is_empty());
    let Some(wrapper_section) = wrapper_section else {
        return Err(PeRewriteError::NoWrappers {
            section: fatbin.index,
            name: fatbin.name.clone(),
        });
    };
    let fa = u64::from(pe.file_alignment);
    let sa = u64::from(pe.section_alignment);
    check_relocations(&pe, fatbin, wrapper_section)?;
    // A rebased image would leave such a pointer at the preferred base's address.
    if fat.relocatable
        && let Some(w) = fat.wrappers.iter().find(|w| !w.relocated)
    {
        return Err(layout(format!(
            "wrapper {} at {:#x}: the image has base relocations but none for its pointer",
            w.index, w.offset
        )));
    }

    // The bytes removed: the fat-binary section's whole raw data.
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
    let with_data = || pe.sections.iter().filter(|s| s.raw_size != 0);
    if let Some(s) = with_data().find(|s| u64::from(s.raw_offset) < headers_end) {
        return Err(layout(format!(
            "section [{}] {}: its bytes at {:#x} lie inside the headers (SizeOfHeaders {headers_end:#x})",
            s.index, s.name, s.raw_offset
        )));
    }
    if let Some(s) = with_data().find(|s| {
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
        let shared = with_data()
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

    // Where the marker goes: after every section's bytes in the file, after every section in
    // memory.
    let sections_end = with_data()
        .map(|s| u64::from(s.raw_offset) + u64::from(s.raw_size))
        .max()
        .unwrap_or(headers_end);
    let moved = |x: u64| if x >= cut_end { x - removed } else { x };
    let marker_offset = align_up(moved(sections_end), fa);
    let marker_raw = align_up(marker.len() as u64, fa);
    let inserted = marker_offset - moved(sections_end) + marker_raw;
    // An input offset's place in the output.
    let relocated = |x: u64| moved(x) + if x >= sections_end { inserted } else { 0 };
    let memory_end = pe
        .sections
        .iter()
        .map(|s| u64::from(s.rva) + u64::from(s.memory_len()))
        .max()
        .unwrap_or(0);
    let marker_rva = align_up(memory_end.max(headers_end), sa);
    let size_of_image = marker_rva + align_up(marker.len() as u64, sa);
    let too_big = |what: &str, v: u64| {
        u32::try_from(v).map_err(|_| layout(format!("{what} {v:#x} does not fit in 32 bits")))
    };
    let size_of_image = too_big("SizeOfImage", size_of_image)?;
    let marker_rva = too_big("the .kpackrf RVA", marker_rva)?;
    let marker_offset32 = too_big("the .kpackrf file offset", marker_offset)?;

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

    let mut patches = Patches::default();
    let u16b = |v: u16| v.to_le_bytes().to_vec();
    let u32b = |v: u32| v.to_le_bytes().to_vec();
    let file_header = pe.nt_offset + 4;
    let count = u16::try_from(pe.sections.len() + 1)
        .map_err(|_| layout("NumberOfSections would exceed 65535"))?;
    patches.add(file_header + field::NUMBER_OF_SECTIONS, u16b(count))?;
    if pe.symbol_table != 0 {
        let at = too_big("PointerToSymbolTable", relocated(pe.symbol_table.into()))?;
        patches.add(file_header + field::POINTER_TO_SYMBOL_TABLE, u32b(at))?;
    }
    let opt = pe.optional_offset;
    let initialized = (u64::from(pe.initialized_size).saturating_sub(removed) + marker_raw)
        .min(u32::MAX.into()) as u32;
    // A `VirtualSize` of 0 means the section is `SizeOfRawData` long in memory: once its file
    // bytes are gone that length must be written out, or the section would vanish from memory.
    let fat_virtual_size = match fatbin.virtual_size {
        0 => fatbin.raw_size,
        size => size,
    };
    let uninitialized = (u64::from(pe.uninitialized_size) + align_up(fat_virtual_size.into(), fa))
        .min(u32::MAX.into()) as u32;
    patches.add(opt + field::SIZE_OF_INITIALIZED_DATA, u32b(initialized))?;
    patches.add(opt + field::SIZE_OF_UNINITIALIZED_DATA, u32b(uninitialized))?;
    patches.add(opt + field::SIZE_OF_IMAGE, u32b(size_of_image))?;
    let checksum_at = opt + field::CHECKSUM;
    // Zero while the checksum is computed; set at the end when the input had one.
    patches.add(checksum_at, u32b(0))?;
    for s in &pe.sections {
        let h = s.header_offset;
        if s.index == fatbin.index {
            patches.add(h + field::VIRTUAL_SIZE, u32b(fat_virtual_size))?;
            patches.add(h + field::SIZE_OF_RAW_DATA, u32b(0))?;
            patches.add(h + field::POINTER_TO_RAW_DATA, u32b(0))?;
            let c = (s.characteristics & !CNT_INITIALIZED_DATA) | CNT_UNINITIALIZED_DATA;
            patches.add(h + field::CHARACTERISTICS, u32b(c))?;
        } else if s.raw_size != 0 && u64::from(s.raw_offset) >= cut_end {
            let at = too_big("PointerToRawData", relocated(s.raw_offset.into()))?;
            patches.add(h + field::POINTER_TO_RAW_DATA, u32b(at))?;
        }
    }
    let mut header = Vec::with_capacity(SECTION_HEADER_SIZE as usize);
    let mut name = [0u8; 8];
    name[..MARKER_SECTION.len()].copy_from_slice(MARKER_SECTION.as_bytes());
    header.extend_from_slice(&name);
    header.extend_from_slice(&(marker.len() as u32).to_le_bytes());
    header.extend_from_slice(&marker_rva.to_le_bytes());
    header.extend_from_slice(&(marker_raw as u32).to_le_bytes());
    header.extend_from_slice(&marker_offset32.to_le_bytes());
    header.extend_from_slice(&[0; 12]);
    header.extend_from_slice(&(MEM_READ | CNT_INITIALIZED_DATA).to_le_bytes());
    patches.add(table_end, header)?;
    for at in pe.debug_data_pointers()? {
        let old = u32_at(data, at, "debug directory PointerToRawData")?;
        if u64::from(old) >= cut_start && u64::from(old) < cut_end {
            return Err(layout(format!(
                "the debug directory entry at {:#x} points into the device code",
                at - 24
            )));
        }
        if old != 0 {
            patches.add(
                at,
                u32b(too_big("debug PointerToRawData", relocated(old.into()))?),
            )?;
        }
    }
    let pointer = pe.image_base.wrapping_add(marker_rva.into());
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

    let file_end = data.len() as u64;
    let mut pieces = vec![Piece::Input {
        start: 0,
        end: cut_start,
    }];
    pieces.push(Piece::Input {
        start: cut_end,
        end: sections_end,
    });
    pieces.push(Piece::Zeros(marker_offset - moved(sections_end)));
    let mut content = marker.to_vec();
    content.resize(marker_raw as usize, 0);
    pieces.push(Piece::Bytes(content));
    pieces.push(Piece::Input {
        start: sections_end,
        end: file_end,
    });
    pieces.retain(|p| !p.is_empty());
    let mut splice = Splice { pieces, patches };

    let checksum = (pe.checksum != 0).then(|| {
        let mut sum = Checksum::default();
        let _ = splice.for_each_slice(data, &mut std::io::empty(), |b| {
            sum.update(b);
            Ok(())
        });
        sum.finish()
    });
    if let Some(c) = checksum {
        // Replace the zero placed above.
        let mut fresh = Patches::default();
        for (at, b) in splice.patches.iter() {
            fresh.add(
                at,
                if at == checksum_at {
                    u32b(c)
                } else {
                    b.to_vec()
                },
            )?;
        }
        splice.patches = fresh;
    }
    let output_len = splice.len();
    Ok(PeRewrite {
        splice,
        summary: PeRewriteSummary {
            input_len: file_end,
            output_len,
            removed,
            marker_vaddr: pointer,
            marker_offset,
            wrappers: fat.wrappers.len(),
            checksum,
        },
    })
}

fn find<'p>(pe: &'p PeFile<'_>, names: &[&str]) -> Option<&'p Section> {
    pe.sections
        .iter()
        .find(|s| names.contains(&s.name.as_str()))
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
