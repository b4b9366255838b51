//! The host rewrite of aarch64 and ppc64le shared libraries (`fixtures/platforms`, clang-22
//! with ld.lld and GNU ld): the machine comes from `e_machine`, the page from the file's
//! largest `p_align` (64 KiB by default on both), and every layout rule holds modulo that
//! page. Loading them under qemu is kpack-pipeline's `platforms` test.

use kpack_elf::machine::page_size;
use kpack_elf::rewrite::plan;
use kpack_elf::{ElfFile, FatBinaryKind, PointerSource, RelocKind, inspect, reloc_kind, verify};
use kpack_hostbin::marker::MarkerMetadata;
use kpack_testkit::{PLATFORM_FIXTURES, read_fixture};
use object::elf::{
    ELFDATA2MSB, EM_AARCH64, EM_PPC64, PT_LOAD, R_AARCH64_RELATIVE, R_PPC64_RELATIVE,
};

fn marker() -> Vec<u8> {
    MarkerMetadata {
        kernel_name: "lib/libtest.so".into(),
        search_paths: vec!["../.kpack/test_@GFXARCH@.kpack".into()],
        host_entry_id: None,
    }
    .encode()
    .unwrap()
}

fn relative(e_machine: u16) -> u32 {
    match e_machine {
        EM_AARCH64 => R_AARCH64_RELATIVE,
        EM_PPC64 => R_PPC64_RELATIVE,
        other => panic!("not a platform fixture machine: {other}"),
    }
}

#[test]
fn aarch64_and_ppc64le_rewrites_cut_and_align_in_the_files_page() {
    let marker = marker();
    for &(rel, foreign) in PLATFORM_FIXTURES {
        let input = read_fixture(rel);
        let before = inspect(&input).unwrap();
        assert_eq!(before.machine, foreign.e_machine, "{rel}");
        // The -fgpu-rdc libraries fill one wrapper pointer with the machine's absolute
        // 64-bit type against __hip_fatbin_<hash> (R_AARCH64_ABS64, R_PPC64_ADDR64).
        let absolute = before.wrappers.iter().any(|w| {
            matches!(&w.pointer, PointerSource::Rela { r_type, .. }
                if reloc_kind(foreign.e_machine, *r_type) == RelocKind::Absolute64)
        });
        assert_eq!(absolute, rel.contains("librdc"), "{rel}");
        assert_eq!(before.kind, FatBinaryKind::Fat, "{rel}");
        let a = ElfFile::parse(&input).unwrap();
        let page = page_size(foreign.e_machine, a.program_headers());
        let want_page = if rel.ends_with("_4k.so") {
            0x1000
        } else {
            0x10000
        };
        assert_eq!(page, want_page, "{rel}: the page is the largest p_align");

        let rewrite = plan(&input, &marker).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let out = rewrite.to_vec(&input);
        verify(&out).unwrap_or_else(|issues| panic!("{rel}: {issues:?}"));

        // Whole pages of .hip_fatbin go, in the file's page: the 6 KB fatbins span one
        // 4 KiB page and no 64 KiB one; the 168 KB one spans one 64 KiB page.
        let fatbin = before.fatbin.as_ref().unwrap();
        let (v, end) = (fatbin.vaddr, fatbin.vaddr + fatbin.size);
        let whole = (end / page * page).saturating_sub(v.div_ceil(page) * page);
        assert_eq!(rewrite.summary.removed, whole, "{rel}");
        assert_eq!(rewrite.summary.removed % page, 0, "{rel}");
        if rel.contains("libbig") || rel.ends_with("_4k.so") {
            assert!(rewrite.summary.removed > 0, "{rel}: nothing removed");
        }
        // The marker's segment needs congruence, not a page-aligned file offset: the file
        // grows by the marker and the tables only, never by padding to a 64 KiB boundary.
        assert!(
            rewrite.summary.output_len < rewrite.summary.input_len - rewrite.summary.removed + 4096,
            "{rel}: {:?}",
            rewrite.summary
        );

        // Every PT_LOAD of the output is congruent modulo the page, the marker's segment
        // too, and sits one free page above the others.
        let b = ElfFile::parse(&out).unwrap();
        let loads: Vec<_> = b
            .program_headers()
            .iter()
            .filter(|p| p.p_type == PT_LOAD)
            .collect();
        for p in &loads {
            assert_eq!(p.p_offset % page, p.p_vaddr % page, "{rel}: {p:?}");
            assert!(p.p_align <= page, "{rel}: {p:?}");
        }
        let seg = loads
            .iter()
            .find(|p| {
                p.p_vaddr <= rewrite.summary.marker_vaddr
                    && rewrite.summary.marker_vaddr < p.p_vaddr + p.p_memsz
            })
            .unwrap();
        assert_eq!(seg.p_align, page, "{rel}");
        let below = loads
            .iter()
            .filter(|p| p.p_vaddr < seg.p_vaddr)
            .map(|p| p.p_vaddr + p.p_memsz)
            .max()
            .unwrap();
        assert!(
            seg.p_vaddr / page * page >= below.div_ceil(page) * page + page,
            "{rel}: no free page below the marker's segment"
        );

        // Each wrapper is HIPK and relocated by the machine's RELATIVE type to the marker
        // (an absolute relocation is converted).
        let after = inspect(&out).unwrap();
        assert_eq!(after.kind, FatBinaryKind::Kpacked, "{rel}");
        assert_eq!(after.wrappers.len(), before.wrappers.len(), "{rel}");
        for w in &after.wrappers {
            match &w.pointer {
                PointerSource::Rela { r_type, addend, .. } => {
                    assert_eq!(*r_type, relative(foreign.e_machine), "{rel}");
                    assert_eq!(*addend as u64, rewrite.summary.marker_vaddr, "{rel}");
                }
                other => panic!("{rel}: pointer filled by {other:?}"),
            }
            assert_eq!(w.target, Some(rewrite.summary.marker_vaddr), "{rel}");
        }
    }
}

#[test]
fn the_machine_comes_from_the_elf_header_not_the_bundles_host_entry() {
    // clang writes `host-x86_64-unknown-linux` as the host entry of every bundle, whatever
    // the host machine (the big fixtures' bundles are uncompressed, so it is visible).
    for &(rel, foreign) in PLATFORM_FIXTURES
        .iter()
        .filter(|(r, _)| r.contains("libbig"))
    {
        let input = read_fixture(rel);
        let fat = inspect(&input).unwrap();
        let f = fat.fatbin.as_ref().unwrap();
        let bytes = &input[f.offset as usize..(f.offset + f.size) as usize];
        assert!(
            bytes
                .windows(b"host-x86_64-unknown-linux".len())
                .any(|w| w == b"host-x86_64-unknown-linux"),
            "{rel}"
        );
        assert_eq!(fat.machine, foreign.e_machine, "{rel}");
        let out = plan(&input, &marker()).unwrap().to_vec(&input);
        assert_eq!(inspect(&out).unwrap().machine, foreign.e_machine, "{rel}");
    }
}

#[test]
fn big_endian_ppc64_is_refused_with_its_reason() {
    let mut be = read_fixture("platforms/libmodern_ppc64le_lld.so");
    be[5] = ELFDATA2MSB;
    let err = plan(&be, &marker()).unwrap_err().to_string();
    assert!(
        err.contains("big-endian") && err.contains("ppc64le"),
        "{err}"
    );
}
