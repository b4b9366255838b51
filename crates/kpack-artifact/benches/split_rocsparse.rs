//! Splitting an artifact that holds bookworm's librocsparse.so.0.1 (1.3 GB, 111 wrappers,
//! 777 code objects, 7 targets) next to a plain copy of the same artifact, in the same run.
//!
//! Prints wall time and peak RSS (VmHWM, reset before each phase). Targets: split <= 10 s on
//! 2 cores with zstd archives, peak RSS <= 0.5 GB. Needs the corpus from `scripts/setup.sh`.
//!
//! Then the cost of integrity within that split: the split's coding of its own code objects
//! as it was before archives carried checks and as it is now (zstd's frame checksum and the
//! XXH3-64 digest of every code object), in the same run, against the split's CPU time.
//! Target: <= 5 % of the split.

use std::time::Instant;

use kpack_archive::{Compression, KernelCompressor};
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
    integrity_share(&dir.path().join("out"), split_cpu.as_secs_f64(), threads);
}

/// Prints what integrity costs the split: its coding of every code object the split wrote
/// (read back from the archives under `out`) as the writer did before archives carried
/// checks (a kept zstd context without the checksum, no digest) and as it does now
/// ([`KernelCompressor::prepare`]: zstd checksum, XXH3 digest). On as many worker threads as
/// the split (whose allocator then behaves as in the split), each taking one object at a
/// time and alternating which coding goes first so both meet cold and warm caches alike; the
/// best of [`ROUNDS`] rounds of each. Everything else the split does is the same code before
/// and after, so the difference, against the split's CPU time `split_cpu`, is the share
/// integrity adds.
fn integrity_share(out: &std::path::Path, split_cpu: f64, threads: usize) {
    let level = kpack_archive::DEFAULT_ZSTD_LEVEL;
    let mut objects = Vec::new();
    for entry in kpack_fs::walk(out) {
        let path = entry.unwrap().path;
        if path.extension().is_some_and(|e| e == "kpack") {
            let archive = kpack_archive::Archive::open(&path).unwrap();
            assert!(archive.has_digests(), "{}", path.display());
            for (binary, arch, _) in archive.entries() {
                objects.push((path.clone(), binary.to_owned(), arch.to_owned()));
            }
        }
    }
    // One worker's share: the objects i with i % threads == worker; (before, now) seconds.
    let code_share = |worker: usize| {
        let mut before = zstd::bulk::Compressor::new(level).unwrap();
        let mut now = KernelCompressor::new(Compression::Zstd { level });
        let (mut before_secs, mut now_secs) = (0.0, 0.0);
        for (i, (path, binary, arch)) in objects.iter().enumerate().skip(worker).step_by(threads) {
            let archive = kpack_archive::Archive::open(path).unwrap();
            let object = archive.get(binary, arch).unwrap().into_owned();
            let mut code_before = || {
                let start = Instant::now();
                std::hint::black_box(before.compress(&object).unwrap());
                start.elapsed().as_secs_f64()
            };
            let mut code_now = || {
                let start = Instant::now();
                std::hint::black_box(now.prepare(&object[..]).unwrap());
                start.elapsed().as_secs_f64()
            };
            if (i / threads).is_multiple_of(2) {
                before_secs += code_before();
                now_secs += code_now();
            } else {
                now_secs += code_now();
                before_secs += code_before();
            }
        }
        (before_secs, now_secs)
    };
    let (mut best_before, mut best_now) = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        let shares: Vec<(f64, f64)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|w| scope.spawn(move || code_share(w)))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        best_before = best_before.min(shares.iter().map(|s| s.0).sum());
        best_now = best_now.min(shares.iter().map(|s| s.1).sum());
    }
    println!(
        "  coding the split's {} code objects on {threads} threads, best of {ROUNDS}: before checks {best_before:>7.3} s, now {best_now:>7.3} s",
        objects.len()
    );
    println!(
        "  integrity adds {:>7.3} s CPU = {:.2} % of the split's CPU time (target <= 5 %)",
        best_now - best_before,
        100.0 * (best_now - best_before) / split_cpu
    );
}

/// Rounds of the coding comparison: the best of each is the least disturbed by the machine.
const ROUNDS: usize = 5;
