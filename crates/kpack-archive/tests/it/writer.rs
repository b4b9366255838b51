//! Writer behaviour: zstd frames any decoder accepts, dedupe, determinism, atomic files.

use crate::common;

use std::borrow::Cow;

use common::{edit_toc, split_toc, take_key, top_field, vector, zstd_frames};
use kpack_archive::{Archive, ArchiveError, ArchiveWriter, Compression, ErrorKind, binary_key};
use rmpv::Value;

/// The zstd vector's kernels, in TOC order: (binary, arch, bytes).
fn kernels() -> Vec<(String, String, Vec<u8>)> {
    let a = Archive::from_bytes(vector("test_zstd.kpack")).unwrap();
    a.entries()
        .map(|(b, arch, _)| {
            (
                b.to_owned(),
                arch.to_owned(),
                a.get(b, arch).unwrap().into_owned(),
            )
        })
        .collect()
}

fn write(w: &mut ArchiveWriter<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    let n = w.write_to(&mut out).unwrap();
    assert_eq!(n, out.len() as u64);
    out
}

fn writer_with(
    compression: Compression,
    kernels: &[(String, String, Vec<u8>)],
) -> ArchiveWriter<'_> {
    let mut w = ArchiveWriter::new("grp", "gfx110X", compression);
    for (b, arch, data) in kernels {
        w.add(b, arch, data.as_slice(), &[]).unwrap();
    }
    w
}

#[test]
fn zstd_frames_decode_with_an_independent_decoder_and_record_their_size_and_checksum() {
    let ks = kernels();
    let out = write(&mut writer_with(Compression::Zstd { level: 19 }, &ks));
    let frames = zstd_frames(&out);
    assert_eq!(frames.len(), ks.len());
    for (frame, (_, _, data)) in frames.iter().zip(&ks) {
        assert_eq!(&frame[..4], [0x28, 0xb5, 0x2f, 0xfd], "zstd frame magic");
        let descriptor = frame[4];
        assert_ne!(
            descriptor >> 6 | (descriptor >> 5 & 1),
            0,
            "Frame_Content_Size present"
        );
        assert_eq!(descriptor & 0x04, 0x04, "content checksum");
        assert_eq!(descriptor & 0x03, 0, "no dictionary");
        let content_size = zstd::zstd_safe::get_frame_content_size(frame).unwrap();
        assert_eq!(content_size, Some(data.len() as u64));
        let mut decoded = Vec::new();
        std::io::copy(
            &mut zstd::stream::read::Decoder::new(frame.as_slice()).unwrap(),
            &mut decoded,
        )
        .unwrap();
        assert_eq!(&decoded, data);
    }
}

// The zstd CLI here is a Linux program, which a Windows test under wine cannot start.
#[cfg(unix)]
/// Needs the `zstd` command (`scripts/setup.sh` installs it): a missing one fails the test.
#[test]
fn zstd_frames_decode_with_the_zstd_cli() {
    let cli = std::path::Path::new("/usr/bin/zstd");
    assert!(
        cli.exists(),
        "{} is not installed (scripts/setup.sh installs it)",
        cli.display()
    );
    let ks = kernels();
    let frames = zstd_frames(&write(&mut writer_with(Compression::zstd(), &ks)));
    let dir = tempfile::tempdir().unwrap();
    for (i, (frame, (_, _, data))) in frames.iter().zip(&ks).enumerate() {
        let path = dir.path().join(format!("k{i}.zst"));
        std::fs::write(&path, frame).unwrap();
        let out = std::process::Command::new(cli)
            .arg("-d")
            .arg("-c")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(&out.stdout, data);
    }
}

#[test]
fn zstd_archives_round_trip_through_the_reader() {
    let ks = kernels();
    for level in [1, 3, 19] {
        let out = write(&mut writer_with(Compression::Zstd { level }, &ks));
        let a = Archive::from_bytes(out).unwrap();
        assert_eq!(
            a.gfx_arches(),
            ["gfx1100", "gfx1101"],
            "derived in first-insertion order"
        );
        for (b, arch, data) in &ks {
            let got = a.get(b, arch).unwrap();
            assert!(matches!(got, Cow::Owned(_)));
            assert_eq!(&*got, data.as_slice());
        }
    }
}

