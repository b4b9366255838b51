//! Malformed archives fail at open with typed errors naming what is wrong, never a panic.
//! Each case edits a reference vector in one place.

use crate::common;

use common::{edit_toc, encode, field, top_field, vector};
use kpack_archive::{Archive, ArchiveError, ErrorKind};
use rmpv::Value;

fn noop() -> Vec<u8> {
    vector("test_noop.kpack")
}

fn zstd() -> Vec<u8> {
    vector("test_zstd.kpack")
}

fn open_err(bytes: Vec<u8>) -> ArchiveError {
    Archive::from_bytes(bytes).unwrap_err()
}

/// Opening fails with `kind` and a message containing `message`.
fn assert_rejected(bytes: Vec<u8>, kind: ErrorKind, message: &str) {
    let e = open_err(bytes);
    assert_eq!(e.kind(), kind, "{e}");
    assert!(e.to_string().contains(message), "{e:?} lacks {message:?}");
}

fn entry<'v>(top: &'v mut [(Value, Value)], binary: &str, arch: &str) -> &'v mut Value {
    field(field(top_field(top, "toc"), binary), arch)
}

#[test]
fn every_truncation_of_the_noop_vector_is_an_error() {
    let bytes = noop();
    for len in 0..bytes.len() {
        let e = open_err(bytes[..len].to_vec());
        assert!(
            matches!(e.kind(), ErrorKind::InvalidFormat | ErrorKind::MsgpackParse),
            "{len}: {e}"
        );
    }
}

#[test]
fn every_truncation_of_the_zstd_vector_is_an_error() {
    let bytes = zstd();
    for len in 0..bytes.len() {
        assert!(Archive::from_bytes(bytes[..len].to_vec()).is_err(), "{len}");
    }
}

#[test]
fn header_errors() {
    let mut b = noop();
    b[0] = b'X';
    assert_rejected(b, ErrorKind::InvalidFormat, "bad magic");
    let mut b = noop();
    b[4] = 3;
    assert_rejected(b, ErrorKind::UnsupportedVersion, "header version 3");
    // Version 2 is scheme `unified`'s: a version 1 TOC under it disagrees with the header.
    let mut b = noop();
    b[4] = 2;
    assert_rejected(b, ErrorKind::UnsupportedVersion, "TOC format_version 1");
    let mut b = noop();
    b[8..16].copy_from_slice(&10_000u64.to_le_bytes());
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "toc_offset 10000 at byte 8 is outside [64, 903)",
    );
    let mut b = noop();
    b[8..16].copy_from_slice(&16u64.to_le_bytes());
    assert_rejected(b, ErrorKind::InvalidFormat, "toc_offset 16");
    assert_rejected(vec![], ErrorKind::InvalidFormat, "0 bytes");
}

#[test]
fn toc_that_is_not_a_map_is_a_parse_failure() {
    let mut b = noop();
    b.truncate(570);
    b.extend(encode(&Value::Array(vec![])).unwrap());
    assert_rejected(
        b,
        ErrorKind::MsgpackParse,
        "TOC at byte 570: expected a map, found array",
    );
}

#[test]
fn toc_msgpack_errors_carry_the_file_offset() {
    let mut b = noop();
    b.truncate(570);
    b.extend([0x81, 0xc1, 0x00]);
    assert_rejected(b, ErrorKind::MsgpackParse, "at byte 571");
    let mut b = noop();
    b.push(0);
    assert_rejected(
        b,
        ErrorKind::MsgpackParse,
        "at byte 903: expected end of input",
    );
}

#[test]
fn a_str32_claiming_4_gib_in_the_toc_fails_without_allocating() {
    let mut b = noop();
    b.truncate(570);
    b.extend([0x81, 0xdb, 0xff, 0xff, 0xff, 0xff, b'x']);
    assert_rejected(
        b,
        ErrorKind::MsgpackParse,
        "needs at least 4294967295 bytes, only 1 left",
    );
}

