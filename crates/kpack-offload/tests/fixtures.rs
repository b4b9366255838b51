//! The reader on the `llvm-offload-binary` file of fixtures/offload (three version-1
//! binaries of code objects, built by build_offload.sh), whole and damaged.

use kpack_offload::{ImageKind, OffloadKind, parse};
use kpack_testkit::read_fixture;

#[test]
fn llvm_offload_binary_file_holds_the_code_objects_it_was_built_from() {
    let bytes = read_fixture("offload/mk.offload");
    let images = parse(&bytes, 0).unwrap();
    let expected = [
        ("gfx900", "offload/mk_gfx900.co"),
        ("gfx1030", "offload/mk_gfx1030.co"),
        ("gfx90a:xnack+", "offload/mk_gfx90a_xnackp.co"),
    ];
    assert_eq!(images.len(), expected.len());
    for (i, (image, (arch, co))) in images.iter().zip(expected).enumerate() {
        assert_eq!(image.binary, i);
        assert_eq!(image.version, 1);
        assert_eq!(image.arch(), Some(arch));
        assert_eq!(image.triple(), Some("amdgcn-amd-amdhsa"));
        assert_eq!(image.image_kind, ImageKind::OBJECT);
        assert_eq!(image.offload_kind, OffloadKind::HIP);
        assert_eq!(image.data, read_fixture(co));
        let at = image.offset as usize;
        assert_eq!(&bytes[at..at + image.data.len()], image.data);
    }
}

#[test]
fn every_truncation_fails_with_an_offset_inside_the_file() {
    let bytes = read_fixture("offload/mk.offload");
    let whole = parse(&bytes, 0).unwrap();
    let ends: Vec<u64> = whole
        .iter()
        .skip(1)
        .map(|i| i.binary_offset)
        .chain([bytes.len() as u64])
        .collect();
    for len in 1..bytes.len() {
        match parse(&bytes[..len], 0) {
            // Cut exactly between binaries: the binaries before the cut.
            Ok(images) => assert!(ends.contains(&(len as u64)), "{len}: {}", images.len()),
            Err(e) => assert!(
                e.offset < len as u64 && e.binary_offset <= e.offset,
                "{len}: {e}"
            ),
        }
    }
}

#[test]
fn any_corrupt_header_byte_is_an_error_or_a_bounded_reading() {
    let bytes = read_fixture("offload/mk.offload");
    let starts: Vec<usize> = parse(&bytes, 0)
        .unwrap()
        .iter()
        .map(|i| i.binary_offset as usize)
        .collect();
    for &start in &starts {
        // The header, the entry and the string map of each binary.
        for at in start..start + 0x90 {
            for flip in [0x01, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[at] ^= flip;
                if let Ok(images) = parse(&bad, 0) {
                    for i in images {
                        assert!(i.offset as usize + i.data.len() <= bad.len());
                    }
                }
            }
        }
    }
}

/// The `.llvm.offloading` section of the relocatable object `fixture`.
fn offloading_section(fixture: &str) -> Vec<u8> {
    use object::{Object, ObjectSection};
    let bytes = read_fixture(fixture);
    let file = object::File::parse(&*bytes).unwrap();
    let section = file.section_by_name(".llvm.offloading").unwrap();
    section.data().unwrap().to_vec()
}

#[test]
fn the_writer_writes_every_fixture_binary_back_byte_for_byte() {
    let mut inputs = vec![("offload/mk.offload", read_fixture("offload/mk.offload"))];
    for o in [
        "offload/mk_rdc.o",
        "offload/mk2_rdc.o",
        "offload/mk_embedded.o",
    ] {
        inputs.push((o, offloading_section(o)));
    }
    for (name, bytes) in inputs {
        let images = parse(&bytes, 0).unwrap();
        assert!(!images.is_empty(), "{name}");
        let mut written = Vec::new();
        for image in &images {
            kpack_offload::write_binary(image, &mut written);
        }
        assert!(written == bytes, "{name}: written differently");
    }
}