#[test]
fn identical_kernels_are_stored_once_and_read_back_under_every_key() {
    let ks = kernels();
    let data = &ks[0].2;
    for compression in [Compression::None, Compression::zstd()] {
        let mut single = writer_with(compression, &ks[..1]);
        let mut w = writer_with(compression, &ks[..1]);
        w.add("lib/copy.so#0", "gfx1100", data.clone(), &[])
            .unwrap();
        assert_eq!((w.entry_count(), w.blob_count()), (2, 1));
        let (one, two) = (write(&mut single), write(&mut w));
        // Only the TOC grows; the blob region is the same.
        assert_eq!(one[8..16], two[8..16]);
        let a = Archive::from_bytes(two.clone()).unwrap();
        assert_eq!(a.blob_count(), 1);
        assert_eq!(a.info("lib/copy.so#0", "gfx1100").unwrap().ordinal, 0);
        assert_eq!(
            &*a.get("lib/copy.so#0", "gfx1100").unwrap(),
            data.as_slice()
        );
        assert_eq!(&*a.get(&ks[0].0, &ks[0].1).unwrap(), data.as_slice());

        let mut distinct = writer_with(compression, &ks[..1]);
        let mut other = data.clone();
        other[0] ^= 1;
        distinct
            .add("lib/copy.so#0", "gfx1100", other, &[])
            .unwrap();
        assert_eq!(distinct.blob_count(), 2);
        assert!(write(&mut distinct).len() > two.len());
    }
}

#[test]
fn writing_twice_gives_identical_bytes() {
    let ks = kernels();
    for compression in [Compression::None, Compression::zstd()] {
        let a = write(&mut writer_with(compression, &ks));
        let b = write(&mut writer_with(compression, &ks));
        assert_eq!(a, b);
        let mut w = writer_with(compression, &ks);
        assert_eq!(write(&mut w), write(&mut w));
    }
}

#[test]
fn metadata_is_written_in_order_only_when_present() {
    let ks = kernels();
    let meta = vec![
        (
            "target".to_owned(),
            "hipv4-amdgcn-amd-amdhsa--gfx1100".to_owned(),
        ),
        ("source_prefix".to_owned(), "lib".to_owned()),
    ];
    let mut w = ArchiveWriter::new("grp", "gfx1100", Compression::None);
    w.add(&ks[0].0, &ks[0].1, ks[0].2.as_slice(), &meta)
        .unwrap();
    w.add(&ks[1].0, &ks[1].1, ks[1].2.as_slice(), &[]).unwrap();
    let out = write(&mut w);
    let a = Archive::from_bytes(out.clone()).unwrap();
    assert_eq!(
        a.info(&ks[0].0, &ks[0].1).unwrap().metadata,
        meta.as_slice()
    );
    assert!(a.info(&ks[1].0, &ks[1].1).unwrap().metadata.is_empty());
    let (_, top) = split_toc(&out);
    let toc = &top
        .iter()
        .find(|(k, _)| k.as_str() == Some("toc"))
        .unwrap()
        .1;
    let entry_keys = |arch: &str| -> Vec<String> {
        let e = &toc[ks[0].0.as_str()][arch];
        e.as_map()
            .unwrap()
            .iter()
            .map(|(k, _)| k.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        entry_keys("gfx1100"),
        ["type", "ordinal", "original_size", "metadata", "xxh3"]
    );
    assert_eq!(
        entry_keys("gfx1101"),
        ["type", "ordinal", "original_size", "xxh3"]
    );
    let keys: Vec<_> = top.iter().map(|(k, _)| k.as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "format_version",
            "group_name",
            "gfx_arch_family",
            "gfx_arches",
            "toc",
            "compression_scheme",
            "blobs",
            "toc_xxh3"
        ]
    );
}

