//! The verifier on what the reference rocm-kpack rewrote (`fixtures/refmade/`): a wrapper's
//! pointer is where the loader puts it (the RELA addend; the value stored in the file only
//! under RELR, REL or without relocation), so nine of its ten libraries pass; the RELR one,
//! whose pointer lands on the ELF header, is refused in words; what glibc loads but the ELF
//! specification forbids is a warning.

use kpack_elf::verify::findings;
use kpack_elf::{ElfFile, PointerSource, VerifyIssue, inspect};
use kpack_testkit::refmade::{REFMADE_LIBRARIES, REFMADE_MISDIRECTED, refmade_library};
use kpack_testkit::{assert_no_debug_formatting, fixture, read_fixture};

/// The message of `issue` with its offset, as `verify-elf` prints it, checked for Rust
/// debug formatting.
fn shown(issue: &VerifyIssue) -> String {
    let text = issue.to_string();
    assert_no_debug_formatting(&text);
    text
}

#[test]
fn nine_of_the_reference_made_libraries_verify_the_relr_one_is_refused() {
    for (name, _) in REFMADE_LIBRARIES {
        let found = findings(&std::fs::read(refmade_library(name)).unwrap());
        if name == REFMADE_MISDIRECTED {
            assert_eq!(found.issues.len(), 1, "{name}: {:#?}", found.issues);
        } else {
            assert!(found.issues.is_empty(), "{name}: {:#?}", found.issues);
        }
        let warned = name == "libalign2m.so";
        assert_eq!(!found.warnings.is_empty(), warned, "{name}: {:#?}", found);
    }
}

#[test]
fn the_relr_library_is_refused_naming_the_wrapper_where_its_pointer_lands_and_why() {
    let data = std::fs::read(refmade_library(REFMADE_MISDIRECTED)).unwrap();
    let fat = inspect(&data).unwrap();
    let w = &fat.wrappers[0];
    assert!(matches!(w.pointer, PointerSource::Relr { in_file: 0, .. }));
    let marker = fat.marker.as_ref().unwrap().vaddr;
    let found = findings(&data);
    let issue = &found.issues[0];
    assert_eq!(issue.offset, Some(w.offset));
    let text = shown(issue);
    assert_eq!(
        text,
        format!(
            "offset {:#x}: wrapper 0: at run time its pointer lands at load base + 0x0, the ELF \
             header (file offset 0x0), not on the marker .rocm_kpack_ref at load base + \
             {marker:#x}: under RELR (word {} of section [{}] .relr.dyn) the value stored in \
             the file is the addend, and it is 0x0",
            w.offset,
            match w.pointer {
                PointerSource::Relr { word_index, .. } => word_index,
                _ => unreachable!(),
            },
            match w.pointer {
                PointerSource::Relr { section_index, .. } => section_index,
                _ => unreachable!(),
            },
        )
    );
}

/// The file offset of `r_addend` of the RELA entry that fills `data`'s wrapper 0.
fn wrapper_addend_at(data: &[u8]) -> usize {
    let elf = ElfFile::parse(data).unwrap();
    let fat = inspect(data).unwrap();
    let PointerSource::Rela {
        section_index,
        entry_index,
        ..
    } = fat.wrappers[0].pointer
    else {
        panic!("wrapper 0 is not filled by RELA");
    };
    (elf.section_headers()[section_index].sh_offset + entry_index as u64 * 24 + 16) as usize
}

#[test]
fn a_wrapper_whose_addend_is_off_by_one_is_refused() {
    // The reference's output (0 in the file) and kpack's (the pointer in the file too).
    let kpacked = {
        let input = read_fixture("bin/libone.so");
        let (_, marker) = crate::rewrite::marker();
        kpack_elf::rewrite::plan(&input, &marker)
            .unwrap()
            .to_vec(&input)
    };
    let reference = std::fs::read(refmade_library("libone.so")).unwrap();
    for (who, mut data) in [("kpack", kpacked), ("reference", reference)] {
        assert!(findings(&data).issues.is_empty(), "{who}");
        let at = wrapper_addend_at(&data);
        let addend = u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
        data[at..at + 8].copy_from_slice(&(addend + 1).to_le_bytes());
        let fat = inspect(&data).unwrap();
        let marker = fat.marker.as_ref().unwrap();
        let found = findings(&data);
        assert_eq!(found.issues.len(), 1, "{who}: {:#?}", found.issues);
        let text = shown(&found.issues[0]);
        let want = format!(
            "offset {:#x}: wrapper 0: at run time its pointer lands 0x1 bytes into \
             .rocm_kpack_ref, not on the marker at load base + {:#x}: a RELATIVE relocation",
            fat.wrappers[0].offset, marker.vaddr
        );
        assert!(text.starts_with(&want), "{who}: {text}");
        assert!(
            text.ends_with(&format!(
                "fills it, with addend {:#x} (under RELA the value stored in the file, {:#x}, is ignored)",
                addend + 1,
                fat.wrappers[0].binary
            )),
            "{who}: {text}"
        );
    }
}

