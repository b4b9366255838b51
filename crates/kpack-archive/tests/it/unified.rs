//! Scheme `unified` (format version 2): identity, references within the chain bound, the
//! version check a spec-following v1 reader makes, streaming and in-memory writers agreeing,
//! and malformed reference tables.

use crate::common;

use common::{decode, edit_toc, field, split_toc, top_field, vector};
use kpack_archive::unified::MAX_CHAIN;
use kpack_archive::{
    Archive, ArchiveFileWriter, ArchiveWriter, Compression, CompressionScheme, ErrorKind,
    REFERENCE_CACHE_BUDGET,
};
use kpack_testkit::read_fixture;
use rmpv::Value;

/// (binary, arch, bytes) per entry.
type Kernels = Vec<(String, String, Vec<u8>)>;

/// Real code objects: the fixtures' standalone ones and the reference vector's kernels, each
/// under several targets (the copies for the `xnack` twin differ in their flags byte as real
/// twins do), across two binaries.
fn kernels() -> Kernels {
    let mut objects: Vec<Vec<u8>> = [
        "bin/k1_gfx90a.hsaco",
        "bin/k1_genco.hsaco",
        "modern/mk_gfx1030.co",
        "modern/mk_gfx90a_xnackp.co",
        "modern/mk_gfx1201_plain.hsaco",
    ]
    .iter()
    .map(|rel| read_fixture(rel))
    .collect();
    let v = Archive::from_bytes(vector("test_zstd.kpack")).unwrap();
    objects.extend(
        v.entries()
            .map(|(b, a, _)| v.get(b, a).unwrap().into_owned()),
    );
    let mut out = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        let binary = format!("lib/libk{}.so#{}", i % 2, i / 2);
        let mut twin = object.clone();
        // e_flags' xnack bits sit at byte 48 of a 64-bit ELF header.
        if twin.len() > 48 {
            twin[48] ^= 0x03;
        }
        out.push((binary.clone(), "gfx90a:xnack-".to_owned(), object.clone()));
        out.push((binary.clone(), "gfx90a:xnack+".to_owned(), twin));
        out.push((binary.clone(), "gfx1100".to_owned(), object.clone()));
    }
    out
}

fn write(compression: Compression, ks: &[(String, String, Vec<u8>)]) -> Vec<u8> {
    let mut w = ArchiveWriter::new("grp", "gfx90X", compression);
    for (b, a, d) in ks {
        w.add(b, a, d.as_slice(), &[]).unwrap();
    }
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    out
}

/// The TOC's `frames`: (offset, size, ref) per ordinal.
fn frames(archive: &[u8]) -> Vec<(u64, u64, Option<u64>)> {
    let (_, top) = split_toc(archive);
    let frames = top.iter().find(|(k, _)| k.as_str() == Some("frames"));
    let Some((_, Value::Array(frames))) = frames else {
        panic!("no frames array")
    };
    frames
        .iter()
        .map(|f| {
            let get = |k: &str| {
                f.as_map()
                    .unwrap()
                    .iter()
                    .find(|(key, _)| key.as_str() == Some(k))
                    .and_then(|(_, v)| v.as_u64())
            };
            (get("offset").unwrap(), get("size").unwrap(), get("ref"))
        })
        .collect()
}

/// How many frames reading frame `i` decodes.
fn chain_len(table: &[(u64, u64, Option<u64>)], i: usize) -> usize {
    match table[i].2 {
        Some(r) => 1 + chain_len(table, r as usize),
        None => 1,
    }
}

#[test]
fn unified_archives_read_back_every_code_object_byte_for_byte() {
    let ks = kernels();
    for level in [1, 3, 19] {
        let a = Archive::from_bytes(write(Compression::Unified { level }, &ks)).unwrap();
        a.validate().unwrap();
        assert_eq!(a.compression_scheme(), CompressionScheme::Unified);
        for (b, arch, data) in &ks {
            assert_eq!(&*a.get(b, arch).unwrap(), data.as_slice(), "{b} {arch}");
            let mut buf = vec![0xa5; data.len() + 3];
            assert_eq!(a.get_into(b, arch, &mut buf).unwrap(), data.len());
            assert_eq!(&buf[..data.len()], data.as_slice());
        }
    }
}

