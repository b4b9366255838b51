//! HIP fat-binary inspection of a PE image: the fat-binary section, its bundles, the
//! 24-byte wrappers and where their absolute pointers lead.

use kpack_bundle::LocatedBundle;
use kpack_hostbin::{FatBinaryKind, WRAPPER_POINTER_OFFSET, WRAPPER_SIZE, WrapperMagic};

use crate::PeError;
use crate::pe::{IMAGE_FILE_RELOCS_STRIPPED, IMAGE_REL_BASED_DIR64, PeFile, Section, u64_at};

/// Names of the section holding the offload bundles: lld-link cuts `.hip_fatbin` to 8
/// characters; GNU ld (mingw) keeps the long name through the COFF string table.
pub const FATBIN_SECTIONS: [&str; 2] = [".hip_fat", ".hip_fatbin"];
/// Names of the section holding the wrappers (cut by lld-link, long with GNU ld).
pub const WRAPPER_SECTIONS: [&str; 2] = [".hipFatB", ".hipFatBinSegment"];
/// Name of the section kpack adds for the HIPK marker (`.rocm_kpack_ref` cut to 8).
pub const MARKER_SECTION: &str = ".kpackrf";

/// A section of interest: where it is in the file and in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeSection {
    /// Index in the section table.
    pub index: usize,
    /// Its name as resolved (`.hip_fat` or `.hip_fatbin`, ...).
    pub name: String,
    /// `PointerToRawData`.
    pub offset: u64,
    /// Absolute virtual address at the preferred base (`ImageBase + VirtualAddress`).
    pub vaddr: u64,
    /// `VirtualSize` (the content's length).
    pub size: u64,
    /// `SizeOfRawData` (0 once kpack removed the device code).
    pub raw_size: u64,
}

impl PeSection {
    fn of(pe: &PeFile<'_>, s: &Section) -> Self {
        PeSection {
            index: s.index,
            name: s.name.clone(),
            offset: s.raw_offset.into(),
            vaddr: pe.image_base.wrapping_add(s.rva.into()),
            size: s.virtual_size.into(),
            raw_size: s.raw_size.into(),
        }
    }

    /// Whether its bytes were removed from the file (kpack's equivalent of ELF `NOBITS`).
    pub fn nobits(&self) -> bool {
        self.raw_size == 0 && self.size != 0
    }

    /// The section's bytes within the file it was inspected from (up to `VirtualSize`).
    pub fn bytes<'d>(&self, file: &'d [u8]) -> Option<&'d [u8]> {
        let start = usize::try_from(self.offset).ok()?;
        let len = usize::try_from(self.size.min(self.raw_size)).ok()?;
        file.get(start..start.checked_add(len)?)
    }
}

/// One 24-byte `__CudaFatBinaryWrapper`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeWrapper {
    /// Slot number (kpack's `co_index`).
    pub index: usize,
    /// File offset of the wrapper.
    pub offset: u64,
    /// Its absolute virtual address at the preferred base.
    pub vaddr: u64,
    /// The magic.
    pub magic: WrapperMagic,
    /// The version (1).
    pub version: u32,
    /// The pointer as stored: an absolute address at the preferred base.
    pub binary: u64,
    /// `reserved1`.
    pub reserved1: u64,
    /// Whether an `IMAGE_REL_BASED_DIR64` base relocation fixes the pointer when the image
    /// is loaded elsewhere (false in a `/fixed` image without `.reloc`: the stored value is
    /// the pointer).
    pub relocated: bool,
    /// The bundle (index into [`PeFatBinary::bundles`]) starting exactly where the pointer
    /// leads.
    pub bundle: Option<usize>,
}

/// Everything kpack needs to know about a PE image's device code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeFatBinary {
    /// What state the image is in.
    pub kind: FatBinaryKind,
    /// COFF `Machine`.
    pub machine: u16,
    /// A DLL (else an EXE).
    pub dll: bool,
    /// `ImageBase`.
    pub image_base: u64,
    /// Whether the image can be rebased (it has base relocations and is not
    /// `IMAGE_FILE_RELOCS_STRIPPED`).
    pub relocatable: bool,
    /// The fat-binary section, if present.
    pub fatbin: Option<PeSection>,
    /// Its bundles, offsets relative to the section start; empty when absent or removed.
    pub bundles: Vec<LocatedBundle>,
    /// The wrappers, in slot order.
    pub wrappers: Vec<PeWrapper>,
    /// The `.kpackrf` marker section, if present.
    pub marker: Option<PeSection>,
}

