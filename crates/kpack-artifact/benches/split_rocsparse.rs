//! Splitting an artifact that holds bookworm's librocsparse.so.0.1 (1.3 GB, 111 wrappers,
//! 777 code objects, 7 targets) next to a plain copy of the same artifact, in the same run.
//!
//! Prints wall time and peak RSS (VmHWM, reset before each phase). Targets: split <= 10 s on
//! 2 cores with zstd archives, peak RSS <= 0.5 GB. Needs the corpus from `scripts/setup.sh`.

use std::time::Instant;

use kpack_artifact::manifest;
use kpack_artifact::split::{SplitOptions, split};

fn main() {
    let lib = kpack_testkit::librocsparse();
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

    kpack_testkit::reset_peak_rss();
    let start = Instant::now();
    kpack_testkit::copy_tree(&artifact, &dir.path().join("copy"));
    let copy_time = start.elapsed();
    let copy_rss = kpack_testkit::peak_rss_kib();
    std::fs::remove_dir_all(dir.path().join("copy")).unwrap();

    kpack_testkit::reset_peak_rss();
    let base = kpack_testkit::peak_rss_kib();
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
    let split_rss = kpack_testkit::peak_rss_kib();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());

    println!("split an artifact holding librocsparse.so.0.1 ({size} bytes), {threads} cores");
    println!(
        "  plain copy of the artifact  {:>8.3} s  peak RSS {:>7.1} MiB",
        copy_time.as_secs_f64(),
        kpack_testkit::mib(copy_rss)
    );
    println!(
        "  kpack split (zstd)          {:>8.3} s  peak RSS {:>7.1} MiB  (baseline {:.1} MiB; {} artifacts, {} code objects; targets <= 10 s, <= 512 MiB)",
        split_time.as_secs_f64(),
        kpack_testkit::mib(split_rss),
        kpack_testkit::mib(base),
        summary.artifacts.len(),
        summary.code_objects
    );
}
