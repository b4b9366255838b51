//! Unbundling all of bookworm's librocsparse.so.0.1 (1.3 GB, 777 code objects) against a
//! plain sequential read of the same file, measured in the same run.
//!
//! Prints wall times, the ratios, the CPU time ratio (which a loaded machine does not
//! distort), and the peak resident set size of the unbundle (the kernel's VmHWM, reset
//! before it starts). Targets: within 3x of the read, peak RSS well
//! under the file size. Needs the corpus from `scripts/setup.sh`.
//!
//! Output goes to tmpfs (`/dev/shm`) when there is one: unbundling writes 1.3 GB, and on a
//! disk file system that costs as much as copying the file, which says nothing about kpack.
//! A plain copy of the file into the same directory is measured as the write baseline.

use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kpack_pipeline::unbundle::{TargetFilter, Unbundler};

/// Reads `path` through an 8 MiB buffer; returns the wall time, the CPU time and the size.
fn sequential_read(path: &PathBuf) -> (Duration, Duration, u64) {
    let cpu = kpack_testkit::cpu_time();
    let start = Instant::now();
    let mut file = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; 8 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    (start.elapsed(), kpack_testkit::cpu_time() - cpu, total)
}

fn main() {
    let path = kpack_testkit::librocsparse();
    // Warm the page cache so both sides measure the same thing: CPU and memory traffic.
    let _ = sequential_read(&path);
    let (read_time, read_cpu, size) = sequential_read(&path);

    let scratch = ["/dev/shm", env!("CARGO_TARGET_TMPDIR")]
        .into_iter()
        .find(|d| std::path::Path::new(d).is_dir())
        .unwrap();
    let out = tempfile::Builder::new()
        .prefix("kpack-bench-")
        .tempdir_in(scratch)
        .unwrap();
    let start = Instant::now();
    std::fs::copy(&path, out.path().join("copy")).unwrap();
    let copy_time = start.elapsed();
    std::fs::remove_file(out.path().join("copy")).unwrap();
    kpack_testkit::reset_peak_rss();
    let base_rss = kpack_testkit::peak_rss_kib();
    let cpu = kpack_testkit::cpu_time();
    let start = Instant::now();
    let mut unbundler = Unbundler::new(out.path(), TargetFilter::default()).unwrap();
    unbundler.unbundle_file(&path).unwrap();
    let written = unbundler.publish().unwrap();
    let unbundle_time = start.elapsed();
    let unbundle_cpu = kpack_testkit::cpu_time() - cpu;
    let peak = kpack_testkit::peak_rss_kib();
    let written_bytes: u64 = written.iter().map(|w| w.size).sum();

    println!("unbundle librocsparse.so.0.1 ({size} bytes) into {scratch}");
    println!(
        "  sequential read         {:>9.3} s  (CPU {:.3} s)",
        read_time.as_secs_f64(),
        read_cpu.as_secs_f64()
    );
    println!(
        "  plain copy              {:>9.3} s",
        copy_time.as_secs_f64()
    );
    println!(
        "  kpack unbundle          {:>9.3} s  (CPU {:.3} s; {} code objects, {} bytes written)",
        unbundle_time.as_secs_f64(),
        unbundle_cpu.as_secs_f64(),
        written.len(),
        written_bytes
    );
    println!(
        "  ratio unbundle/read     {:>9.2}x  (target <= 3x)",
        unbundle_time.as_secs_f64() / read_time.as_secs_f64()
    );
    // On a shared machine the wall times include waiting for a core; CPU times do not.
    println!(
        "  CPU ratio unbundle/read {:>9.2}x",
        unbundle_cpu.as_secs_f64() / read_cpu.as_secs_f64()
    );
    println!(
        "  ratio unbundle/copy     {:>9.2}x",
        unbundle_time.as_secs_f64() / copy_time.as_secs_f64()
    );
    println!(
        "  peak RSS during unbundle {:>8.1} MiB (process baseline {:.1} MiB; file {:.0} MiB)",
        peak as f64 / 1024.0,
        base_rss as f64 / 1024.0,
        size as f64 / (1 << 20) as f64
    );
}
