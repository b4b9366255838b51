//! Malformed PE images (a real fixture with one field made to lie): clear errors naming the
//! absolute offset and what was expected, never a panic; and refusals of the rewrite.

use kpack_hostbin::marker::MarkerMetadata;
use kpack_pe::rewrite::{PeRewriteError, plan};
use kpack_pe::{PeError, PeFile, inspect, verify};
use kpack_testkit::read_fixture;

fn fixture() -> Vec<u8> {
    read_fixture("platforms/hipapp.dll")
}

fn put_u32(data: &mut [u8], at: u64, v: u32) {
    data[at as usize..at as usize + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u16(data: &mut [u8], at: u64, v: u16) {
    data[at as usize..at as usize + 2].copy_from_slice(&v.to_le_bytes());
}

fn marker() -> Vec<u8> {
    MarkerMetadata {
        kernel_name: "hipapp.dll".into(),
        search_paths: vec![".kpack/hipapp_@GFXARCH@.kpack".into()],
        host_entry_id: None,
    }
    .encode()
    .unwrap()
}

#[test]
fn bad_e_lfanew_is_reported_with_its_offset() {
    for lfanew in [0x10u32, 0x7fff_0000] {
        let mut data = fixture();
        put_u32(&mut data, 0x3c, lfanew);
        let err = PeFile::parse(&data).unwrap_err();
        assert!(
            matches!(err, PeError::BadLfanew { e_lfanew, .. } if e_lfanew == u64::from(lfanew))
        );
        let msg = err.to_string();
        assert!(msg.contains("e_lfanew at offset 0x3c"), "{msg}");
    }
    // e_lfanew inside the file but not at "PE\0\0".
    let mut data = fixture();
    put_u32(&mut data, 0x3c, 0x40);
    let msg = PeFile::parse(&data).unwrap_err().to_string();
    assert!(msg.contains("NT headers at offset 0x40"), "{msg}");
}

#[test]
fn a_section_beyond_the_file_is_reported_with_its_header_offset() {
    let data = fixture();
    let pe = PeFile::parse(&data).unwrap();
    let last = pe
        .sections
        .iter()
        .max_by_key(|s| s.raw_offset)
        .unwrap()
        .clone();
    let cut = &data[..last.raw_offset as usize + 16];
    let err = PeFile::parse(cut).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("header at offset {:#x}", last.header_offset)),
        "{msg}"
    );
    assert!(msg.contains("beyond the end of the file"), "{msg}");

    // A PointerToRawData that lies.
    let mut data = fixture();
    let s = &pe.sections[1];
    put_u32(&mut data, s.header_offset + 20, 0x7fff_0000);
    let msg = PeFile::parse(&data).unwrap_err().to_string();
    assert!(msg.contains(&format!("section [1] {}", s.name)), "{msg}");
    assert!(msg.contains("0x7fff0000"), "{msg}");
}

#[test]
fn lying_header_sizes_are_refused_with_offsets() {
    let data = fixture();
    let pe = PeFile::parse(&data).unwrap();
    let file_header = pe.nt_offset + 4;

    let mut d = data.clone();
    put_u16(&mut d, file_header + 2, 0xffff); // NumberOfSections
    let msg = PeFile::parse(&d).unwrap_err().to_string();
    assert!(msg.contains("section table"), "{msg}");
    assert!(
        msg.contains(&format!("{:#x}", pe.section_table_offset)),
        "{msg}"
    );

    let mut d = data.clone();
    put_u16(&mut d, file_header + 16, 0x20); // SizeOfOptionalHeader
    let msg = PeFile::parse(&d).unwrap_err().to_string();
    assert!(msg.contains("SizeOfOptionalHeader"), "{msg}");

    let mut d = data.clone();
    put_u32(&mut d, pe.optional_offset + 108, 1000); // NumberOfRvaAndSizes
    let msg = PeFile::parse(&d).unwrap_err().to_string();
    assert!(msg.contains("NumberOfRvaAndSizes"), "{msg}");
    assert!(
        msg.contains(&format!("{:#x}", pe.optional_offset + 108)),
        "{msg}"
    );

    let mut d = data.clone();
    put_u16(&mut d, pe.optional_offset, 0x10b); // a PE32 magic
    let msg = PeFile::parse(&d).unwrap_err().to_string();
    assert!(msg.contains("PE32+"), "{msg}");

    // The wrapper section's VirtualSize: not whole wrappers, then more than its file bytes.
    let wrappers = pe.section_by_name(".hipFatB").unwrap().clone();
    let mut d = data.clone();
    put_u32(&mut d, wrappers.header_offset + 8, 25);
    let msg = inspect(&d).unwrap_err().to_string();
    assert!(
        msg.contains("not a multiple of the 24-byte wrapper"),
        "{msg}"
    );
    let mut d = data.clone();
    put_u32(
        &mut d,
        wrappers.header_offset + 8,
        (wrappers.raw_size / 24 + 1) * 24,
    );
    let msg = inspect(&d).unwrap_err().to_string();
    assert!(msg.contains("exceeds SizeOfRawData"), "{msg}");

    // A base relocation block whose SizeOfBlock runs past the table.
    let dir = pe.directories[5];
    let at = pe.rva_to_offset(dir.rva.into(), 8).unwrap();
    let mut d = data.clone();
    put_u32(&mut d, at + 4, 0x10_0000);
    let msg = inspect(&d).unwrap_err().to_string();
    assert!(
        msg.contains(&format!("base relocation block at offset {at:#x}")),
        "{msg}"
    );

    // A fat-binary section whose bundle lies about its size.
    let fat = pe.section_by_name(".hip_fat").unwrap().clone();
    let mut d = data.clone();
    put_u32(&mut d, u64::from(fat.raw_offset) + 8, 0x7fff_ffff); // CCOB v3 total size (low half)
    let msg = inspect(&d).unwrap_err().to_string();
    assert!(msg.contains(".hip_fatbin at offset"), "{msg}");
}

