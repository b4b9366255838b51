//! Splitting the PyPI jax-rocm7-plugin 0.12.0 wheel (CCOB v3, 27 targets) next to the naive
//! re-zip of the same wheel (`unzip` + `zip -r`, Info-ZIP, default level), in the same run.
//!
//! Prints the median wall time of 3 runs of each and the split's peak RSS (VmHWM, reset
//! before the split). Targets: split <= 1x the naive re-zip, peak RSS <= 512 MiB. Needs the
//! corpus from `scripts/setup.sh` and `zip`/`unzip`.

use std::process::Command;

use kpack_wheel::{SplitOptions, split_wheel};

fn main() {
    let wheel = kpack_testkit::corpus_wheel("jax_rocm7_plugin", "0.12.0");
    let size = std::fs::metadata(&wheel).unwrap().len();
    let dir = tempfile::Builder::new()
        .prefix("kpack-bench-wheel-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let runs = 3;

    let mut naive = Vec::new();
    for i in 0..runs {
        let x = dir.path().join(format!("x{i}"));
        let out = dir.path().join(format!("rezip{i}.whl"));
        let (t, ()) = kpack_testkit::time(|| {
            kpack_testkit::run_tool(
                "unzip",
                &["-q", wheel.to_str().unwrap(), "-d", x.to_str().unwrap()],
            );
            let status = Command::new("zip")
                .args(["-q", "-r", "-X"])
                .arg(&out)
                .arg(".")
                .current_dir(&x)
                .status()
                .expect("zip is required (scripts/setup.sh installs it)");
            assert!(status.success());
        });
        naive.push(t);
    }

    kpack_testkit::reset_peak_rss();
    let base = kpack_testkit::peak_rss_kib();
    let mut split = Vec::new();
    let mut summary = None;
    for i in 0..runs {
        let opts = SplitOptions::new(dir.path().join(format!("split{i}")));
        let (t, s) = kpack_testkit::time(|| split_wheel(&wheel, &opts).unwrap());
        split.push(t);
        summary = Some(s);
    }
    let rss = kpack_testkit::peak_rss_kib();
    let summary = summary.unwrap();
    let (naive, split) = (kpack_testkit::median(naive), kpack_testkit::median(split));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "split-wheel {} ({size} bytes, {} fat binaries, {} targets), {threads} cores, median of {runs}",
        wheel.file_name().unwrap().to_string_lossy(),
        summary.fat_binaries.len(),
        summary.architectures.len()
    );
    println!(
        "  unzip + zip -r (naive re-zip)  {:>8.3} s",
        naive.as_secs_f64()
    );
    println!(
        "  kpack split-wheel (zstd)       {:>8.3} s  ratio {:.2}x  peak RSS {:>7.1} MiB (baseline {:.1} MiB; {} wheels; targets <= 1x, <= 512 MiB)",
        split.as_secs_f64(),
        split.as_secs_f64() / naive.as_secs_f64(),
        kpack_testkit::mib(rss),
        kpack_testkit::mib(base),
        1 + summary.devices.len()
    );
}
