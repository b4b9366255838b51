//! The ELF parser on real fixtures, cross-checked against binutils when available.

use std::collections::BTreeMap;

use kpack_elf::{ElfFile, RelocationEntries};
use kpack_testkit::{ELF_FIXTURES, fixtures, read_fixture, run_tool};
use object::elf::*;

#[test]
fn libone_headers_and_tables_are_parsed_completely() {
    let data = read_fixture("bin/libone.so");
    let elf = ElfFile::parse(&data).unwrap();
    let h = elf.header();
    assert_eq!((h.e_type, h.e_machine, h.e_version), (ET_DYN, EM_X86_64, 1));
    assert_eq!((h.e_phoff, h.e_shoff, h.e_shstrndx), (64, 0xc850, 31));
    assert_eq!(elf.program_headers().len(), 9);
    assert_eq!(elf.section_headers().len(), 32);

    let loads: Vec<_> = elf
        .program_headers()
        .iter()
        .filter(|p| p.p_type == PT_LOAD)
        .map(|p| (p.p_offset, p.p_vaddr, p.p_filesz, p.p_memsz, p.p_flags))
        .collect();
    assert_eq!(
        loads,
        [
            (0, 0, 0x810, 0x810, PF_R),
            (0x1000, 0x1000, 0x359, 0x359, PF_R | PF_X),
            (0x2000, 0x2000, 0x92b8, 0x92b8, PF_R),
            (0xbd90, 0xcd90, 0x2d0, 0x2e0, PF_R | PF_W),
        ]
    );
    let fatbin = elf.section_by_name(".hip_fatbin").unwrap();
    assert_eq!(
        (fatbin.index, fatbin.sh_type, fatbin.sh_addralign),
        (16, SHT_PROGBITS, 4096)
    );
    assert_eq!(elf.section_data(fatbin).unwrap().len(), 0x8179);
    let bss = elf.section_by_name(".bss").unwrap();
    assert!(
        elf.section_data(bss).unwrap().is_empty(),
        "NOBITS has no bytes"
    );
}

#[test]
fn vaddr_mapping_goes_through_load_segments_and_stops_at_filesz() {
    let data = read_fixture("bin/libone.so");
    let elf = ElfFile::parse(&data).unwrap();
    // RW segment: offset 0xbd90 ↔ vaddr 0xcd90, filesz 0x2d0, memsz 0x2e0.
    assert_eq!(elf.vaddr_to_offset(0xd048), Some(0xc048));
    assert_eq!(elf.vaddr_to_offset(0xd05f), Some(0xc05f));
    assert_eq!(elf.vaddr_to_offset(0xd060), None, ".bss has no file bytes");
    assert_eq!(elf.vaddr_to_offset(0xd070), None, "beyond every segment");
    assert_eq!(elf.offset_to_vaddr(0xc048), Some(0xd048));
    assert_eq!(
        elf.offset_to_vaddr(0xc060),
        None,
        "past the last file-backed byte"
    );
    assert_eq!(elf.load_segment_for_vaddr(0xd060).map(|p| p.index), Some(3));

    let obj = read_fixture("bin/k1.o");
    let obj = ElfFile::parse(&obj).unwrap();
    assert!(obj.program_headers().is_empty());
    assert_eq!(
        obj.vaddr_to_offset(0),
        None,
        "relocatable objects are not mapped"
    );
}

