//! `inspect` on the real hipcc / clang-22 outputs in `fixtures/`.

use kpack_bundle::BundleFormat;
use kpack_elf::{
    ElfFile, FatBinary, FatBinaryKind, PointerSource, WRAPPER_SIZE, WrapperMagic, inspect,
};
use kpack_testkit::{ELF_FIXTURE_ROLES, ELF_FIXTURES, Role, read_fixture};
use object::elf::{EM_AMDGPU, EM_X86_64, ET_DYN, ET_EXEC, ET_REL, R_X86_64_64, R_X86_64_RELATIVE};

const UNCOMPRESSED_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
const CCOB_MAGIC: &[u8] = b"CCOB";

fn inspected(rel: &str) -> (Vec<u8>, FatBinary) {
    let data = read_fixture(rel);
    let fat = inspect(&data).unwrap_or_else(|e| panic!("{rel}: {e}"));
    (data, fat)
}

/// The file offset of a wrapper's target: through the segments in linked files,
/// section-relative in relocatable objects.
fn target_file_offset(data: &[u8], fat: &FatBinary, target: u64) -> u64 {
    let fatbin = fat.fatbin.as_ref().expect(".hip_fatbin");
    if fat.elf_type == ET_REL {
        fatbin.offset + (target - fatbin.vaddr)
    } else {
        let elf = ElfFile::parse(data).expect("parse");
        elf.vaddr_to_offset(target).expect("target is file-backed")
    }
}

fn rela(fat: &FatBinary, wrapper: usize) -> (u32, Option<&str>, i64) {
    match &fat.wrappers[wrapper].pointer {
        PointerSource::Rela {
            r_type,
            symbol,
            addend,
            ..
        } => (*r_type, symbol.as_deref(), *addend),
        other => panic!("wrapper {wrapper}: expected a RELA pointer, got {other:?}"),
    }
}

#[test]
fn every_elf_fixture_has_the_expected_kind_wrappers_and_bundles() {
    // (file, kind, wrappers, bundles)
    let expected: &[(&str, FatBinaryKind, usize, usize)] = &[
        ("bin/exe_nopie", FatBinaryKind::Fat, 1, 1),
        ("bin/exe_pie", FatBinaryKind::Fat, 1, 1),
        ("bin/k1.o", FatBinaryKind::Fat, 1, 1),
        ("bin/k2.o", FatBinaryKind::Fat, 1, 1),
        ("bin/libalign2m.so", FatBinaryKind::Fat, 1, 1),
        ("bin/libhostonly.so", FatBinaryKind::HostOnly, 0, 0),
        ("bin/libone.so", FatBinaryKind::Fat, 1, 1),
        ("bin/libone_gfx906.so", FatBinaryKind::Fat, 1, 1),
        ("bin/libone_stripped.so", FatBinaryKind::Fat, 1, 1),
        ("bin/librdc.so", FatBinaryKind::Fat, 2, 1),
        ("bin/librelr.so", FatBinaryKind::Fat, 1, 1),
        ("bin/libtwo.so", FatBinaryKind::Fat, 2, 2),
        ("bin/rdc_a.o", FatBinaryKind::Rdc, 1, 0),
        ("bin/rdc_b.o", FatBinaryKind::Rdc, 1, 0),
        ("modern/exe_modern_v3", FatBinaryKind::Fat, 1, 1),
        ("modern/libmodern_nocompress.so", FatBinaryKind::Fat, 1, 1),
        ("modern/libmodern_two_v3.so", FatBinaryKind::Fat, 2, 2),
        ("modern/libmodern_v2.so", FatBinaryKind::Fat, 1, 1),
        ("modern/libmodern_v3.so", FatBinaryKind::Fat, 1, 1),
        ("modern/libmodern_wide_v3.so", FatBinaryKind::Fat, 1, 1),
        ("modern/mk2_v3.o", FatBinaryKind::Fat, 1, 1),
        ("modern/mk_gfx1030.co", FatBinaryKind::HostOnly, 0, 0),
        ("modern/mk_gfx90a_xnackp.co", FatBinaryKind::HostOnly, 0, 0),
        ("modern/mk_v3.o", FatBinaryKind::Fat, 1, 1),
    ];
    let names: Vec<&str> = expected.iter().map(|e| e.0).collect();
    assert_eq!(ELF_FIXTURES, names);
    for &(rel, kind, wrappers, bundles) in expected {
        let (_, fat) = inspected(rel);
        assert_eq!(fat.kind, kind, "{rel}");
        assert_eq!(fat.wrappers.len(), wrappers, "{rel}: wrappers");
        assert_eq!(fat.bundles.len(), bundles, "{rel}: bundles");
        assert!(fat.marker.is_none(), "{rel}: no fixture is kpacked");
    }
}