/// `value` with the keys of every map in it in reverse order.
fn keys_reversed(value: &mut Value) {
    match value {
        Value::Map(map) => {
            map.reverse();
            map.iter_mut().for_each(|(_, v)| keys_reversed(v));
        }
        Value::Array(items) => items.iter_mut().for_each(keys_reversed),
        _ => {}
    }
}

#[test]
fn a_toc_whose_maps_are_in_another_key_order_reads_the_same_as_the_writers() {
    // The reader takes a fast path over the maps as our writer orders their keys (frames,
    // blobs, entries) and reads any other order field by field: both must agree.
    let ks = kernels();
    for compression in [
        Compression::None,
        Compression::Zstd { level: 3 },
        Compression::Unified { level: 3 },
    ] {
        let written = write(compression, &ks);
        let reordered = edit_toc(&written, |top| {
            for (key, value) in top.iter_mut() {
                if key.as_str() != Some("toc_xxh3") {
                    keys_reversed(value);
                }
            }
        });
        assert_ne!(written, reordered);
        let (a, b) = (
            Archive::from_bytes(written).unwrap(),
            Archive::from_bytes(reordered).unwrap(),
        );
        // Entries are listed in TOC order, which the reversal changed.
        let listed = |a: &Archive| -> Vec<(String, String, u64, Option<u64>)> {
            let mut list: Vec<_> = a
                .entries()
                .map(|(b, arch, e)| (b.to_owned(), arch.to_owned(), e.original_size, e.digest))
                .collect();
            list.sort();
            list
        };
        assert_eq!(listed(&a), listed(&b), "{compression:?}");
        assert!(listed(&a).iter().all(|e| e.3.is_some()));
        for (binary, arch, data) in &ks {
            for archive in [&a, &b] {
                let got = archive.get(binary, arch).unwrap();
                assert_eq!(&*got, data.as_slice(), "{binary} {arch}");
            }
        }
    }
}

#[test]
fn reference_frames_are_held_within_the_budget_and_reads_from_many_threads_agree() {
    let ks = kernels();
    let bytes = write(Compression::Unified { level: 3 }, &ks);
    assert!(
        frames(&bytes).iter().any(|f| f.2.is_some()),
        "the fixture has delta frames"
    );
    let a = std::sync::Arc::new(Archive::from_bytes(bytes).unwrap());
    assert_eq!(a.reference_cache_bytes(), 0, "nothing decoded at open");
    // Backwards: leaves first, so their references are decoded for them and then reused.
    for (b, arch, data) in ks.iter().rev() {
        assert_eq!(&*a.get(b, arch).unwrap(), data.as_slice(), "{b} {arch}");
    }
    let held = a.reference_cache_bytes();
    assert!(held > 0 && held <= REFERENCE_CACHE_BUDGET, "{held}");
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (a, ks) = (std::sync::Arc::clone(&a), ks.clone());
            std::thread::spawn(move || {
                for i in 0..ks.len() * 4 {
                    let (b, arch, data) = &ks[(i * 7 + t) % ks.len()];
                    let mut buf = vec![0; data.len()];
                    a.get_into(b, arch, &mut buf).unwrap();
                    assert_eq!(&buf, data, "{b} {arch}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(a.reference_cache_bytes() <= REFERENCE_CACHE_BUDGET);
}

#[test]
fn twins_are_coded_as_deltas_within_the_chain_bound_and_identical_objects_stored_once() {
    let ks = kernels();
    let bytes = write(Compression::unified(), &ks);
    let table = frames(&bytes);
    // Every object is stored under gfx90a:xnack- and gfx1100 with the same bytes.
    assert_eq!(table.len(), ks.len() / 3 * 2);
    let deltas = table.iter().filter(|f| f.2.is_some()).count();
    assert!(deltas >= ks.len() / 3, "each twin is a delta: {table:?}");
    for (i, (offset, size, reference)) in table.iter().enumerate() {
        let frame = &bytes[*offset as usize..(*offset + *size) as usize];
        assert_eq!(&frame[..4], [0x28, 0xb5, 0x2f, 0xfd], "frame {i} is zstd");
        if let Some(r) = reference {
            assert!((*r as usize) < i, "frame {i} refers forward");
        }
        assert!(
            chain_len(&table, i) <= MAX_CHAIN,
            "chain bound at frame {i}"
        );
    }
    let v1 = write(Compression::zstd(), &ks);
    // zstd stores each object and its twin (identical copies once too): about half goes.
    assert!(
        bytes.len() * 10 < v1.len() * 6,
        "unified {} vs zstd {}",
        bytes.len(),
        v1.len()
    );
}

#[test]
fn version_2_header_and_toc() {
    let bytes = write(Compression::unified(), &kernels());
    assert_eq!(&bytes[..4], b"KPAK");
    assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()), 2);
    let (_, top) = split_toc(&bytes);
    let keys: Vec<&str> = top.iter().map(|(k, _)| k.as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "format_version",
            "group_name",
            "gfx_arch_family",
            "gfx_arches",
            "toc",
            "compression_scheme",
            "frames",
            "toc_xxh3"
        ]
    );
    assert_eq!(top[0].1.as_u64(), Some(2));
    assert_eq!(top[5].1.as_str(), Some("unified"));
}

/// `ks` written by an [`ArchiveFileWriter`] of scheme `unified`, each group ended (see
/// [`ArchiveFileWriter::end_group`]) once its last kernel is added if `end_groups`.
fn write_streamed(ks: &[(String, String, Vec<u8>)], end_groups: bool) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.kpack");
    let mut w = ArchiveFileWriter::create(&path, "grp", "gfx90X", Compression::unified()).unwrap();
    for (i, (b, a, d)) in ks.iter().enumerate() {
        w.add(b, a, d.as_slice(), &[]).unwrap();
        if end_groups && ks.get(i + 1).is_none_or(|next| next.0 != *b) {
            w.end_group().unwrap();
        }
    }
    w.finish().unwrap();
    std::fs::read(&path).unwrap()
}