#[test]
fn hip_fatbin_symbol_is_found_in_symtab_then_dynsym() {
    let data = read_fixture("bin/librdc.so");
    let elf = ElfFile::parse(&data).unwrap();
    let sym = elf.find_symbol("__hip_fatbin").unwrap().unwrap();
    assert_eq!((sym.index, sym.st_value, sym.st_shndx), (34, 0x3000, 16));
    assert_eq!(elf.symbol_address(&sym).unwrap(), Some(0x3000));

    // Stripped: only .dynsym is left.
    let data = read_fixture("bin/libone_stripped.so");
    let elf = ElfFile::parse(&data).unwrap();
    assert!(elf.section_by_name(".symtab").is_none());
    let sym = elf.find_symbol("add_one").unwrap().unwrap();
    assert_eq!(sym.st_value, 0xcda8);
    assert!(elf.find_symbol("__hip_fatbin").unwrap().is_none());

    // In an object, a section symbol is named after its section and its address
    // is section-relative.
    let data = read_fixture("bin/k1.o");
    let elf = ElfFile::parse(&data).unwrap();
    let symtab = elf.section_by_name(".symtab").unwrap();
    let sym = elf.symbol(symtab, 8).unwrap();
    assert_eq!(
        (sym.name.as_str(), sym.symbol_type(), sym.st_shndx),
        (".hip_fatbin", STT_SECTION, 7)
    );
    assert_eq!(elf.symbol_address(&sym).unwrap(), Some(0));
}

#[test]
fn rela_sections_decode_types_symbols_and_addends() {
    let data = read_fixture("bin/libone.so");
    let elf = ElfFile::parse(&data).unwrap();
    let relocs = elf.relocations().unwrap();
    let names: Vec<&str> = relocs.iter().map(|r| r.header.name.as_str()).collect();
    assert_eq!(names, [".rela.dyn", ".rela.plt"]);
    let RelocationEntries::Rela(dyn_relocs) = &relocs[0].entries else {
        panic!()
    };
    assert_eq!(dyn_relocs.len(), 11);
    let relative: Vec<(u64, i64)> = dyn_relocs
        .iter()
        .filter(|r| r.r_type == R_X86_64_RELATIVE)
        .map(|r| (r.r_offset, r.r_addend))
        .collect();
    assert_eq!(
        relative,
        [
            (0xcd90, 0x1170),
            (0xcd98, 0x12b0),
            (0xcda0, 0x1130),
            (0xd040, 0xd040),
            (0xd050, 0x3000)
        ]
    );
    let abs = dyn_relocs.iter().find(|r| r.r_type == R_X86_64_64).unwrap();
    assert_eq!((abs.r_offset, abs.r_sym), (0xcda8, 13));
    let dynsym = elf
        .section(u64::from(relocs[0].header.sh_link), "test")
        .unwrap();
    assert_eq!(
        elf.symbol(dynsym, 13).unwrap().name,
        "__device_stub__add_one"
    );
    let RelocationEntries::Rela(plt) = &relocs[1].entries else {
        panic!()
    };
    assert!(plt.iter().all(|r| r.r_type == R_X86_64_JUMP_SLOT));
}

#[test]
fn dynamic_section_lists_entries_up_to_dt_null() {
    let data = read_fixture("bin/libone.so");
    let elf = ElfFile::parse(&data).unwrap();
    let dynamic = elf.dynamic().unwrap();
    // readelf: "contains 29 entries", counting the terminating DT_NULL.
    assert_eq!(dynamic.len(), 28);
    assert_eq!(dynamic[0].offset, 0xbdb0);
    assert_eq!(
        dynamic
            .iter()
            .filter(|d| d.tag == u64::from(DT_NEEDED))
            .count(),
        5
    );
    let rela = dynamic
        .iter()
        .find(|d| d.tag == u64::from(DT_RELA))
        .unwrap();
    assert_eq!(rela.val, elf.section_by_name(".rela.dyn").unwrap().sh_addr);
    let relasz = dynamic
        .iter()
        .find(|d| d.tag == u64::from(DT_RELASZ))
        .unwrap();
    assert_eq!(relasz.val, 0x108);
}

/// The output of `tool args… FIXTURE`; panics when the tool is missing or fails.
fn tool_output(tool: &str, args: &[&str], rel: &str) -> String {
    let path = fixtures().join(rel);
    let path = path.to_str().expect("fixture paths are UTF-8");
    let args: Vec<&str> = args.iter().copied().chain([path]).collect();
    String::from_utf8_lossy(&run_tool(tool, &args)).into_owned()
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("hex {s:?}"))
}

