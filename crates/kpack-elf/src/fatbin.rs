//! HIP fat-binary inspection: `.hip_fatbin`, its bundles, the
//! `__CudaFatBinaryWrapper`s in `.hipFatBinSegment` and where their pointers lead.

use kpack_bundle::LocatedBundle;
use object::LittleEndian as LE;
use object::elf::{
    ET_REL, SHF_ALLOC, SHN_LORESERVE, SHN_UNDEF, SHT_NOBITS, SHT_REL, SHT_RELA, SHT_RELR,
};
use object::endian::U64Bytes;

use crate::ElfError;
use crate::elf::{ElfFile, RelocationEntries, SectionHeader, Symbol, section_label};
use crate::machine::{RelocKind, reloc_kind};
use kpack_hostbin::bytes::whole_records;
use kpack_hostbin::{FatBinaryKind, WRAPPER_POINTER_OFFSET, WRAPPER_SIZE, WrapperMagic};

/// Name of the section holding the offload bundles.
pub const FATBIN_SECTION: &str = ".hip_fatbin";
/// Name of the section holding the 24-byte wrappers.
pub const WRAPPER_SECTION: &str = ".hipFatBinSegment";
/// Name of the section added by kpack holding the HIPK metadata.
pub const MARKER_SECTION: &str = ".rocm_kpack_ref";
/// Prefix of the per-target bitcode sections of `-fgpu-rdc` relocatable objects.
pub const RDC_SECTION_PREFIX: &str = "__CLANG_OFFLOAD_BUNDLE__";
/// The `.hip_fatbin` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatbinSection {
    /// Section index.
    pub section_index: usize,
    /// `sh_offset`. For a `SHT_NOBITS` section this is the stale offset the
    /// section had before kpack removed its bytes.
    pub offset: u64,
    /// `sh_addr` (0 in relocatable objects). Not necessarily equal to `offset`.
    pub vaddr: u64,
    /// `sh_size`.
    pub size: u64,
    /// `SHT_NOBITS` (bytes removed by kpack) rather than `SHT_PROGBITS`.
    pub nobits: bool,
}

/// The `.rocm_kpack_ref` marker section (decoded by `kpack_hostbin::marker`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerSection {
    /// Section index.
    pub section_index: usize,
    /// `sh_offset`.
    pub offset: u64,
    /// `sh_addr`.
    pub vaddr: u64,
    /// `sh_size`.
    pub size: u64,
    /// `SHF_ALLOC`: mapped by a `PT_LOAD` (kpack's Phase 1 done).
    pub alloc: bool,
}

impl MarkerSection {
    /// The marker bytes within the file they were inspected from.
    pub fn bytes<'d>(&self, file: &'d [u8]) -> Option<&'d [u8]> {
        let start = usize::try_from(self.offset).ok()?;
        let len = usize::try_from(self.size).ok()?;
        file.get(start..start.checked_add(len)?)
    }
}

/// A per-target device bitcode section of a `-fgpu-rdc` relocatable object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdcSection {
    /// Section index.
    pub section_index: usize,
    /// `__CLANG_OFFLOAD_BUNDLE__<target_triple>`.
    pub name: String,
    /// The bundle triple, e.g. `hip-amdgcn-amd-amdhsa-gfx90a:xnack-` or the host's
    /// `host-x86_64-pc-linux-gnu`.
    pub target_triple: String,
    /// `sh_offset`.
    pub offset: u64,
    /// `sh_size`.
    pub size: u64,
}

/// How the loader (or the linker, for relocatable objects) fills a wrapper's
/// binary pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PointerSource {
    /// No relocation applies: the value in the file is the pointer (non-PIE
    /// `ET_EXEC`).
    InPlace(u64),
    /// An `Elf64_Rela` entry: the machine's `*_RELATIVE` (pointer = base + addend) or
    /// absolute 64-bit type (`R_X86_64_64`, `R_AARCH64_ABS64`, `R_PPC64_ADDR64`: pointer =
    /// symbol + addend); other types are listed as-is.
    Rela {
        /// The relocation section.
        section_index: usize,
        /// The entry in that section.
        entry_index: usize,
        /// The relocation type.
        r_type: u32,
        /// The symbol's name (a section symbol gets its section's name); `None`
        /// for symbol index 0.
        symbol: Option<String>,
        /// `r_addend`.
        addend: i64,
    },
    /// An `Elf64_Rel` entry; the addend is the value in the file.
    Rel {
        /// The relocation section.
        section_index: usize,
        /// The entry in that section.
        entry_index: usize,
        /// The relocation type.
        r_type: u32,
        /// The symbol's name, as for `Rela`.
        symbol: Option<String>,
        /// The addend: the pointer value stored in the file.
        in_file: u64,
    },
    /// An `SHT_RELR` relative relocation; pointer = base + the value in the file.
    Relr {
        /// The `SHT_RELR` section.
        section_index: usize,
        /// The RELR word (address or bitmap) that relocates the pointer.
        word_index: usize,
        /// The addend: the pointer value stored in the file.
        in_file: u64,
    },
}