#[test]
fn streamed_and_in_memory_unified_archives_are_identical() {
    let ks = kernels();
    assert_eq!(
        write_streamed(&ks, false),
        write(Compression::unified(), &ks)
    );
}

#[test]
fn ending_each_group_once_its_key_is_complete_changes_no_byte() {
    // What a transform does after each bundle, so that no writer holds a group until the
    // next bundle: the groups are the same, coded earlier.
    let ks = kernels();
    assert_eq!(
        write_streamed(&ks, true),
        write(Compression::unified(), &ks)
    );
}

/// What a reader following the spec does (§1, §4): magic, `version == 1` else
/// UNSUPPORTED_VERSION, then the TOC's blobs or zstd frames. Returns every entry's bytes.
fn spec_reader(bytes: &[u8]) -> Result<Kernels, &'static str> {
    if bytes.len() < 16 || &bytes[..4] != b"KPAK" {
        return Err("INVALID_FORMAT");
    }
    if u32::from_le_bytes(bytes[4..8].try_into().unwrap()) != 1 {
        return Err("UNSUPPORTED_VERSION");
    }
    let toc_offset = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    let Value::Map(top) = decode(&bytes[toc_offset..]).map_err(|_| "MSGPACK_PARSE_FAILED")? else {
        return Err("INVALID_FORMAT");
    };
    let get = |k: &str| {
        top.iter()
            .find(|(key, _)| key.as_str() == Some(k))
            .map(|e| &e.1)
    };
    let scheme = get("compression_scheme")
        .and_then(Value::as_str)
        .unwrap_or("none");
    let stored: Vec<Vec<u8>> = match scheme {
        "none" => get("blobs")
            .and_then(Value::as_array)
            .ok_or("INVALID_FORMAT")?
            .iter()
            .map(|b| {
                let m = |k: &str| b[k].as_u64().unwrap() as usize;
                bytes[m("offset")..m("offset") + m("size")].to_vec()
            })
            .collect(),
        "zstd-per-kernel" => {
            let at = get("zstd_offset").and_then(Value::as_u64).unwrap() as usize;
            let count = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            let mut pos = at + 4;
            (0..count)
                .map(|_| {
                    let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap());
                    let frame = &bytes[pos + 4..pos + 4 + len as usize];
                    pos += 4 + len as usize;
                    zstd::decode_all(frame).unwrap()
                })
                .collect()
        }
        _ => return Err("INVALID_FORMAT"),
    };
    let mut out = Vec::new();
    for (binary, arches) in get("toc").and_then(Value::as_map).unwrap() {
        for (arch, entry) in arches.as_map().unwrap() {
            let ordinal = entry["ordinal"].as_u64().unwrap() as usize;
            out.push((
                binary.as_str().unwrap().to_owned(),
                arch.as_str().unwrap().to_owned(),
                stored[ordinal].clone(),
            ));
        }
    }
    Ok(out)
}

