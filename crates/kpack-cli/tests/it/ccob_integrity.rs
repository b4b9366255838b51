//! A CCOB (compressed clang offload bundle) is read only once its hash holds. Every command
//! that decodes one refuses a library, or a wheel holding it, with one byte flipped inside a
//! bundle's zstd frame: exit status 1, an error naming the file, the bundle and the absolute
//! offset of the hash that does not hold, and nothing written. The flip is one that still
//! decompresses to the header's size into a well-formed bundle of well-formed code objects,
//! so only the hash can tell; a command that went on would pass the damage along (prune would
//! even recompress it under a new, valid hash).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{WHEEL, kpack, s};
use kpack_testkit::{fixture, read_fixture};
use sha2::Digest;

/// Two CCOB v3 bundles (gfx11-generic, gfx1100, gfx942:sramecc+:xnack- each).
const LIB: &str = "modern/libmodern_two_v3.so";
/// The file offset of its second bundle (index 1).
const BUNDLE: u64 = 0x4000;
/// A byte of that bundle's zstd frame whose low bit, flipped, still decompresses to the
/// header's size and changes only two bytes deep inside the gfx942 code object (found by
/// flipping each byte of the frame in turn and decoding it with `zstd -d`).
const FLIPPED: u64 = BUNDLE + 0x512;
/// The absolute offset of the bundle's hash (CCOB v3: bytes 24..32 of its header).
const HASH_AT: &str = "CCOB hash at offset 0x4018";

/// The library with the byte at [`FLIPPED`] flipped.
fn damaged_library() -> Vec<u8> {
    let mut bytes = read_fixture(LIB);
    let bundle = &bytes[BUNDLE as usize..];
    assert!(bundle.starts_with(b"CCOB"), "{LIB}: no CCOB at {BUNDLE:#x}");
    assert_eq!(u16::from_le_bytes([bundle[4], bundle[5]]), 3, "CCOB v3");
    let total = u64::from_le_bytes(bundle[8..16].try_into().unwrap());
    assert!(
        (BUNDLE + 32..BUNDLE + total).contains(&FLIPPED),
        "inside the frame"
    );
    bytes[FLIPPED as usize] ^= 1;
    bytes
}

/// `damaged_library()` written into a fresh directory as `libmodern_two_v3.so`.
fn damaged_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libmodern_two_v3.so");
    std::fs::write(&path, damaged_library()).unwrap();
    (dir, path)
}

/// Asserts that `out` is the refusal of the damaged bundle of `file`: exit status 1 and an
/// error naming the file, bundle 1 at its offset and the hash's offset.
fn assert_refused(what: &str, out: &Output, file: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: {err}");
    for needle in [
        file,
        &format!("bundle 1 at file offset {BUNDLE:#x}"),
        HASH_AT,
    ] {
        assert!(err.contains(needle), "{what}: {err:?} lacks {needle:?}");
    }
}

/// Asserts that `dir` holds nothing (no output, no temporary left beside it).
fn assert_empty(what: &str, dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{what} left {left:?} in {}", dir.display());
}

/// Runs `kpack prune` of `input` into a fresh directory with `selection`, which must refuse
/// it naming `file` and write nothing.
fn assert_prune_refused(input: &Path, output_name: &str, selection: &[&str], file: &str) {
    let out_dir = tempfile::tempdir().unwrap();
    let output = out_dir.path().join(output_name);
    let mut args = vec!["prune", s(input), "-o", s(&output)];
    args.extend(selection);
    assert_refused(&format!("{args:?}"), &kpack(&args), file);
    assert_empty(&format!("{args:?}"), out_dir.path());
}

#[test]
fn prune_keep_refuses_a_ccob_bundle_with_a_flipped_payload_byte() {
    let (_dir, lib) = damaged_file();
    // gfx942 keeps the damaged code object, gfx1100 drops one of its neighbours: the bundle
    // would be recompressed either way.
    for keep in [&["--keep", "gfx942"][..], &["--keep", "gfx1100"]] {
        assert_prune_refused(&lib, "pruned.so", keep, s(&lib));
    }
}

#[test]
fn prune_drop_refuses_a_ccob_bundle_with_a_flipped_payload_byte() {
    let (_dir, lib) = damaged_file();
    for drop in [&["--drop", "gfx1100"][..], &["--drop", "gfx942"]] {
        assert_prune_refused(&lib, "pruned.so", drop, s(&lib));
    }
}

/// The sample wheel with the damaged library added as `kpack_demo/lib/libmodern_two_v3.so`
/// and listed in its RECORD (so the wheel itself is sound), written into `dir`.
fn damaged_wheel(dir: &Path) -> PathBuf {
    const MEMBER: &str = "kpack_demo/lib/libmodern_two_v3.so";
    let lib = damaged_library();
    let row = format!(
        "{MEMBER},{},{}\n",
        kpack_wheelfile::metadata::record_hash(&sha2::Sha256::digest(&lib).into()),
        lib.len()
    );
    let bytes = std::fs::read(fixture(WHEEL)).unwrap();
    let mut src = zip::ZipArchive::new(std::io::Cursor::new(&bytes)).unwrap();
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().unix_permissions(0o755);
    w.start_file(MEMBER, options).unwrap();
    std::io::Write::write_all(&mut w, &lib).unwrap();
    for i in 0..src.len() {
        let mut f = src.by_index(i).unwrap();
        let name = f.name().to_owned();
        let mut data = Vec::new();
        std::io::copy(&mut f, &mut data).unwrap();
        if name.ends_with(".dist-info/RECORD") {
            data.splice(0..0, row.bytes());
        }
        w.start_file(name, options).unwrap();
        std::io::Write::write_all(&mut w, &data).unwrap();
    }
    let path = dir.join(WHEEL.rsplit('/').next().unwrap());
    std::fs::write(&path, w.finish().unwrap().into_inner()).unwrap();
    path
}

