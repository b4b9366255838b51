//! Separated debug files (`fixtures/debug`, `objcopy --only-keep-debug` of fat fixtures):
//! device sections present but `SHT_NOBITS`, so no device code.

use kpack_elf::rewrite::{RewriteError, plan};
use kpack_elf::{ElfFile, FatBinaryKind, inspect};
use kpack_testkit::{DEBUG_FIXTURES, read_fixture};
use object::elf::{PT_DYNAMIC, PT_GNU_EH_FRAME, PT_GNU_RELRO, PT_LOAD, SHT_NOBITS};

#[test]
fn debug_files_inspect_as_debug_only_without_wrappers_bundles_or_marker() {
    for rel in DEBUG_FIXTURES {
        let data = read_fixture(rel);
        let elf = ElfFile::parse(&data).unwrap_or_else(|e| panic!("{rel}: {e}"));
        // What build_debug.sh checked: both device sections are there, without bytes.
        for name in [".hip_fatbin", ".hipFatBinSegment"] {
            let section = elf.section_by_name(name).unwrap();
            assert_eq!(section.sh_type, SHT_NOBITS, "{rel}: {name}");
        }
        let fat = inspect(&data).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(fat.kind, FatBinaryKind::DebugOnly, "{rel}");
        assert!(fat.fatbin.as_ref().is_some_and(|f| f.nobits), "{rel}");
        assert!(fat.wrappers.is_empty(), "{rel}: no wrapper is read");
        assert!(fat.bundles.is_empty(), "{rel}");
        assert!(fat.marker.is_none(), "{rel}");
    }
}

#[test]
fn the_host_rewrite_refuses_a_debug_file_as_debug_only() {
    for rel in DEBUG_FIXTURES {
        let data = read_fixture(rel);
        match plan(&data, b"marker") {
            Err(RewriteError::DebugOnly) => {}
            Err(other) => panic!("{rel}: expected DebugOnly, got {other}"),
            Ok(_) => panic!("{rel}: a rewrite was planned"),
        }
    }
}

#[test]
fn a_stripped_librarys_debug_file_parses_though_segments_point_past_its_end() {
    // No debug sections to keep: the file (2864 bytes) ends before the offsets the library's
    // program headers keep (its RW PT_LOAD, PT_DYNAMIC, GNU_RELRO, GNU_EH_FRAME), none of
    // which has file bytes left. Real libraries ship stripped.
    let data = read_fixture("debug/libone_stripped.so.debug");
    let elf = ElfFile::parse(&data).unwrap();
    let past_end: Vec<_> = elf
        .program_headers()
        .iter()
        .filter(|p| p.p_offset > data.len() as u64)
        .collect();
    let types: Vec<u32> = past_end.iter().map(|p| p.p_type).collect();
    assert_eq!(types, [PT_LOAD, PT_DYNAMIC, PT_GNU_EH_FRAME, PT_GNU_RELRO]);
    for p in past_end {
        assert_eq!(p.p_filesz, 0);
        assert_eq!(elf.segment_data(p).unwrap(), b"");
    }
    assert_eq!(inspect(&data).unwrap().kind, FatBinaryKind::DebugOnly);
}
