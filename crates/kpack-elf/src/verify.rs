//! A structural verifier for linked ELF files, run on every rewrite output before it is
//! renamed into place (and available as `kpack verify-elf`).
//!
//! It checks what a loader and the HIP runtime rely on, and reports every problem found
//! (not just the first), each with the file offset it is about:
//! * `PT_LOAD`s: file ranges of file-backed segments do not overlap, and a segment with
//!   `p_filesz == 0` does not share its `p_offset` with another; `p_offset ≡ p_vaddr` modulo
//!   the page ([`crate::machine::page_size`]: 4 KiB on x86-64, the largest `p_align` on
//!   aarch64 and ppc64); a power-of-two `p_align`; sorted by address, not overlapping in
//!   memory; `p_filesz <= p_memsz`;
//! * the program header table lies inside a `PT_LOAD`; `PT_PHDR` matches `e_phoff` and that
//!   segment's address; in executables (`ET_EXEC` or `PT_INTERP`) the table's segment has
//!   the first `PT_LOAD`'s `p_vaddr - p_offset` (kernels before 5.18 compute `AT_PHDR` from
//!   it);
//! * allocated sections: aligned addresses; contents file-backed by a `PT_LOAD` at the
//!   matching address; `SHT_NOBITS` ones inside a `PT_LOAD`'s memory;
//! * the section header table overlaps neither the program header table nor any section;
//!   section names lie inside the name table (checked by the parser);
//! * kpacked files: every wrapper has magic HIPK, version 1, `reserved1` = its index, and a
//!   pointer the loader puts ([`crate::landing`]) on the address of an allocated
//!   `.rocm_kpack_ref`, whose bytes decode as HIPK marker metadata.
//!
//! Warnings, not refusals ([`Findings::warnings`]), for what the ELF specification forbids
//! but glibc loads (the reference's rewrite writes both): `p_offset ≢ p_vaddr` modulo a
//! `p_align` above the page (the page congruence is what `mmap` needs), and a `PT_PHDR`
//! whose size is not the table's (the loader reads only its address).

use kpack_hostbin::marker::MarkerMetadata;

use object::elf::{ET_DYN, PT_LOAD, PT_PHDR, SHF_ALLOC, SHF_TLS, SHT_NOBITS};

use crate::elf::{ElfFile, PHDR_SIZE, ProgramHeader, SHDR_SIZE};
use crate::fatbin::{MARKER_SECTION, PointerSource, inspect_elf};
use crate::landing::{marker_offset, pointer_origin};
use crate::machine::page_size;
use kpack_hostbin::{FatBinaryKind, Findings, VerifyIssue, hipk_wrapper_issues};

/// Every refusal of `data`, in check order; `Ok` if there is none (warnings aside).
pub fn verify(data: &[u8]) -> Result<(), Vec<VerifyIssue>> {
    findings(data).refusals()
}

/// The refusals of `data`'s layout alone, kpacked wrappers and marker unchecked: what a
/// restore needs of its input, whose wrappers it rewrites whatever they point at.
pub fn verify_layout(data: &[u8]) -> Result<(), Vec<VerifyIssue>> {
    check(data, false).refusals()
}

/// Every refusal and warning of `data`, each in check order.
pub fn findings(data: &[u8]) -> Findings {
    check(data, true)
}

fn check(data: &[u8], kpacked: bool) -> Findings {
    let mut found = Findings::default();
    let mut add =
        |offset: Option<u64>, message: String| found.issues.push(VerifyIssue { offset, message });
    let mut warn =
        |offset: Option<u64>, message: String| found.warnings.push(VerifyIssue { offset, message });
    match ElfFile::parse(data) {
        Ok(elf) => {
            let loads: Vec<&ProgramHeader> = elf
                .program_headers()
                .iter()
                .filter(|p| p.p_type == PT_LOAD)
                .collect();
            check_loads(&elf, &loads, &mut add, &mut warn);
            check_program_header_table(&elf, &loads, &mut add, &mut warn);
            check_sections(&elf, &loads, &mut add);
            if kpacked {
                check_kpacked(data, &elf, &mut add);
            }
        }
        Err(e) => add(None, format!("does not parse: {e}")),
    }
    found
}