/// One 24-byte `__CudaFatBinaryWrapper` of `.hipFatBinSegment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapper {
    /// Slot number in the section (kpack's `co_index`).
    pub index: usize,
    /// File offset of the wrapper.
    pub offset: u64,
    /// Address of the wrapper (`sh_addr + 24 * index`; section-relative in
    /// relocatable objects).
    pub vaddr: u64,
    /// The wrapper's magic.
    pub magic: WrapperMagic,
    /// The wrapper's version (1).
    pub version: u32,
    /// The pointer bytes as stored in the file.
    pub binary: u64,
    /// `reserved1` (kpack writes the wrapper's index).
    pub reserved1: u64,
    /// How the pointer is filled at load time.
    pub pointer: PointerSource,
    /// Where the loader will put the pointer (link-time address, load base 0), by the ABI
    /// rules of `loader_pointer` (the addend of a RELA entry, the stored value under RELR
    /// or REL, the stored value of a non-PIE executable), when it can be computed: `None`
    /// for undefined symbols (e.g. `__hip_fatbin` in an RDC object before device linking)
    /// and uninterpreted relocation types. In relocatable objects, a symbol's address is
    /// its section's `sh_addr` (0) + `st_value`, i.e. section-relative. This, never
    /// [`Wrapper::binary`], is what the pointer is.
    pub target: Option<u64>,
    /// The bundle (index into [`FatBinary::bundles`]) starting exactly at
    /// `target`. In relocatable objects this additionally requires the pointer's
    /// symbol to be defined in `.hip_fatbin`.
    pub bundle: Option<usize>,
}

/// Everything kpack needs to know about a host ELF file's device code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatBinary {
    /// What state the file is in.
    pub kind: FatBinaryKind,
    /// `e_type` (`ET_REL`, `ET_EXEC`, `ET_DYN`).
    pub elf_type: u16,
    /// `e_machine`.
    pub machine: u16,
    /// `.hip_fatbin`, if present.
    pub fatbin: Option<FatbinSection>,
    /// The bundles of `.hip_fatbin`, offsets relative to the section start; empty
    /// if the section is absent or `SHT_NOBITS`.
    pub bundles: Vec<LocatedBundle>,
    /// The wrappers of `.hipFatBinSegment`, in slot order.
    pub wrappers: Vec<Wrapper>,
    /// `.rocm_kpack_ref`, if present.
    pub marker: Option<MarkerSection>,
    /// The per-target bitcode sections of a `-fgpu-rdc` object.
    pub rdc_sections: Vec<RdcSection>,
}

impl FatBinary {
    /// Whether the file is a relocatable object (`ET_REL`): its device code is
    /// linked into a final binary later.
    pub fn is_relocatable(&self) -> bool {
        self.elf_type == ET_REL
    }
}

/// Parses `data` as ELF and inspects its fat-binary parts.
pub fn inspect(data: &[u8]) -> Result<FatBinary, ElfError> {
    inspect_elf(&ElfFile::parse(data)?)
}

/// Whether `elf` is a separated debug file (`objcopy --only-keep-debug` output): its
/// `.hipFatBinSegment` is `SHT_NOBITS`, and so is its `.hip_fatbin` if it has one.
///
/// The wrappers decide because nothing else empties them: kpack's rewrite empties
/// `.hip_fatbin` but keeps the wrappers (the runtime reads them), and a loadable file
/// without wrapper bytes could register no code. A `SHT_NOBITS` wrapper section beside a
/// `.hip_fatbin` with contents is no debug file but a malformed one, which inspection refuses.
fn is_separated_debug(elf: &ElfFile<'_>) -> bool {
    let nobits = |name| elf.section_by_name(name).map(|s| s.sh_type == SHT_NOBITS);
    nobits(WRAPPER_SECTION) == Some(true) && nobits(FATBIN_SECTION) != Some(false)
}

