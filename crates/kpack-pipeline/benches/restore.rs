//! `restore` of bookworm's librocsparse.so.0.1 (1.3 GB, uncompressed bundles) from its
//! transformed form (zstd archives), next to a plain copy of the original measured in the
//! same run.
//!
//! Prints wall time, the ratio to the copy, and peak RSS (VmHWM, reset before each phase;
//! target <= 512 MiB: memory follows one bundle). The CCOB v3 libraries' restore (with
//! `--compress`) is measured as a child process in kpack-cli's `memory_ccob` bench, where
//! no earlier phase of the same process inflates the figure. Needs the corpus from
//! `scripts/setup.sh`.

use std::path::Path;
use std::time::Instant;

use kpack_archive::Compression;
use kpack_pipeline::restore::{RestoreOptions, restore};

fn bench(lib: &Path) {
    let size = std::fs::metadata(lib).unwrap().len();
    let dir = tempfile::Builder::new()
        .prefix("kpack-bench-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let (kpacked, _) = kpack_testkit::transform_into(lib, dir.path(), Compression::zstd());

    kpack_testkit::reset_peak_rss();
    let (copy_time, _) = kpack_testkit::time(|| std::fs::copy(lib, dir.path().join("copy")));
    let copy_rss = kpack_testkit::peak_rss_kib();
    std::fs::remove_file(dir.path().join("copy")).unwrap();

    let opts = RestoreOptions {
        output: dir.path().join("restored.so"),
        kpack_dirs: Vec::new(),
        targets: Vec::new(),
        compress: false,
    };
    kpack_testkit::reset_peak_rss();
    let base = kpack_testkit::peak_rss_kib();
    let start = Instant::now();
    let summary = restore(&kpacked, &opts, &|_, _| {}).unwrap();
    let restore_time = start.elapsed();
    let restore_rss = kpack_testkit::peak_rss_kib();

    let name = lib.file_name().unwrap().to_string_lossy();
    println!(
        "restore {name} ({size} bytes, {} wrappers, {} targets, {})",
        summary.wrappers,
        summary.targets.len(),
        summary.format
    );
    println!(
        "  plain copy of the original {:>8.3} s  peak RSS {:>7.1} MiB",
        copy_time.as_secs_f64(),
        kpack_testkit::mib(copy_rss)
    );
    println!(
        "  kpack restore              {:>8.3} s  peak RSS {:>7.1} MiB  ratio {:.2}x copy (baseline {:.1} MiB; target <= 512 MiB)",
        restore_time.as_secs_f64(),
        kpack_testkit::mib(restore_rss),
        restore_time.as_secs_f64() / copy_time.as_secs_f64(),
        kpack_testkit::mib(base)
    );
}

fn main() {
    bench(&kpack_testkit::librocsparse());
}