#[test]
fn zstd_toc_ends_with_the_region_location() {
    let ks = kernels();
    let out = write(&mut writer_with(Compression::zstd(), &ks));
    let (_, top) = split_toc(&out);
    let keys: Vec<_> = top.iter().map(|(k, _)| k.as_str().unwrap()).collect();
    assert_eq!(
        keys[5..],
        [
            "compression_scheme",
            "zstd_offset",
            "zstd_size",
            "zstd_frame_sizes",
            "toc_xxh3"
        ]
    );
    assert_eq!(top[6].1, Value::from(64));
}

/// The frames' sizes as the TOC gives them, u32 LE each.
fn frame_sizes_of(archive: &[u8]) -> Vec<u32> {
    let (_, mut top) = split_toc(archive);
    let Some(Value::Binary(sizes)) = take_key(&mut top, "zstd_frame_sizes") else {
        panic!("zstd_frame_sizes is not a bin")
    };
    sizes
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn zstd_toc_gives_every_frame_size_in_ordinal_order() {
    let ks = kernels();
    let out = write(&mut writer_with(Compression::zstd(), &ks));
    let frames: Vec<u32> = zstd_frames(&out).iter().map(|f| f.len() as u32).collect();
    assert_eq!(frame_sizes_of(&out), frames);
}

/// `archive` with its TOC's frame sizes replaced by `sizes` (the TOC digest recomputed).
fn with_frame_sizes(archive: &[u8], sizes: &[u32]) -> Vec<u8> {
    let bin: Vec<u8> = sizes.iter().flat_map(|s| s.to_le_bytes()).collect();
    edit_toc(archive, |top| {
        *top_field(top, "zstd_frame_sizes") = Value::Binary(bin);
    })
}

#[test]
fn a_size_prefix_that_disagrees_with_the_tocs_frame_sizes_is_damage_named_by_frame_and_offset() {
    // Two kernels whose frames differ in size.
    let ks: Vec<(String, String, Vec<u8>)> = [(0, 100), (1, 3000)]
        .map(|(i, n)| {
            let data = (0..n).map(|j: u32| (j * 7 % 251) as u8).collect();
            (binary_key("lib/libx.so", i), "gfx1100".to_owned(), data)
        })
        .into();
    let out = write(&mut writer_with(Compression::zstd(), &ks));
    let mut sizes = frame_sizes_of(&out);
    assert!(sizes.len() == 2 && sizes[0] != sizes[1], "{sizes:?}");
    // Swapped, the sizes still fill the region: open succeeds, and the TOC (its digest
    // recomputed) is intact, so it is the prefixes that are wrong.
    sizes.swap(0, 1);
    let a = Archive::from_bytes(with_frame_sizes(&out, &sizes)).unwrap();
    let (binary, arch, info) = a.entries().find(|(_, _, i)| i.ordinal == 0).unwrap();
    let e = a.get(binary, arch).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::IntegrityCheckFailed, "{e}");
    let message = e.to_string();
    assert!(
        message.contains("zstd frame 0") && message.contains("byte 68"),
        "{message}"
    );
    assert!(info.ordinal == 0);
    assert_eq!(
        a.validate().unwrap_err().kind(),
        ErrorKind::IntegrityCheckFailed
    );
}

#[test]
fn frame_sizes_that_do_not_fill_the_region_or_miscount_the_frames_fail_at_open() {
    let ks = kernels();
    let out = write(&mut writer_with(Compression::zstd(), &ks));
    let sizes = frame_sizes_of(&out);
    let mut short = sizes.clone();
    short[0] -= 1;
    let mut fewer = sizes.clone();
    fewer.pop();
    for (what, bad) in [("a size one short", short), ("one size fewer", fewer)] {
        let e = Archive::from_bytes(with_frame_sizes(&out, &bad)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IntegrityCheckFailed, "{what}: {e}");
        assert!(e.to_string().contains("zstd"), "{what}: {e}");
    }
}