/// (name, addr, offset, size) from `readelf -SW`, excluding section 0.
fn readelf_sections(text: &str) -> Vec<(String, u64, u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix('[')?;
            let (index, rest) = rest.split_once(']')?;
            let index: usize = index.trim().parse().ok()?;
            if index == 0 {
                return None;
            }
            let fields: Vec<&str> = rest.split_whitespace().collect();
            Some((
                fields[0].to_string(),
                hex(fields[2]),
                hex(fields[3]),
                hex(fields[4]),
            ))
        })
        .collect()
}

/// (offset, vaddr, filesz, memsz) of every program header from `readelf -lW`.
fn readelf_segments(text: &str) -> Vec<(u64, u64, u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() >= 6 && fields[1].starts_with("0x") && fields[2].starts_with("0x")).then(
                || {
                    (
                        hex(fields[1]),
                        hex(fields[2]),
                        hex(fields[4]),
                        hex(fields[5]),
                    )
                },
            )
        })
        .collect()
}

/// Entry count per relocation section from `readelf -rW`.
fn readelf_relocation_counts(text: &str) -> BTreeMap<String, usize> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("Relocation section '")?;
            let (name, rest) = rest.split_once('\'')?;
            let count = rest.split_whitespace().rev().nth(1)?.parse().ok()?;
            Some((name.to_string(), count))
        })
        .collect()
}

#[test]
#[cfg_attr(windows, ignore = "needs readelf")]
fn sections_segments_and_relocation_counts_match_readelf() {
    for rel in ELF_FIXTURES {
        let data = read_fixture(rel);
        let elf = ElfFile::parse(&data).unwrap_or_else(|e| panic!("{rel}: {e}"));

        let ours: Vec<_> = elf
            .section_headers()
            .iter()
            .skip(1)
            .map(|s| (s.name.clone(), s.sh_addr, s.sh_offset, s.sh_size))
            .collect();
        let sections = readelf_sections(&tool_output("readelf", &["-SW"], rel));
        assert!(!sections.is_empty(), "{rel}: readelf output not understood");
        assert_eq!(ours, sections, "{rel}: sections");

        let ours: Vec<_> = elf
            .program_headers()
            .iter()
            .map(|p| (p.p_offset, p.p_vaddr, p.p_filesz, p.p_memsz))
            .collect();
        let segments = tool_output("readelf", &["-lW"], rel);
        assert_eq!(ours, readelf_segments(&segments), "{rel}: segments");

        let ours: BTreeMap<String, usize> = elf
            .relocations()
            .unwrap()
            .iter()
            .map(|r| {
                let n = match &r.entries {
                    RelocationEntries::Rela(v) => v.len(),
                    RelocationEntries::Rel(v) => v.len(),
                    // readelf counts RELR words ("contains 3 entries: 5 offsets").
                    RelocationEntries::Relr(_) => (r.header.sh_size / 8) as usize,
                };
                (r.header.name.clone(), n)
            })
            .collect();
        let relocs = tool_output("readelf", &["-rW"], rel);
        assert_eq!(
            ours,
            readelf_relocation_counts(&relocs),
            "{rel}: relocations"
        );
    }
}

#[test]
fn elf_fixture_list_is_complete() {
    let mut found = Vec::new();
    for dir in ["bin", "modern"] {
        for entry in std::fs::read_dir(fixtures().join(dir)).unwrap() {
            let rel = format!("{dir}/{}", entry.unwrap().file_name().to_string_lossy());
            if kpack_elf::is_elf(&read_fixture(&rel)) {
                found.push(rel);
            }
        }
    }
    found.sort();
    assert_eq!(found, ELF_FIXTURES);
}