#[test]
fn every_fixture_role_is_what_inspection_finds() {
    for &(rel, role) in ELF_FIXTURE_ROLES {
        let (_, fat) = inspected(rel);
        let found = match (fat.machine, fat.elf_type, fat.kind) {
            (EM_AMDGPU, _, FatBinaryKind::HostOnly) => Role::CodeObject,
            (EM_X86_64, ET_REL, FatBinaryKind::Fat) => Role::FatObject,
            (EM_X86_64, ET_REL, FatBinaryKind::Rdc) => Role::RdcObject,
            (EM_X86_64, ET_DYN | ET_EXEC, FatBinaryKind::Fat) => Role::LinkedFat,
            (EM_X86_64, ET_DYN | ET_EXEC, FatBinaryKind::HostOnly) => Role::HostOnly,
            other => panic!("{rel}: no role for {other:?}"),
        };
        assert_eq!(found, role, "{rel}");
    }
}

#[test]
fn wrapper_count_is_the_segment_size_over_24() {
    for &rel in ELF_FIXTURES {
        let data = read_fixture(rel);
        let elf = ElfFile::parse(&data).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let fat = inspect(&data).expect("inspect");
        let expected = elf
            .section_by_name(".hipFatBinSegment")
            .map_or(0, |s| s.sh_size / WRAPPER_SIZE);
        assert_eq!(fat.wrappers.len() as u64, expected, "{rel}");
        for (i, w) in fat.wrappers.iter().enumerate() {
            assert_eq!(w.index, i);
            assert_eq!(w.magic, WrapperMagic::Hipf, "{rel} wrapper {i}");
            assert_eq!(w.version, 1, "{rel} wrapper {i}");
            assert_eq!(w.reserved1, 0, "{rel} wrapper {i}");
            let raw = &data[w.offset as usize..][..24];
            assert_eq!(
                raw[..4],
                *b"\x46\x50\x49\x48",
                "{rel}: HIPF bytes at the wrapper offset"
            );
        }
    }
}

#[test]
fn every_fat_wrapper_resolves_to_a_bundle_start() {
    for &rel in ELF_FIXTURES {
        let (data, fat) = inspected(rel);
        if fat.kind != FatBinaryKind::Fat {
            continue;
        }
        let fatbin = fat.fatbin.as_ref().expect("fatbin");
        assert!(!fatbin.nobits, "{rel}");
        for w in &fat.wrappers {
            let bundle = w
                .bundle
                .unwrap_or_else(|| panic!("{rel} wrapper {}: no bundle", w.index));
            let target = w.target.expect("resolved target");
            assert_eq!(target, fatbin.vaddr + fat.bundles[bundle].offset, "{rel}");
            let at = target_file_offset(&data, &fat, target) as usize;
            let magic = match fat.bundles[bundle].format {
                BundleFormat::Uncompressed => UNCOMPRESSED_MAGIC,
                BundleFormat::Compressed { .. } => CCOB_MAGIC,
            };
            assert!(
                data[at..].starts_with(magic),
                "{rel} wrapper {}: no bundle magic at {at:#x}",
                w.index
            );
        }
    }
}

#[test]
fn libone_has_one_wrapper_pointing_at_bundle_0_through_a_relative_relocation() {
    let (data, fat) = inspected("bin/libone.so");
    assert_eq!((fat.elf_type, fat.machine), (ET_DYN, EM_X86_64));
    let fatbin = fat.fatbin.as_ref().unwrap();
    assert_eq!(
        (fatbin.offset, fatbin.vaddr, fatbin.size),
        (0x3000, 0x3000, 0x8179)
    );
    // ROCm 5 ends the section with one NUL after the bundle.
    assert_eq!(fat.bundles[0].offset, 0);
    assert_eq!(fat.bundles[0].len, 0x8178);
    assert_eq!(fat.bundles[0].format, BundleFormat::Uncompressed);

    let w = &fat.wrappers[0];
    assert_eq!((w.offset, w.vaddr), (0xc048, 0xd048));
    assert_eq!(rela(&fat, 0), (R_X86_64_RELATIVE, None, 0x3000));
    let elf = ElfFile::parse(&data).unwrap();
    let PointerSource::Rela {
        section_index,
        entry_index,
        ..
    } = w.pointer
    else {
        unreachable!()
    };
    assert_eq!(elf.section_headers()[section_index].name, ".rela.dyn");
    assert_eq!(entry_index, 4);
    assert_eq!(
        (w.binary, w.target, w.bundle),
        (0x3000, Some(0x3000), Some(0))
    );
}

