//! Malformed and lying inputs: every one is a typed error naming an offset, never a panic
//! or an allocation the input does not justify.

use crate::common;

use common::{fixture, hip_fatbin};
use flate2::{Compression, write::ZlibEncoder};
use kpack_bundle::{
    Bundle, BundleError, CompressionMethod, DecodedBundle, bundle_extent, ccob_hash, walk_fatbin,
    write_compressed, write_uncompressed,
};
use std::io::Write;

const SMALL_FIXTURES: [&str; 7] = [
    "modern/ccob_v1_llvm18.bundle",
    "modern/ccob_v2_llvm19.bundle",
    "modern/ccob_v2_llvm22.bundle",
    "modern/ccob_v3_llvm22.bundle",
    "modern/mk_genco_v3.hsaco",
    "modern/mk_gfx1201_plain.hsaco",
    "bin/k1_gfx90a.hsaco",
];

#[test]
fn every_truncation_of_a_real_bundle_is_an_error() {
    let mut files = SMALL_FIXTURES.to_vec();
    files.push("modern/plain_align1_llvm22.bundle");
    for file in files {
        let bytes = fixture(file);
        for len in 0..bytes.len() {
            let prefix = &bytes[..len];
            assert!(bundle_extent(prefix).is_err(), "{file} cut at {len}");
            assert!(
                DecodedBundle::decode(prefix).is_err(),
                "{file} cut at {len}"
            );
            assert!(
                walk_fatbin(prefix).is_err() || len == 0,
                "{file} cut at {len}"
            );
            if !file.contains("ccob") && !file.contains("genco") {
                assert!(Bundle::parse(prefix).is_err(), "{file} cut at {len}");
            }
        }
    }
}

#[test]
fn truncation_errors_name_what_was_expected() {
    let v3 = fixture("modern/ccob_v3_llvm22.bundle");
    assert_eq!(
        bundle_extent(&v3[..100]),
        Err(BundleError::Truncated {
            offset: 0,
            needed: 2026,
            available: 100,
            what: "CCOB (total size from its header)"
        })
    );
    assert!(matches!(
        bundle_extent(&v3[..2]),
        Err(BundleError::Truncated {
            what: "bundle magic",
            ..
        })
    ));
    let plain = fixture("bin/k1_gfx90a.hsaco");
    assert_eq!(
        bundle_extent(&plain[..40]),
        Err(BundleError::TooManyEntries {
            offset: 24,
            count: 2,
            max: 0
        })
    );
    assert_eq!(
        bundle_extent(&plain[..100]),
        Err(BundleError::Truncated {
            offset: 81,
            needed: 24,
            available: 19,
            what: "entry header"
        })
    );
    assert_eq!(
        bundle_extent(&plain[..8000]),
        Err(BundleError::EntryOutOfRange {
            bundle_offset: 0,
            entry: 1,
            offset: 4096,
            size: 4472,
            bundle_len: 8000
        })
    );
}

#[test]
fn truncating_a_section_inside_a_bundle_names_the_bundle_offset() {
    let section = hip_fatbin("bin/libtwo.so");
    assert_eq!(
        walk_fatbin(&section[..40000]),
        Err(BundleError::EntryOutOfRange {
            bundle_offset: 36864,
            entry: 0,
            offset: 4096,
            size: 0,
            bundle_len: 40000 - 36864
        })
    );
    // Cut inside the padding: one complete bundle, nothing else.
    assert_eq!(walk_fatbin(&section[..36864]).unwrap().len(), 1);
}

/// Writes `value` at `at` in a copy of `bytes`.
fn patched(bytes: &[u8], at: usize, value: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at..at + value.len()].copy_from_slice(value);
    out
}

// Entry 1 of k1_gfx90a.hsaco: header at 32 + 24 + 25 (host triple) = 81.
const ENTRY1: usize = 81;

#[test]
fn lying_entry_offsets_and_sizes_are_errors() {
    let real = fixture("bin/k1_gfx90a.hsaco");
    let len = real.len() as u64;
    for (offset, size) in [
        (len - 10, 4472),
        (u64::MAX - 1, 4472),
        (4096, u64::MAX),
        (len + 1, 0),
    ] {
        let mut bad = patched(&real, ENTRY1, &offset.to_le_bytes());
        bad = patched(&bad, ENTRY1 + 8, &size.to_le_bytes());
        let expected = BundleError::EntryOutOfRange {
            bundle_offset: 0,
            entry: 1,
            offset,
            size,
            bundle_len: len,
        };
        assert_eq!(Bundle::parse(&bad), Err(expected.clone()));
        assert_eq!(walk_fatbin(&bad), Err(expected));
    }
    let into_header = patched(&real, ENTRY1, &16u64.to_le_bytes());
    assert_eq!(
        Bundle::parse(&into_header),
        Err(BundleError::EntryOverlapsHeader {
            bundle_offset: 0,
            entry: 1,
            offset: 16,
            header_len: 143
        })
    );
}

