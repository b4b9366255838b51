//! PE32+ fixtures (`fixtures/platforms`, clang-22 with lld-link and mingw GNU ld): reading,
//! the rewrite and the verifier. Loading them under wine is kpack-pipeline's `pe` test.

use kpack_hostbin::marker::MarkerMetadata;
use kpack_hostbin::{FatBinaryKind, WrapperMagic};
use kpack_pe::rewrite::{PeRewriteError, plan};
use kpack_pe::{PeFile, checksum_of, inspect, verify};
use kpack_testkit::{PE_FIXTURES, read_fixture};

fn marker() -> Vec<u8> {
    MarkerMetadata {
        kernel_name: "bin/hipapp.dll".into(),
        search_paths: vec![".kpack/hipapp_@GFXARCH@.kpack".into()],
        host_entry_id: None,
    }
    .encode()
    .unwrap()
}

/// Offset of `CheckSum` in a PE32+ image.
fn checksum_field(data: &[u8]) -> u64 {
    PeFile::parse(data).unwrap().optional_offset + 64
}

#[test]
fn fixtures_show_their_sections_wrappers_and_bundles() {
    for f in PE_FIXTURES {
        let data = read_fixture(f.path);
        let pe = PeFile::parse(&data).unwrap();
        assert_eq!(pe.machine, 0x8664, "{}", f.path);
        assert_eq!(pe.is_dll(), f.dll, "{}", f.path);
        let fat = inspect(&data).unwrap();
        assert_eq!(fat.kind, FatBinaryKind::Fat, "{}", f.path);
        let section = fat.fatbin.as_ref().unwrap();
        let name = if f.long_names {
            ".hip_fatbin"
        } else {
            ".hip_fat"
        };
        assert_eq!(section.name, name, "{}", f.path);
        assert_eq!(fat.wrappers.len(), f.wrappers, "{}", f.path);
        assert_eq!(
            fat.bundles.len(),
            f.wrappers,
            "{}: one bundle per TU",
            f.path
        );
        assert_eq!(fat.relocatable, f.relocatable, "{}", f.path);
        for (i, w) in fat.wrappers.iter().enumerate() {
            assert_eq!(w.magic, WrapperMagic::Hipf, "{}", f.path);
            assert_eq!(w.version, 1);
            // The pointer is absolute at the preferred base, relocated by DIR64 unless /fixed.
            assert_eq!(
                w.binary,
                section.vaddr + fat.bundles[i].offset,
                "{}",
                f.path
            );
            assert_eq!(w.bundle, Some(i), "{}", f.path);
            assert_eq!(w.relocated, f.relocatable, "{}", f.path);
        }
    }
}

#[test]
fn mingw_long_names_come_from_the_string_table() {
    let data = read_fixture("platforms/hipapp_mingw.dll");
    let pe = PeFile::parse(&data).unwrap();
    let raw_name = |name: &str| {
        let s = pe.section_by_name(name).unwrap();
        data[s.header_offset as usize..s.header_offset as usize + 8].to_vec()
    };
    assert_eq!(raw_name(".hip_fatbin"), b"/4\0\0\0\0\0\0");
    assert_eq!(raw_name(".hipFatBinSegment"), b"/16\0\0\0\0\0");
    assert_ne!(pe.symbol_table, 0);
}

#[test]
fn checksum_matches_the_linkers() {
    // GNU ld writes the checksum; lld-link writes 0.
    let data = read_fixture("platforms/hipapp_mingw.dll");
    let pe = PeFile::parse(&data).unwrap();
    assert_ne!(pe.checksum, 0);
    assert_eq!(checksum_of(&data, checksum_field(&data)), pe.checksum);
}