/// Inspects the fat-binary parts of an already parsed file.
pub fn inspect_elf(elf: &ElfFile<'_>) -> Result<FatBinary, ElfError> {
    let header = elf.header();
    // A debug file's section headers are its library's but their bytes are not there: no
    // wrapper or marker is read from the stale offsets.
    let debug_only = is_separated_debug(elf);
    let (fatbin, bundles) = match elf.section_by_name(FATBIN_SECTION) {
        Some(section) => {
            let fatbin = FatbinSection {
                section_index: section.index,
                offset: section.sh_offset,
                vaddr: section.sh_addr,
                size: section.sh_size,
                nobits: section.sh_type == SHT_NOBITS,
            };
            let bytes = elf.section_data(section)?;
            let bundles = if bytes.is_empty() {
                Vec::new()
            } else {
                kpack_bundle::walk_fatbin(bytes).map_err(|source| ElfError::Bundle {
                    section: section.index,
                    offset: section.sh_offset,
                    // Absolute in the file, like every offset kpack prints.
                    source: source.shifted(section.sh_offset),
                })?
            };
            (Some(fatbin), bundles)
        }
        None => (None, Vec::new()),
    };
    let wrappers = match elf.section_by_name(WRAPPER_SECTION) {
        Some(section) if !debug_only => read_wrappers(elf, section, fatbin.as_ref(), &bundles)?,
        _ => Vec::new(),
    };
    let marker = elf
        .section_by_name(MARKER_SECTION)
        .filter(|_| !debug_only)
        .map(|s| MarkerSection {
            section_index: s.index,
            offset: s.sh_offset,
            vaddr: s.sh_addr,
            size: s.sh_size,
            alloc: s.sh_flags & u64::from(SHF_ALLOC) != 0,
        });
    let rdc_sections: Vec<RdcSection> = elf
        .section_headers()
        .iter()
        .filter_map(|s| {
            let triple = s.name.strip_prefix(RDC_SECTION_PREFIX)?;
            Some(RdcSection {
                section_index: s.index,
                name: s.name.clone(),
                target_triple: triple.to_string(),
                offset: s.sh_offset,
                size: s.sh_size,
            })
        })
        .collect();

    let kind = if debug_only {
        FatBinaryKind::DebugOnly
    } else if marker.is_some()
        || fatbin.as_ref().is_some_and(|f| f.nobits)
        || wrappers.iter().any(|w| w.magic == WrapperMagic::Hipk)
    {
        FatBinaryKind::Kpacked
    } else if fatbin.is_some() {
        FatBinaryKind::Fat
    } else if !rdc_sections.is_empty() {
        FatBinaryKind::Rdc
    } else {
        FatBinaryKind::HostOnly
    };

    Ok(FatBinary {
        kind,
        elf_type: header.e_type,
        machine: header.e_machine,
        fatbin,
        bundles,
        wrappers,
        marker,
        rdc_sections,
    })
}

/// Where a wrapper pointer leads: the address and, in relocatable objects, the
/// section that address is relative to.
#[derive(Clone, Copy)]
struct Resolved {
    target: Option<u64>,
    section: Option<usize>,
}