#[test]
fn lying_counts_and_triple_lengths_do_not_allocate() {
    let real = fixture("bin/k1_gfx90a.hsaco");
    assert_eq!(
        Bundle::parse(&patched(&real, 24, &u64::MAX.to_le_bytes())),
        Err(BundleError::TooManyEntries {
            offset: 24,
            count: u64::MAX,
            max: (8568 - 32) / 24
        })
    );
    assert_eq!(
        Bundle::parse(&patched(&real, ENTRY1 + 16, &(1u64 << 62).to_le_bytes())),
        Err(BundleError::Truncated {
            offset: ENTRY1 as u64 + 24,
            needed: 1 << 62,
            available: 8568 - ENTRY1 as u64 - 24,
            what: "entry triple"
        })
    );
    let not_utf8 = patched(&real, ENTRY1 + 24 + 3, &[0xff]);
    assert_eq!(
        Bundle::parse(&not_utf8),
        Err(BundleError::TripleNotUtf8 {
            entry: 1,
            offset: ENTRY1 as u64 + 24
        })
    );
}

#[test]
fn ccob_claiming_2_pow_60_bytes_is_refused_before_allocating() {
    let v3 = fixture("modern/ccob_v3_llvm22.bundle");
    let huge = patched(&v3, 16, &(1u64 << 60).to_le_bytes());
    assert_eq!(
        DecodedBundle::decode(&huge),
        Err(BundleError::DecompressedTooLarge {
            offset: 16,
            claimed: 1 << 60,
            limit: 1994 * 32768
        })
    );
    // A claim within the ratio limit but beyond the real size: decoding stops at the data.
    let more = patched(&v3, 16, &20000u64.to_le_bytes());
    assert!(matches!(
        DecodedBundle::decode(&more),
        Err(BundleError::SizeMismatch {
            expected: 20000,
            ..
        })
    ));
    let less = patched(&v3, 16, &100u64.to_le_bytes());
    assert_eq!(
        DecodedBundle::decode(&less),
        Err(BundleError::SizeMismatch {
            offset: 32,
            expected: 100,
            actual: 11124,
            what: "zstd frame content size"
        })
    );
    let far = patched(&v3, 8, &(1u64 << 60).to_le_bytes());
    assert!(
        matches!(walk_fatbin(&far), Err(BundleError::Truncated { needed, .. }) if needed == 1 << 60)
    );
    let v1 = fixture("modern/ccob_v1_llvm18.bundle");
    let v1_huge = patched(&v1, 8, &u32::MAX.to_le_bytes());
    assert!(matches!(
        DecodedBundle::decode(&v1_huge),
        Err(BundleError::DecompressedTooLarge { offset: 8, .. })
    ));
}

#[test]
fn a_wrong_hash_is_an_error() {
    for (file, at) in [
        ("modern/ccob_v1_llvm18.bundle", 12),
        ("modern/ccob_v2_llvm22.bundle", 16),
        ("modern/ccob_v3_llvm22.bundle", 24),
    ] {
        let real = fixture(file);
        let stored = u64::from_le_bytes(real[at..at + 8].try_into().unwrap());
        let bad = patched(&real, at, &(stored ^ 1).to_le_bytes());
        assert_eq!(
            DecodedBundle::decode(&bad),
            Err(BundleError::HashMismatch {
                offset: at as u64,
                expected: stored ^ 1,
                actual: stored
            }),
            "{file}"
        );
    }
}

