//! The writers: byte-for-byte against clang-offload-bundler output, and round trips.

use crate::common;

use common::{fixture, noise};
use kpack_bundle::{
    BUNDLE_MAGIC, Bundle, BundleError, BundleFormat, CompressionMethod, DecodedBundle,
    LocatedBundle, ccob_hash, uncompressed_layout, walk_fatbin, write_compressed,
    write_uncompressed,
};

fn rewrite(bytes: &[u8], align: u64) -> Vec<u8> {
    let bundle = Bundle::parse_exact(bytes).unwrap();
    let entries: Vec<(&str, &[u8])> = bundle
        .entries()
        .iter()
        .map(|e| (e.triple, e.data))
        .collect();
    write_uncompressed(&entries, align)
}

#[test]
fn write_uncompressed_reproduces_clang_offload_bundler_output_byte_for_byte() {
    for (file, align) in [
        ("bin/k1_genco.hsaco", 4096),
        ("bin/k1_gfx90a.hsaco", 4096),
        ("modern/mk_gfx1201_plain.hsaco", 4096),
        ("modern/plain_align4096_llvm22.bundle", 4096),
        ("modern/plain_align1_llvm22.bundle", 1),
    ] {
        let bytes = fixture(file);
        assert!(rewrite(&bytes, align) == bytes, "{file} at align {align}");
    }
}

#[test]
fn uncompressed_layout_places_entries_where_write_uncompressed_does() {
    let bytes = fixture("modern/plain_align1_llvm22.bundle");
    let bundle = Bundle::parse_exact(&bytes).unwrap();
    for align in [1, 8, 4096] {
        let written = rewrite(&bytes, align);
        let sized: Vec<(&str, u64)> = bundle
            .entries()
            .iter()
            .map(|e| (e.triple, e.data.len() as u64))
            .collect();
        let (header, offsets) = uncompressed_layout(&sized, align);
        // The layout and the entries' bytes at its offsets, gaps zero-filled, are the bundle.
        let mut assembled = header;
        for (e, &at) in bundle.entries().iter().zip(&offsets) {
            assembled.resize(at as usize, 0);
            assembled.extend_from_slice(e.data);
        }
        assert!(assembled == written, "align {align}");
    }
}

#[test]
fn write_uncompressed_reproduces_the_llvm18_payload_and_realigns() {
    let v1 = fixture("modern/ccob_v1_llvm18.bundle");
    let decoded = DecodedBundle::decode(&v1).unwrap();
    assert!(rewrite(decoded.payload(), 1) == decoded.payload());
    // Realigning the packed LLVM 22 bundle gives the 4096-aligned one.
    let packed = fixture("modern/plain_align1_llvm22.bundle");
    assert!(rewrite(&packed, 4096) == fixture("modern/plain_align4096_llvm22.bundle"));
}

#[test]
fn write_uncompressed_round_trips_through_parse_at_any_alignment() {
    let co = fixture("modern/mk_gfx1030.co");
    let entries: [(&str, &[u8]); 3] = [
        ("host-x86_64-unknown-linux-gnu-", &[]),
        ("hipv4-amdgcn-amd-amdhsa--gfx1030", &co),
        ("hipv4-amdgcn-amd-amdhsa--gfx1030-copy", &co[..100]),
    ];
    for align in [0, 1, 8, 100, 4096] {
        let bytes = write_uncompressed(&entries, align);
        let bundle = Bundle::parse_exact(&bytes).unwrap();
        let got: Vec<(&str, &[u8])> = bundle
            .entries()
            .iter()
            .map(|e| (e.triple, e.data))
            .collect();
        assert_eq!(got, entries, "align {align}");
        for e in bundle.entries() {
            assert_eq!(e.offset % align.max(1), 0, "align {align}");
        }
    }
    let empty = write_uncompressed(&[], 4096);
    assert_eq!(empty.len(), 32);
    assert!(Bundle::parse_exact(&empty).unwrap().entries().is_empty());
}

#[test]
fn write_compressed_round_trips_for_v1_v2_v3_zstd_and_zlib() {
    let plain = fixture("modern/plain_align4096_llvm22.bundle");
    for version in [1, 2, 3] {
        for (method, level) in [
            (CompressionMethod::Zstd, 3),
            (CompressionMethod::Zstd, -5),
            (CompressionMethod::Zlib, 6),
        ] {
            let ccob = write_compressed(&plain, version, method, level).unwrap();
            assert_eq!(
                ccob,
                write_compressed(&plain, version, method, level).unwrap()
            );
            assert!(ccob.len() < plain.len());
            let decoded = DecodedBundle::decode(&ccob).unwrap();
            assert_eq!(
                decoded.format(),
                &BundleFormat::Compressed {
                    version,
                    method,
                    hash: ccob_hash(&plain),
                    uncompressed_size: plain.len() as u64
                }
            );
            assert_eq!(decoded.payload(), &plain[..]);
            assert_eq!(decoded.compressed_len(), ccob.len() as u64);
            assert_eq!(
                walk_fatbin(&ccob).unwrap(),
                [LocatedBundle {
                    offset: 0,
                    len: ccob.len() as u64,
                    format: *decoded.format()
                }]
            );
        }
    }
}