/// Parses `data` as a PE image and inspects its fat-binary parts.
pub fn inspect(data: &[u8]) -> Result<PeFatBinary, PeError> {
    inspect_pe(&PeFile::parse(data)?)
}

/// The first section named one of `names`.
pub(crate) fn find<'p>(pe: &'p PeFile<'_>, names: &[&str]) -> Option<&'p Section> {
    pe.sections
        .iter()
        .find(|s| names.contains(&s.name.as_str()))
}

/// Inspects the fat-binary parts of a parsed image.
pub fn inspect_pe(pe: &PeFile<'_>) -> Result<PeFatBinary, PeError> {
    let fat_section = find(pe, &FATBIN_SECTIONS);
    let fatbin = fat_section.map(|s| PeSection::of(pe, s));
    let bundles = match (fat_section, &fatbin) {
        (Some(section), Some(f)) if !f.nobits() => {
            let bytes = &pe.section_data(section)[..f.size.min(f.raw_size) as usize];
            if bytes.is_empty() {
                Vec::new()
            } else {
                kpack_bundle::walk_fatbin(bytes).map_err(|source| PeError::Bundle {
                    section: section.index,
                    offset: f.offset,
                    source: source.shifted(f.offset),
                })?
            }
        }
        _ => Vec::new(),
    };
    let relocations = pe.base_relocations()?;
    let wrappers = match find(pe, &WRAPPER_SECTIONS) {
        Some(section) => read_wrappers(pe, section, fatbin.as_ref(), &bundles, &relocations)?,
        None => Vec::new(),
    };
    let marker = pe
        .section_by_name(MARKER_SECTION)
        .map(|s| PeSection::of(pe, s));
    let kind = if marker.is_some()
        || fatbin.as_ref().is_some_and(PeSection::nobits)
        || wrappers.iter().any(|w| w.magic == WrapperMagic::Hipk)
    {
        FatBinaryKind::Kpacked
    } else if fatbin.is_some() {
        FatBinaryKind::Fat
    } else {
        FatBinaryKind::HostOnly
    };
    Ok(PeFatBinary {
        kind,
        machine: pe.machine,
        dll: pe.is_dll(),
        image_base: pe.image_base,
        relocatable: !relocations.is_empty()
            && pe.characteristics & IMAGE_FILE_RELOCS_STRIPPED == 0,
        fatbin,
        bundles,
        wrappers,
        marker,
    })
}

fn read_wrappers(
    pe: &PeFile<'_>,
    section: &Section,
    fatbin: Option<&PeSection>,
    bundles: &[LocatedBundle],
    relocations: &[crate::pe::BaseRelocation],
) -> Result<Vec<PeWrapper>, PeError> {
    let problem = |problem: String| PeError::WrapperSection {
        index: section.index,
        name: section.name.clone(),
        offset: section.raw_offset.into(),
        problem,
    };
    let size = u64::from(section.virtual_size);
    if !size.is_multiple_of(WRAPPER_SIZE) {
        return Err(problem(format!(
            "VirtualSize {size:#x} is not a multiple of the 24-byte wrapper"
        )));
    }
    if size > u64::from(section.raw_size) {
        return Err(problem(format!(
            "VirtualSize {size:#x} exceeds SizeOfRawData {:#x}: the wrappers are not all in the file",
            section.raw_size
        )));
    }
    let data = pe.data();
    let image_base = pe.image_base;
    (0..size / WRAPPER_SIZE)
        .map(|i| {
            let offset = u64::from(section.raw_offset) + i * WRAPPER_SIZE;
            let rva = u64::from(section.rva) + i * WRAPPER_SIZE;
            let head = u64_at(data, offset, "wrapper")?;
            let binary = u64_at(data, offset + WRAPPER_POINTER_OFFSET, "wrapper pointer")?;
            let reserved1 = u64_at(data, offset + 16, "wrapper reserved1")?;
            let pointer_rva = rva + WRAPPER_POINTER_OFFSET;
            let relocated = relocations
                .iter()
                .any(|r| r.rva == pointer_rva && r.kind == IMAGE_REL_BASED_DIR64);
            let bundle = fatbin
                .filter(|f| !f.nobits())
                .and_then(|f| binary.checked_sub(f.vaddr))
                .and_then(|rel| bundles.iter().position(|b| b.offset == rel));
            Ok(PeWrapper {
                index: i as usize,
                offset,
                vaddr: image_base.wrapping_add(rva),
                magic: (head as u32).into(),
                version: (head >> 32) as u32,
                binary,
                reserved1,
                relocated,
                bundle,
            })
        })
        .collect()
}