#[test]
fn a_spec_following_v1_reader_rejects_unified_and_reads_every_v1_archive_we_write() {
    let ks = kernels();
    assert_eq!(
        spec_reader(&write(Compression::unified(), &ks)).unwrap_err(),
        "UNSUPPORTED_VERSION"
    );
    for compression in [
        Compression::None,
        Compression::zstd(),
        Compression::Zstd { level: 19 },
    ] {
        assert_eq!(spec_reader(&write(compression, &ks)).unwrap(), ks);
    }
    // The reference vectors too, as the spec's readers read them.
    for name in ["test_noop.kpack", "test_zstd.kpack"] {
        let bytes = vector(name);
        let a = Archive::from_bytes(bytes.clone()).unwrap();
        let ours: Vec<_> = a
            .entries()
            .map(|(b, arch, _)| {
                (
                    b.to_owned(),
                    arch.to_owned(),
                    a.get(b, arch).unwrap().into(),
                )
            })
            .collect();
        assert_eq!(spec_reader(&bytes).unwrap(), ours, "{name}");
    }
}

fn assert_rejected(bytes: Vec<u8>, kind: ErrorKind, message: &str) {
    let e = Archive::from_bytes(bytes).unwrap_err();
    assert_eq!(e.kind(), kind, "{e}");
    assert!(e.to_string().contains(message), "{e} lacks {message:?}");
}

/// Index of the first frame with a `ref`, and that ref.
fn first_delta(bytes: &[u8]) -> (usize, u64) {
    frames(bytes)
        .iter()
        .enumerate()
        .find_map(|(i, f)| f.2.map(|r| (i, r)))
        .expect("a delta frame")
}