#[test]
fn libone_variants_without_symtab_or_with_one_target_resolve_the_same_way() {
    for rel in ["bin/libone_stripped.so", "bin/libone_gfx906.so"] {
        let (_, fat) = inspected(rel);
        assert_eq!(rela(&fat, 0), (R_X86_64_RELATIVE, None, 0x3000), "{rel}");
        assert_eq!(fat.wrappers[0].bundle, Some(0), "{rel}");
    }
}

#[test]
fn libtwo_wrappers_point_at_bundles_0_and_1() {
    let (_, fat) = inspected("bin/libtwo.so");
    assert_eq!(
        fat.bundles.iter().map(|b| b.offset).collect::<Vec<_>>(),
        [0, 0x9000]
    );
    assert_eq!(rela(&fat, 0), (R_X86_64_RELATIVE, None, 0x3000));
    assert_eq!(rela(&fat, 1), (R_X86_64_RELATIVE, None, 0xc000));
    assert_eq!(
        fat.wrappers.iter().map(|w| w.bundle).collect::<Vec<_>>(),
        [Some(0), Some(1)]
    );
}

#[test]
fn exe_nopie_pointer_is_the_in_file_absolute_address() {
    let (data, fat) = inspected("bin/exe_nopie");
    assert_eq!(fat.elf_type, ET_EXEC);
    let fatbin = fat.fatbin.as_ref().unwrap();
    assert_eq!((fatbin.offset, fatbin.vaddr), (0x3000, 0x403000));
    assert_ne!(fatbin.offset, fatbin.vaddr);
    let w = &fat.wrappers[0];
    assert_eq!(w.pointer, PointerSource::InPlace(0x403000));
    assert_eq!((w.target, w.bundle), (Some(0x403000), Some(0)));
    let elf = ElfFile::parse(&data).unwrap();
    assert_eq!(elf.vaddr_to_offset(0x403000), Some(0x3000));
    assert_eq!(elf.offset_to_vaddr(0x3000), Some(0x403000));
    // The wrapper section is read-only in a non-PIE executable.
    let seg = elf.section_by_name(".hipFatBinSegment").unwrap();
    assert_eq!(seg.sh_flags & u64::from(object::elf::SHF_WRITE), 0);
}

#[test]
fn pie_executables_use_a_relative_relocation() {
    for rel in ["bin/exe_pie", "modern/exe_modern_v3"] {
        let (_, fat) = inspected(rel);
        assert_eq!(fat.elf_type, ET_DYN, "{rel}");
        assert_eq!(rela(&fat, 0), (R_X86_64_RELATIVE, None, 0x3000), "{rel}");
        assert_eq!(fat.wrappers[0].bundle, Some(0), "{rel}");
    }
}

#[test]
fn librdc_wrappers_share_one_bundle_through_abs64_against_hip_fatbin() {
    let (_, fat) = inspected("bin/librdc.so");
    assert_eq!(fat.bundles.len(), 1);
    for (i, w) in fat.wrappers.iter().enumerate() {
        assert_eq!(rela(&fat, i), (R_X86_64_64, Some("__hip_fatbin"), 0));
        assert_eq!(w.binary, 0, "the in-file pointer is 0");
        assert_eq!((w.target, w.bundle), (Some(0x3000), Some(0)));
    }
}

#[test]
fn libhostonly_has_no_device_code() {
    let (_, fat) = inspected("bin/libhostonly.so");
    assert_eq!(fat.kind, FatBinaryKind::HostOnly);
    assert!(fat.fatbin.is_none() && fat.wrappers.is_empty() && fat.rdc_sections.is_empty());
}

#[test]
fn modern_libraries_carry_ccob_bundles_of_the_expected_version() {
    for (rel, version) in [
        ("modern/libmodern_v3.so", Some(3)),
        ("modern/libmodern_v2.so", Some(2)),
        ("modern/libmodern_nocompress.so", None),
        ("modern/libmodern_wide_v3.so", Some(3)),
        ("modern/mk_v3.o", Some(3)),
    ] {
        let (_, fat) = inspected(rel);
        let found = match fat.bundles[0].format {
            BundleFormat::Compressed { version, .. } => Some(version),
            BundleFormat::Uncompressed => None,
        };
        assert_eq!(found, version, "{rel}");
        assert_eq!(fat.wrappers[0].bundle, Some(0), "{rel}");
    }
}

