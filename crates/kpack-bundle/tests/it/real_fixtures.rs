//! Reading real bundles and `.hip_fatbin` sections from `fixtures/`.

use crate::common;

use common::{device_entries, fixture, hip_fatbin};
use kpack_bundle::{
    Bundle, BundleFormat, CompressionMethod, DecodedBundle, LocatedBundle, MAX_STREAM_WINDOW,
    bundle_extent, ccob_hash, ccob_header, stream_window, walk_fatbin,
};

const GFX1030: &str = "hipv4-amdgcn-amd-amdhsa--gfx1030";
const GFX90A_XNACKP: &str = "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+";

/// The two code objects every `ccob_*`/`plain_*` fixture bundles.
fn expected_code_objects() -> Vec<(String, Vec<u8>)> {
    vec![
        (GFX1030.to_string(), fixture("modern/mk_gfx1030.co")),
        (
            GFX90A_XNACKP.to_string(),
            fixture("modern/mk_gfx90a_xnackp.co"),
        ),
    ]
}

fn compressed(version: u16, uncompressed_size: u64, hash: u64) -> BundleFormat {
    BundleFormat::Compressed {
        version,
        method: CompressionMethod::Zstd,
        hash,
        uncompressed_size,
    }
}

#[test]
fn ccob_v1_v2_v3_from_llvm18_19_22_decode_to_the_same_code_objects() {
    // (file, version, uncompressed size, hash = low half of MD5(payload), LE)
    let cases = [
        ("modern/ccob_v1_llvm18.bundle", 1, 11154, 0xd85b219788e75b57),
        ("modern/ccob_v2_llvm19.bundle", 2, 11154, 0xd85b219788e75b57),
        ("modern/ccob_v2_llvm22.bundle", 2, 11124, 0xcd1ef449f9b94034),
        ("modern/ccob_v3_llvm22.bundle", 3, 11124, 0xcd1ef449f9b94034),
    ];
    for (file, version, size, hash) in cases {
        let bytes = fixture(file);
        let decoded = DecodedBundle::decode(&bytes).unwrap();
        assert_eq!(decoded.format(), &compressed(version, size, hash), "{file}");
        assert_eq!(ccob_hash(decoded.payload()), hash, "{file}");
        assert_eq!(decoded.compressed_len(), bytes.len() as u64, "{file}");
        assert_eq!(decoded.payload().len() as u64, size, "{file}");
        let bundle = decoded.bundle().unwrap();
        assert_eq!(device_entries(&bundle), expected_code_objects(), "{file}");
        assert_eq!(bundle.entries().len(), 3);
        assert!(bundle.entries()[0].is_host() && bundle.entries()[0].data.is_empty());
    }
}

#[test]
fn llvm18_and_19_bundles_carry_a_doubled_host_triple() {
    // The 30 extra bytes of the LLVM 18/19 payloads: the host triple as those bundlers wrote it.
    for file in [
        "modern/ccob_v1_llvm18.bundle",
        "modern/ccob_v2_llvm19.bundle",
    ] {
        let bytes = fixture(file);
        let decoded = DecodedBundle::decode(&bytes).unwrap();
        let bundle = decoded.bundle().unwrap();
        assert_eq!(
            bundle.entries()[0].triple,
            "host-x86_64-unknown-linux-gnu-host-x86_64-unknown-linux-gnu-"
        );
    }
}

#[test]
fn llvm22_ccob_payloads_are_the_align1_plain_bundle() {
    let plain = fixture("modern/plain_align1_llvm22.bundle");
    for file in [
        "modern/ccob_v2_llvm22.bundle",
        "modern/ccob_v3_llvm22.bundle",
    ] {
        let bytes = fixture(file);
        assert_eq!(DecodedBundle::decode(&bytes).unwrap().payload(), &plain[..]);
    }
}