#[test]
fn a_zstd_archive_without_frame_sizes_reads_by_walking_its_prefixes() {
    let ks = kernels();
    let out = write(&mut writer_with(Compression::zstd(), &ks));
    let walked = Archive::from_bytes(edit_toc(&out, |top| {
        take_key(top, "zstd_frame_sizes").unwrap();
    }))
    .unwrap();
    walked.validate().unwrap();
    for (binary, arch, data) in &ks {
        assert_eq!(*walked.get(binary, arch).unwrap(), data[..]);
    }
}

#[test]
fn duplicate_entries_are_rejected_and_backslashes_normalised() {
    let mut w = ArchiveWriter::new("g", "f", Compression::None);
    w.add("lib\\x.so#0", "gfx900", &b"abc"[..], &[]).unwrap();
    let e = w.add("lib/x.so#0", "gfx900", &b"def"[..], &[]).unwrap_err();
    assert!(matches!(e, ArchiveError::DuplicateEntry { .. }));
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    w.add("lib/x.so#0", "gfx906", &b"def"[..], &[]).unwrap();
    let dup_meta = [
        ("k".to_owned(), "1".to_owned()),
        ("k".to_owned(), "2".to_owned()),
    ];
    assert!(w.add("lib/y.so#0", "gfx900", &b"x"[..], &dup_meta).is_err());
    let a = Archive::from_bytes(write(&mut w)).unwrap();
    assert_eq!(a.binaries().collect::<Vec<_>>(), ["lib/x.so#0"]);
    assert_eq!(&*a.get("lib/x.so#0", "gfx906").unwrap(), b"def");
}

#[test]
fn explicit_gfx_arches_must_cover_every_entry_arch() {
    let mut w = ArchiveWriter::new("g", "gfx90X", Compression::None);
    w.add(&binary_key("lib/x.so", 0), "gfx906", &b"abc"[..], &[])
        .unwrap();
    assert!(
        w.set_gfx_arches(vec!["gfx900".into(), "gfx900".into()])
            .is_err()
    );
    assert_eq!(
        w.gfx_arches(),
        ["gfx906"],
        "derived from the entries until set"
    );
    w.set_gfx_arches(vec!["gfx900".into()]).unwrap();
    assert_eq!(w.gfx_arches(), ["gfx900"]);
    let e = w.write_to(Vec::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    w.set_gfx_arches(vec!["gfx900".into(), "gfx906".into(), "gfx908".into()])
        .unwrap();
    w.set_gfx_arch_family("gfx9-generic");
    let a = Archive::from_bytes(write(&mut w)).unwrap();
    assert_eq!(a.gfx_arches(), ["gfx900", "gfx906", "gfx908"]);
    assert_eq!(a.gfx_arch_family(), "gfx9-generic");
    a.validate().unwrap();
}

#[test]
fn empty_archives_round_trip() {
    for compression in [Compression::None, Compression::zstd()] {
        let mut w = ArchiveWriter::new("g", "f", compression);
        let a = Archive::from_bytes(write(&mut w)).unwrap();
        assert_eq!(a.binaries().len(), 0);
        assert!(a.gfx_arches().is_empty());
    }
}

#[test]
fn write_file_replaces_the_target_atomically_and_leaves_nothing_on_failure() {
    let ks = kernels();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grp_gfx1100.kpack");
    std::fs::write(&path, b"old").unwrap();
    let mut w = writer_with(Compression::zstd(), &ks);
    let n = w.write_file(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), write(&mut w));
    assert_eq!(n, std::fs::metadata(&path).unwrap().len());
    let a = Archive::open(&path).unwrap();
    assert_eq!(&*a.get(&ks[2].0, &ks[2].1).unwrap(), ks[2].2.as_slice());

    let mut bad = writer_with(Compression::None, &ks);
    bad.set_gfx_arches(vec!["gfx900".into()]).unwrap();
    let failed = dir.path().join("failed.kpack");
    let e = bad.write_file(&failed).unwrap_err();
    assert!(e.to_string().contains("failed.kpack"), "{e}");
    assert!(!failed.exists());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        ["grp_gfx1100.kpack"],
        "no temporary file left behind"
    );
}

