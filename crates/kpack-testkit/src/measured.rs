//! Whole-process runs of `kpack` measured once and shared: a real-world test that must run an
//! expensive command anyway (a level-19 `unified` pack of a whole library takes minutes of
//! CPU) records its wall time and peak RSS, and the benchmark that prints that figure takes
//! the record instead of running the command again, when it was made by the same `kpack`
//! binary. Otherwise, or when the record is missing, the benchmark measures it itself.
//!
//! Records live in `kpack-measurements/` beside the binary (the profile's target directory),
//! one `<key>.txt` per command: the binary's SHA-256, wall seconds, peak RSS in MiB, CPU
//! seconds. A command's output may be kept beside its record ([`keep`]) for a benchmark that
//! reads it ([`kept`]): the level-19 `unified` archive of librocsparse a real-world test makes
//! is the C API bench's v2 archive.
//!
//! Unix only: the figures are `wait4`'s rusage of the child, and they are the Linux
//! benchmarks' (nothing is measured under wine).
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A finished child process: wall time, peak RSS (its `ru_maxrss`) and CPU time (user and
/// system, of every thread).
#[derive(Debug, Clone, Copy)]
pub struct ChildRun {
    pub wall: Duration,
    pub peak_mib: f64,
    pub cpu: Duration,
}

/// Runs `program args` with stdout discarded, which must exit 0; its wall time and peak RSS.
// The child is reaped by `wait4`, which `std` does not offer, for its rusage.
#[allow(unsafe_code, clippy::zombie_processes)]
pub fn run_measured(program: &Path, args: &[&Path]) -> ChildRun {
    let start = Instant::now();
    let child = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for the child spawned above, which nothing else waits for.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(pid, child.id() as libc::pid_t, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{} {args:?} failed ({status:#x})",
        program.display()
    );
    let seconds = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    ChildRun {
        wall,
        peak_mib: usage.ru_maxrss as f64 / 1024.0,
        cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime),
    }
}

fn record_path(kpack: &Path, key: &str) -> PathBuf {
    let dir = kpack.parent().expect("a binary lives in a directory");
    dir.join("kpack-measurements").join(format!("{key}.txt"))
}

fn binary_digest(kpack: &Path) -> String {
    let bytes = std::fs::read(kpack).unwrap_or_else(|e| panic!("{}: {e}", kpack.display()));
    crate::sha256_hex(&bytes)
}

/// [`run_measured`] of `kpack args`, recorded under `key` for [`recorded`].
pub fn run_and_record(kpack: &Path, key: &str, args: &[&Path]) -> ChildRun {
    let path = record_path(kpack, key);
    // An earlier run's kept output must not outlive its record and pass for this run's.
    let _ = std::fs::remove_file(kept_path(&path));
    let run = run_measured(kpack, args);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text = format!(
        "{} {} {} {}\n",
        binary_digest(kpack),
        run.wall.as_secs_f64(),
        run.peak_mib,
        run.cpu.as_secs_f64()
    );
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    run
}

/// Keeps the file `output` of the command recorded under `key` ([`run_and_record`]), for
/// [`kept`]; written under a temporary name and renamed, so that a kept file is whole.
pub fn keep(kpack: &Path, key: &str, output: &Path) {
    let kept = kept_path(&record_path(kpack, key));
    let partial = kept.with_extension("kept.partial");
    std::fs::copy(output, &partial)
        .unwrap_or_else(|e| panic!("{} -> {}: {e}", output.display(), partial.display()));
    std::fs::rename(&partial, &kept).unwrap_or_else(|e| panic!("{}: {e}", kept.display()));
}

/// The file kept ([`keep`]) from the command recorded under `key` by this very `kpack`
/// binary, if any.
pub fn kept(kpack: &Path, key: &str) -> Option<PathBuf> {
    recorded(kpack, key)?;
    let kept = kept_path(&record_path(kpack, key));
    kept.is_file().then_some(kept)
}

/// Where the output kept with the record at `record` is.
fn kept_path(record: &Path) -> PathBuf {
    record.with_extension("kept")
}

/// The run recorded under `key` by this very `kpack` binary, if any.
pub fn recorded(kpack: &Path, key: &str) -> Option<ChildRun> {
    let text = std::fs::read_to_string(record_path(kpack, key)).ok()?;
    let mut fields = text.split_whitespace();
    let (digest, wall, peak, cpu) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    if digest != binary_digest(kpack) {
        return None;
    }
    Some(ChildRun {
        wall: Duration::from_secs_f64(wall.parse().ok()?),
        peak_mib: peak.parse().ok()?,
        cpu: Duration::from_secs_f64(cpu.parse().ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_and_its_kept_output_serve_the_binary_that_made_them_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("kpack");
        std::fs::copy("/bin/true", &binary).unwrap();
        assert!(recorded(&binary, "k").is_none(), "nothing recorded yet");
        let run = run_and_record(&binary, "k", &[]);
        assert!(kept(&binary, "k").is_none(), "nothing kept yet");
        let output = dir.path().join("output");
        std::fs::write(&output, b"archive").unwrap();
        keep(&binary, "k", &output);
        assert_eq!(
            std::fs::read(kept(&binary, "k").unwrap()).unwrap(),
            b"archive"
        );
        let again = recorded(&binary, "k").expect("recorded");
        assert_eq!(again.wall.as_secs_f64(), run.wall.as_secs_f64());
        assert_eq!(again.peak_mib, run.peak_mib);
        assert_eq!(again.cpu.as_secs_f64(), run.cpu.as_secs_f64());
        assert!(recorded(&binary, "other").is_none());
        // Another build of the binary: the record is not its measurement.
        let mut bytes = std::fs::read(&binary).unwrap();
        bytes.push(0);
        std::fs::write(&binary, bytes).unwrap();
        assert!(recorded(&binary, "k").is_none());
        assert!(kept(&binary, "k").is_none(), "kept by another build");
        // A new run drops what the last one kept, even before it records.
        run_and_record(&binary, "k", &[]);
        assert!(kept(&binary, "k").is_none(), "kept by an earlier run");
    }
}
