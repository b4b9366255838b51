//! Splitting an artifact that holds bookworm's librocsparse.so.0.1 (1.3 GB, 111 wrappers,
//! 777 code objects, 7 targets) next to a plain copy of the same artifact, in the same run.
//!
//! Prints wall time and peak RSS (VmHWM, reset before each phase). Targets: split <= 10 s on
//! 2 cores with zstd archives, peak RSS <= 0.5 GB. Needs the corpus from `scripts/setup.sh`.
//!
//! Then the cost of integrity within that split: the digests the archives carry (XXH3-64 of
//! every code object) and zstd's frame checksums (XXH64 of every code object), timed over
//! the split's own code objects in the same run, against the split's CPU time. Target: <= 5 %
//! of the split.

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
    let cpu = kpack_testkit::cpu_time();
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
    let split_cpu = kpack_testkit::cpu_time() - cpu;
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
    println!(
        "  kpack split CPU time        {:>8.3} s",
        split_cpu.as_secs_f64()
    );
    integrity_share(&dir.path().join("out"), split_cpu.as_secs_f64());
}

/// Prints the time the split's integrity work takes over the code objects of the archives
/// under `out`, on one thread, against the split's CPU time `split_cpu` (the split hashes on
/// its workers, so CPU against CPU is the share of the work).
fn integrity_share(out: &std::path::Path, split_cpu: f64) {
    let mut objects = Vec::new();
    for entry in kpack_fs::walk(out) {
        let path = entry.unwrap().path;
        if path.extension().is_some_and(|e| e == "kpack") {
            let archive = kpack_archive::Archive::open(&path).unwrap();
            assert!(archive.has_digests(), "{}", path.display());
            for (binary, arch, _) in archive.entries() {
                objects.push(archive.get(binary, arch).unwrap().into_owned());
            }
        }
    }
    let bytes: usize = objects.iter().map(Vec::len).sum();
    let start = Instant::now();
    let mut sum = 0u64;
    for o in &objects {
        sum ^= kpack_archive::digest::content_digest(o);
        sum ^= xxhash_rust::xxh64::xxh64(o, 0);
    }
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(sum);
    println!(
        "  integrity (XXH3 digests + zstd XXH64 checksums of {} code objects, {bytes} bytes) {:>8.3} s CPU = {:.2} % of the split's CPU time (target <= 5 %)",
        objects.len(),
        secs,
        100.0 * secs / split_cpu
    );
}