/// The file offset of program header `p`.
fn phdr_offset(elf: &ElfFile<'_>, p: &ProgramHeader) -> Option<u64> {
    Some(elf.header().e_phoff + p.index as u64 * PHDR_SIZE)
}

/// `PT_LOAD`s: `p_filesz <= p_memsz`, offsets congruent to addresses modulo the page (and,
/// a warning, modulo `p_align`), no two overlapping in the file (nor one without file bytes
/// sharing another's offset), sorted by address and apart in memory.
fn check_loads(
    elf: &ElfFile<'_>,
    loads: &[&ProgramHeader],
    add: &mut impl FnMut(Option<u64>, String),
    warn: &mut impl FnMut(Option<u64>, String),
) {
    let h = elf.header();
    let phdr_at = |p: &ProgramHeader| phdr_offset(elf, p);
    let page = page_size(h.e_machine, elf.program_headers());
    for p in loads {
        if p.p_filesz > p.p_memsz {
            add(
                phdr_at(p),
                format!("PT_LOAD [{}]: p_filesz > p_memsz", p.index),
            );
        }
        if p.p_offset % page != p.p_vaddr % page {
            add(
                phdr_at(p),
                format!(
                    "PT_LOAD [{}]: p_offset {:#x} and p_vaddr {:#x} differ modulo the page {page:#x}",
                    p.index, p.p_offset, p.p_vaddr
                ),
            );
        }
        if p.p_align > 1 && !p.p_align.is_power_of_two() {
            add(
                phdr_at(p),
                format!(
                    "PT_LOAD [{}]: p_align {:#x} is not a power of two",
                    p.index, p.p_align
                ),
            );
        } else if p.p_align > 1 && p.p_offset % p.p_align != p.p_vaddr % p.p_align {
            // glibc maps each segment at its page, not at `p_align`: what matters to it is
            // the page congruence, checked above.
            warn(
                phdr_at(p),
                format!(
                    "PT_LOAD [{}]: p_offset {:#x} and p_vaddr {:#x} differ modulo p_align {:#x} (the ELF specification requires congruence; loaders need it only modulo the page {page:#x})",
                    p.index, p.p_offset, p.p_vaddr, p.p_align
                ),
            );
        }
    }
    for (i, p) in loads.iter().enumerate() {
        for q in &loads[i + 1..] {
            let (pe, qe) = (p.p_offset + p.p_filesz, q.p_offset + q.p_filesz);
            if p.p_filesz > 0 && q.p_filesz > 0 && p.p_offset < qe && q.p_offset < pe {
                add(
                    phdr_at(q),
                    format!(
                        "PT_LOAD [{}] and [{}] overlap in the file",
                        p.index, q.index
                    ),
                );
            }
            if (p.p_filesz == 0) != (q.p_filesz == 0) && p.p_offset == q.p_offset {
                add(
                    phdr_at(q),
                    format!(
                        "PT_LOAD [{}] and [{}] share p_offset {:#x}, one without file bytes",
                        p.index, q.index, p.p_offset
                    ),
                );
            }
        }
    }
    for w in loads.windows(2) {
        if w[1].p_vaddr < w[0].p_vaddr.saturating_add(w[0].p_memsz) {
            add(
                phdr_at(w[1]),
                format!(
                    "PT_LOAD [{}] is not above PT_LOAD [{}] in memory",
                    w[1].index, w[0].index
                ),
            );
        }
    }
}

