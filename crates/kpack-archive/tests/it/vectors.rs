//! The reference vectors read back exactly as `fixtures/vectors/README.md` lists them, and the
//! writer reproduces them.

use crate::common;

use common::{sha256_prefix, vector, vector_path, zstd_frames};
use kpack_archive::kpm::{KpmEntry, KpmManifest};
use kpack_archive::{Archive, ArchiveWriter, Compression, CompressionScheme};

/// (binary, arch, size, sha256 prefix) in TOC order.
type Expected = [(&'static str, &'static str, u64, &'static str)];

const NOOP: &Expected = &[
    ("lib/libtest.so#0", "gfx900", 119, "df6b1ab7c33ae62f"),
    ("lib/libtest.so#0", "gfx906", 219, "12b6177c7d7619c6"),
    ("bin/testapp#0", "gfx900", 168, "77033f5412bc6d7b"),
];

const ZSTD: &Expected = &[
    ("lib/libhip.so#0", "gfx1100", 1019, "11590fafe2ba03e4"),
    ("lib/libhip.so#0", "gfx1101", 619, "9f8e72947f029de7"),
    ("bin/hiptest#0", "gfx1100", 1018, "cb26f71dee1b9421"),
];

fn assert_entries(a: &Archive, expected: &Expected) {
    let got: Vec<_> = a
        .entries()
        .map(|(b, arch, info)| (b, arch, info.original_size))
        .collect();
    let want: Vec<_> = expected
        .iter()
        .map(|&(b, arch, size, _)| (b, arch, size))
        .collect();
    assert_eq!(got, want);
    for (i, &(b, arch, size, sha)) in expected.iter().enumerate() {
        let info = a.info(b, arch).unwrap();
        assert_eq!(info.ordinal as usize, i);
        assert!(info.metadata.is_empty());
        let data = a.get(b, arch).unwrap();
        assert_eq!(data.len() as u64, size);
        assert_eq!(sha256_prefix(&data), sha, "{b} {arch}");
    }
    a.validate().unwrap();
}

#[test]
fn noop_vector_reads_back_as_listed() {
    let a = Archive::open(vector_path("test_noop.kpack")).unwrap();
    assert_eq!(a.group_name(), "test");
    assert_eq!(a.gfx_arch_family(), "gfx900X");
    assert_eq!(a.gfx_arches(), ["gfx900", "gfx906"]);
    assert_eq!(a.compression_scheme(), CompressionScheme::None);
    assert_eq!(
        a.binaries().collect::<Vec<_>>(),
        ["lib/libtest.so#0", "bin/testapp#0"]
    );
    assert_eq!(
        a.binaries_sorted().collect::<Vec<_>>(),
        ["bin/testapp#0", "lib/libtest.so#0"]
    );
    assert_entries(&a, NOOP);
    // Blob sizes and offsets from spec §1.2: (64,119), (183,219), (402,168).
    assert!(
        a.get("lib/libtest.so#0", "gfx900")
            .unwrap()
            .starts_with(b"KERNEL1_GFX900_DATA")
    );
    assert!(matches!(
        a.get("bin/testapp#0", "gfx900").unwrap(),
        std::borrow::Cow::Borrowed(_)
    ));
    assert!(!a.contains("bin/testapp#0", "gfx906"));
    assert!(
        a.contains("lib\\libtest.so#0", "gfx906"),
        "backslashes match like the Python reader"
    );
}

#[test]
fn zstd_vector_reads_back_as_listed() {
    let a = Archive::open(vector_path("test_zstd.kpack")).unwrap();
    assert_eq!(a.group_name(), "test");
    assert_eq!(a.gfx_arch_family(), "gfx110X");
    assert_eq!(a.gfx_arches(), ["gfx1100", "gfx1101"]);
    assert_eq!(a.compression_scheme(), CompressionScheme::ZstdPerKernel);
    assert_eq!(
        a.binaries().collect::<Vec<_>>(),
        ["lib/libhip.so#0", "bin/hiptest#0"]
    );
    assert_eq!(
        a.binaries_sorted().collect::<Vec<_>>(),
        ["bin/hiptest#0", "lib/libhip.so#0"]
    );
    assert_entries(&a, ZSTD);
    let frames = zstd_frames(&vector("test_zstd.kpack"));
    let stored: Vec<u64> = a.entries().map(|(_, _, i)| i.stored_size).collect();
    assert_eq!(
        stored,
        frames.iter().map(|f| f.len() as u64).collect::<Vec<_>>()
    );
}

/// Rewrites every entry of `source` in TOC order with `compression`.
fn rewrite(source: &Archive, compression: Compression) -> Vec<u8> {
    let mut w = ArchiveWriter::new(source.group_name(), source.gfx_arch_family(), compression);
    w.set_gfx_arches(source.gfx_arches().to_vec()).unwrap();
    for (b, arch, info) in source.entries() {
        w.add(
            b,
            arch,
            source.get(b, arch).unwrap().into_owned(),
            info.metadata,
        )
        .unwrap();
    }
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    out
}

#[test]
fn writing_the_noop_vector_entries_reproduces_it_byte_for_byte_but_for_the_digests() {
    let original = vector("test_noop.kpack");
    let a = Archive::from_bytes(original.clone()).unwrap();
    let out = rewrite(&a, Compression::None);
    assert_ne!(out, original, "digests are added");
    assert_eq!(common::without_digests(&out), original);
}

#[test]
fn writing_the_noop_vector_entries_with_derived_arches_reproduces_it() {
    let original = vector("test_noop.kpack");
    let a = Archive::from_bytes(original.clone()).unwrap();
    let mut w = ArchiveWriter::new("test", "gfx900X", Compression::None);
    for (b, arch, _) in a.entries() {
        w.add(b, arch, a.get(b, arch).unwrap(), &[]).unwrap();
    }
    let mut out = Vec::new();
    assert_eq!(w.write_to(&mut out).unwrap(), out.len() as u64);
    assert_eq!(common::without_digests(&out), original);
}

#[test]
fn rewriting_the_zstd_vector_at_level_3_reproduces_its_frames_plus_checksums() {
    let original = vector("test_zstd.kpack");
    let a = Archive::from_bytes(original.clone()).unwrap();
    let out = rewrite(&a, Compression::zstd());
    let b = Archive::from_bytes(out.clone()).unwrap();
    assert_entries(&b, ZSTD);
    // The bundled libzstd (zstd-sys, pinned by Cargo.lock) at level 3 makes the same frames
    // as the reference's python-zstandard did, plus zstd's content checksum: the frame header
    // flag (bit 2 of the descriptor after the magic) and 4 bytes after the last block. A
    // zstd-sys upgrade may legitimately change this.
    let ours = common::zstd_frames(&out);
    let theirs = common::zstd_frames(&original);
    assert_eq!(ours.len(), theirs.len());
    for (i, (ours, theirs)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(ours[4] & 0x04, 0x04, "frame {i} carries a checksum");
        let mut unchecked = ours[..ours.len() - 4].to_vec();
        unchecked[4] &= !0x04;
        assert_eq!(
            &unchecked, theirs,
            "frame {i} differs from the reference's (libzstd version change?)"
        );
    }
    // The same TOC but for the digests, the frame sizes and the region's 4 bytes more per
    // frame.
    let (_, mut toc_ours) = common::split_toc(&common::without_digests(&out));
    let (_, toc_theirs) = common::split_toc(&original);
    let sizes: Vec<u8> = ours
        .iter()
        .flat_map(|f| (f.len() as u32).to_le_bytes())
        .collect();
    assert_eq!(
        common::take_key(&mut toc_ours, "zstd_frame_sizes"),
        Some(rmpv::Value::Binary(sizes))
    );
    let size = common::top_field(&mut toc_ours, "zstd_size");
    *size = (size.as_u64().unwrap() - 4 * theirs.len() as u64).into();
    assert_eq!(toc_ours, toc_theirs);
}

#[test]
fn legacy_kpm_decodes_and_reencodes_as_its_bytes_with_the_digest_appended() {
    let bytes = vector("legacy_test_zstd.kpm");
    let m = KpmManifest::decode(&bytes).unwrap();
    let entry = |kernel_count| KpmEntry {
        file: "test_zstd.kpack".to_owned(),
        size: 518,
        kernel_count,
        package: None,
    };
    assert_eq!(
        m,
        KpmManifest {
            format_version: 1,
            component_name: "test_zstd".to_owned(),
            prefix: "lib".to_owned(),
            kpack_files: vec![
                ("gfx1100".to_owned(), entry(2)),
                ("gfx1101".to_owned(), entry(1)),
            ],
        }
    );
    // Re-encoded, it is the same map with the digest as a fifth key, last.
    let mut sealed = bytes.clone();
    assert_eq!(sealed[0], 0x84);
    sealed[0] = 0x85;
    let encoded = m.encode().unwrap();
    assert_eq!(encoded[..sealed.len()], sealed[..]);
    assert_eq!(
        &encoded[sealed.len()..sealed.len() + 7],
        b"\xa4xxh3\xc4\x08"
    );
    assert_eq!(encoded.len(), sealed.len() + 15);
    assert_eq!(KpmManifest::decode(&encoded).unwrap(), m);
}
