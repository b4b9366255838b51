//! What the benchmarks share: peak-memory readings (the real-world input is kpack-testkit's).
#![allow(dead_code)] // each bench uses its own subset

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