/// The program header table lies inside a `PT_LOAD`; in executables, its segment has the
/// first `PT_LOAD`'s `p_vaddr - p_offset`; `PT_PHDR` describes it (its size, a warning).
fn check_program_header_table(
    elf: &ElfFile<'_>,
    loads: &[&ProgramHeader],
    add: &mut impl FnMut(Option<u64>, String),
    warn: &mut impl FnMut(Option<u64>, String),
) {
    let h = elf.header();
    let phdr_at = |p: &ProgramHeader| phdr_offset(elf, p);
    let table_len = elf.program_headers().len() as u64 * PHDR_SIZE;
    if !loads.is_empty() {
        let covering = loads
            .iter()
            .find(|p| p.p_offset <= h.e_phoff && h.e_phoff + table_len <= p.p_offset + p.p_filesz);
        match covering {
            None => add(
                Some(h.e_phoff),
                "the program header table is not inside a PT_LOAD".into(),
            ),
            Some(c) => {
                let delta = c.p_vaddr.wrapping_sub(c.p_offset);
                let is_exec = elf.is_executable();
                let first = loads[0].p_vaddr.wrapping_sub(loads[0].p_offset);
                if is_exec && delta != first {
                    add(
                        Some(h.e_phoff),
                        format!(
                            "executable: the program header table's segment has p_vaddr - p_offset {delta:#x}, the first PT_LOAD {first:#x} (AT_PHDR would be wrong on kernels before 5.18)"
                        ),
                    );
                }
                for p in elf.program_headers().iter().filter(|p| p.p_type == PT_PHDR) {
                    if p.p_offset != h.e_phoff || p.p_vaddr.wrapping_sub(p.p_offset) != delta {
                        add(
                            phdr_at(p),
                            format!(
                                "PT_PHDR [{}] does not describe the program header table at {:#x} ({} bytes)",
                                p.index, h.e_phoff, table_len
                            ),
                        );
                    } else if p.p_filesz != table_len || p.p_memsz != table_len {
                        // The loader computes the load bias from PT_PHDR's address alone.
                        warn(
                            phdr_at(p),
                            format!(
                                "PT_PHDR [{}]: p_filesz {:#x} and p_memsz {:#x}, but the program header table at {:#x} is {} bytes (loaders read only its address)",
                                p.index, p.p_filesz, p.p_memsz, h.e_phoff, table_len
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// The section header table overlaps neither the program header table nor a section;
/// allocated sections are aligned, and backed by a `PT_LOAD` at their address (in the file,
/// or in memory for `SHT_NOBITS`).
fn check_sections(
    elf: &ElfFile<'_>,
    loads: &[&ProgramHeader],
    add: &mut impl FnMut(Option<u64>, String),
) {
    let h = elf.header();
    let table_len = elf.program_headers().len() as u64 * PHDR_SIZE;
    let sht = h.e_shoff..h.e_shoff + elf.section_headers().len() as u64 * SHDR_SIZE;
    let overlaps =
        |s: u64, len: u64, r: &std::ops::Range<u64>| len > 0 && s < r.end && r.start < s + len;
    if overlaps(h.e_phoff, table_len, &sht) {
        add(
            Some(h.e_shoff),
            "the section header table overlaps the program header table".into(),
        );
    }
    for s in elf.section_headers() {
        if s.has_file_data() && overlaps(s.sh_offset, s.sh_size, &sht) {
            add(
                Some(h.e_shoff),
                format!(
                    "the section header table overlaps section [{}] {}",
                    s.index, s.name
                ),
            );
        }
        if s.sh_flags & u64::from(SHF_ALLOC) == 0 || s.sh_size == 0 {
            continue;
        }
        if s.sh_addralign > 1 && s.sh_addr % s.sh_addralign != 0 {
            add(
                Some(s.sh_offset),
                format!(
                    "section [{}] {}: address {:#x} not aligned to {}",
                    s.index, s.name, s.sh_addr, s.sh_addralign
                ),
            );
        }
        if s.sh_flags & u64::from(SHF_TLS) != 0 {
            continue;
        }
        let end = s.sh_addr.saturating_add(s.sh_size);
        if s.has_file_data() {
            let ok = loads.iter().any(|p| {
                p.p_offset <= s.sh_offset
                    && s.sh_offset + s.sh_size <= p.p_offset + p.p_filesz
                    && s.sh_addr.wrapping_sub(p.p_vaddr) == s.sh_offset - p.p_offset
            });
            if !ok {
                add(
                    Some(s.sh_offset),
                    format!(
                        "section [{}] {} is not file-backed by a PT_LOAD at its address {:#x}",
                        s.index, s.name, s.sh_addr
                    ),
                );
            }
        } else if s.sh_type == SHT_NOBITS
            && !loads
                .iter()
                .any(|p| p.p_vaddr <= s.sh_addr && end <= p.p_vaddr.saturating_add(p.p_memsz))
        {
            add(
                Some(s.sh_offset),
                format!(
                    "NOBITS section [{}] {} is not inside a PT_LOAD's memory",
                    s.index, s.name
                ),
            );
        }
    }
}

/// In a kpacked file: the `.rocm_kpack_ref` marker is allocated and decodes as HIPK
/// metadata, and every wrapper is a HIPK one whose pointer the loader puts on it.
fn check_kpacked(data: &[u8], elf: &ElfFile<'_>, add: &mut impl FnMut(Option<u64>, String)) {
    let h = elf.header();
    match inspect_elf(elf) {
        Err(e) => add(None, format!("fat-binary parts do not parse: {e}")),
        Ok(fat) if fat.kind == FatBinaryKind::Kpacked => {
            let marker_vaddr = match &fat.marker {
                None => {
                    add(None, "HIPK wrappers but no .rocm_kpack_ref section".into());
                    None
                }
                Some(m) if !m.alloc => {
                    add(
                        Some(m.offset),
                        ".rocm_kpack_ref is not allocated (SHF_ALLOC)".into(),
                    );
                    None
                }
                Some(m) => {
                    match m.bytes(data).map(MarkerMetadata::decode) {
                        None => add(
                            Some(m.offset),
                            ".rocm_kpack_ref lies outside the file".into(),
                        ),
                        Some(Err(e)) => add(
                            Some(m.offset),
                            format!(".rocm_kpack_ref does not decode as HIPK metadata: {e}"),
                        ),
                        Some(Ok((_, used))) if used as u64 != m.size => add(
                            Some(m.offset),
                            format!(
                                ".rocm_kpack_ref holds {} bytes after its metadata",
                                m.size - used as u64
                            ),
                        ),
                        Some(Ok(_)) => {}
                    }
                    Some(m.vaddr)
                }
            };
            if fat.wrappers.is_empty() {
                add(None, "kpacked file without wrappers".into());
            }
            for w in &fat.wrappers {
                let at = Some(w.offset);
                hipk_wrapper_issues(w.index, w.offset, w.magic, w.version, w.reserved1, add);
                if h.e_type == ET_DYN && matches!(w.pointer, PointerSource::InPlace(_)) {
                    add(
                        at,
                        format!(
                            "wrapper {}: no relocation fills its pointer in a position-independent file",
                            w.index
                        ),
                    );
                }
                if let Some(mv) = marker_vaddr {
                    match marker_offset(elf, &fat, w) {
                        Ok(0) => {}
                        Ok(into) => add(
                            at,
                            format!(
                                "wrapper {}: at run time its pointer lands {into:#x} bytes into {MARKER_SECTION}, not on the marker at load base + {mv:#x}: {}",
                                w.index,
                                pointer_origin(elf, w)
                            ),
                        ),
                        Err(misdirected) => add(at, format!("wrapper {}: {misdirected}", w.index)),
                    }
                }
            }
        }
        Ok(_) => {}
    }
}