#[test]
fn non_congruent_p_align_and_a_phdr_size_mismatch_are_warnings_a_wrong_at_phdr_is_refused() {
    // libalign2m.so: two PT_LOADs not congruent modulo their 2 MiB p_align, as glibc loads.
    let data = std::fs::read(refmade_library("libalign2m.so")).unwrap();
    let found = findings(&data);
    let warnings: Vec<String> = found.warnings.iter().map(shown).collect();
    assert_eq!(
        warnings,
        [
            "offset 0x5070: PT_LOAD [2]: p_offset 0x1d41 and p_vaddr 0x2d41 differ modulo p_align 0x200000 (the ELF specification requires congruence; loaders need it only modulo the page 0x1000)",
            "offset 0x50a8: PT_LOAD [3]: p_offset 0x2000 and p_vaddr 0x203000 differ modulo p_align 0x200000 (the ELF specification requires congruence; loaders need it only modulo the page 0x1000)",
        ]
    );
    // shard-c's bin/demo: only PT_PHDR's size disagrees with the table.
    let demo = |shard: &str| {
        std::fs::read(fixture(&format!(
            "refmade/split/{shard}/demo_lib_generic/demo/stage/bin/demo"
        )))
        .unwrap()
    };
    let found = findings(&demo("shard-c"));
    assert!(found.issues.is_empty(), "{:#?}", found.issues);
    let warnings: Vec<String> = found.warnings.iter().map(shown).collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains(
            "PT_PHDR [0]: p_filesz 0x700 and p_memsz 0x700, but the program header table at"
        ),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].ends_with("is 1008 bytes (loaders read only its address)"));
    // shard-a's and shard-b's: AT_PHDR would be wrong on kernels before 5.18, a refusal with
    // the message it always had.
    for shard in ["shard-a", "shard-b"] {
        let found = findings(&demo(shard));
        let issues: Vec<String> = found.issues.iter().map(shown).collect();
        assert!(
            issues.iter().any(|i| i
                .contains("executable: the program header table's segment has p_vaddr - p_offset")
                && i.ends_with("(AT_PHDR would be wrong on kernels before 5.18)")),
            "{shard}: {issues:#?}"
        );
    }
}

/// Each way a pointer is filled is explained in words: on fat fixtures (no marker), where
/// each wrapper's pointer lands (the start of `.hip_fatbin`) and what fills it.
#[test]
fn where_a_pointer_lands_and_why_is_said_for_every_way_it_is_filled() {
    for (rel, why) in [
        (
            "bin/exe_nopie",
            "no relocation applies, so the value stored in the file is the pointer, and it is 0x403000",
        ),
        ("bin/libone.so", "a RELATIVE relocation (type 8, entry"),
        (
            "bin/librdc.so",
            "an absolute 64-bit relocation (type 1, entry",
        ),
        ("bin/librelr.so", "under RELR (word"),
    ] {
        let data = read_fixture(rel);
        let elf = ElfFile::parse(&data).unwrap();
        let fat = inspect(&data).unwrap();
        let fatbin = fat.fatbin.as_ref().unwrap();
        for w in &fat.wrappers {
            let text = kpack_elf::marker_offset(&elf, &fat, w)
                .unwrap_err()
                .to_string();
            let want = format!(
                "at run time its pointer lands at load base + {:#x}, the start of section [{}] \
                 .hip_fatbin, not on the marker .rocm_kpack_ref, which the file does not have: \
                 {why}",
                fatbin.vaddr, fatbin.section_index
            );
            assert!(text.starts_with(&want), "{rel}:\n{text}\n{want}");
            assert_no_debug_formatting(&text);
        }
    }
    // A marker that is not loaded cannot be reached.
    let mut data = std::fs::read(refmade_library("libone.so")).unwrap();
    let elf = ElfFile::parse(&data).unwrap();
    let marker = elf.section_by_name(".rocm_kpack_ref").unwrap().index as u64;
    let flags_at = (elf.header().e_shoff + marker * 64 + 8) as usize;
    data[flags_at..flags_at + 8].copy_from_slice(&0u64.to_le_bytes());
    let elf = ElfFile::parse(&data).unwrap();
    let fat = inspect(&data).unwrap();
    let text = kpack_elf::marker_offset(&elf, &fat, &fat.wrappers[0])
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("not on the marker .rocm_kpack_ref, which is not loaded (no SHF_ALLOC): "),
        "{text}"
    );
}