#[test]
fn plain_bundles_hold_the_same_code_objects_at_their_stored_offsets() {
    let cases = [
        ("modern/plain_align1_llvm22.bundle", [204, 204, 5220]),
        ("modern/plain_align4096_llvm22.bundle", [4096, 4096, 12288]),
    ];
    for (file, offsets) in cases {
        let bytes = fixture(file);
        let bundle = Bundle::parse_exact(&bytes).unwrap();
        assert_eq!(bundle.len(), bytes.len() as u64);
        assert_eq!(bundle.header_len(), 204);
        let got: Vec<u64> = bundle.entries().iter().map(|e| e.offset).collect();
        assert_eq!(got, offsets, "{file}");
        assert_eq!(device_entries(&bundle), expected_code_objects(), "{file}");
        let decoded = DecodedBundle::decode(&bytes).unwrap();
        assert_eq!(decoded.format(), &BundleFormat::Uncompressed);
        assert_eq!(decoded.payload(), &bytes[..]);
    }
}

#[test]
fn standalone_bundle_files_extend_exactly_to_their_end() {
    for file in [
        "modern/ccob_v1_llvm18.bundle",
        "modern/ccob_v2_llvm19.bundle",
        "modern/ccob_v2_llvm22.bundle",
        "modern/ccob_v3_llvm22.bundle",
        "modern/plain_align1_llvm22.bundle",
        "modern/plain_align4096_llvm22.bundle",
        "modern/mk_genco_v3.hsaco",
        "modern/mk_gfx1201_plain.hsaco",
        "bin/k1_genco.hsaco",
        "bin/k1_gfx90a.hsaco",
    ] {
        let bytes = fixture(file);
        assert_eq!(bundle_extent(&bytes).unwrap(), bytes.len() as u64, "{file}");
        assert_eq!(walk_fatbin(&bytes).unwrap().len(), 1, "{file}");
    }
}

fn triples(bundle: &Bundle<'_>) -> Vec<String> {
    bundle
        .entries()
        .iter()
        .map(|e| e.triple.to_string())
        .collect()
}

#[test]
fn kernel_database_files_list_their_targets() {
    let genco = fixture("modern/mk_genco_v3.hsaco");
    let decoded = DecodedBundle::decode(&genco).unwrap();
    let bundle = decoded.bundle().unwrap();
    assert_eq!(
        triples(&bundle),
        [
            "host-x86_64-unknown-linux-gnu-",
            "hipv4-amdgcn-amd-amdhsa--gfx11-generic",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
            "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
        ]
    );

    let k1 = fixture("bin/k1_genco.hsaco");
    let bundle = Bundle::parse_exact(&k1).unwrap();
    let t = triples(&bundle);
    assert_eq!(t[0], "host-x86_64-unknown-linux");
    assert_eq!(t.len(), 7);
    assert!(t.contains(&"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-".to_string()));
    for entry in &bundle.entries()[1..] {
        assert_eq!(entry.offset % 4096, 0);
        assert_eq!(&entry.data[..4], b"\x7fELF");
    }

    let plain = fixture("modern/mk_gfx1201_plain.hsaco");
    let bundle = Bundle::parse_exact(&plain).unwrap();
    assert_eq!(triples(&bundle)[1], "hipv4-amdgcn-amd-amdhsa--gfx1201");
}

fn located(offset: u64, len: u64, format: BundleFormat) -> LocatedBundle {
    LocatedBundle {
        offset,
        len,
        format,
    }
}

#[test]
fn two_uncompressed_bundles_in_one_section_are_found_by_header() {
    let section = hip_fatbin("bin/libtwo.so");
    assert_eq!(section.len(), 70001); // ROCm 5: one trailing NUL
    let found = walk_fatbin(&section).unwrap();
    assert_eq!(
        found,
        [
            located(0, 33144, BundleFormat::Uncompressed),
            located(36864, 33136, BundleFormat::Uncompressed),
        ]
    );
    for b in &found {
        let bytes = &section[b.offset as usize..];
        let decoded = DecodedBundle::decode(bytes).unwrap();
        assert_eq!(decoded.compressed_len(), b.len);
        assert_eq!(decoded.bundle().unwrap().entries().len(), 7);
    }
}

#[test]
fn rocm5_trailing_nul_is_padding() {
    for file in ["bin/libone.so", "bin/k1.o"] {
        let section = hip_fatbin(file);
        assert_eq!(section.len(), 33145);
        assert_eq!(section[33144], 0);
        assert_eq!(
            walk_fatbin(&section).unwrap(),
            [located(0, 33144, BundleFormat::Uncompressed)],
            "{file}"
        );
    }
}

