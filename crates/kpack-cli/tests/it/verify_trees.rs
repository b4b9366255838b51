//! `kpack verify` as fsck: recombined artifacts, an installed tree and single archives, checked
//! without the originals; damage to archives, `.kpm` indexes and markers named with the file
//! and byte offset, every damaged entry, not only the first.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common;

use common::{kpack, kpack_ok, recombined_shards, s};
use kpack_archive::Archive;

/// The generic package of demo_lib and its gfx9 and gfx90X groups installed into one prefix.
fn installed(out: &Path, root: &Path) -> PathBuf {
    for package in ["demo_lib_generic", "demo_lib_gfx9", "demo_lib_gfx90X"] {
        kpack_testkit::copy_tree(&out.join(package).join("demo/stage"), root);
    }
    root.to_owned()
}

/// `kpack verify --json PATH...`: its exit code and report.
fn verify(paths: &[&Path]) -> (i32, Value) {
    let mut args = vec!["verify", "--json"];
    args.extend(paths.iter().map(|p| s(p)));
    let out = kpack(&args);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), report)
}

fn failures(report: &Value) -> &Vec<Value> {
    report["failures"].as_array().unwrap()
}

/// The archive `name` of the installed tree `root`.
fn archive(root: &Path, name: &str) -> PathBuf {
    root.join(".kpack").join(name)
}

/// Flips the lowest bit of byte `at` of `path`.
fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 1;
    // Copies of installed trees are hard links nowhere: a plain rewrite of this one file.
    std::fs::remove_file(path).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Where the stored bytes of each of the first `n` entries of `path` start (distinct ones).
fn stored_offsets(path: &Path, n: usize) -> Vec<(String, String, u64)> {
    let file = std::fs::read(path).unwrap();
    let x = Archive::open(path).unwrap();
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (binary, arch, _) in x.entries() {
        let stored = x.stored_bytes(binary, arch).unwrap();
        let at = file
            .windows(stored.len())
            .position(|w| w == stored)
            .unwrap() as u64;
        if !seen.contains(&at) {
            seen.push(at);
            out.push((binary.to_owned(), arch.to_owned(), at));
        }
        if out.len() == n {
            break;
        }
    }
    out
}

/// The file's kpacked host binaries' marker: where its first byte (the map header) is.
fn marker_at(binary: &Path) -> u64 {
    let bytes = std::fs::read(binary).unwrap();
    let key = bytes
        .windows(b"kpack_search_paths".len())
        .position(|w| w == b"kpack_search_paths")
        .unwrap();
    // fixmap(3), or fixmap(4) with the host entry id last (clang 15's binaries), the digest
    // (fixstr(4) "xxh3", bin 8), then fixstr(18) and the key.
    let at = key - 17;
    assert!(matches!(bytes[at], 0x83 | 0x84), "{:#x}", bytes[at]);
    assert_eq!(
        &bytes[at + 1..at + 8],
        &[0xa4, b'x', b'x', b'h', b'3', 0xc4, 8]
    );
    assert_eq!(bytes[key - 1], 0xb2);
    at as u64
}

#[test]
fn recombined_artifacts_an_installed_tree_and_one_archive_verify_without_the_originals() {
    let dir = tempfile::tempdir().unwrap();
    let out = recombined_shards(dir.path(), &[]);
    let (code, report) = verify(&[&out]);
    assert_eq!((code, failures(&report).len()), (0, 0), "{report}");
    assert!(report["entries"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["unproven"], serde_json::json!([]));

    let root = installed(&out, &dir.path().join("install"));
    let (code, report) = verify(&[&root]);
    assert_eq!((code, failures(&report).len()), (0, 0), "{report}");
    assert_eq!(report["artifacts"], 0);
    assert_eq!(report["binaries"], 2, "{report}");
    assert_eq!(report["archives"], 10, "{report}");

    let one = archive(&root, "lib_libdemo.so.1_gfx906.kpack");
    let (code, report) = verify(&[&one, &archive(&root, "bin_demo_gfx900.kpack")]);
    assert_eq!((code, failures(&report).len()), (0, 0), "{report}");
    assert_eq!(report["archives"], 2);
    let text = String::from_utf8(kpack_ok(&["verify", s(&one)]).stdout).unwrap();
    assert!(text.ends_with(": ok\n"), "{text}");
}

#[test]
fn an_archive_without_digests_verifies_with_a_warning_that_it_is_unproven() {
    let legacy = kpack_testkit::fixture("vectors/test_zstd.kpack");
    let (code, report) = verify(&[&legacy]);
    assert_eq!((code, failures(&report).len()), (0, 0), "{report}");
    assert_eq!(report["entries"], 3, "{report}");
    let unproven = report["unproven"].as_array().unwrap();
    assert_eq!(unproven.len(), 1);
    assert!(unproven[0].as_str().unwrap().ends_with("test_zstd.kpack"));
    let text = String::from_utf8(kpack_ok(&["verify", s(&legacy)]).stdout).unwrap();
    assert!(
        text.contains("test_zstd.kpack: carries no digests"),
        "{text}"
    );
}

#[test]
fn damage_in_two_frames_of_one_archive_and_the_toc_of_another_is_each_named_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let out = recombined_shards(dir.path(), &[]);
    let root = installed(&out, &dir.path().join("install"));
    let framed = archive(&root, "lib_libdemo.so.1_gfx906.kpack");
    let damaged = stored_offsets(&framed, 2);
    assert_eq!(damaged.len(), 2, "two entries with their own frames");
    for (_, _, at) in &damaged {
        flip(&framed, at + 20);
    }
    let tocked = archive(&root, "lib_libdemo.so.1_gfx90a:xnack+.kpack");
    let bytes = std::fs::read(&tocked).unwrap();
    let toc_at = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    // Inside the TOC, away from its trailer: a byte of a binary key.
    let key_at = toc_at as usize
        + bytes[toc_at as usize..]
            .windows(b"libdemo".len())
            .position(|w| w == b"libdemo")
            .unwrap();
    flip(&tocked, key_at as u64);

    let (code, report) = verify(&[&root]);
    assert_eq!(code, 1, "{report}");
    for (binary, arch, at) in &damaged {
        let named = failures(&report).iter().any(|f| {
            f["kind"] == "entry"
                && f["file"] == s(&framed)
                && f["binary"] == binary.as_str()
                && f["arch"] == arch.as_str()
                && f["offset"] == *at
        });
        assert!(named, "{binary} {arch} at {at} not named in {report}");
    }
    let toc = failures(&report)
        .iter()
        .find(|f| f["file"] == s(&tocked))
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(toc["kind"], "file");
    assert_eq!(toc["what"], "archive");
    assert_eq!(toc["damaged"], true);
    assert_eq!(toc["offset"], toc_at, "{toc}");
    // The same, as lines.
    let text = String::from_utf8(kpack(&["verify", s(&root)]).stdout).unwrap();
    for (binary, _, at) in &damaged {
        let line = format!("FAIL {}: entry {binary} for ", framed.display());
        assert!(
            text.lines()
                .any(|l| l.starts_with(&line) && l.contains(&format!(" at byte {at}: "))),
            "{line} in {text}"
        );
    }
    assert!(
        text.contains(&format!(
            "FAIL {}: archive at byte {toc_at}: ",
            tocked.display()
        )),
        "{text}"
    );
}