#[test]
fn write_compressed_reproduces_llvm22_ccob_v2_and_v3_byte_for_byte() {
    let plain = fixture("modern/plain_align1_llvm22.bundle");
    for (file, version) in [
        ("modern/ccob_v2_llvm22.bundle", 2),
        ("modern/ccob_v3_llvm22.bundle", 3),
    ] {
        let ours = write_compressed(&plain, version, CompressionMethod::Zstd, 3).unwrap();
        assert!(ours == fixture(file), "{file}");
    }
}

#[test]
fn write_compressed_rejects_unwritable_versions_and_levels() {
    let plain = fixture("bin/k1_gfx90a.hsaco");
    for version in [0, 4] {
        assert_eq!(
            write_compressed(&plain, version, CompressionMethod::Zstd, 3),
            Err(BundleError::CannotWriteVersion { version })
        );
    }
    for (method, level) in [
        (CompressionMethod::Zlib, 10),
        (CompressionMethod::Zlib, -1),
        (CompressionMethod::Zstd, 23),
    ] {
        assert_eq!(
            write_compressed(&plain, 3, method, level),
            Err(BundleError::InvalidLevel { method, level })
        );
    }
}

#[test]
fn walker_bounds_bundles_by_header_even_when_data_contains_magics() {
    // An uncompressed bundle whose entry is itself a real bundle, at a 4096-aligned offset:
    // a magic scan would split it in two.
    let inner = fixture("bin/k1_gfx90a.hsaco");
    let outer = write_uncompressed(
        &[
            ("host-x86_64-unknown-linux-gnu-", &[]),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", &inner),
        ],
        4096,
    );
    assert_eq!(&outer[4096..4096 + 24], BUNDLE_MAGIC);

    // A CCOB whose compressed bytes contain both magics (incompressible data is stored raw).
    let mut payload = noise(20000, 0x9e3779b97f4a7c15);
    payload[5000..5024].copy_from_slice(BUNDLE_MAGIC);
    payload[9000..9004].copy_from_slice(b"CCOB");
    let bundle = write_uncompressed(
        &[
            ("host-x86_64-unknown-linux-gnu-", &[]),
            ("hipv4-amdgcn-amd-amdhsa--gfx1100", &payload),
        ],
        4096,
    );
    let ccob = write_compressed(&bundle, 3, CompressionMethod::Zstd, 3).unwrap();
    let magic_at = ccob.windows(24).position(|w| w == BUNDLE_MAGIC).unwrap();
    assert!(magic_at > 32);
    assert!(ccob.windows(4).skip(4).any(|w| w == b"CCOB"));

    let mut section = outer.clone();
    section.resize(section.len().next_multiple_of(4096), 0);
    let second = section.len() as u64;
    section.extend_from_slice(&ccob);
    section.resize(section.len().next_multiple_of(4096), 0);
    let third = section.len() as u64;
    section.extend_from_slice(&fixture("modern/ccob_v3_llvm22.bundle"));
    section.push(0);

    let found = walk_fatbin(&section).unwrap();
    let offsets: Vec<(u64, u64)> = found.iter().map(|b| (b.offset, b.len)).collect();
    assert_eq!(
        offsets,
        [
            (0, outer.len() as u64),
            (second, ccob.len() as u64),
            (third, 2026)
        ]
    );
    let decoded = DecodedBundle::decode(&section[second as usize..]).unwrap();
    assert_eq!(decoded.bundle().unwrap().entries()[1].data, &payload[..]);
}

#[test]
fn write_compressed_v1_reproduces_llvm18_ccob_layout() {
    let llvm18 = fixture("modern/ccob_v1_llvm18.bundle");
    let decoded = DecodedBundle::decode(&llvm18).unwrap();
    let ours = write_compressed(decoded.payload(), 1, CompressionMethod::Zstd, 3).unwrap();
    // The 20-byte v1 header (no total size) is LLVM 18's field for field.
    assert_eq!(ours[..20], llvm18[..20]);
    let again = DecodedBundle::decode(&ours).unwrap();
    assert_eq!(again.format(), decoded.format());
    assert_eq!(again.payload(), decoded.payload());
    assert_eq!(again.compressed_len(), ours.len() as u64);
}