#[test]
fn two_ccob_v3_in_one_section_are_found_by_total_size() {
    let section = hip_fatbin("modern/libmodern_two_v3.so");
    let found = walk_fatbin(&section).unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!((found[0].offset, found[0].len), (0, 2125));
    assert_eq!((found[1].offset, found[1].len), (4096, 2135));
    assert_eq!(found[1].offset + found[1].len, section.len() as u64);
    for b in &found {
        assert!(matches!(
            b.format,
            BundleFormat::Compressed { version: 3, .. }
        ));
        let decoded = DecodedBundle::decode(&section[b.offset as usize..]).unwrap();
        assert_eq!(decoded.bundle().unwrap().entries().len(), 4);
    }
}

#[test]
fn modern_single_bundle_sections() {
    let cases: [(&str, Option<u16>, usize); 5] = [
        ("modern/libmodern_v3.so", Some(3), 4),
        ("modern/libmodern_v2.so", Some(2), 4),
        ("modern/libmodern_nocompress.so", None, 4),
        ("modern/libmodern_wide_v3.so", Some(3), 16),
        ("modern/mk_v3.o", Some(3), 4),
    ];
    for (file, version, entries) in cases {
        let section = hip_fatbin(file);
        let found = walk_fatbin(&section).unwrap();
        assert_eq!(found.len(), 1, "{file}");
        assert_eq!(found[0].len, section.len() as u64, "{file}");
        let got_version = match found[0].format {
            BundleFormat::Compressed { version, .. } => Some(version),
            BundleFormat::Uncompressed => None,
        };
        assert_eq!(got_version, version, "{file}");
        let decoded = DecodedBundle::decode(&section).unwrap();
        assert_eq!(decoded.bundle().unwrap().entries().len(), entries, "{file}");
    }
}

#[test]
fn rdc_library_section_is_one_bundle() {
    let section = hip_fatbin("bin/librdc.so");
    let found = walk_fatbin(&section).unwrap();
    assert_eq!(found.len(), 1);
    let decoded = DecodedBundle::decode(&section).unwrap();
    assert!(decoded.bundle().unwrap().entries().len() > 1);
}

#[test]
fn v1_ccob_sections_are_bounded_by_walking_the_zstd_frame() {
    // v1 stores no total size: two real LLVM 18 CCOBs, 4096-aligned, must still be split.
    let v1 = fixture("modern/ccob_v1_llvm18.bundle");
    let mut section = v1.clone();
    section.resize(4096, 0);
    section.extend_from_slice(&v1);
    let found = walk_fatbin(&section).unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!((found[0].offset, found[0].len), (0, v1.len() as u64));
    assert_eq!((found[1].offset, found[1].len), (4096, v1.len() as u64));
}

/// Every entry of `bytes` read from its stream ([`kpack_bundle::EntryStream`]), checks and
/// all: `Err` as soon as one fails.
fn streamed(bytes: &[u8]) -> Result<Vec<kpack_bundle::StreamedEntry>, kpack_bundle::BundleError> {
    let mut stream = kpack_bundle::EntryStream::open(bytes)?.expect("a zstd CCOB streams");
    let mut entries = Vec::new();
    while let Some(entry) = stream.next_entry()? {
        entries.push(entry);
    }
    Ok(entries)
}

#[test]
fn ccobs_read_entry_by_entry_from_their_stream_give_the_entries_of_the_whole_decode() {
    for file in [
        "modern/ccob_v1_llvm18.bundle",
        "modern/ccob_v2_llvm19.bundle",
        "modern/ccob_v2_llvm22.bundle",
        "modern/ccob_v3_llvm22.bundle",
        "modern/mk_genco_v3.hsaco",
    ] {
        let bytes = fixture(file);
        let decoded = DecodedBundle::decode(&bytes).unwrap();
        let bundle = decoded.bundle().unwrap();
        let entries = streamed(&bytes).unwrap();
        assert_eq!(entries.len(), bundle.entries().len(), "{file}");
        for (s, e) in entries.iter().zip(bundle.entries()) {
            assert_eq!(
                (s.triple.as_str(), s.offset),
                (e.triple, e.offset),
                "{file}"
            );
            assert_eq!(s.data, e.data, "{file} {}", e.triple);
        }
    }
    let plain = fixture("modern/plain_align4096_llvm22.bundle");
    assert!(kpack_bundle::EntryStream::open(&plain).unwrap().is_none());
}

