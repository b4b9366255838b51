//! The way back from [`crate::rewrite`]: a kpacked binary becomes a fat binary again, its
//! wrappers pointing at bundles in a re-created `.hip_fatbin` (`kpack restore`).
//!
//! # Layout
//! The input is kept whole up to where its trailing `.shstrtab` and section header table
//! start (both re-emitted at the end, as in the rewrite), with these edits in place:
//! * One new read-only `PT_LOAD`, one free page above every segment, holds the program
//!   header table (moved there, the old one zeroed: the rewrite's placement, old-kernel
//!   `AT_PHDR` rule for executables included) and then the bundles, starting at an address
//!   aligned to `.hip_fatbin`'s `sh_addralign` (4096 at least, as linkers place bundles).
//!   A kpacked executable's table in `.hip_fatbin`'s freed pages ends with a spare `PT_NULL`
//!   entry: dropped, it makes room for the new segment and the table stays where it is
//!   (moved above every segment it would pad the file by the freed range).
//!   The bundles are streamed into the output ([`crate::Rewrite::write_with_contents`]), never held.
//! * `.hip_fatbin` becomes `SHT_PROGBITS` again at the bundles' address, offset and size.
//!   The address range it had (zero-filled memory since the rewrite) stays reserved in its
//!   segment, unused.
//! * `.rocm_kpack_ref` is emptied (its bytes zeroed) and its section header dropped when it
//!   is the last one (the rewrite puts it there), else made `SHT_NULL`, so the output is not
//!   seen as kpacked and can be transformed again.
//! * Each wrapper gets magic HIPF, version 1, `reserved1` 0 and its pointer set to its
//!   bundle, in the file and in the relocation that fills it at load time (the machine's
//!   `*_RELATIVE` addend, the in-file addend of `SHT_REL`/`SHT_RELR`, or the in-file pointer
//!   of a non-PIE executable).
//!
//! Everything else (code, data, relocations other than the wrappers', symbols, debug
//! sections) keeps its bytes and its offset: only the ELF header, the old program header
//! table, the wrapper records, their relocation entries and the marker change in place.

use object::elf::{ET_DYN, ET_EXEC, PN_XNUM, PT_NULL, SHT_NULL, SHT_PROGBITS};

use crate::elf::{ElfFile, SectionHeader};
use crate::fatbin::inspect_elf;
use crate::machine;
use crate::rewrite::assemble::finish;
use crate::rewrite::marker_segment::place_marker_segment;
use crate::rewrite::sections::SectionTable;
use crate::rewrite::split::drop_trailing_tables;
use crate::rewrite::wrappers::point_wrappers;
use crate::rewrite::{Cut, Rewrite, RewriteError, align_up, layout};
use crate::verify::verify_layout;
use kpack_hostbin::splice::{Patches, Piece};
use kpack_hostbin::{FatBinaryKind, HIPF_MAGIC, WrapperMagic};

/// The least alignment of the re-created `.hip_fatbin` (linkers align it to a page).
pub const FATBIN_ALIGN: u64 = 4096;

/// What the restore puts back: `len` bytes of bundles (the payload streamed into
/// [`Rewrite::write_with_contents`]) and, per wrapper in slot order, the offset of its bundle in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    /// Total length of the bundles, padding between them included.
    pub len: u64,
    /// Per wrapper, its bundle's offset from the payload's start.
    pub wrapper_bundles: Vec<u64>,
}

/// A planned restore.
#[derive(Debug, Clone)]
pub struct RestoreLayout {
    /// The rewrite (apply with [`Rewrite::write_with_contents`] and the payload).
    pub rewrite: Rewrite,
    /// Address of the re-created `.hip_fatbin`.
    pub fatbin_vaddr: u64,
    /// Its file offset in the output.
    pub fatbin_offset: u64,
}