fn read_wrappers(
    elf: &ElfFile<'_>,
    segment: &SectionHeader,
    fatbin: Option<&FatbinSection>,
    bundles: &[LocatedBundle],
) -> Result<Vec<Wrapper>, ElfError> {
    if segment.sh_type == SHT_NOBITS {
        return Err(ElfError::WrapperSectionNobits {
            section: segment.index,
            offset: segment.sh_offset,
        });
    }
    if !segment.sh_size.is_multiple_of(WRAPPER_SIZE) {
        return Err(ElfError::WrapperSectionSize {
            section: segment.index,
            offset: segment.sh_offset,
            size: segment.sh_size,
        });
    }
    // A wrapper is three little-endian words: magic and version (low and high half),
    // the binary pointer, reserved1.
    let words: &[U64Bytes<LE>] = whole_records(elf.section_data(segment)?);
    let records: Vec<[u64; 3]> = words
        .chunks_exact(3)
        .map(|w| [w[0].get(LE), w[1].get(LE), w[2].get(LE)])
        .collect();
    let pointers: Vec<u64> = records.iter().map(|&[_, binary, _]| binary).collect();
    let relocated = pointer_relocations(elf, segment, &pointers)?;
    let relocatable = elf.header().e_type == ET_REL;

    let mut wrappers = Vec::with_capacity(records.len());
    for (index, (&[head, binary, reserved1], found)) in records.iter().zip(relocated).enumerate() {
        let (pointer, resolved) = found.unwrap_or_else(|| {
            let source = PointerSource::InPlace(binary);
            let resolved = loader_pointer(elf, &source, None);
            (source, resolved)
        });
        // Relocatable objects: every section starts at address 0, so an address
        // only identifies a bundle when it is known to be relative to .hip_fatbin.
        let bundle = fatbin
            .filter(|f| !f.nobits && (!relocatable || resolved.section == Some(f.section_index)))
            .and_then(|f| resolved.target?.checked_sub(f.vaddr))
            .and_then(|rel| bundles.iter().position(|b| b.offset == rel));
        let slot = index as u64 * WRAPPER_SIZE;
        wrappers.push(Wrapper {
            index,
            offset: segment.sh_offset + slot,
            vaddr: segment.sh_addr.wrapping_add(slot),
            magic: (head as u32).into(),
            version: (head >> 32) as u32,
            binary,
            reserved1,
            pointer,
            target: resolved.target,
            bundle,
        });
    }
    Ok(wrappers)
}

/// One relocation entry in a common shape: `r_type` is `None` for RELR (relative,
/// no symbol; `entry_index` is then the RELR word), `addend` is `None` unless RELA.
struct Candidate {
    entry_index: usize,
    r_offset: u64,
    r_sym: u32,
    r_type: Option<u32>,
    addend: Option<i64>,
}

/// For each wrapper slot, the first relocation (in section-header order) that
/// writes its pointer, and what it resolves to. Linked files: the loader's
/// relocations (`SHF_ALLOC` sections), addressed by vaddr. Relocatable objects:
/// the sections applying to `.hipFatBinSegment` (`sh_info`), addressed
/// section-relative. `in_file` holds each slot's stored pointer value.
fn pointer_relocations(
    elf: &ElfFile<'_>,
    segment: &SectionHeader,
    in_file: &[u64],
) -> Result<Vec<Option<(PointerSource, Resolved)>>, ElfError> {
    let relocatable = elf.header().e_type == ET_REL;
    let base = if relocatable { 0 } else { segment.sh_addr };
    let slot_of = |r_offset: u64| -> Option<usize> {
        let rel = r_offset.checked_sub(base)?;
        if rel % WRAPPER_SIZE != WRAPPER_POINTER_OFFSET {
            return None;
        }
        usize::try_from(rel / WRAPPER_SIZE)
            .ok()
            .filter(|&i| i < in_file.len())
    };
    let mut found: Vec<Option<(PointerSource, Resolved)>> = vec![None; in_file.len()];
    for section in elf.section_headers() {
        let applies = if relocatable {
            matches!(section.sh_type, SHT_RELA | SHT_REL)
                && u64::from(section.sh_info) == segment.index as u64
        } else {
            matches!(section.sh_type, SHT_RELA | SHT_REL | SHT_RELR)
                && section.sh_flags & u64::from(SHF_ALLOC) != 0
        };
        if !applies {
            continue;
        }
        let relocs = elf.relocation_section(section)?;
        let candidates: Vec<Candidate> = match &relocs.entries {
            RelocationEntries::Rela(v) => v
                .iter()
                .enumerate()
                .map(|(i, r)| Candidate {
                    entry_index: i,
                    r_offset: r.r_offset,
                    r_sym: r.r_sym,
                    r_type: Some(r.r_type),
                    addend: Some(r.r_addend),
                })
                .collect(),
            RelocationEntries::Rel(v) => v
                .iter()
                .enumerate()
                .map(|(i, r)| Candidate {
                    entry_index: i,
                    r_offset: r.r_offset,
                    r_sym: r.r_sym,
                    r_type: Some(r.r_type),
                    addend: None,
                })
                .collect(),
            RelocationEntries::Relr(v) => v
                .iter()
                .map(|r| Candidate {
                    entry_index: r.word_index,
                    r_offset: r.r_offset,
                    r_sym: 0,
                    r_type: None,
                    addend: None,
                })
                .collect(),
        };
        for Candidate {
            entry_index,
            r_offset,
            r_sym,
            r_type,
            addend,
        } in candidates
        {
            let Some(slot) = slot_of(r_offset).filter(|&i| found[i].is_none()) else {
                continue;
            };
            let value = in_file[slot];
            let section_index = section.index;
            let Some(r_type) = r_type else {
                let source = PointerSource::Relr {
                    section_index,
                    word_index: entry_index,
                    in_file: value,
                };
                let resolved = loader_pointer(elf, &source, None);
                found[slot] = Some((source, resolved));
                continue;
            };
            let sym = symbol_for(elf, section, r_sym)?;
            let symbol = sym.as_ref().map(|(s, _)| s.name.clone());
            let source = match addend {
                Some(addend) => PointerSource::Rela {
                    section_index,
                    entry_index,
                    r_type,
                    symbol,
                    addend,
                },
                None => PointerSource::Rel {
                    section_index,
                    entry_index,
                    r_type,
                    symbol,
                    in_file: value,
                },
            };
            let resolved = loader_pointer(elf, &source, sym.as_ref());
            found[slot] = Some((source, resolved));
        }
    }
    Ok(found)
}

