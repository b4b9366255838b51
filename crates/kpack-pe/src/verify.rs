//! The structural PE verifier: what a Windows loader relies on, checked on every image kpack
//! writes (the reference has none, its B19).

use kpack_hostbin::marker::MarkerMetadata;
use kpack_hostbin::{VerifyIssue, WRAPPER_POINTER_OFFSET, WrapperMagic, hipk_wrapper_issues};

use crate::BaseRelocation;
use crate::fatbin::inspect_pe;
use crate::pe::{
    DIRECTORY_SECURITY, IMAGE_REL_BASED_DIR64, PeFile, SECTION_HEADER_SIZE, align_up, checksum_of,
    field,
};

/// Checks the structure of the PE image `data`; every problem found, or `Ok`.
///
/// * headers: the section table ends within `SizeOfHeaders`, which is a multiple of
///   `FileAlignment` and below the first section's RVA;
/// * sections: file bytes aligned to `FileAlignment`, inside the file, after the headers and
///   not overlapping; RVAs aligned to `SectionAlignment`, ascending, not overlapping;
///   `SizeOfImage` ends right after the last one;
/// * data directories (but the certificate table, which is a file range) inside the image;
/// * base relocations parse, and each patches 8 bytes inside a section;
/// * fat binary: a kpacked image has only HIPK wrappers, version 1, `reserved1` = slot,
///   pointing at `.kpackrf` (relocated by `DIR64` exactly when the image has relocations),
///   whose content is a marker that decodes; the device-code section has no file bytes;
/// * `CheckSum`, when not 0, is the image's checksum.
pub fn verify(data: &[u8]) -> Result<(), Vec<VerifyIssue>> {
    check(data, true)
}

/// The layout checks of [`verify()`] alone (headers, sections, directories, base
/// relocations): what the rewrite needs of its input before it plans from it.
pub fn verify_layout(data: &[u8]) -> Result<(), Vec<VerifyIssue>> {
    check(data, false)
}

fn check(data: &[u8], whole: bool) -> Result<(), Vec<VerifyIssue>> {
    let mut issues = Vec::new();
    let mut add =
        |offset: Option<u64>, message: String| issues.push(VerifyIssue { offset, message });
    let pe = match PeFile::parse(data) {
        Ok(pe) => pe,
        Err(e) => {
            add(None, format!("does not parse: {e}"));
            return Err(issues);
        }
    };
    check_headers(&pe, &mut add);
    check_sections(&pe, &mut add);
    check_directories(&pe, &mut add);
    let relocations = check_base_relocations(&pe, &mut add);
    if whole {
        check_fat_binary(&pe, &relocations, &mut add);
        check_checksum(data, &pe, &mut add);
    }
    if issues.is_empty() {
        Ok(())
    } else {
        Err(issues)
    }
}

/// The section table ends within `SizeOfHeaders`, a multiple of `FileAlignment`.
fn check_headers(pe: &PeFile<'_>, add: &mut impl FnMut(Option<u64>, String)) {
    let fa = u64::from(pe.file_alignment);
    let headers = u64::from(pe.size_of_headers);
    let table_end = pe.section_table_offset + pe.sections.len() as u64 * SECTION_HEADER_SIZE;
    if table_end > headers {
        add(
            Some(pe.section_table_offset),
            format!("the section table ends at {table_end:#x}, past SizeOfHeaders {headers:#x}"),
        );
    }
    if !headers.is_multiple_of(fa) {
        add(
            Some(pe.optional_offset + 60),
            format!("SizeOfHeaders {headers:#x} is not a multiple of FileAlignment {fa:#x}"),
        );
    }
}

/// Each section in memory (aligned, above the headers, after the one before) and in the
/// file (aligned, after the headers, sharing no bytes), and `SizeOfImage` ending right after
/// the last one.
fn check_sections(pe: &PeFile<'_>, add: &mut impl FnMut(Option<u64>, String)) {
    let fa = u64::from(pe.file_alignment);
    let sa = u64::from(pe.section_alignment);
    let headers = u64::from(pe.size_of_headers);
    let mut previous: Option<(u64, u64, &str)> = None;
    let mut raw: Vec<(u64, u64, &str)> = Vec::new();
    for s in &pe.sections {
        let h = Some(s.header_offset);
        let name = s.name.as_str();
        let (rva, mem) = (u64::from(s.rva), u64::from(s.memory_len()));
        if !rva.is_multiple_of(sa) {
            add(
                h,
                format!(
                    "section {name}: RVA {rva:#x} is not a multiple of SectionAlignment {sa:#x}"
                ),
            );
        }
        if rva < align_up(headers, sa) {
            add(
                h,
                format!("section {name}: RVA {rva:#x} lies inside the headers' pages"),
            );
        }
        if let Some((prev_rva, prev_mem, prev)) = previous
            && rva < align_up(prev_rva + prev_mem, sa)
        {
            add(
                h,
                format!("section {name}: RVA {rva:#x} overlaps or precedes section {prev}"),
            );
        }
        previous = Some((rva, mem, name));
        if s.raw_size != 0 {
            let (start, len) = (u64::from(s.raw_offset), u64::from(s.raw_size));
            if !start.is_multiple_of(fa) {
                add(
                    h,
                    format!(
                        "section {name}: PointerToRawData {start:#x} is not a multiple of FileAlignment {fa:#x}"
                    ),
                );
            }
            if start < headers {
                add(
                    h,
                    format!("section {name}: its bytes at {start:#x} lie inside the headers"),
                );
            }
            raw.push((start, start + len, name));
        }
    }
    raw.sort_unstable();
    for pair in raw.windows(2) {
        if pair[1].0 < pair[0].1 {
            add(
                Some(pair[1].0),
                format!("sections {} and {} share file bytes", pair[0].2, pair[1].2),
            );
        }
    }
    if let Some((rva, mem, _)) = previous {
        let expected = align_up(rva + mem, sa);
        if u64::from(pe.size_of_image) != expected {
            add(
                Some(pe.optional_offset + field::SIZE_OF_IMAGE),
                format!(
                    "SizeOfImage is {:#x}, expected {expected:#x} (the last section's end)",
                    pe.size_of_image
                ),
            );
        }
    }
}

