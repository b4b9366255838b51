//! Whether a kpacked wrapper's pointer reaches the `.rocm_kpack_ref` marker at run time,
//! and, when it does not, where it lands and why, in words.
//!
//! The pointer is what the loader computes ([`Wrapper::target`]: the RELA addend, the stored
//! value under RELR or REL, the stored value of a non-PIE executable), never the value stored
//! in the file alone: the reference's rewrite (like lld) leaves 0 there under RELA, which the
//! ABI ignores. Every reader of a kpacked wrapper asks [`marker_offset`]: `verify-elf`,
//! `restore`, `inspect` and the artifact checks.

use object::elf::{SHF_ALLOC, SHT_NOBITS};

use crate::elf::{ElfFile, section_label};
use crate::fatbin::{FatBinary, MARKER_SECTION, MarkerSection, PointerSource, Wrapper};
use crate::machine::{RelocKind, reloc_kind};

/// A wrapper whose pointer the loader will not put inside the marker (displayed without
/// the wrapper, which callers name their own way).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at run time its pointer {lands}, not on the marker {MARKER_SECTION}{marker}: {why}")]
pub struct Misdirected {
    /// The wrapper's slot.
    pub wrapper: usize,
    /// The wrapper's file offset.
    pub offset: u64,
    /// Where the pointer lands (load base + its address, and what is there), or why it is
    /// not known.
    pub lands: String,
    /// The marker's address (` at load base + 0x…`), or why there is none to reach.
    pub marker: String,
    /// What fills the pointer at load time, and with which value.
    pub why: String,
}

/// How far into `.rocm_kpack_ref` the loader will put wrapper `w`'s pointer (0: on the
/// marker's first byte), or where it lands instead and why.
pub fn marker_offset(elf: &ElfFile<'_>, fat: &FatBinary, w: &Wrapper) -> Result<u64, Misdirected> {
    let marker = fat.marker.as_ref().filter(|m| m.alloc);
    let inside =
        |m: &MarkerSection, at: u64| at.checked_sub(m.vaddr).filter(|&into| into < m.size.max(1));
    if let Some(into) = marker.zip(w.target).and_then(|(m, at)| inside(m, at)) {
        return Ok(into);
    }
    let marker = match (&fat.marker, marker) {
        (_, Some(m)) => format!(" at load base + {:#x}", m.vaddr),
        (Some(_), None) => ", which is not loaded (no SHF_ALLOC)".to_owned(),
        (None, None) => ", which the file does not have".to_owned(),
    };
    Err(Misdirected {
        wrapper: w.index,
        offset: w.offset,
        lands: match w.target {
            Some(at) => format!("lands at load base + {at:#x}, {}", place(elf, at)),
            None => "cannot be computed".to_owned(),
        },
        marker,
        why: pointer_origin(elf, w),
    })
}

/// What lies at address `vaddr` of the loaded image: the ELF header, the program header
/// table, an allocated section (and how far into it), or no segment.
fn place(elf: &ElfFile<'_>, vaddr: u64) -> String {
    let h = elf.header();
    if let Some(offset) = elf.vaddr_to_offset(vaddr) {
        if offset < u64::from(h.e_ehsize) {
            return format!("the ELF header (file offset {offset:#x})");
        }
        let table = h.e_phoff..h.e_phoff + u64::from(h.e_phentsize) * u64::from(h.e_phnum);
        if table.contains(&offset) {
            return format!("the program header table (file offset {offset:#x})");
        }
    }
    let section = elf.section_headers().iter().find(|s| {
        s.sh_flags & u64::from(SHF_ALLOC) != 0
            && s.sh_size > 0
            && (s.sh_addr..s.sh_addr.saturating_add(s.sh_size)).contains(&vaddr)
    });
    match section {
        Some(s) if s.sh_addr == vaddr => format!("the start of {}", section_label(s)),
        Some(s) => format!(
            "{:#x} bytes into {}{}",
            vaddr - s.sh_addr,
            section_label(s),
            if s.sh_type == SHT_NOBITS {
                " (zero-filled)"
            } else {
                ""
            }
        ),
        None if elf.load_segment_for_vaddr(vaddr).is_some() => {
            "a loaded address no allocated section covers".to_owned()
        }
        None => "an address no PT_LOAD maps".to_owned(),
    }
}

/// What fills wrapper `w`'s pointer at load time and with which value: the relocation entry
/// and its addend (and symbol), or the value stored in the file when that is the addend or
/// the pointer itself.
pub fn pointer_origin(elf: &ElfFile<'_>, w: &Wrapper) -> String {
    let label = |section_index: usize| {
        elf.section_headers()
            .get(section_index)
            .map_or_else(|| format!("section [{section_index}]"), section_label)
    };
    let kind = |r_type: u32| match reloc_kind(elf.header().e_machine, r_type) {
        RelocKind::Relative => "a RELATIVE relocation",
        RelocKind::Absolute64 => "an absolute 64-bit relocation",
        RelocKind::Other => "a relocation of a type that cannot hold a pointer",
    };
    let of_symbol = |symbol: &Option<String>| {
        symbol
            .as_ref()
            .map_or_else(String::new, |name| format!(" against {name}"))
    };
    match &w.pointer {
        PointerSource::InPlace(stored) => format!(
            "no relocation applies, so the value stored in the file is the pointer, and it is {stored:#x}"
        ),
        PointerSource::Rela {
            section_index,
            entry_index,
            r_type,
            symbol,
            addend,
        } => format!(
            "{} (type {r_type}, entry {entry_index} of {}){} fills it, with addend {:#x} (under RELA the value stored in the file, {:#x}, is ignored)",
            kind(*r_type),
            label(*section_index),
            of_symbol(symbol),
            *addend as u64,
            w.binary
        ),
        PointerSource::Rel {
            section_index,
            entry_index,
            r_type,
            symbol,
            in_file,
        } => format!(
            "{} (type {r_type}, entry {entry_index} of {}){} fills it; under REL the value stored in the file is the addend, and it is {in_file:#x}",
            kind(*r_type),
            label(*section_index),
            of_symbol(symbol)
        ),
        PointerSource::Relr {
            section_index,
            word_index,
            in_file,
        } => format!(
            "under RELR (word {word_index} of {}) the value stored in the file is the addend, and it is {in_file:#x}",
            label(*section_index)
        ),
    }
}
