//! `kpack prune` of the two real-world libraries, keeping two targets, next to a plain copy
//! of the same file measured in the same run: bookworm's librocsparse.so.0.1 (1.3 GB,
//! uncompressed bundles) and ROCm 7.2.4's librocblas.so.5.2 (210 MB, CCOB v3: every bundle is
//! decompressed, 1 GB in all, and the kept entries recompressed).
//!
//! Prints wall time and peak RSS (VmHWM, reset before each phase) of the copy and the prune,
//! and their ratio. Targets: prune <= 2x the copy's time, peak RSS <= 512 MB. On a CCOB
//! library a copy is no fair floor (every bundle must be decompressed to select its entries,
//! and the kept ones compressed again), so the floor is measured too: `zstd -d` of the same
//! CCOB frames (one thread), with the prune's ratio to it. Every CCOB's hash is verified
//! (a damaged bundle must be refused, not recompressed under a new hash), so the cost of that
//! check is printed too: the MD5 of the same decompressed bytes alone, one thread, against
//! the prune's wall time (which spreads it over its worker threads). Needs the corpus from
//! `scripts/setup.sh`.

use std::io::Read;
use std::path::Path;
use std::time::Instant;

use kpack_prune::{Selection, prune};
use kpack_target::TargetId;

fn measure(name: &str, path: &Path, keep: &[&str]) {
    let size = std::fs::metadata(path).unwrap().len();
    let dir = tempfile::Builder::new()
        .prefix("kpack-bench-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    // Warm the page cache so both phases read the same way.
    std::fs::copy(path, dir.path().join("warm")).unwrap();
    std::fs::remove_file(dir.path().join("warm")).unwrap();

    kpack_testkit::reset_peak_rss();
    let start = Instant::now();
    std::fs::copy(path, dir.path().join("copy")).unwrap();
    let copy_time = start.elapsed();
    let copy_rss = kpack_testkit::peak_rss_kib();
    std::fs::remove_file(dir.path().join("copy")).unwrap();

    // The decoding floor: `zstd -d` of the library's CCOB frames, if it has any.
    let frames = dir.path().join("frames.zst");
    let compressed = kpack_testkit::ccob_frames(path, &frames);
    let floor = (compressed > 0).then(|| {
        let start = Instant::now();
        let status = std::process::Command::new("zstd")
            .args(["-d", "-q", "-c"])
            .arg(&frames)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("zstd is required (scripts/setup.sh installs it)");
        assert!(status.success(), "zstd -d {}", frames.display());
        (start.elapsed(), compressed)
    });

    let selection = Selection::Keep(keep.iter().map(|t| TargetId::parse(t).unwrap()).collect());
    let out = dir.path().join("pruned");
    kpack_testkit::reset_peak_rss();
    let start = Instant::now();
    prune(&[path.to_owned()], &out, &selection, false).unwrap();
    let prune_time = start.elapsed();
    let prune_rss = kpack_testkit::peak_rss_kib();
    let out_size = std::fs::metadata(&out).unwrap().len();

    // The hash check alone: MD5 of the decompressed bytes, decoded first (after the prune, so
    // holding them does not count in its peak RSS).
    let hash_time = floor.map(|_| {
        let mut decompressed = Vec::new();
        zstd::stream::read::Decoder::new(std::fs::File::open(&frames).unwrap())
            .unwrap()
            .read_to_end(&mut decompressed)
            .unwrap();
        let start = Instant::now();
        std::hint::black_box(kpack_bundle::ccob_hash(&decompressed));
        (start.elapsed(), decompressed.len())
    });
    std::fs::remove_file(&frames).unwrap();

    println!("prune {name} ({size} bytes) keeping {}", keep.join(" "));
    println!(
        "  plain copy  {:>8.3} s  peak RSS {:>7.1} MiB",
        copy_time.as_secs_f64(),
        kpack_testkit::mib(copy_rss)
    );
    println!(
        "  prune       {:>8.3} s  peak RSS {:>7.1} MiB  -> {out_size} bytes",
        prune_time.as_secs_f64(),
        kpack_testkit::mib(prune_rss)
    );
    if let Some((floor_time, compressed)) = floor {
        println!(
            "  zstd -d     {:>8.3} s  of its {compressed} bytes of CCOB frames (the decoding floor)",
            floor_time.as_secs_f64()
        );
        println!(
            "  prune / zstd -d time: {:.2}",
            prune_time.as_secs_f64() / floor_time.as_secs_f64()
        );
    }
    if let Some((hash_time, decompressed)) = hash_time {
        println!(
            "  MD5         {:>8.3} s  of its {decompressed} decompressed bytes (the CCOB hash check, one thread: {:.0} % of the prune's time)",
            hash_time.as_secs_f64(),
            100.0 * hash_time.as_secs_f64() / prune_time.as_secs_f64()
        );
    }
    println!(
        "  prune / copy time: {:.2} (target <= 2); peak RSS {:.1} MiB (target <= 512)",
        prune_time.as_secs_f64() / copy_time.as_secs_f64(),
        kpack_testkit::mib(prune_rss)
    );
}

fn main() {
    measure(
        "librocsparse.so.0.1",
        &kpack_testkit::librocsparse(),
        &["gfx90a", "gfx1030"],
    );
    measure(
        "librocblas.so.5.2",
        &kpack_testkit::librocblas(),
        &["gfx90a", "gfx1100"],
    );
}