/// The stream makes the whole decode's checks: a flipped bit anywhere in the compressed
/// bytes is an error by the last entry (a bad block, a size or the MD5 hash), never a
/// different entry returned with success.
#[test]
fn a_flipped_bit_in_a_streamed_ccob_is_an_error_by_its_last_entry() {
    let bytes = fixture("modern/ccob_v3_llvm22.bundle");
    let good = streamed(&bytes).unwrap();
    for at in (0..bytes.len()).step_by(7) {
        for bit in [0, 3, 7] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1 << bit;
            match kpack_bundle::EntryStream::open(&damaged) {
                Err(_) | Ok(None) => continue,
                Ok(Some(_)) => {}
            }
            if let Ok(entries) = streamed(&damaged) {
                assert_eq!(entries, good, "byte {at} bit {bit} read back differently");
            }
        }
    }
    // Cut short: an error, not fewer entries.
    let cut = &bytes[..bytes.len() - 5];
    assert!(streamed(cut).is_err());
}

/// clang's small CCOBs are single-segment zstd frames: the window a stream read of them holds
/// is their content; a zlib CCOB or a plain bundle has no zstd window.
#[test]
fn the_stream_window_of_a_single_segment_ccob_is_its_content_size() {
    for (file, size) in [
        ("modern/ccob_v2_llvm19.bundle", 11154),
        ("modern/ccob_v2_llvm22.bundle", 11124),
        ("modern/ccob_v3_llvm22.bundle", 11124),
    ] {
        assert_eq!(stream_window(&fixture(file)), Some(size), "{file}");
    }
    assert_eq!(
        stream_window(&fixture("modern/plain_align1_llvm22.bundle")),
        None
    );
    let zlib = kpack_bundle::write_compressed(
        &fixture("modern/plain_align1_llvm22.bundle"),
        3,
        CompressionMethod::Zlib,
        6,
    )
    .unwrap();
    assert_eq!(stream_window(&zlib), None);
}

/// A large bundle's frame declares its window (librocthrust-tests' 1.16 GB CCOBs: 2^27, clang's
/// long-distance matching), which is what a stream read holds, not the content; a window
/// beyond what the decoder accepts counts as that limit, and a header cut short as none.
/// The frame headers are written by hand (RFC 8878, 3.1.1.1): a real one needs a bundle
/// larger than 128 MiB.
#[test]
fn the_stream_window_of_a_large_ccob_is_the_window_its_frame_declares() {
    let frame = |window_log: u8, content: u32| {
        let mut f = 0xFD2F_B528u32.to_le_bytes().to_vec();
        // A four-byte content size, not single-segment: a window descriptor follows.
        f.push(0b1000_0000);
        f.push((window_log - 10) << 3);
        f.extend_from_slice(&content.to_le_bytes());
        f
    };
    let ccob = |frame: Vec<u8>, content: u64| {
        let mut c = ccob_header(3, CompressionMethod::Zstd, content, 1 << 20, 0).unwrap();
        c.extend_from_slice(&frame);
        c
    };
    let large = 1_159_906_200;
    assert_eq!(
        stream_window(&ccob(frame(27, large), large.into())),
        Some(1 << 27)
    );
    assert_eq!(
        stream_window(&ccob(frame(23, large), large.into())),
        Some(1 << 23)
    );
    assert_eq!(
        stream_window(&ccob(frame(31, large), large.into())),
        Some(MAX_STREAM_WINDOW)
    );
    // A window larger than the content holds only the content.
    assert_eq!(
        stream_window(&ccob(frame(27, 5_000_000), 5_000_000)),
        Some(5_000_000)
    );
    let mut cut = ccob(frame(27, large), large.into());
    cut.truncate(cut.len() - 5);
    assert_eq!(stream_window(&cut), None);
}