/// Plans the restore of the kpacked `data` with `payload`'s bundles; nothing is written.
pub fn plan(data: &[u8], payload: &Payload) -> Result<RestoreLayout, RewriteError> {
    let elf = ElfFile::parse(data)?;
    let h = elf.header();
    if h.e_type != ET_EXEC && h.e_type != ET_DYN {
        return Err(RewriteError::NotLinked(h.e_type));
    }
    let machine =
        machine::machine(h.e_machine).ok_or(RewriteError::UnsupportedMachine(h.e_machine))?;
    let fat = inspect_elf(&elf)?;
    if fat.kind != FatBinaryKind::Kpacked {
        return Err(RewriteError::NotKpacked);
    }
    if h.e_phnum == PN_XNUM {
        return Err(layout("extended segment numbering (e_phnum == PN_XNUM)"));
    }
    // Every wrapper record is rewritten, so where its pointer lands now is no reason to
    // refuse: a restore is how a wrapper the loader misdirects (the reference's RELR bug) is
    // repaired. The layout must be sound, as for any rewrite.
    verify_layout(data).map_err(|issues| RewriteError::MalformedInput { issues })?;
    let fatbin = fat
        .fatbin
        .clone()
        .ok_or_else(|| layout("no .hip_fatbin section to re-create"))?;
    let marker = fat
        .marker
        .clone()
        .ok_or_else(|| layout("no .rocm_kpack_ref section"))?;
    if payload.wrapper_bundles.len() != fat.wrappers.len() {
        return Err(layout(format!(
            "{} bundle offsets for {} wrappers",
            payload.wrapper_bundles.len(),
            fat.wrappers.len()
        )));
    }
    let page = machine::page_size(machine.e_machine, elf.program_headers());
    let shdrs = elf.section_headers();
    let align = shdrs[fatbin.section_index].sh_addralign.max(FATBIN_ALIGN);

    let cut = Cut::NONE;
    let mut patches = Patches::default();
    if marker.size > 0 {
        let bytes = marker
            .bytes(data)
            .ok_or_else(|| layout(".rocm_kpack_ref lies outside the file"))?;
        patches.zero(marker.offset..marker.offset + bytes.len() as u64)?;
    }
    let kept = drop_trailing_tables(&elf, cut, &mut patches)?;
    // A spare `PT_NULL` entry (a kpacked executable's, see the rewrite's Executables) makes
    // room for the new segment: the table keeps its size and place.
    let phdrs: Vec<_> = elf
        .program_headers()
        .iter()
        .filter(|p| p.p_type != PT_NULL)
        .cloned()
        .collect();
    let segment = place_marker_segment(
        &elf,
        phdrs,
        cut,
        &kept,
        (payload.len, align),
        (page, None),
        &mut patches,
    )?;
    let fatbin_vaddr = segment.marker_vaddr();
    point_wrappers(
        &elf,
        &fat,
        machine,
        WrapperMagic::Hipk,
        |w| {
            (
                HIPF_MAGIC,
                1,
                fatbin_vaddr + payload.wrapper_bundles[w.index],
                0,
            )
        },
        &mut patches,
    )?;

    let names_offset = segment.end;
    let table_offset = align_up(names_offset + kept.shstr.sh_size, 8);
    let mut headers: Vec<SectionHeader> = shdrs.to_vec();
    for s in &mut headers {
        if s.index == fatbin.section_index {
            s.sh_type = SHT_PROGBITS;
            s.sh_addr = fatbin_vaddr;
            s.sh_offset = segment.marker_offset();
            s.sh_size = payload.len;
            s.sh_addralign = align;
        } else if s.index == kept.shstr.index {
            s.sh_offset = names_offset;
        } else if s.index == marker.section_index {
            *s = SectionHeader {
                index: s.index,
                name: String::new(),
                sh_name: 0,
                sh_type: SHT_NULL,
                sh_flags: 0,
                sh_addr: 0,
                sh_offset: 0,
                sh_size: 0,
                sh_link: 0,
                sh_info: 0,
                sh_addralign: 0,
                sh_entsize: 0,
            };
        }
    }
    if marker.section_index + 1 == headers.len() && marker.section_index != kept.shstr.index {
        headers.pop();
    }
    let sections = SectionTable {
        headers,
        names_offset,
        marker_added: false,
        table_offset,
    };
    let rewrite = finish(
        &elf,
        cut,
        &kept,
        &segment,
        sections,
        patches,
        Piece::Contents(payload.len),
        fat.wrappers.len(),
    )?;
    Ok(RestoreLayout {
        rewrite,
        fatbin_vaddr,
        fatbin_offset: segment.marker_offset(),
    })
}