#[test]
fn rewrite_removes_every_device_byte_and_verifies() {
    let marker = marker();
    for f in PE_FIXTURES {
        let input = read_fixture(f.path);
        verify(&input).unwrap_or_else(|i| panic!("{}: input: {i:?}", f.path));
        let before = PeFile::parse(&input).unwrap();
        let fat_before = inspect(&input).unwrap();
        let fatbin = fat_before.fatbin.clone().unwrap();
        let rewrite = plan(&input, &marker).unwrap_or_else(|e| panic!("{}: {e}", f.path));
        let out = rewrite.to_vec(&input);
        assert_eq!(out.len() as u64, rewrite.summary.output_len);
        verify(&out).unwrap_or_else(|i| panic!("{}: {i:?}", f.path));
        let s = &rewrite.summary;
        assert_eq!(
            s.removed, fatbin.raw_size,
            "{}: all of the raw data",
            f.path
        );
        assert_eq!(s.removed % 512, 0);
        assert_eq!(
            out.len() as u64,
            input.len() as u64 - s.removed + marker.len().next_multiple_of(512) as u64,
            "{}",
            f.path
        );

        let after = PeFile::parse(&out).unwrap();
        assert_eq!(after.sections.len(), before.sections.len() + 1);
        // Nothing moves in memory: every old section keeps its RVA and VirtualSize.
        for (a, b) in before.sections.iter().zip(&after.sections) {
            assert_eq!(
                (a.name.as_str(), a.rva, a.virtual_size),
                (b.name.as_str(), b.rva, b.virtual_size)
            );
        }
        let fat = inspect(&out).unwrap();
        assert_eq!(fat.kind, FatBinaryKind::Kpacked, "{}", f.path);
        assert!(fat.fatbin.as_ref().unwrap().nobits());
        let m = fat.marker.as_ref().unwrap();
        assert_eq!(m.vaddr, s.marker_vaddr);
        assert_eq!(m.offset % 512, 0);
        assert_eq!(m.vaddr % 0x1000, 0);
        assert_eq!(m.bytes(&out).unwrap(), &marker[..]);
        for w in &fat.wrappers {
            assert_eq!(w.magic, WrapperMagic::Hipk);
            assert_eq!(
                w.binary, m.vaddr,
                "{}: pointer = ImageBase + RVA(.kpackrf)",
                f.path
            );
            assert_eq!(w.reserved1, w.index as u64);
            assert_eq!(
                w.relocated, f.relocatable,
                "{}: the DIR64 fix-ups stay",
                f.path
            );
        }
        // The image grew by the marker's pages only.
        assert_eq!(
            after.size_of_image,
            before.size_of_image + marker.len().next_multiple_of(0x1000) as u32
        );
        // Base relocations are unchanged.
        assert_eq!(
            before.base_relocations().unwrap().len(),
            after.base_relocations().unwrap().len()
        );
        // The checksum is kept when there was one (recomputed), 0 when there was none.
        assert_eq!(after.checksum != 0, before.checksum != 0, "{}", f.path);
        assert_eq!(s.checksum.is_some(), before.checksum != 0);
        // Every other section's bytes are the same bytes.
        for (a, b) in before.sections.iter().zip(&after.sections) {
            if a.index == fatbin.index || b.name == ".hipFatB" || b.name == ".hipFatBinSegment" {
                continue;
            }
            assert_eq!(
                before.section_data(a),
                after.section_data(b),
                "{}: {}",
                f.path,
                a.name
            );
        }
        // The mingw COFF symbols and string table moved with their bytes.
        if before.symbol_table != 0 {
            assert_eq!(
                &input[before.symbol_table as usize..],
                &out[after.symbol_table as usize..],
                "{}",
                f.path
            );
            assert_eq!(
                after.section_by_name(".hip_fatbin").unwrap().index,
                fatbin.index
            );
        }
        // Once is enough.
        assert!(matches!(
            plan(&out, &marker),
            Err(PeRewriteError::AlreadyKpacked)
        ));
    }
}

#[test]
fn rewrite_is_deterministic() {
    let input = read_fixture("platforms/hipapp2.dll");
    let a = plan(&input, &marker()).unwrap().to_vec(&input);
    let b = plan(&input, &marker()).unwrap().to_vec(&input);
    assert_eq!(a, b);
}

/// Runs a witness tool; panics if it is missing, fails or warns on stderr. Returns stdout.
fn witness(program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} is required (scripts/setup.sh installs it): {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "{program} {args:?}: {stderr}"
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs the Linux builds of llvm-readobj (the corpus's llvmv) and mingw's objdump; the Linux run checks it"
)]
fn llvm_and_gnu_readers_accept_the_outputs_without_a_warning() {
    let llvmv = kpack_testkit::corpus().join("llvmv");
    let dir = tempfile::tempdir().unwrap();
    for f in PE_FIXTURES {
        let input = read_fixture(f.path);
        let out = plan(&input, &marker()).unwrap().to_vec(&input);
        let path = dir.path().join(f.path.rsplit('/').next().unwrap());
        std::fs::write(&path, &out).unwrap();
        let p = path.to_str().unwrap();
        let llvm = witness(
            llvmv.to_str().unwrap(),
            &[
                "22",
                "llvm-readobj",
                "--file-headers",
                "--sections",
                "--coff-basereloc",
                p,
            ],
        );
        assert!(llvm.contains("Name: .kpackrf"), "{}: {llvm}", f.path);
        let gnu = witness("x86_64-w64-mingw32-objdump", &["-h", "-p", p]);
        assert!(gnu.contains(".kpackrf"), "{}: {gnu}", f.path);
        // GNU objdump resolves the long names through the string table it finds moved.
        if f.long_names {
            assert!(
                gnu.contains(".hip_fatbin") && gnu.contains(".hipFatBinSegment"),
                "{gnu}"
            );
        }
    }
}