#[test]
fn streamed_archives_are_byte_identical_to_buffered_ones_dedupe_included() {
    let mut ks = kernels();
    // A repeated kernel under a new key: dedupe must find it by reading the file back.
    ks.push(("again#7".into(), ks[1].1.clone(), ks[1].2.clone()));
    let dir = tempfile::tempdir().unwrap();
    for compression in [Compression::None, Compression::zstd()] {
        let path = dir.path().join("streamed.kpack");
        let mut streamed =
            kpack_archive::ArchiveFileWriter::create(&path, "grp", "gfx110X", compression).unwrap();
        let mut compressor = kpack_archive::KernelCompressor::new(compression);
        for (i, (b, arch, data)) in ks.iter().enumerate() {
            if i % 2 == 0 {
                streamed.add(b, arch, data.as_slice(), &[]).unwrap();
            } else {
                let kernel = compressor.prepare(data.as_slice()).unwrap();
                streamed.add_prepared(b, arch, kernel, &[]).unwrap();
            }
        }
        assert_eq!(streamed.entry_count(), ks.len());
        assert!(!path.exists(), "nothing at the final path before finish");
        let n = streamed.finish().unwrap();
        let mut buffered = writer_with(compression, &ks);
        assert_eq!(
            buffered.blob_count(),
            ks.len() - 1,
            "the repeat is stored once"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            write(&mut buffered),
            "{compression:?}"
        );
        assert_eq!(n, std::fs::metadata(&path).unwrap().len());
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn an_unfinished_streamed_archive_leaves_nothing_behind() {
    let ks = kernels();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grp_gfx1100.kpack");
    let mut w =
        kpack_archive::ArchiveFileWriter::create(&path, "grp", "gfx1100", Compression::zstd())
            .unwrap();
    w.add(&ks[0].0, &ks[0].1, ks[0].2.as_slice(), &[]).unwrap();
    let e = w
        .add(&ks[0].0, &ks[0].1, ks[0].2.as_slice(), &[])
        .unwrap_err();
    assert!(e.to_string().contains("grp_gfx1100.kpack"), "{e}");
    drop(w);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A code object over `PIECES_ABOVE` is read in pieces, which put together are what `get`
/// gives; a damaged byte of its frame is an error that names the archive's damage, and a
/// code object at or under the limit comes in one piece. Every scheme reads so.
#[test]
fn a_large_code_object_read_in_pieces_is_what_get_reads_and_damage_to_it_is_an_error() {
    let large: Vec<u8> = (0..kpack_archive::PIECES_ABOVE as u32 + 1_000_003)
        .map(|i| (i / 61 % 249) as u8 ^ (i % 5) as u8)
        .collect();
    let small = large[..1000].to_vec();
    let ks = vec![
        ("large#0".to_owned(), "gfx1100".to_owned(), large.clone()),
        ("small#0".to_owned(), "gfx1100".to_owned(), small.clone()),
    ];
    let pieces_of = |a: &Archive, binary: &str| {
        let mut pieces = Vec::new();
        let len = a
            .get_in_pieces(binary, "gfx1100", &mut |p| pieces.push(p.to_vec()))
            .map(|len| (len, pieces.len()));
        (len, pieces.concat())
    };
    for compression in [
        Compression::Zstd { level: 3 },
        Compression::None,
        Compression::Unified { level: 3 },
    ] {
        let out = write(&mut writer_with(compression, &ks));
        let a = Archive::from_bytes(out.clone()).unwrap();
        let (read, bytes) = pieces_of(&a, "large#0");
        let (len, count) = read.unwrap();
        assert_eq!((len, bytes == large), (large.len() as u64, true));
        if let Compression::Zstd { .. } = compression {
            assert!(count > 1, "{count} pieces");
        } else {
            assert_eq!(count, 1);
        }
        let (read, bytes) = pieces_of(&a, "small#0");
        assert_eq!((read.unwrap(), bytes), ((1000, 1), small.clone()));
    }
    // A byte of the large frame's compressed body flipped (its frame is the first).
    let out = write(&mut writer_with(Compression::Zstd { level: 3 }, &ks));
    let frame = &zstd_frames(&out)[0];
    let at = out.windows(64).position(|w| w == &frame[..64]).unwrap() + frame.len() / 2;
    let mut damaged = out.clone();
    damaged[at] ^= 0x20;
    let a = Archive::from_bytes(damaged).unwrap();
    let error = pieces_of(&a, "large#0").0.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::IntegrityCheckFailed, "{error}");
    assert!(
        error.to_string().contains("binary large#0, arch gfx1100"),
        "{error}"
    );
}

/// A code object whose bundle many wrappers lead to (RCCL's: 38) is stored once with an entry
/// under each key, the archive byte for byte the one its keys added one at a time give; the
/// stored bytes are compared with the earlier blobs once, not read back once per key.
#[test]
fn a_kernel_added_under_many_keys_is_the_archive_of_it_added_key_by_key() {
    let ks = kernels();
    let keys = |binary: &str| -> Vec<String> { (0..38).map(|i| format!("{binary}.{i}")).collect() };
    let dir = tempfile::tempdir().unwrap();
    for compression in [
        Compression::None,
        Compression::zstd(),
        Compression::unified(),
    ] {
        let path = dir.path().join("under.kpack");
        let mut under =
            kpack_archive::ArchiveFileWriter::create(&path, "grp", "gfx110X", compression).unwrap();
        let mut compressor = kpack_archive::KernelCompressor::new(compression);
        let mut key_by_key = ArchiveWriter::new("grp", "gfx110X", compression);
        for (binary, arch, data) in &ks {
            let kernel = compressor.prepare(data.as_slice()).unwrap();
            under
                .add_prepared_under(&keys(binary), arch, kernel, &[])
                .unwrap();
            for key in &keys(binary) {
                key_by_key.add(key, arch, data.as_slice(), &[]).unwrap();
            }
        }
        assert_eq!(under.entry_count(), 38 * ks.len());
        under.finish().unwrap();
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written, write(&mut key_by_key), "{compression:?}");
        let a = Archive::from_bytes(written).unwrap();
        assert_eq!(a.blob_count(), ks.len(), "{compression:?}");
        for (binary, arch, data) in &ks {
            for key in &keys(binary) {
                assert_eq!(&*a.get(key, arch).unwrap(), data.as_slice());
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
}

/// A code object larger than the coder's scratch buffer, not a repetition zstd could code to
/// nothing.
fn large_kernel() -> Vec<u8> {
    (0..(16u32 << 20) + 300_001)
        .map(|i| (i / 97 % 251) as u8 ^ (i % 7) as u8)
        .collect()
}

/// A kernel coded in pieces (a code object of a bundle read as a stream) goes straight to
/// the archive's file as a frame that decodes to it, with its size in the frame header and
/// zstd's checksum, and the digest and size of it added whole; under each of its keys. The
/// same kernel coded in pieces again shares its blob (the frame written twice is dropped
/// from the file), and the kernels added whole around it are where they would be without
/// it.
#[test]
fn a_kernel_coded_in_pieces_is_a_checked_frame_of_it_in_the_file_shared_when_coded_again() {
    let ks = kernels();
    let large = large_kernel();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pieces.kpack");
    let compression = Compression::zstd();
    let mut file =
        kpack_archive::ArchiveFileWriter::create(&path, "grp", "gfx110X", compression).unwrap();
    let mut whole = ArchiveWriter::new("grp", "gfx110X", compression);
    let (b0, arch0, data0) = &ks[0];
    file.add(b0, arch0, data0.as_slice(), &[]).unwrap();
    whole.add(b0, arch0, data0.as_slice(), &[]).unwrap();
    for (round, keys) in [
        ["big#0", "big#1", "big#2"],
        ["again#0", "again#1", "again#2"],
    ]
    .into_iter()
    .enumerate()
    {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let mut pieces = file
            .kernel_in_pieces(keys.clone(), "gfx1100", large.len() as u64)
            .unwrap()
            .expect("a zstd archive codes a kernel in pieces");
        for piece in large.chunks(65_536 + round) {
            pieces.piece(piece).unwrap();
        }
        pieces.finish().unwrap();
        for key in &keys {
            whole.add(key, "gfx1100", large.as_slice(), &[]).unwrap();
        }
    }
    for (b, arch, data) in &ks[1..] {
        file.add(b, arch, data.as_slice(), &[]).unwrap();
        whole.add(b, arch, data.as_slice(), &[]).unwrap();
    }
    file.finish().unwrap();
    let a = Archive::open(&path).unwrap();
    let w = Archive::from_bytes(write(&mut whole)).unwrap();
    assert_eq!(
        a.blob_count(),
        ks.len() + 1,
        "one blob for the large kernel"
    );
    for key in ["big#0", "big#1", "big#2", "again#0", "again#1", "again#2"] {
        assert!(*a.get(key, "gfx1100").unwrap() == *large, "{key}");
        let (info, whole_info) = (
            a.info(key, "gfx1100").unwrap(),
            w.info(key, "gfx1100").unwrap(),
        );
        assert_eq!(info.ordinal, 1, "{key}: after the first kernel added whole");
        assert_eq!(
            (info.digest, info.original_size),
            (whole_info.digest, whole_info.original_size),
            "{key}"
        );
        let frame = a.stored_bytes(key, "gfx1100").unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(frame).ok(),
            Some(Some(large.len() as u64)),
            "the content size is in the frame header"
        );
        assert_ne!(frame[4] & 0x04, 0, "the checksum flag is set");
    }
    for (b, arch, data) in &ks {
        assert_eq!(&*a.get(b, arch).unwrap(), data.as_slice());
        assert_eq!(
            a.stored_bytes(b, arch).unwrap(),
            w.stored_bytes(b, arch).unwrap(),
            "{b} {arch}: the frames added whole are those of an archive without pieces"
        );
    }
}

/// A kernel given more or fewer bytes than it was begun with is refused, and leaves the
/// archive's file as it found it: the archive written after the failures is byte for byte
/// the one written without them. A key already in the archive is refused before anything is
/// coded; archives that code kernels whole (`none`, `unified`) code none in pieces.
#[test]
fn a_kernel_coded_in_pieces_that_fails_leaves_the_archive_as_it_was() {
    let ks = kernels();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("failed.kpack");
    let compression = Compression::zstd();
    let mut file =
        kpack_archive::ArchiveFileWriter::create(&path, "grp", "gfx110X", compression).unwrap();
    let (b0, arch0, data0) = &ks[0];
    file.add(b0, arch0, data0.as_slice(), &[]).unwrap();
    let keys = || vec!["short#0".to_string()];
    let mut short = file
        .kernel_in_pieces(keys(), "gfx1100", 100_000)
        .unwrap()
        .unwrap();
    short.piece(&large_kernel()[..99_999]).unwrap();
    let error = short.finish().unwrap_err().to_string();
    assert!(
        error.contains("pieces of 99999 bytes") && error.contains("the 100000"),
        "{error}"
    );
    assert!(error.contains("failed.kpack"), "names the archive: {error}");
    let mut long = file
        .kernel_in_pieces(keys(), "gfx1100", 10)
        .unwrap()
        .unwrap();
    assert!(long.piece(&[7; 11]).is_err());
    drop(long);
    let duplicate = file.kernel_in_pieces(vec![b0.clone()], arch0, 10);
    assert!(
        matches!(
            duplicate.as_ref().map(|_| ()).unwrap_err().inner(),
            ArchiveError::DuplicateEntry { .. }
        ),
        "a key already stored is refused"
    );
    drop(duplicate);
    for (b, arch, data) in &ks[1..] {
        file.add(b, arch, data.as_slice(), &[]).unwrap();
    }
    file.finish().unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        write(&mut writer_with(compression, &ks))
    );
    for whole in [Compression::None, Compression::unified()] {
        let path = dir.path().join("whole.kpack");
        let mut file =
            kpack_archive::ArchiveFileWriter::create(&path, "grp", "gfx110X", whole).unwrap();
        assert!(
            file.kernel_in_pieces(vec!["k".into()], "gfx1100", 10)
                .unwrap()
                .is_none()
        );
    }
}
