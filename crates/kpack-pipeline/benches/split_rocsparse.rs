//! Splitting an artifact that holds bookworm's librocsparse.so.0.1 (1.3 GB, 111 wrappers,
//! 777 code objects, 7 targets) next to a plain copy of the same artifact, in the same run.
//!
//! Prints wall time and peak RSS (VmHWM, reset before each phase). Targets: split <= 10 s on
//! 2 cores with zstd archives, peak RSS <= 0.5 GB. Needs the corpus from `scripts/setup.sh`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use kpack_pipeline::artifact::manifest;
use kpack_pipeline::artifact::split::{SplitOptions, split};

fn librocsparse() -> PathBuf {
    let corpus = std::env::var_os("KPACK_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/kpack-corpus"));
    let path =
        corpus.join("x/librocsparse0_5.3.0+dfsg-2/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1");
    assert!(
        path.exists(),
        "{} missing: run scripts/setup.sh",
        path.display()
    );
    path
}

/// VmHWM of this process in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn reset_peak_rss() {
    // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

fn main() {
    let lib = librocsparse();
    let size = std::fs::metadata(&lib).unwrap().len();
    let dir = tempfile::Builder::new()
        .prefix("kpack-bench-split-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    // The artifact: manifest + prefix tree holding the library (a copy, so the split reads
    // a file of this filesystem like the plain copy does).
    let artifact = dir.path().join("sparse_lib_gfxall");
    let prefix = "math-libs/rocSPARSE/stage";
    std::fs::create_dir_all(artifact.join(prefix).join("lib")).unwrap();
    manifest::write(&artifact, &[prefix.to_owned()]).unwrap();
    std::fs::copy(&lib, artifact.join(prefix).join("lib/librocsparse.so.0.1")).unwrap();

    reset_peak_rss();
    let start = Instant::now();
    copy_tree(&artifact, &dir.path().join("copy"));
    let copy_time = start.elapsed();
    let copy_rss = peak_rss_kib();
    std::fs::remove_dir_all(dir.path().join("copy")).unwrap();

    reset_peak_rss();
    let base = peak_rss_kib();
    let start = Instant::now();
    let summary = split(
        &artifact,
        &dir.path().join("out"),
        "sparse_lib",
        &SplitOptions::default(),
        &|_, _| {},
    )
    .unwrap();
    let split_time = start.elapsed();
    let split_rss = peak_rss_kib();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());

    println!("split an artifact holding librocsparse.so.0.1 ({size} bytes), {threads} cores");
    println!(
        "  plain copy of the artifact  {:>8.3} s  peak RSS {:>7.1} MiB",
        copy_time.as_secs_f64(),
        mib(copy_rss)
    );
    println!(
        "  kpack split (zstd)          {:>8.3} s  peak RSS {:>7.1} MiB  (baseline {:.1} MiB; {} artifacts, {} code objects; targets <= 10 s, <= 512 MiB)",
        split_time.as_secs_f64(),
        mib(split_rss),
        mib(base),
        summary.artifacts.len(),
        summary.code_objects
    );
}