#[test]
fn split_wheel_refuses_a_wheel_holding_a_ccob_bundle_with_a_flipped_payload_byte() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = damaged_wheel(dir.path());
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("out");
    let r = kpack(&["split-wheel", s(&wheel), "-o", s(&out)]);
    assert_refused("split-wheel", &r, "libmodern_two_v3.so");
    assert!(
        String::from_utf8_lossy(&r.stderr).contains(s(&wheel)),
        "split-wheel names the wheel: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_empty("split-wheel", out_dir.path());
}

/// The split of a tarball splits its fat binaries on the workers while it reads on, so the
/// second damaged library may fail first; the error is still the first damaged member's in
/// tarball order (a healthy one before it, another damaged one after), at any thread count,
/// and nothing is written.
#[test]
fn split_of_a_tarball_names_its_first_damaged_fat_binary_at_one_two_and_eight_threads() {
    let dir = tempfile::tempdir().unwrap();
    let artifact = dir.path().join("demo_gfxall");
    for (sub, bytes) in [
        ("a", read_fixture(LIB)),
        ("b", damaged_library()),
        ("c", damaged_library()),
    ] {
        let lib = artifact.join("demo/lib").join(sub);
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("libmodern_two_v3.so"), bytes).unwrap();
    }
    std::fs::write(artifact.join("artifact_manifest.txt"), "demo\n").unwrap();
    let tarball = dir.path().join("demo_gfxall.tar.zst");
    kpack_tar::pack_dir(&artifact, &tarball, kpack_tar::PackOptions::from_env()).unwrap();
    let first = format!("{}/demo/lib/b/libmodern_two_v3.so", tarball.display());
    for threads in ["1", "2", "8"] {
        let out_dir = tempfile::tempdir().unwrap();
        let out = out_dir.path().join("out");
        let args = [
            "split",
            s(&tarball),
            "-o",
            s(&out),
            "--component",
            "demo",
            "--threads",
            threads,
        ];
        let r = kpack(&args);
        assert_refused(&format!("{args:?}"), &r, &first);
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(!err.contains("lib/c/"), "{args:?}: {err}");
        assert_empty(&format!("{args:?}"), out_dir.path());
    }
}

#[test]
fn prune_of_a_wheel_refuses_a_ccob_bundle_with_a_flipped_payload_byte() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = damaged_wheel(dir.path());
    let name = WHEEL.rsplit('/').next().unwrap();
    assert_prune_refused(&wheel, name, &["--keep", "gfx942"], "libmodern_two_v3.so");
}

/// Restore reads no bundle: its input is a kpacked binary, whose device code is in `.kpack`
/// archives (checked by their own digests), and a damaged CCOB never becomes one (transform
/// refuses it, below). What it is given here, the damaged fat library, it refuses whole
/// before reading any bundle, so the error names the file but no bundle; even when told to
/// write over its input, that input stays as it was.
#[test]
fn restore_refuses_a_fat_ccob_library_with_a_flipped_payload_byte_writing_nothing() {
    let (dir, lib) = damaged_file();
    let before = std::fs::read(&lib).unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    for output in [out_dir.path().join("restored.so"), lib.clone()] {
        let r = kpack(&["restore", s(&lib), "-o", s(&output)]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{err}");
        assert!(
            err.contains(s(&lib)) && err.contains("not kpacked"),
            "{err}"
        );
        assert_empty("restore", out_dir.path());
        assert_eq!(std::fs::read(&lib).unwrap(), before);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

#[test]
fn transform_pack_inspect_report_and_unbundle_refuse_a_ccob_bundle_with_a_flipped_payload_byte() {
    let (_dir, lib) = damaged_file();
    let out_dir = tempfile::tempdir().unwrap();
    let o = |name: &str| out_dir.path().join(name);
    let runs: [(&str, Vec<PathBuf>); 5] = [
        (
            "transform",
            vec![
                lib.clone(),
                "-o".into(),
                o("lib.so"),
                "--kpack-dir".into(),
                o("kpack"),
            ],
        ),
        ("pack", vec!["-o".into(), o("all.kpack"), lib.clone()]),
        ("inspect", vec![lib.clone()]),
        ("report", vec![lib.clone(), "-o".into(), o("report.html")]),
        ("unbundle", vec![lib.clone(), "-o".into(), o("objects")]),
    ];
    for (command, args) in runs {
        let mut all = vec![command];
        all.extend(args.iter().map(|a| s(a)));
        assert_refused(command, &kpack(&all), s(&lib));
        if command == "transform" {
            // Transform creates its `--kpack-dir` as the first bundle's archives start, and
            // removes only the archives when a later bundle fails: an empty directory stays.
            assert_empty(command, &o("kpack"));
            std::fs::remove_dir(o("kpack")).unwrap();
        }
        if command == "unbundle" {
            // Unbundle publishes its code objects together: bundle 0's, whose hash holds, are
            // not left behind when bundle 1 fails.
            assert_empty(command, &o("objects"));
            std::fs::remove_dir(o("objects")).unwrap();
        }
        assert_empty(command, out_dir.path());
    }
}