#[test]
fn a_long_name_outside_the_string_table_is_refused() {
    let data = read_fixture("platforms/hipapp_mingw.dll");
    let pe = PeFile::parse(&data).unwrap();
    let s = pe.section_by_name(".hip_fatbin").unwrap().clone();
    let mut d = data.clone();
    d[s.header_offset as usize..s.header_offset as usize + 8].copy_from_slice(b"/9999999");
    let msg = PeFile::parse(&d).unwrap_err().to_string();
    assert!(
        msg.contains(&format!("header at offset {:#x}", s.header_offset)),
        "{msg}"
    );
    assert!(msg.contains("outside"), "{msg}");
}

#[test]
fn every_truncation_is_an_error_or_a_verified_rewrite_never_a_panic() {
    let marker = marker();
    for name in ["platforms/hipapp.dll", "platforms/hipapp_mingw.dll"] {
        let data = read_fixture(name);
        for len in (0..data.len()).step_by(7) {
            let cut = &data[..len];
            let _ = inspect(cut);
            let _ = verify(cut);
            if let Ok(r) = plan(cut, &marker) {
                verify(&r.to_vec(cut)).unwrap_or_else(|i| panic!("{name}[..{len}]: {i:?}"));
            }
        }
    }
}

#[test]
fn an_authenticode_signed_image_is_refused() {
    let mut data = fixture();
    let pe = PeFile::parse(&data).unwrap();
    let security = pe.optional_offset + 112 + 4 * 8;
    let end = data.len() as u32;
    put_u32(&mut data, security, end);
    put_u32(&mut data, security + 4, 0x800);
    let err = plan(&data, &marker()).unwrap_err();
    assert!(matches!(err, PeRewriteError::Signed { .. }), "{err}");
    assert!(err.to_string().contains("Authenticode-signed"), "{err}");
}

#[test]
fn no_room_for_the_marker_header_is_refused() {
    let mut data = fixture();
    let pe = PeFile::parse(&data).unwrap();
    let table_end = pe.section_table_offset + 40 * pe.sections.len() as u64;
    data[table_end as usize + 8] = 1;
    let msg = plan(&data, &marker()).unwrap_err().to_string();
    assert!(msg.contains(&format!("{table_end:#x}")), "{msg}");
}