/// The symbol a relocation refers to (through the section's `sh_link`) and its
/// address; `None` for symbol index 0.
fn symbol_for(
    elf: &ElfFile<'_>,
    relocs: &SectionHeader,
    r_sym: u32,
) -> Result<Option<(Symbol, Option<u64>)>, ElfError> {
    if r_sym == 0 {
        return Ok(None);
    }
    let symtab = elf.section(
        u64::from(relocs.sh_link),
        &format!("sh_link of {}", section_label(relocs)),
    )?;
    let sym = elf.symbol(symtab, u64::from(r_sym))?;
    let address = elf.symbol_address(&sym)?;
    Ok(Some((sym, address)))
}

/// Where the dynamic loader (or, in a relocatable object, the static linker) will put a
/// wrapper's pointer, the load base taken as 0: the one place this is computed, so that
/// every reader of a wrapper (verify, restore, prune, inspect, the artifact checks)
/// follows the same ABI rules.
/// * no relocation (a non-PIE executable): the value stored in the file;
/// * `SHT_RELR`, or `SHT_REL` of the `*_RELATIVE` type: base + the value stored in the file
///   (there the stored value *is* the addend);
/// * `SHT_RELA`: base + `r_addend` (`*_RELATIVE`), or symbol + `r_addend` (absolute 64-bit);
///   the value stored in the file is ignored (linkers such as lld leave 0 there, as the
///   reference's rewrite does);
/// * `SHT_REL` of the absolute type: symbol + the value stored in the file.
///
/// `sym` is the relocation's symbol and its address (`None` for symbol 0). Other types, and
/// undefined symbols, leave the pointer unknown.
fn loader_pointer(
    elf: &ElfFile<'_>,
    source: &PointerSource,
    sym: Option<&(Symbol, Option<u64>)>,
) -> Resolved {
    let unresolved = Resolved {
        target: None,
        section: None,
    };
    let (r_type, addend) = match *source {
        PointerSource::InPlace(stored)
        | PointerSource::Relr {
            in_file: stored, ..
        } => {
            return Resolved {
                target: Some(stored),
                section: None,
            };
        }
        PointerSource::Rela { r_type, addend, .. } => (r_type, addend as u64),
        PointerSource::Rel {
            r_type, in_file, ..
        } => (r_type, in_file),
    };
    match reloc_kind(elf.header().e_machine, r_type) {
        RelocKind::Relative => Resolved {
            target: Some(addend),
            section: None,
        },
        RelocKind::Absolute64 => match sym {
            None => Resolved {
                target: Some(addend),
                section: None,
            },
            Some((s, Some(address))) => Resolved {
                target: Some(address.wrapping_add(addend)),
                section: (s.st_shndx != SHN_UNDEF && s.st_shndx < SHN_LORESERVE)
                    .then_some(usize::from(s.st_shndx)),
            },
            Some((_, None)) => unresolved,
        },
        RelocKind::Other => unresolved,
    }
}