#[test]
fn wrong_typed_fields_name_their_path() {
    let b = edit_toc(&noop(), |t| {
        *field(entry(t, "lib/libtest.so#0", "gfx900"), "ordinal") = "0".into()
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "toc[\"lib/libtest.so#0\"][\"gfx900\"].ordinal: expected unsigned int, found str",
    );
    let b = edit_toc(&noop(), |t| {
        *field(entry(t, "bin/testapp#0", "gfx900"), "ordinal") = Value::from(-1)
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "ordinal: expected unsigned int, found negative int",
    );
    let b = edit_toc(&noop(), |t| {
        *field(entry(t, "bin/testapp#0", "gfx900"), "original_size") = Value::F64(168.0)
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "original_size: expected unsigned int, found float",
    );
    let b = edit_toc(&noop(), |t| *top_field(t, "group_name") = Value::Nil);
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "group_name: expected str, found nil",
    );
    let b = edit_toc(&noop(), |t| {
        *top_field(t, "gfx_arches") = Value::Array(vec!["gfx900".into(), Value::from(906)])
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "gfx_arches[1]: expected str, found unsigned int",
    );
    let b = edit_toc(&noop(), |t| {
        *field(entry(t, "bin/testapp#0", "gfx900"), "type") = "elf".into()
    });
    assert_rejected(b, ErrorKind::InvalidFormat, "type: expected \"hsaco\"");
    let b = edit_toc(&noop(), |t| {
        let Value::Array(blobs) = top_field(t, "blobs") else {
            panic!()
        };
        *field(&mut blobs[1], "size") = "219".into();
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "blobs[1].size: expected unsigned int, found str",
    );
}

#[test]
fn missing_required_keys_are_named() {
    for key in [
        "format_version",
        "group_name",
        "gfx_arch_family",
        "gfx_arches",
        "toc",
        "blobs",
    ] {
        let b = edit_toc(&noop(), |t| t.retain(|(k, _)| k.as_str() != Some(key)));
        assert_rejected(b, ErrorKind::InvalidFormat, &format!("{key}: missing"));
    }
    let b = edit_toc(&noop(), |t| {
        let Value::Map(e) = entry(t, "lib/libtest.so#0", "gfx906") else {
            panic!()
        };
        e.retain(|(k, _)| k.as_str() != Some("original_size"));
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "[\"gfx906\"].original_size: missing",
    );
    for key in ["zstd_offset", "zstd_size"] {
        let b = edit_toc(&zstd(), |t| t.retain(|(k, _)| k.as_str() != Some(key)));
        assert_rejected(b, ErrorKind::InvalidFormat, &format!("{key}: missing"));
    }
}

#[test]
fn a_missing_scheme_means_none_but_an_unknown_one_is_rejected() {
    let b = edit_toc(&noop(), |t| {
        t.retain(|(k, _)| k.as_str() != Some("compression_scheme"))
    });
    assert_eq!(Archive::from_bytes(b).unwrap().binaries().len(), 2);
    let b = edit_toc(&noop(), |t| {
        *top_field(t, "compression_scheme") = "lz4".into()
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "unknown compression_scheme lz4",
    );
}

#[test]
fn toc_format_version_other_than_the_headers_is_unsupported() {
    let b = edit_toc(&noop(), |t| {
        *top_field(t, "format_version") = Value::from(2)
    });
    assert_rejected(b, ErrorKind::UnsupportedVersion, "TOC format_version 2");
}

#[test]
fn duplicate_toc_keys_are_rejected() {
    let b = edit_toc(&noop(), |t| {
        let dup = t[1].clone();
        t.push(dup);
    });
    assert_rejected(b, ErrorKind::InvalidFormat, "duplicate key \"group_name\"");
}

#[test]
fn ordinal_out_of_range_is_rejected_at_open() {
    let b = edit_toc(&noop(), |t| {
        *field(entry(t, "bin/testapp#0", "gfx900"), "ordinal") = Value::from(3)
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "ordinal 3 out of range, the archive stores 3 blobs",
    );
}

#[test]
fn blobs_outside_the_data_region_are_rejected() {
    let set_blob = |offset: u64, size: u64| {
        edit_toc(&noop(), |t| {
            let Value::Array(blobs) = top_field(t, "blobs") else {
                panic!()
            };
            *field(&mut blobs[2], "offset") = Value::from(offset);
            *field(&mut blobs[2], "size") = Value::from(size);
        })
    };
    assert_rejected(
        set_blob(1 << 40, 168),
        ErrorKind::InvalidFormat,
        "blobs[2]: bytes 1099511627776+168 lie outside",
    );
    assert_rejected(
        set_blob(u64::MAX, 168),
        ErrorKind::InvalidFormat,
        "blobs[2]",
    );
    assert_rejected(
        set_blob(500, 168),
        ErrorKind::InvalidFormat,
        "data region [64, 570)",
    );
    assert_rejected(set_blob(0, 168), ErrorKind::InvalidFormat, "blobs[2]");
}

#[test]
fn noop_original_size_must_match_the_blob() {
    let b = edit_toc(&noop(), |t| {
        *field(entry(t, "bin/testapp#0", "gfx900"), "original_size") = Value::from(169)
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "original_size 169 differs from the blob size 168",
    );
    let b = edit_toc(&zstd(), |t| {
        *field(entry(t, "bin/hiptest#0", "gfx1100"), "original_size") = Value::from(1u64 << 33)
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "exceeds the 4294967296-byte limit",
    );
}

#[test]
fn zstd_region_and_frame_count_are_bounds_checked_at_open() {
    // Region: u32 count at 64, first frame size at 68.
    let mut b = zstd();
    b[64..68].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "frame count 4294967295 at byte 64 cannot fit",
    );
    let b = edit_toc(&zstd(), |t| {
        *top_field(t, "zstd_size") = Value::from(10_000)
    });
    assert_rejected(b, ErrorKind::InvalidFormat, "zstd region: bytes 64+10000");
    let b = edit_toc(&zstd(), |t| *top_field(t, "zstd_size") = Value::from(2));
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "expected the frame count (u32) at byte 64",
    );
}

#[test]
fn zstd_frame_sizes_are_checked_at_first_use_and_by_validate() {
    let mut overrun = zstd();
    overrun[68..72].copy_from_slice(&1000u32.to_le_bytes());
    // Two frames counted, the third (ordinal 2) left over: drop its one entry.
    let mut short_count = edit_toc(&zstd(), |t| {
        let Value::Map(toc) = top_field(t, "toc") else {
            panic!()
        };
        toc.retain(|(k, _)| k.as_str() != Some("bin/hiptest#0"));
    });
    short_count[64..68].copy_from_slice(&2u32.to_le_bytes());
    for (b, message) in [
        (
            overrun,
            "zstd frame 0: size 1000 at byte 68 runs past the region end",
        ),
        (short_count, "unused bytes after the last frame"),
    ] {
        let a = Archive::from_bytes(b).unwrap();
        for e in [
            a.validate().unwrap_err(),
            a.get("lib/libhip.so#0", "gfx1100").unwrap_err(),
            a.get_into("lib/libhip.so#0", "gfx1100", &mut [0; 1019])
                .unwrap_err(),
        ] {
            assert_eq!(e.kind(), ErrorKind::InvalidFormat, "{e}");
            assert!(e.to_string().contains(message), "{e:?} lacks {message:?}");
        }
        assert_eq!(a.info("lib/libhip.so#0", "gfx1100").unwrap().stored_size, 0);
    }
}

#[test]
fn zstd_original_size_mismatch_fails_on_get_not_open() {
    for size in [1000, 1020, 0] {
        let b = edit_toc(&zstd(), |t| {
            *field(entry(t, "lib/libhip.so#0", "gfx1100"), "original_size") = Value::from(size)
        });
        let a = Archive::from_bytes(b).unwrap();
        let e = a.get("lib/libhip.so#0", "gfx1100").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DecompressionFailed, "{e}");
        assert!(
            e.to_string().contains("frame content size 1019 differs"),
            "{e}"
        );
        assert_eq!(a.get("bin/hiptest#0", "gfx1100").unwrap().len(), 1018);
    }
}

#[test]
fn a_corrupt_zstd_frame_fails_on_get() {
    let mut b = zstd();
    // Inside the first frame's compressed body (frame starts at 72).
    for byte in &mut b[90..110] {
        *byte = 0xff;
    }
    let a = Archive::from_bytes(b).unwrap();
    assert_eq!(
        a.get("lib/libhip.so#0", "gfx1100").unwrap_err().kind(),
        ErrorKind::DecompressionFailed
    );
    let mut b = zstd();
    b[72] = 0; // frame magic
    let a = Archive::from_bytes(b).unwrap();
    assert!(
        a.get("lib/libhip.so#0", "gfx1100")
            .unwrap_err()
            .to_string()
            .contains("invalid zstd frame header")
    );
}

#[test]
fn unknown_entries_are_kernel_not_found() {
    let a = Archive::from_bytes(noop()).unwrap();
    for (b, arch) in [
        ("bin/testapp#0", "gfx906"),
        ("bin/testapp", "gfx900"),
        ("nope#0", "gfx900"),
    ] {
        assert_eq!(
            a.get(b, arch).unwrap_err().kind(),
            ErrorKind::KernelNotFound
        );
    }
}

#[test]
fn arches_missing_from_gfx_arches_open_but_fail_validation() {
    let b = edit_toc(&noop(), |t| {
        *top_field(t, "gfx_arches") = Value::Array(vec!["gfx900".into()])
    });
    let a = Archive::from_bytes(b).unwrap();
    assert_eq!(a.get("lib/libtest.so#0", "gfx906").unwrap().len(), 219);
    let e = a.validate().unwrap_err();
    assert!(
        matches!(e, ArchiveError::Unreachable { ref arch, .. } if arch == "gfx906"),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::InvalidFormat);

    let b = edit_toc(&noop(), |t| {
        let Value::Map(toc) = top_field(t, "toc") else {
            panic!()
        };
        toc[1].0 = "bin/testapp".into();
    });
    let a = Archive::from_bytes(b).unwrap();
    assert!(a.validate().unwrap_err().to_string().contains("#<index>"));

    let b = edit_toc(&noop(), |t| {
        *top_field(t, "gfx_arches") =
            Value::Array(vec!["gfx900".into(), "gfx906".into(), "gfx900".into()]);
    });
    assert!(
        Archive::from_bytes(b)
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string()
            .contains("listed twice")
    );
}

#[test]
fn file_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.kpack");
    let e = Archive::open(&missing).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::FileNotFound);
    assert!(e.to_string().contains("missing.kpack"), "{e}");

    let empty = dir.path().join("empty.kpack");
    std::fs::write(&empty, b"").unwrap();
    let e = Archive::open(&empty).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFormat);
    assert!(matches!(e.inner(), ArchiveError::TooShort { len: 0 }));
    assert!(
        e.to_string().starts_with(&empty.display().to_string()),
        "{e}"
    );

    let bad = dir.path().join("bad.kpack");
    let b = edit_toc(&noop(), |t| {
        *field(entry(t, "bin/testapp#0", "gfx900"), "ordinal") = Value::from(9)
    });
    std::fs::write(&bad, b).unwrap();
    let e = Archive::open(&bad).unwrap_err();
    assert!(
        e.to_string().contains("bad.kpack") && e.to_string().contains("ordinal 9"),
        "{e}"
    );

    let zstd_path = dir.path().join("z.kpack");
    let b = edit_toc(&zstd(), |t| {
        *field(entry(t, "bin/hiptest#0", "gfx1100"), "original_size") = Value::from(5)
    });
    std::fs::write(&zstd_path, b).unwrap();
    let a = Archive::open(&zstd_path).unwrap();
    assert_eq!(a.path(), Some(zstd_path.as_path()));
    let e = a.get("bin/hiptest#0", "gfx1100").unwrap_err();
    assert!(e.to_string().contains("z.kpack"), "{e}");
}

/// A zstd archive holding `frame` as its only kernel, with the given `original_size`.
fn single_frame_archive(frame: &[u8], original_size: u64) -> Vec<u8> {
    let region_len = 8 + frame.len() as u64;
    let mut b = b"KPAK\x01\0\0\0".to_vec();
    b.extend((64 + region_len).to_le_bytes());
    b.resize(64, 0);
    b.extend(1u32.to_le_bytes());
    b.extend((frame.len() as u32).to_le_bytes());
    b.extend(frame);
    let s = |s: &str| Value::from(s);
    let entry = Value::Map(vec![
        (s("type"), s("hsaco")),
        (s("ordinal"), Value::from(0)),
        (s("original_size"), Value::from(original_size)),
    ]);
    let toc = Value::Map(vec![
        (s("format_version"), Value::from(1)),
        (s("group_name"), s("g")),
        (s("gfx_arch_family"), s("gfx1100")),
        (s("gfx_arches"), Value::Array(vec![s("gfx1100")])),
        (
            s("toc"),
            Value::Map(vec![(s("k#0"), Value::Map(vec![(s("gfx1100"), entry)]))]),
        ),
        (s("compression_scheme"), s("zstd-per-kernel")),
        (s("zstd_offset"), Value::from(64)),
        (s("zstd_size"), Value::from(region_len)),
    ]);
    b.extend(encode(&toc).unwrap());
    b
}

#[test]
fn frames_without_a_content_size_decode_only_to_exactly_original_size() {
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_contentsize(false).unwrap();
    std::io::Write::write_all(&mut enc, &data).unwrap();
    let frame = enc.finish().unwrap();
    assert_eq!(
        zstd::zstd_safe::get_frame_content_size(&frame).unwrap(),
        None
    );

    let a = Archive::from_bytes(single_frame_archive(&frame, 5000)).unwrap();
    assert_eq!(&*a.get("k#0", "gfx1100").unwrap(), data.as_slice());
    for wrong in [4999, 5001, 1 << 32] {
        let a = Archive::from_bytes(single_frame_archive(&frame, wrong)).unwrap();
        let e = a.get("k#0", "gfx1100").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DecompressionFailed, "{e}");
    }
}

#[test]
fn every_one_byte_corruption_of_a_toc_opens_or_fails_with_an_error_that_locates_it() {
    for bytes in [noop(), zstd()] {
        let toc_at = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
        for i in toc_at..bytes.len() {
            let markers = [0x00, 0x7f, 0x80, 0x8f, 0x90, 0xa0, 0xbf, 0xc0, 0xc1, 0xc4];
            let more = [0xcc, 0xcf, 0xd0, 0xd4, 0xd9, 0xdb, 0xdc, 0xdf, 0xe0, 0xff];
            for value in markers.into_iter().chain(more).chain([bytes[i] ^ 1]) {
                let mut b = bytes.clone();
                b[i] = value;
                if let Err(e) = Archive::from_bytes(b) {
                    let m = e.to_string();
                    assert!(
                        m.contains("TOC") || m.starts_with("zstd region"),
                        "byte {i} = {value:#04x}: {m}"
                    );
                }
            }
        }
    }
}