#[test]
fn a_pointer_into_the_device_code_is_refused() {
    // Make the .rdata relocation's target point into .hip_fat: after the rewrite it would
    // read zeros.
    let mut data = fixture();
    let pe = PeFile::parse(&data).unwrap();
    let fat = pe.section_by_name(".hip_fat").unwrap().clone();
    let wrappers = pe.section_by_name(".hipFatB").unwrap().clone();
    let other = pe
        .base_relocations()
        .unwrap()
        .into_iter()
        .find(|r| r.rva != u64::from(wrappers.rva) + 8)
        .expect("a base relocation besides the wrapper's");
    let at = pe.rva_to_offset(other.rva, 8).unwrap() as usize;
    let into = pe.image_base + u64::from(fat.rva) + 16;
    data[at..at + 8].copy_from_slice(&into.to_le_bytes());
    let err = plan(&data, &marker()).unwrap_err();
    assert!(
        matches!(err, PeRewriteError::FatbinReferenced { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains(&format!("{:#x}", other.entry_offset)),
        "{err}"
    );
}

#[test]
fn the_verifier_names_what_a_broken_output_gets_wrong() {
    let input = fixture();
    let out = plan(&input, &marker()).unwrap().to_vec(&input);
    let pe = PeFile::parse(&out).unwrap();
    // SizeOfImage that lies.
    let mut d = out.clone();
    put_u32(&mut d, pe.optional_offset + 56, pe.size_of_image + 0x1000);
    let issues = verify(&d).unwrap_err();
    assert!(
        issues.iter().any(|i| i.message.contains("SizeOfImage")),
        "{issues:?}"
    );
    // A wrapper put back to HIPF.
    let w = pe.section_by_name(".hipFatB").unwrap().raw_offset as usize;
    let mut d = out.clone();
    d[w..w + 4].copy_from_slice(b"HIPF");
    let issues = verify(&d).unwrap_err();
    assert!(
        issues.iter().any(|i| i.message.contains("not HIPK")),
        "{issues:?}"
    );
    // A wrong checksum.
    let mut d = out.clone();
    put_u32(&mut d, pe.optional_offset + 64, 0x1234);
    let issues = verify(&d).unwrap_err();
    assert!(
        issues.iter().any(|i| i.message.contains("CheckSum")),
        "{issues:?}"
    );
}

#[test]
fn an_input_whose_sections_overlap_in_memory_is_refused_not_rewritten() {
    // Found by the `pe` fuzz target: five bytes of the /fixed EXE changed, among them the
    // high byte of .hipFatB's VirtualSize, so that it runs into .hip_fat. The rewrite used to
    // plan from it and write an output its verifier refused.
    let mut data = read_fixture("platforms/hipexe_fixed.exe");
    for (at, byte) in [
        (209, 0o377),
        (599, 0o44),
        (3636, 0o62),
        (4064, 0o244),
        (6534, 0o62),
    ] {
        data[at] = byte;
    }
    let err = plan(&data, &marker()).unwrap_err();
    assert!(
        matches!(err, PeRewriteError::MalformedInput { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("overlaps"), "{err}");
}

#[test]
fn a_wrapper_of_another_version_is_written_as_version_1() {
    // Found by the `pe` fuzz target: a wrapper with version 0 kept its version, and the
    // output failed verification (the runtime only takes HIPK version 1).
    let mut data = fixture();
    let pe = PeFile::parse(&data).unwrap();
    let w = pe.section_by_name(".hipFatB").unwrap().raw_offset as u64;
    put_u32(&mut data, w + 4, 0);
    let out = plan(&data, &marker()).unwrap().to_vec(&data);
    verify(&out).unwrap();
    assert_eq!(inspect(&out).unwrap().wrappers[0].version, 1);
}

#[test]
fn a_wrapper_pointer_without_its_base_relocation_is_refused() {
    // Turn the DIR64 entry of the wrapper's pointer into padding (IMAGE_REL_BASED_ABSOLUTE).
    let mut data = fixture();
    let pe = PeFile::parse(&data).unwrap();
    let pointer = u64::from(pe.section_by_name(".hipFatB").unwrap().rva) + 8;
    let entry = pe
        .base_relocations()
        .unwrap()
        .into_iter()
        .find(|r| r.rva == pointer)
        .unwrap();
    put_u16(&mut data, entry.entry_offset, 0);
    let msg = plan(&data, &marker()).unwrap_err().to_string();
    assert!(msg.contains("none for its pointer"), "{msg}");
}

#[test]
fn coff_symbols_sharing_bytes_with_the_last_section_are_refused_not_split() {
    // Found by the `pe` fuzz target: mingw's COFF symbols (after the sections) made to begin
    // inside the last section's bytes. The rewrite moves what follows the sections, so the
    // symbols would stay and their string table move: the output's string table size was
    // read from the wrong bytes.
    let mut data = read_fixture("platforms/hipapp_mingw.dll");
    let pe = PeFile::parse(&data).unwrap();
    let symbols = pe
        .coff_symbols()
        .unwrap()
        .expect("mingw keeps its COFF symbols");
    let last = pe
        .sections
        .iter()
        .filter(|s| s.raw_size != 0)
        .max_by_key(|s| s.raw_offset)
        .unwrap()
        .clone();
    assert_eq!(
        u64::from(last.raw_offset + last.raw_size),
        symbols.start,
        "the fixture's symbols follow its last section"
    );
    put_u32(&mut data, last.header_offset + 16, last.raw_size + 4);
    let err = plan(&data, &marker()).unwrap_err();
    assert!(matches!(err, PeRewriteError::Layout(_)), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{:#x}", symbols.start)) && msg.contains(&last.name),
        "{msg}"
    );
    // The unmodified fixture still rewrites and verifies.
    let good = read_fixture("platforms/hipapp_mingw.dll");
    verify(&plan(&good, &marker()).unwrap().to_vec(&good)).unwrap();
}

#[test]
fn a_device_section_with_virtual_size_zero_keeps_its_memory_length_after_the_rewrite() {
    // Found by the `pe` fuzz target: `.hip_fat` with VirtualSize 0 (loaders then map
    // SizeOfRawData bytes). Keeping the 0 while the file bytes go left a section of no
    // length in memory, which the verifier reads as device code still in the file.
    let mut data = fixture();
    let pe = PeFile::parse(&data).unwrap();
    let fat = pe.section_by_name(".hip_fat").unwrap().clone();
    put_u32(&mut data, fat.header_offset + 8, 0);
    let out = plan(&data, &marker()).unwrap().to_vec(&data);
    verify(&out).unwrap();
    let rewritten = PeFile::parse(&out).unwrap();
    let section = rewritten.section_by_name(".hip_fat").unwrap();
    assert_eq!(
        (section.virtual_size, section.raw_size, section.rva),
        (fat.raw_size, 0, fat.rva)
    );
}
