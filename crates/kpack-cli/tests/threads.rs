//! `--threads` bounds every worker pool, and the output is the same bytes whatever the count:
//! 1, 2 and 8 threads (8 on any machine: the point is the order results are placed in, not
//! the speed).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{kpack_ok, s};
use kpack_testkit::fixture;

/// Every regular file under `root`, by relative path.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    kpack_fs::walk(root)
        .map(Result::unwrap)
        .filter(|e| e.file_type.is_file())
        .map(|e| {
            let bytes = std::fs::read(&e.path).unwrap();
            (e.rel.to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

/// `args` as the owned strings [`same_bytes_at_every_thread_count`] takes.
fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// Runs `command` (its output directory given) at 1, 2 and 8 threads; every run must write
/// the same files with the same bytes.
fn same_bytes_at_every_thread_count(what: &str, command: impl Fn(&Path) -> Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut first: Option<BTreeMap<String, Vec<u8>>> = None;
    for threads in ["1", "2", "8"] {
        let out = dir.path().join(format!("threads-{threads}"));
        let mut args = vec!["--threads".to_owned(), threads.to_owned()];
        args.extend(command(&out));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kpack_ok(&args);
        let written = tree(&out);
        assert!(!written.is_empty(), "{what}: nothing written");
        match &first {
            None => first = Some(written),
            Some(first) => {
                let names = |t: &BTreeMap<String, Vec<u8>>| t.keys().cloned().collect::<Vec<_>>();
                assert_eq!(names(first), names(&written), "{what}: --threads {threads}");
                for (name, bytes) in first {
                    assert!(
                        written[name] == *bytes,
                        "{what}: {name} differs at --threads {threads}"
                    );
                }
            }
        }
    }
}

#[test]
fn transform_writes_the_same_bytes_at_1_2_and_8_threads() {
    let input = fixture("modern/libmodern_wide_v3.so");
    for compression in ["zstd", "unified"] {
        same_bytes_at_every_thread_count(&format!("transform {compression}"), |out| {
            owned(&[
                "transform",
                s(&input),
                "-o",
                s(&out.join("libmodern_wide_v3.so")),
                "--kpack-dir",
                s(&out.join(".kpack")),
                "--compression",
                compression,
            ])
        });
    }
}

#[test]
fn split_writes_the_same_bytes_at_1_2_and_8_threads() {
    let shard = fixture("shards/shard-a");
    same_bytes_at_every_thread_count("split", |out| {
        owned(&[
            "split",
            "--batch",
            s(&shard),
            "-o",
            s(out),
            "--split-databases",
            "rocblas",
        ])
    });
}

#[test]
fn split_wheel_writes_the_same_bytes_at_1_2_and_8_threads() {
    let wheel = fixture("wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl");
    same_bytes_at_every_thread_count("split-wheel", |out| {
        owned(&["split-wheel", s(&wheel), "-o", s(out)])
    });
}

#[test]
fn prune_writes_the_same_bytes_at_1_2_and_8_threads() {
    let input = fixture("modern/libmodern_wide_v3.so");
    same_bytes_at_every_thread_count("prune", |out| {
        owned(&[
            "prune",
            s(&input),
            "-o",
            s(&out.join("pruned.so")),
            "--keep",
            "gfx90a",
        ])
    });
}

#[test]
#[ignore = "real-world"]
fn transform_of_a_real_ccob_library_writes_the_same_bytes_at_1_2_and_8_threads() {
    // Debian's librocsparse.so.1.0: 319 CCOB v3 bundles, 2.1 GB of code objects, 14 targets.
    let input = kpack_testkit::corpus()
        .join("x/librocsparse1_7.2.4-1~exp1/usr/lib/x86_64-linux-gnu/librocsparse.so.1.0");
    assert!(
        input.is_file(),
        "{} is missing: run scripts/setup.sh",
        input.display()
    );
    same_bytes_at_every_thread_count("transform librocsparse.so.1.0", |out| {
        owned(&[
            "transform",
            s(&input),
            "-o",
            s(&out.join("librocsparse.so.1.0")),
            "--kpack-dir",
            s(&out.join(".kpack")),
        ])
    });
}
