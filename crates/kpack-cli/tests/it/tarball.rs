//! `kpack split --output-format tar.zst` from the command line: reproducible whatever the
//! thread count, every member's mtime from SOURCE_DATE_EPOCH, owned by 0:0, with modes and
//! symlinks, as GNU tar lists them.

use crate::common;

use std::process::Command;

use common::s;
use kpack_testkit::{fixture, run_tool};

fn split_tar(out: &std::path::Path, threads: &str, epoch: &str) {
    let status = Command::new(env!("CARGO_BIN_EXE_kpack"))
        .args([
            "split",
            s(&fixture("shards/shard-a/demo_lib_gfx90X")),
            "-o",
            s(out),
            "--component",
            "demo_lib",
            "--split-databases",
            "rocblas",
            "--output-format",
            "tar.zst",
            "--threads",
            threads,
        ])
        .env("CI", "1")
        .env("SOURCE_DATE_EPOCH", epoch)
        .status()
        .expect("kpack runs");
    assert!(status.success());
}

#[test]
fn tar_output_is_reproducible_and_dated_from_source_date_epoch() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    split_tar(&a, "1", "1700000000");
    split_tar(&b, "4", "1700000000");
    split_tar(&c, "1", "1");
    let mut names: Vec<String> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "demo_lib_generic.tar.zst",
            "demo_lib_gfx900.tar.zst",
            "demo_lib_gfx906.tar.zst"
        ]
    );
    for n in &names {
        let bytes = std::fs::read(a.join(n)).unwrap();
        assert_eq!(bytes, std::fs::read(b.join(n)).unwrap(), "{n}: threads");
        assert_ne!(bytes, std::fs::read(c.join(n)).unwrap(), "{n}: epoch");
    }
    let listing = String::from_utf8(run_tool(
        "tar",
        &[
            "--zstd",
            "-tvf",
            s(&a.join("demo_lib_generic.tar.zst")),
            "--numeric-owner",
            "--full-time",
            "--utc",
        ],
    ))
    .unwrap();
    for line in listing.lines() {
        assert!(line.contains(" 0/0 "), "{line}");
        assert!(line.contains(" 2023-11-14 22:13:20 "), "{line}");
    }
    assert!(listing.contains("-rwxr-xr-x") && listing.contains("demo/stage/bin/demo"));
    assert!(listing.contains("demo/stage/lib/libdemo.so -> libdemo.so.1"));
}

/// Bytes of the regular files below `dir` (0 when it is gone).
fn bytes_below(dir: &std::path::Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => bytes_below(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

#[test]
fn verify_of_tar_shards_spools_one_member_at_a_time_beside_the_rewritten_binaries_and_leaves_nothing_in_tmpdir()
 {
    let tmp = tempfile::tempdir().unwrap();
    let (tars, dirs) = (tmp.path().join("tars"), tmp.path().join("dirs"));
    for (out, format) in [(&tars, "tar.zst"), (&dirs, "dir")] {
        common::kpack_ok(&[
            "split",
            "--batch",
            s(&fixture("shards/shard-a")),
            "-o",
            s(out),
            "--split-databases",
            "rocblas",
            "--output-format",
            format,
        ]);
    }
    // The largest member: the largest file of the same outputs as directories.
    let largest = kpack_testkit::snapshot(&dirs)
        .iter()
        .map(|(_, _, bytes)| bytes.len() as u64)
        .max()
        .unwrap();
    // Check 8 keeps each rewritten binary of a tarball (in $TMPDIR, not in memory) until
    // its original is read.
    let kept: u64 = kpack_testkit::snapshot(&dirs)
        .iter()
        .filter(|(path, _, bytes)| {
            path.contains("_generic/")
                && bytes.starts_with(b"\x7fELF")
                && bytes.windows(15).any(|w| w == b".rocm_kpack_ref")
        })
        .map(|(_, _, bytes)| bytes.len() as u64)
        .sum();
    assert!(kept > 0, "the fixture has rewritten binaries");
    let unpacked = bytes_below(&dirs);
    assert!(
        unpacked > largest + kept,
        "the fixture must tell the two apart: {unpacked} bytes, the largest member {largest}, \
         the rewritten binaries {kept}"
    );
    let tmpdir = tmp.path().join("tmpdir");
    std::fs::create_dir(&tmpdir).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kpack"))
        .args([
            "verify",
            s(&tars),
            "--original",
            s(&fixture("shards/shard-a")),
        ])
        .env("CI", "1")
        .env("TMPDIR", &tmpdir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Watch $TMPDIR while verify runs: never more than one member in it beside the kept
    // rewritten binaries.
    let mut most = 0;
    let status = loop {
        most = most.max(bytes_below(&tmpdir));
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
    };
    assert!(status.success());
    assert!(
        most <= largest + kept,
        "{most} bytes in $TMPDIR at once; the largest member has {largest}, the rewritten \
         binaries {kept}"
    );
    assert_eq!(std::fs::read_dir(&tmpdir).unwrap().count(), 0);
}
