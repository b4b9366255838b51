//! `kpack inspect` of a wheel read in place and of a tarball streamed, next to what a user
//! would do without them in the same run: unpack (`unzip -q`, `tar -xf`) and inspect the
//! tree. The input is the largest wheel of the corpus, cupy-rocm-7-0 14.2.0 (73 MB zipped,
//! 374 MB unpacked); the tarball is its unpacked tree packed as `.tar.zst` by kpack-tar
//! before the measurements.
//!
//! Prints the median wall time of 3 runs of kpack's in-place reads and one run of each
//! unpack-and-inspect baseline, the ratios to the baseline, and the peak RSS (VmHWM, reset
//! before each) against the largest member. The baselines take 4-12x as long as the reads
//! in place (7-8 s a run; three of each were half of this bench's CI time), so one run of each
//! decides the <= 1x target as surely as a median would.
//! Targets: in place <= 1x the baseline, peak RSS <= 512 MiB whatever the container's size.
//! Needs the corpus from `scripts/setup.sh`, `unzip` and GNU tar.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Inspects every input under `paths` as `kpack inspect --json` does; returns how many
/// inspections (files and members) there were.
fn inspect(paths: &[PathBuf]) -> usize {
    let mut n = 0;
    for path in kpack_pipeline::expand_inputs(paths).unwrap() {
        kpack_inputs::inspect(&path, paths.contains(&path), &mut |i| {
            assert!(i.result.is_ok(), "{}: {:?}", i.path, i.result.err());
            n += 1;
        });
    }
    n
}

/// Median time of `runs` runs of `f` and the peak RSS over them.
fn measure(runs: usize, mut f: impl FnMut(usize)) -> (Duration, u64) {
    kpack_testkit::reset_peak_rss();
    let times = (0..runs).map(|i| kpack_testkit::time(|| f(i)).0).collect();
    (kpack_testkit::median(times), kpack_testkit::peak_rss_kib())
}

fn unpack_and_inspect(tool: &str, args: &[&str], container: &Path, into: &Path) -> usize {
    std::fs::create_dir_all(into).unwrap();
    let mut full: Vec<&str> = args.to_vec();
    match tool {
        "unzip" => full.extend([container.to_str().unwrap(), "-d", into.to_str().unwrap()]),
        _ => full.extend([container.to_str().unwrap(), "-C", into.to_str().unwrap()]),
    }
    kpack_testkit::run_tool(tool, &full);
    let n = inspect(&[into.to_owned()]);
    std::fs::remove_dir_all(into).unwrap();
    n
}

fn main() {
    let wheel = kpack_testkit::corpus_wheel("cupy_rocm_7_0", "14.2.0");
    let dir = tempfile::Builder::new()
        .prefix("kpack-bench-inputs-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let tree = dir.path().join("tree");
    kpack_testkit::run_tool(
        "unzip",
        &["-q", wheel.to_str().unwrap(), "-d", tree.to_str().unwrap()],
    );
    let largest = kpack_pipeline::expand_inputs(std::slice::from_ref(&tree))
        .unwrap()
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .max()
        .unwrap();
    let tarball = dir.path().join("cupy.tar.zst");
    kpack_tar::pack_dir(&tree, &tarball, kpack_tar::PackOptions::from_env()).unwrap();
    std::fs::remove_dir_all(&tree).unwrap();
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    println!(
        "inspect in place: {} ({:.1} MiB; largest member {:.1} MiB), tarball {:.1} MiB, kpack median of 3",
        wheel.file_name().unwrap().to_string_lossy(),
        mib(std::fs::metadata(&wheel).unwrap().len()),
        mib(largest),
        mib(std::fs::metadata(&tarball).unwrap().len()),
    );
    for (name, container, tool, args) in [
        ("wheel", &wheel, "unzip", &["-q"][..]),
        ("tar.zst", &tarball, "tar", &["-xf"][..]),
    ] {
        let mut count = 0;
        let (base_t, base_rss) = measure(1, |i| {
            count = unpack_and_inspect(tool, args, container, &dir.path().join(format!("x{i}")));
        });
        let (t, rss) = measure(3, |_| {
            assert_eq!(inspect(std::slice::from_ref(container)), count)
        });
        println!(
            "  {tool} + inspect tree ({name}, {count} files) {:>8.3} s  peak RSS {:>7.1} MiB",
            base_t.as_secs_f64(),
            kpack_testkit::mib(base_rss)
        );
        println!(
            "  kpack inspect {name:<8} in place    {:>8.3} s  ratio {:.2}x  peak RSS {:>7.1} MiB (targets <= 1x, <= 512 MiB)",
            t.as_secs_f64(),
            t.as_secs_f64() / base_t.as_secs_f64(),
            kpack_testkit::mib(rss)
        );
    }
}
