//! Transforming all of bookworm's librocsparse.so.0.1 (1.3 GB, 111 wrappers, 777 code
//! objects) next to a plain copy of the same file, measured in the same run.
//!
//! Prints wall time and peak RSS (VmHWM, reset before each phase) for: the copy; the whole
//! transform (archives + host rewrite); and the host rewrite alone, after the archives are
//! written. Targets: rewrite <= 1 s, its RSS <= 100 MB. Needs the corpus from `scripts/setup.sh`.

use std::time::Instant;

use kpack_archive::Compression;
use kpack_hostbin::marker::MarkerMetadata;
use kpack_pipeline::transform::{self, TransformOptions};

fn main() {
    let path = kpack_testkit::librocsparse();
    let size = std::fs::metadata(&path).unwrap().len();
    let dir = tempfile::Builder::new()
        .prefix("kpack-bench-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    // Warm the page cache so every phase measures the same thing.
    std::fs::copy(&path, dir.path().join("warm")).unwrap();
    std::fs::remove_file(dir.path().join("warm")).unwrap();

    kpack_testkit::reset_peak_rss();
    let start = Instant::now();
    std::fs::copy(&path, dir.path().join("copy")).unwrap();
    let copy_time = start.elapsed();
    let copy_rss = kpack_testkit::peak_rss_kib();
    std::fs::remove_file(dir.path().join("copy")).unwrap();

    let opts = TransformOptions {
        output: dir.path().join("lib/librocsparse.so.0.1"),
        kpack_dir: dir.path().join(".kpack"),
        group: None,
        kernel_name: None,
        search_paths: Vec::new(),
        compression: Compression::zstd(),
        names: kpack_pipeline::transform::NameRules::for_output(false),
    };
    std::fs::create_dir_all(dir.path().join("lib")).unwrap();
    // The rewrite alone (measured first, so no earlier phase inflates its baseline): what
    // `kpack_elf::rewrite` does to the host file once the code objects are in archives: plan
    // the layout, stream the output, verify it.
    let file = std::fs::File::open(&path).unwrap();
    let map = kpack_pipeline::map_file(&file, &path).unwrap();
    let marker = MarkerMetadata {
        kernel_name: "librocsparse.so.0.1".to_owned(),
        search_paths: vec!["../.kpack/librocsparse_@GFXARCH@.kpack".to_owned()],
        host_entry_id: None,
    }
    .encode()
    .unwrap();
    let out = dir.path().join("lib/rewrite-only.so");
    kpack_testkit::reset_peak_rss();
    let base = kpack_testkit::peak_rss_kib();
    let start = Instant::now();
    let rewrite = kpack_elf::rewrite::plan(&map, &marker).unwrap();
    let sink = std::io::BufWriter::new(std::fs::File::create(&out).unwrap());
    rewrite.write_to(&map, sink).unwrap();
    let written = std::fs::File::open(&out).unwrap();
    let written = kpack_pipeline::map_file(&written, &out).unwrap();
    kpack_elf::verify(&written).unwrap();
    let rewrite_time = start.elapsed();
    let rewrite_rss = kpack_testkit::peak_rss_kib();
    drop(written);
    std::fs::remove_file(&out).unwrap();

    kpack_testkit::reset_peak_rss();
    let start = Instant::now();
    let outcome = transform::transform(&path, &opts).unwrap();
    let full_time = start.elapsed();
    let full_rss = kpack_testkit::peak_rss_kib();
    let transform::Outcome::Transformed(summary) = outcome else {
        panic!("librocsparse is already kpacked?")
    };

    println!("transform librocsparse.so.0.1 ({size} bytes)");
    println!(
        "  plain copy              {:>8.3} s  peak RSS {:>7.1} MiB",
        copy_time.as_secs_f64(),
        kpack_testkit::mib(copy_rss)
    );
    println!(
        "  full transform (zstd)   {:>8.3} s  peak RSS {:>7.1} MiB  ({} archives, {} code objects, host {} bytes)",
        full_time.as_secs_f64(),
        kpack_testkit::mib(full_rss),
        summary.archives.len(),
        summary.code_objects,
        summary.output_size
    );
    println!(
        "  host rewrite alone      {:>8.3} s  peak RSS {:>7.1} MiB  (baseline {:.1} MiB; targets <= 1 s, <= 100 MB)",
        rewrite_time.as_secs_f64(),
        kpack_testkit::mib(rewrite_rss),
        kpack_testkit::mib(base)
    );
}
