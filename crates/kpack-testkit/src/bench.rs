//! What the benchmarks measure with: timing, CPU time and this process's peak resident set.

/// The median of timing samples (benchmarks).
pub fn median(mut samples: Vec<std::time::Duration>) -> std::time::Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Peak resident set (VmHWM) of this process in KiB (benchmarks).
pub fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Resets VmHWM to the current RSS (writing 5 to clear_refs, Linux >= 4.0), so the next
/// [`peak_rss_kib`] is the peak of what follows (benchmarks).
pub fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// CPU time (user + system, every thread) this process has used so far, from
/// `/proc/self/stat` in clock ticks (benchmarks: unlike wall time, it does not count the
/// time spent waiting for a core on a loaded machine).
pub fn cpu_time() -> std::time::Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The command name (field 2) may hold spaces; the fields after it do not.
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<u64> = after_name
        .split(' ')
        .skip(11) // state .. cmajflt: utime is field 14 of the whole line
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    // Linux reports these in USER_HZ, which is 100 on every architecture it exports /proc on.
    std::time::Duration::from_secs_f64((fields[0] + fields[1]) as f64 / 100.0)
}

/// KiB to MiB.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// How long `f` takes, with its result (benchmarks).
pub fn time<R>(f: impl FnOnce() -> R) -> (std::time::Duration, R) {
    let start = std::time::Instant::now();
    let r = f();
    (start.elapsed(), r)
}