#[test]
fn non_zero_padding_between_bundles_is_an_error() {
    let mut section = hip_fatbin("bin/libtwo.so");
    section[36000] = 0x01;
    assert_eq!(
        walk_fatbin(&section),
        Err(BundleError::NonZeroPadding {
            offset: 36000,
            byte: 1
        })
    );
    let mut section = hip_fatbin("bin/libone.so");
    section[33144] = b'C';
    assert!(matches!(
        walk_fatbin(&section),
        Err(BundleError::Truncated { offset: 33144, .. })
    ));
    let mut garbage = hip_fatbin("bin/libone.so");
    garbage[0] = b'X';
    assert_eq!(
        walk_fatbin(&garbage),
        Err(BundleError::BadMagic { offset: 0 })
    );
    assert_eq!(walk_fatbin(&[0; 100]), Ok(vec![]));
    assert_eq!(walk_fatbin(&[]), Ok(vec![]));
}

#[test]
fn unknown_versions_and_methods_are_errors() {
    let v3 = fixture("modern/ccob_v3_llvm22.bundle");
    for version in [0u16, 4, 0xffff] {
        assert_eq!(
            bundle_extent(&patched(&v3, 4, &version.to_le_bytes())),
            Err(BundleError::UnsupportedVersion { offset: 4, version })
        );
    }
    for method in [2u16, 3, 0xffff] {
        assert_eq!(
            DecodedBundle::decode(&patched(&v3, 6, &method.to_le_bytes())),
            Err(BundleError::UnsupportedMethod { offset: 6, method })
        );
    }
    // zstd data announced as zlib
    assert!(matches!(
        DecodedBundle::decode(&patched(&v3, 6, &0u16.to_le_bytes())),
        Err(BundleError::Decompress {
            method: CompressionMethod::Zlib,
            ..
        })
    ));
}

#[test]
fn zero_total_size_is_an_error_not_a_loop() {
    let mut section = fixture("modern/ccob_v3_llvm22.bundle");
    section.resize(4096, 0);
    section.extend_from_slice(&fixture("modern/ccob_v2_llvm22.bundle"));
    let mut v3_zero = section.clone();
    v3_zero[8..16].fill(0);
    assert_eq!(
        walk_fatbin(&v3_zero),
        Err(BundleError::BadTotalSize {
            offset: 8,
            total_size: 0,
            header_len: 32
        })
    );
    let mut v2_zero = section.clone();
    v2_zero[4096 + 8..4096 + 12].copy_from_slice(&23u32.to_le_bytes());
    assert_eq!(
        walk_fatbin(&v2_zero),
        Err(BundleError::BadTotalSize {
            offset: 4096 + 8,
            total_size: 23,
            header_len: 24
        })
    );
}

#[test]
fn bytes_after_the_compressed_stream_inside_total_size_are_an_error() {
    let mut v3 = fixture("modern/ccob_v3_llvm22.bundle");
    v3.extend_from_slice(&[0; 4]);
    v3[8..16].copy_from_slice(&2030u64.to_le_bytes());
    assert!(DecodedBundle::decode(&v3).is_err());
    // total_size cut inside the zstd frame
    let short = patched(
        &fixture("modern/ccob_v3_llvm22.bundle"),
        8,
        &2000u64.to_le_bytes(),
    );
    assert!(matches!(
        DecodedBundle::decode(&short),
        Err(BundleError::Decompress { offset: 32, .. })
    ));
}

/// A v1 zlib CCOB, which no fixture has (LLVM 18 wrote zstd when available).
fn v1_zlib(payload: &[u8]) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::new(6));
    encoder.write_all(payload).unwrap();
    let stream = encoder.finish().unwrap();
    let mut out = b"CCOB\x01\x00\x00\x00".to_vec();
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&ccob_hash(payload).to_le_bytes());
    out.extend_from_slice(&stream);
    out
}

#[test]
fn v1_zlib_ccob_is_bounded_by_inflating_it() {
    let payload = fixture("bin/k1_gfx90a.hsaco");
    let ccob = v1_zlib(&payload);
    let mut section = ccob.clone();
    section.resize(4096, 0);
    section.extend_from_slice(&ccob);
    section.push(0);
    let found = walk_fatbin(&section).unwrap();
    assert_eq!(
        found.iter().map(|b| (b.offset, b.len)).collect::<Vec<_>>(),
        [(0, ccob.len() as u64), (4096, ccob.len() as u64)]
    );
    let decoded = DecodedBundle::decode(&section[4096..]).unwrap();
    assert_eq!(decoded.payload(), &payload[..]);
    assert_eq!(decoded.compressed_len(), ccob.len() as u64);
    for len in 0..ccob.len() {
        assert!(DecodedBundle::decode(&ccob[..len]).is_err(), "cut at {len}");
        assert!(bundle_extent(&ccob[..len]).is_err(), "cut at {len}");
    }
}

