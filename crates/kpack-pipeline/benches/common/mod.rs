//! What the benchmarks share: the real-world input and peak-memory readings.
#![allow(dead_code)] // each bench uses its own subset

use std::path::PathBuf;

/// bookworm's librocsparse.so.0.1 from the corpus `scripts/setup.sh` fetches.
pub fn librocsparse() -> PathBuf {
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
pub fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Resets VmHWM to the current RSS (writing 5 to clear_refs, Linux >= 4.0), so the next
/// reading is the peak of what follows.
pub fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// KiB to MiB.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