/// Every data directory but the certificate table (a file range) inside one section.
fn check_directories(pe: &PeFile<'_>, add: &mut impl FnMut(Option<u64>, String)) {
    for (i, d) in pe.directories.iter().enumerate() {
        if i == DIRECTORY_SECURITY || d.size == 0 {
            continue;
        }
        if pe.section_at_rva(d.rva.into(), d.size.into()).is_none() {
            add(
                Some(pe.optional_offset + field::DATA_DIRECTORIES + 8 * i as u64),
                format!(
                    "data directory {i}: RVA {:#x}..+{:#x} is not inside one section",
                    d.rva, d.size
                ),
            );
        }
    }
}

/// The base relocations parse and each patches bytes inside a section; returns them (none
/// when they do not parse).
fn check_base_relocations(
    pe: &PeFile<'_>,
    add: &mut impl FnMut(Option<u64>, String),
) -> Vec<BaseRelocation> {
    let relocations = match pe.base_relocations() {
        Ok(r) => r,
        Err(e) => {
            add(None, format!("base relocations: {e}"));
            Vec::new()
        }
    };
    for r in &relocations {
        let len = if r.kind == IMAGE_REL_BASED_DIR64 {
            8
        } else {
            4
        };
        if pe.section_at_rva(r.rva, len).is_none() {
            add(
                Some(r.entry_offset),
                format!(
                    "base relocation patches RVA {:#x}, outside every section",
                    r.rva
                ),
            );
        }
    }
    relocations
}

/// `CheckSum`, when not 0, is the image's checksum.
fn check_checksum(data: &[u8], pe: &PeFile<'_>, add: &mut impl FnMut(Option<u64>, String)) {
    let at = pe.optional_offset + field::CHECKSUM;
    if pe.checksum != 0 {
        let expected = checksum_of(data, at);
        if pe.checksum != expected {
            add(
                Some(at),
                format!("CheckSum is {:#x}, expected {expected:#x}", pe.checksum),
            );
        }
    }
}

fn check_fat_binary(
    pe: &PeFile<'_>,
    relocations: &[BaseRelocation],
    add: &mut impl FnMut(Option<u64>, String),
) {
    let fat = match inspect_pe(pe) {
        Ok(f) => f,
        Err(e) => {
            add(None, format!("fat binary: {e}"));
            return;
        }
    };
    let Some(marker) = &fat.marker else {
        if let Some(w) = fat.wrappers.iter().find(|w| w.magic == WrapperMagic::Hipk) {
            add(
                Some(w.offset),
                format!("wrapper {} is HIPK but the image has no .kpackrf", w.index),
            );
        }
        return;
    };
    let marker_bytes = marker.bytes(pe.data()).unwrap_or_default();
    if marker_bytes.len() as u64 != marker.size {
        add(
            Some(marker.offset),
            format!(
                ".kpackrf: VirtualSize {:#x} exceeds its {:#x} file bytes",
                marker.size, marker.raw_size
            ),
        );
    } else if let Err(e) = MarkerMetadata::decode(marker_bytes) {
        add(Some(marker.offset), format!(".kpackrf: {e}"));
    }
    if let Some(f) = fat.fatbin.as_ref().filter(|f| !f.nobits()) {
        add(
            Some(f.offset),
            format!("{}: the device code is still in the file", f.name),
        );
    }
    let marker_end = marker.vaddr + marker.size.max(1);
    for w in &fat.wrappers {
        let at = Some(w.offset);
        hipk_wrapper_issues(w.index, w.offset, w.magic, w.version, w.reserved1, add);
        if w.binary < marker.vaddr || w.binary >= marker_end {
            add(
                at,
                format!(
                    "wrapper {}: pointer {:#x} is not inside .kpackrf ({:#x}..{marker_end:#x})",
                    w.index, w.binary, marker.vaddr
                ),
            );
        }
        if !relocations.is_empty() && !w.relocated {
            add(
                Some(w.offset + WRAPPER_POINTER_OFFSET),
                format!(
                    "wrapper {}: the image has base relocations but none for the pointer",
                    w.index
                ),
            );
        }
    }
}