#[test]
fn a_payload_with_more_than_one_bundle_is_strict_in_bundle_and_walked_by_bundles() {
    let one = fixture("bin/k1_gfx90a.hsaco");
    let mut two = one.clone();
    two.resize(12288, 0);
    two.extend_from_slice(&fixture("modern/mk_gfx1201_plain.hsaco"));
    let ccob = write_compressed(&two, 3, CompressionMethod::Zstd, 3).unwrap();
    let decoded = DecodedBundle::decode(&ccob).unwrap();
    assert_eq!(
        decoded.bundle(),
        Err(BundleError::TrailingData {
            offset: 8568,
            len: 12288 + 9304 - 8568,
            what: "the bundle"
        })
    );
    let bundles = decoded.bundles().unwrap();
    assert_eq!(bundles.len(), 2);
    assert_eq!(
        bundles[1].entries()[1].triple,
        "hipv4-amdgcn-amd-amdhsa--gfx1201"
    );

    let nested = write_uncompressed(&[], 1)
        .into_iter()
        .chain(fixture("modern/ccob_v3_llvm22.bundle"))
        .collect::<Vec<_>>();
    let ccob = write_compressed(&nested, 2, CompressionMethod::Zlib, 6).unwrap();
    assert_eq!(
        DecodedBundle::decode(&ccob).unwrap().bundles(),
        Err(BundleError::NestedCompressed { offset: 32 })
    );
}

#[test]
fn corrupting_any_header_byte_never_panics() {
    for file in SMALL_FIXTURES {
        let real = fixture(file);
        let header_len = 160.min(real.len());
        for at in 0..header_len {
            for value in [0x00, 0xff, real[at].wrapping_add(1), real[at] ^ 0x80] {
                let bad = patched(&real, at, &[value]);
                let _ = bundle_extent(&bad);
                let _ = walk_fatbin(&bad);
                let _ = Bundle::parse(&bad);
                if let Ok(decoded) = DecodedBundle::decode(&bad) {
                    let _ = decoded.bundle();
                    let _ = decoded.bundles();
                }
            }
        }
    }
}

#[test]
fn a_count_beyond_the_real_entries_is_reported_as_an_implausible_count() {
    // clang's default layout: zero padding from the header's end (204) to the data (4096).
    let aligned = fixture("modern/plain_align4096_llvm22.bundle");
    let bad = patched(&aligned, 24, &4u64.to_le_bytes());
    let err = Bundle::parse(&bad).unwrap_err();
    assert_eq!(
        err,
        BundleError::ImplausibleEntryCount {
            offset: 24,
            count: 4,
            entry: 3,
            entry_offset: 204,
            why: "is zero padding"
        }
    );
    assert_eq!(
        err.to_string(),
        "implausible entry count 4 at offset 0x18: the header holds only 3 entries (entry 3 at 0xcc is zero padding)"
    );
    // Packed (alignment 1): the fourth "entry header" would be the first entry's data.
    let packed = fixture("modern/plain_align1_llvm22.bundle");
    let bad = patched(&packed, 24, &4u64.to_le_bytes());
    assert_eq!(
        Bundle::parse(&bad),
        Err(BundleError::ImplausibleEntryCount {
            offset: 24,
            count: 4,
            entry: 3,
            entry_offset: 204,
            why: "would overlap the data of the entries before it"
        })
    );
    // Inside a section, the offsets are the section's.
    let mut section = vec![0u8; 4096];
    section.extend_from_slice(&bad);
    assert_eq!(
        walk_fatbin(&section),
        Err(BundleError::ImplausibleEntryCount {
            offset: 4096 + 24,
            count: 4,
            entry: 3,
            entry_offset: 4096 + 204,
            why: "would overlap the data of the entries before it"
        })
    );
}

#[test]
fn a_hash_mismatch_names_the_hash_field_in_hex() {
    let mut v3 = fixture("modern/ccob_v3_llvm22.bundle");
    v3[24] ^= 1;
    let err = DecodedBundle::decode(&v3).unwrap_err();
    assert!(
        matches!(err, BundleError::HashMismatch { offset: 24, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("CCOB hash at offset 0x18: stored 0x"),
        "{err}"
    );
    // Shifted to where the bundle lies in a file, the offset is absolute.
    let shifted = err.shifted(0x1000);
    assert!(
        shifted
            .to_string()
            .starts_with("CCOB hash at offset 0x1018:"),
        "{shifted}"
    );
}