#[test]
fn references_must_point_back() {
    let good = write(Compression::unified(), &kernels());
    let (delta, _) = first_delta(&good);
    // A reference to itself (or later) breaks the backwards rule.
    let b = edit_toc(&good, |t| {
        let Value::Array(frames) = top_field(t, "frames") else {
            panic!()
        };
        *field(&mut frames[delta], "ref") = Value::from(delta as u64);
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        &format!("frames[{delta}].ref: {delta} is not an earlier frame's ordinal"),
    );
}

/// A hand-built version 2 archive of real code objects, one entry per frame: frame `i` is
/// `objects[i]`, coded against the content of frame `refs[i]` if given.
fn chained(objects: &[Vec<u8>], refs: &[Option<usize>]) -> Vec<u8> {
    let mut region = Vec::new();
    let mut frames = Vec::new();
    let mut toc = Vec::new();
    for (i, (object, reference)) in objects.iter().zip(refs).enumerate() {
        let frame = match reference {
            Some(r) => zstd::bulk::Compressor::with_dictionary(19, &objects[*r])
                .unwrap()
                .compress(object)
                .unwrap(),
            None => zstd::bulk::compress(object, 19).unwrap(),
        };
        let mut f = vec![
            (Value::from("offset"), Value::from(64 + region.len() as u64)),
            (Value::from("size"), Value::from(frame.len() as u64)),
        ];
        if let Some(r) = reference {
            f.push((Value::from("ref"), Value::from(*r as u64)));
        }
        frames.push(Value::Map(f));
        region.extend(frame);
        let entry = Value::Map(vec![
            (Value::from("type"), Value::from("hsaco")),
            (Value::from("ordinal"), Value::from(i as u64)),
            (
                Value::from("original_size"),
                Value::from(object.len() as u64),
            ),
        ]);
        toc.push((
            Value::from(format!("lib/libk.so#{i}")),
            Value::Map(vec![(Value::from("gfx1100"), entry)]),
        ));
    }
    let top = Value::Map(vec![
        (Value::from("format_version"), Value::from(2)),
        (Value::from("group_name"), Value::from("grp")),
        (Value::from("gfx_arch_family"), Value::from("gfx1100")),
        (
            Value::from("gfx_arches"),
            Value::Array(vec![Value::from("gfx1100")]),
        ),
        (Value::from("toc"), Value::Map(toc)),
        (Value::from("compression_scheme"), Value::from("unified")),
        (Value::from("frames"), Value::Array(frames)),
    ]);
    let mut out = b"KPAK".to_vec();
    out.extend(2u32.to_le_bytes());
    out.extend((64 + region.len() as u64).to_le_bytes());
    out.resize(64, 0);
    out.extend(region);
    out.extend(common::encode(&top).unwrap());
    out
}

#[test]
fn a_chain_of_three_frames_decodes_and_a_longer_one_is_refused_at_open() {
    // Each object a small edit of the one before, as feature variants are.
    let mut objects = vec![read_fixture("bin/k1_gfx90a.hsaco")];
    for (i, at) in [48, 49, 50].into_iter().enumerate() {
        let mut next = objects[i].clone();
        next[at] ^= 0x5a;
        objects.push(next);
    }
    let three = chained(&objects[..3], &[None, Some(0), Some(1)]);
    let a = Archive::from_bytes(three).unwrap();
    a.validate().unwrap();
    for (i, object) in objects[..3].iter().enumerate() {
        let key = format!("lib/libk.so#{i}");
        assert_eq!(&*a.get(&key, "gfx1100").unwrap(), object.as_slice());
        let mut buf = vec![0; object.len()];
        a.get_into(&key, "gfx1100", &mut buf).unwrap();
        assert_eq!(&buf, object);
    }
    let four = chained(&objects, &[None, Some(0), Some(1), Some(2)]);
    assert_rejected(
        four,
        ErrorKind::InvalidFormat,
        "frames[3].ref: frame 3 decodes through a chain of more than 3 frames",
    );
}

#[test]
fn schemes_and_versions_must_agree() {
    let mut b = write(Compression::unified(), &kernels());
    b[4] = 1;
    // The TOC digest covers the header: the edit is damage.
    assert_rejected(b.clone(), ErrorKind::IntegrityCheckFailed, "TOC at byte");
    // Sealed again, the TOC's format_version 2 no longer matches.
    let b = edit_toc(&b, |_| {});
    assert_rejected(b, ErrorKind::UnsupportedVersion, "TOC format_version 2");
    let b = edit_toc(&vector("test_zstd.kpack"), |t| {
        *top_field(t, "compression_scheme") = Value::from("unified")
    });
    assert_rejected(
        b,
        ErrorKind::InvalidFormat,
        "compression_scheme unified cannot appear in a version 1 archive",
    );
}

#[test]
fn a_header_too_damaged_to_find_the_toc_digest_by_is_still_damage() {
    let good = write(Compression::unified(), &kernels());
    let len = good.len() as u64;
    let mut b = good.clone();
    b[0] = b'X';
    assert_rejected(
        b,
        ErrorKind::IntegrityCheckFailed,
        "header at byte 0: bad magic",
    );
    let mut b = good.clone();
    b[4] = 3;
    assert_rejected(b, ErrorKind::IntegrityCheckFailed, "header version 3");
    for (toc_offset, problem) in [
        (len + 10, "is outside [64,"),
        (len - 5, "points into the TOC digest ending the file"),
    ] {
        let mut b = good.clone();
        b[8..16].copy_from_slice(&toc_offset.to_le_bytes());
        assert_rejected(b, ErrorKind::IntegrityCheckFailed, problem);
    }
}

#[test]
fn a_corrupt_reference_fails_the_entries_coded_against_it_as_damage() {
    let good = write(Compression::unified(), &kernels());
    let (delta, r) = first_delta(&good);
    let (offset, size, _) = frames(&good)[r as usize];
    let mut b = good.clone();
    // Break a byte in the middle of the reference frame's compressed data.
    b[(offset + size / 2) as usize] ^= 0xff;
    let a = Archive::from_bytes(b).unwrap();
    let a_good = Archive::from_bytes(good.clone()).unwrap();
    let (binary, arch, _) = a_good
        .entries()
        .find(|(_, _, info)| info.ordinal as usize == delta)
        .unwrap();
    let e = a.get(binary, arch).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::IntegrityCheckFailed, "{e}");
    assert!(e.to_string().contains("archive is damaged"), "{e}");
}