#[test]
fn a_damaged_index_and_a_damaged_marker_are_named_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let out = recombined_shards(dir.path(), &[]);
    let root = installed(&out, &dir.path().join("install"));
    let index = root.join(".kpack/lib_libdemo.so.1.kpm");
    let len = std::fs::metadata(&index).unwrap().len();
    let bytes = std::fs::read(&index).unwrap();
    // gfx906 -> gfx907: `kpack which` would send a gfx907 GPU to gfx906's archive.
    let arch_at = bytes.windows(6).position(|w| w == b"gfx906").unwrap();
    flip(&index, arch_at as u64 + 5);
    let binary = root.join("lib/libdemo.so.1");
    let marker = marker_at(&binary);
    // One bit of the key `kernel_name`: the map's digest no longer matches.
    let key = std::fs::read(&binary).unwrap()[marker as usize..]
        .windows(b"kernel_name".len())
        .position(|w| w == b"kernel_name")
        .unwrap() as u64;
    flip(&binary, marker + key + 10);

    let (code, report) = verify(&[&root]);
    assert_eq!(code, 1, "{report}");
    let of = |file: &Path| {
        failures(&report)
            .iter()
            .find(|f| f["file"] == s(file))
            .unwrap_or_else(|| panic!("{} not in {report}", file.display()))
            .clone()
    };
    let kpm = of(&index);
    assert_eq!(
        (&kpm["what"], &kpm["damaged"], &kpm["offset"]),
        (
            &Value::from("index"),
            &Value::from(true),
            &Value::from(len - 8)
        ),
        "{kpm}"
    );
    let hipk = of(&binary);
    assert_eq!(hipk["what"], "marker", "{hipk}");
    // The digest's 8 bytes follow the map header, its key and the bin's header.
    assert_eq!(hipk["offset"], marker + 8, "{hipk}");
    // `kpack which` refuses the index rather than answering from it.
    let which = kpack(&["which", "gfx907", s(&root)]);
    let said = String::from_utf8_lossy(&which.stdout).into_owned()
        + &String::from_utf8_lossy(&which.stderr);
    assert!(said.contains("damaged"), "{said}");
}

#[test]
fn a_marker_whose_kernel_name_was_flipped_is_damaged_and_its_archives_reached_by_no_marker() {
    let dir = tempfile::tempdir().unwrap();
    let out = recombined_shards(dir.path(), &[]);
    let root = installed(&out, &dir.path().join("install"));
    let binary = root.join("lib/libdemo.so.1");
    let bytes = std::fs::read(&binary).unwrap();
    let name_at = bytes
        .windows(b"stage/lib/libdemo".len())
        .position(|w| w == b"stage/lib/libdemo")
        .unwrap();
    flip(&binary, name_at as u64 + 10); // libdemo -> mibdemo

    let (code, report) = verify(&[&root]);
    assert_eq!(code, 1, "{report}");
    let lines: Vec<&str> = failures(&report)
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    // The marker's digest refuses the other name: the runtime would be sent nowhere rather
    // than to another binary's code objects, and verify names the marker and the archives
    // no marker reaches any more.
    let metadata = format!("HIPK metadata at byte {}", marker_at(&binary));
    assert!(
        lines.iter().any(|l| l.starts_with(s(&binary))
            && l.contains(&metadata)
            && l.contains("the file is damaged")),
        "{metadata}: {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("lib_libdemo.so.1_gfx906.kpack")
                && l.contains("no binary's marker reaches this archive")),
        "{lines:#?}"
    );
}