#[test]
fn libmodern_two_v3_wrappers_point_at_two_ccob_bundles() {
    let (_, fat) = inspected("modern/libmodern_two_v3.so");
    assert_eq!(
        fat.bundles.iter().map(|b| b.offset).collect::<Vec<_>>(),
        [0, 0x1000]
    );
    assert!(
        fat.bundles
            .iter()
            .all(|b| matches!(b.format, BundleFormat::Compressed { version: 3, .. }))
    );
    assert_eq!(rela(&fat, 0), (R_X86_64_RELATIVE, None, 0x3000));
    assert_eq!(rela(&fat, 1), (R_X86_64_RELATIVE, None, 0x4000));
    assert_eq!(
        fat.wrappers.iter().map(|w| w.bundle).collect::<Vec<_>>(),
        [Some(0), Some(1)]
    );
}

#[test]
fn relocatable_objects_point_through_abs64_against_the_fatbin_section_symbol() {
    for rel in ["bin/k1.o", "bin/k2.o", "modern/mk_v3.o", "modern/mk2_v3.o"] {
        let (data, fat) = inspected(rel);
        assert_eq!(fat.elf_type, ET_REL, "{rel}");
        let fatbin = fat.fatbin.as_ref().unwrap();
        assert_eq!((fatbin.offset, fatbin.vaddr), (0x1000, 0), "{rel}");
        assert_eq!(
            rela(&fat, 0),
            (R_X86_64_64, Some(".hip_fatbin"), 0),
            "{rel}"
        );
        let elf = ElfFile::parse(&data).unwrap();
        let PointerSource::Rela { section_index, .. } = fat.wrappers[0].pointer else {
            unreachable!()
        };
        assert_eq!(
            elf.section_headers()[section_index].name,
            ".rela.hipFatBinSegment",
            "{rel}"
        );
        assert_eq!(fat.wrappers[0].bundle, Some(0), "{rel}");
        assert!(fat.rdc_sections.is_empty(), "{rel}");
    }
}

#[test]
fn rdc_objects_list_their_bitcode_sections_and_an_unresolved_hip_fatbin_pointer() {
    for rel in ["bin/rdc_a.o", "bin/rdc_b.o"] {
        let (data, fat) = inspected(rel);
        assert_eq!(fat.kind, FatBinaryKind::Rdc, "{rel}");
        assert!(fat.fatbin.is_none(), "{rel}");
        let triples: Vec<&str> = fat
            .rdc_sections
            .iter()
            .map(|s| s.target_triple.as_str())
            .collect();
        assert_eq!(
            triples,
            [
                "hip-amdgcn-amd-amdhsa-gfx1030",
                "hip-amdgcn-amd-amdhsa-gfx900",
                "hip-amdgcn-amd-amdhsa-gfx90a:xnack-",
                "host-x86_64-pc-linux-gnu",
            ],
            "{rel}"
        );
        for s in &fat.rdc_sections {
            assert_eq!(
                s.name,
                format!("__CLANG_OFFLOAD_BUNDLE__{}", s.target_triple)
            );
            let bytes = &data[s.offset as usize..][..s.size as usize];
            if s.target_triple.starts_with("hip") {
                assert!(
                    bytes.starts_with(b"BC\xc0\xde"),
                    "{rel} {}: LLVM bitcode",
                    s.name
                );
            }
        }
        // __hip_fatbin is undefined until the device link.
        assert_eq!(
            rela(&fat, 0),
            (R_X86_64_64, Some("__hip_fatbin"), 0),
            "{rel}"
        );
        assert_eq!(
            (fat.wrappers[0].target, fat.wrappers[0].bundle),
            (None, None),
            "{rel}"
        );
    }
}

#[test]
fn amdgpu_code_objects_are_not_host_fat_binaries() {
    for rel in ["modern/mk_gfx1030.co", "modern/mk_gfx90a_xnackp.co"] {
        let (_, fat) = inspected(rel);
        assert_eq!(
            (fat.kind, fat.machine),
            (FatBinaryKind::HostOnly, EM_AMDGPU),
            "{rel}"
        );
    }
}
