//! Crash safety of the real `kpack` binary: killed (`kill -9`) at named points of writing its
//! outputs (the `KPACK_TEST_KILL_AT` hook, [`kpack_fs::fault_point`]) and at timed moments,
//! or stopped by a full disk (a file-size limit), `transform`, `split`, `recombine` and
//! `split-wheel` leave nothing at a final path but complete outputs, and the next run to the
//! same output succeeds and sweeps every temporary the killed one left.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use kpack_fs::{FAULT_ENV, TEMP_PREFIX};
use kpack_testkit::{fixture, snapshot};

use crate::common;

use common::{kpack_ok, s};

fn kpack_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kpack"));
    c.args(args)
        .env("CI", "1")
        .env_remove(FAULT_ENV)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// Runs `kpack args` with the kill hook at `point`; it must die of SIGKILL there.
fn killed_at(point: &str, args: &[&str]) {
    let status = kpack_cmd(args).env(FAULT_ENV, point).status().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "kpack {args:?} with {FAULT_ENV}={point} was not killed there: {status}"
    );
}

/// Starts `kpack args`, kills it after `delay`, and waits for it.
fn killed_after(delay: Duration, args: &[&str]) -> ExitStatus {
    let mut child = kpack_cmd(args).spawn().unwrap();
    std::thread::sleep(delay);
    let _ = child.kill();
    child.wait().unwrap()
}

/// Every kpack temporary directly in `dir`.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Err(_) => Vec::new(),
        Ok(rd) => rd
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().starts_with(TEMP_PREFIX))
            .map(|e| e.path())
            .collect(),
    }
}

/// What is at the final paths below `dir`: the snapshot without kpack's temporaries.
fn finals(dir: &Path) -> Vec<(String, String, Vec<u8>)> {
    snapshot(dir)
        .into_iter()
        .filter(|(p, _, _)| !p.split('/').any(|c| c.starts_with(TEMP_PREFIX)))
        .collect()
}

/// The delays of the timed kills: from before the first write to after the end.
fn delays() -> impl Iterator<Item = Duration> {
    [0u64, 1, 2, 3, 5, 8, 12, 20, 35, 60, 100, 200]
        .into_iter()
        .map(Duration::from_millis)
}

// ---- transform ---------------------------------------------------------------------------

struct Transform {
    dir: tempfile::TempDir,
}

impl Transform {
    fn new() -> Transform {
        let t = Transform {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(t.lib()).unwrap();
        t
    }
    fn lib(&self) -> PathBuf {
        self.dir.path().join("lib")
    }
    fn kpack_dir(&self) -> PathBuf {
        self.dir.path().join("lib/.kpack")
    }
    fn args(&self) -> Vec<String> {
        vec![
            "transform".into(),
            fixture("bin/libtwo.so").display().to_string(),
            "-o".into(),
            self.lib().join("libtwo.so").display().to_string(),
            "--kpack-dir".into(),
            self.kpack_dir().display().to_string(),
            "--level".into(),
            "19".into(),
        ]
    }
    fn run_ok(&self) {
        let args = self.args();
        kpack_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }
    /// The outputs of an undisturbed run.
    fn reference() -> Vec<(String, String, Vec<u8>)> {
        let t = Transform::new();
        t.run_ok();
        finals(t.dir.path())
    }
    /// Every final path is absent or byte-identical to the undisturbed run's (output is
    /// deterministic), and a host binary is never there without every archive it names.
    fn check_partial(&self, reference: &[(String, String, Vec<u8>)], when: &str) {
        let now = finals(self.dir.path());
        for entry in &now {
            if entry.2.is_empty() && reference.iter().any(|r| r.0 == entry.0) {
                continue; // a directory
            }
            assert!(
                reference.contains(entry),
                "{when}: {} is not a complete output",
                entry.0
            );
        }
        if now.iter().any(|e| e.0 == "lib/libtwo.so") {
            assert_eq!(
                now, reference,
                "{when}: the host binary without all its archives"
            );
        }
    }
    /// A following run succeeds, writes the reference outputs and leaves no temporary.
    fn check_recovers(&self, reference: &[(String, String, Vec<u8>)], when: &str) {
        self.run_ok();
        assert_eq!(finals(self.dir.path()), reference, "{when}");
        assert!(temporaries(&self.lib()).is_empty(), "{when}");
        assert!(temporaries(&self.kpack_dir()).is_empty(), "{when}");
    }
}

#[test]
fn transform_killed_before_publishing_leaves_nothing_at_a_final_path() {
    let reference = Transform::reference();
    for point in [
        "stage-created",
        "transform-host-written",
        "atomic-written",
        "before-publish",
    ] {
        let t = Transform::new();
        let args = t.args();
        killed_at(point, &args.iter().map(String::as_str).collect::<Vec<_>>());
        let left: Vec<String> = finals(t.dir.path()).into_iter().map(|e| e.0).collect();
        assert_eq!(left, ["lib", "lib/.kpack"], "killed at {point}");
        assert!(
            !temporaries(&t.lib()).is_empty() || !temporaries(&t.kpack_dir()).is_empty(),
            "killed at {point}: the staging directories are left for the sweep"
        );
        t.check_recovers(&reference, point);
    }
}

#[test]
fn transform_killed_while_publishing_leaves_only_complete_archives_and_the_sweep_completes_the_job()
{
    let reference = Transform::reference();
    let t = Transform::new();
    let args = t.args();
    killed_at(
        "publish-partial",
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    t.check_partial(&reference, "publish-partial");
    assert!(!t.lib().join("libtwo.so").exists());
    // The job was committed (its journal written): a sweep of either directory completes it.
    kpack_fs::sweep(&t.kpack_dir()).unwrap();
    assert_eq!(finals(t.dir.path()), reference, "completed by the sweep");
    assert!(temporaries(&t.lib()).is_empty());
    assert!(temporaries(&t.kpack_dir()).is_empty());
    t.check_recovers(&reference, "publish-partial");
}

#[test]
fn transform_killed_at_any_moment_leaves_only_complete_outputs_and_the_next_run_sweeps() {
    let reference = Transform::reference();
    let t = Transform::new();
    let args = t.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut mid_run = 0;
    for delay in delays() {
        // Each run replaces the last one's outputs: start from nothing to see this run's.
        let _ = std::fs::remove_file(t.lib().join("libtwo.so"));
        for e in std::fs::read_dir(t.kpack_dir()).into_iter().flatten() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        killed_after(delay, &args);
        t.check_partial(&reference, &format!("killed after {delay:?}"));
        mid_run += usize::from(
            !temporaries(&t.lib()).is_empty() || !temporaries(&t.kpack_dir()).is_empty(),
        );
    }
    assert!(
        mid_run > 0,
        "no timed kill hit the run while it was writing"
    );
    t.check_recovers(&reference, "after timed kills");
}

// ---- split and recombine -------------------------------------------------------------------

fn artifact() -> PathBuf {
    fixture("shards/shard-a/demo_lib_gfx90X")
}

fn split_args(out: &Path) -> Vec<String> {
    vec![
        "split".into(),
        artifact().display().to_string(),
        "-o".into(),
        out.display().to_string(),
        "--component".into(),
        "demo_lib".into(),
    ]
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// What an undisturbed split of the shard writes.
fn split_reference() -> Vec<(String, String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    kpack_ok(&as_strs(&split_args(&out)));
    snapshot(&out)
}

#[test]
fn split_killed_at_any_point_leaves_no_output_and_the_next_run_sweeps() {
    let reference = split_reference();
    // A new output directory, and one that already holds another component.
    for existing in [false, true] {
        for point in ["stage-created", "atomic-written", "before-publish"] {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("out");
            if existing {
                std::fs::create_dir_all(out.join("other_generic")).unwrap();
            }
            killed_at(point, &as_strs(&split_args(&out)));
            let expected: Vec<String> = if existing {
                vec!["other_generic".into()]
            } else {
                Vec::new()
            };
            let left: Vec<String> = finals(dir.path())
                .into_iter()
                .map(|e| e.0)
                .filter(|p| p != "out")
                .map(|p| p.trim_start_matches("out/").to_owned())
                .collect();
            assert_eq!(left, expected, "existing {existing}, killed at {point}");
            let when = format!("existing {existing}, killed at {point}");
            assert!(
                !temporaries(dir.path()).is_empty() || !temporaries(&out).is_empty(),
                "{when}: the staging directory is left for the sweep"
            );
            kpack_ok(&as_strs(&split_args(&out)));
            assert!(temporaries(dir.path()).is_empty(), "{when}");
            assert!(temporaries(&out).is_empty(), "{when}");
            let mut got = snapshot(&out);
            got.retain(|e| !e.0.starts_with("other_generic"));
            assert_eq!(got, reference, "{when}");
            if !existing {
                kpack_ok(&["verify", s(&out), "--original", s(&artifact())]);
            }
        }
    }
}

#[test]
fn split_killed_while_publishing_into_an_existing_output_is_completed_by_the_next_run() {
    let reference = split_reference();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("other_generic")).unwrap();
    killed_at("publish-partial", &as_strs(&split_args(&out)));
    // The generic artifact (it names the others' archives) is published last.
    assert!(!out.join("demo_lib_generic").exists());
    assert_eq!(temporaries(&out).len(), 1);
    // The next run's sweep completes the killed run's publishing, then refuses to replace it.
    let res = kpack_cmd(&as_strs(&split_args(&out))).output().unwrap();
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("demo_lib_generic") && stderr.contains("already exists"),
        "{stderr}"
    );
    assert!(temporaries(&out).is_empty());
    let mut got = snapshot(&out);
    got.retain(|e| !e.0.starts_with("other_generic"));
    assert_eq!(got, reference);
}

#[test]
fn split_killed_at_any_moment_leaves_no_partial_output_and_the_next_run_sweeps() {
    let reference = split_reference();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut mid_run = 0;
    for delay in delays() {
        let _ = std::fs::remove_dir_all(&out);
        killed_after(delay, &as_strs(&split_args(&out)));
        if out.exists() {
            assert_eq!(snapshot(&out), reference, "killed after {delay:?}");
        }
        mid_run += usize::from(!temporaries(dir.path()).is_empty());
    }
    assert!(
        mid_run > 0,
        "no timed kill hit the run while it was writing"
    );
    let _ = std::fs::remove_dir_all(&out);
    kpack_ok(&as_strs(&split_args(&out)));
    assert!(temporaries(dir.path()).is_empty());
    assert_eq!(snapshot(&out), reference);
}

/// Recombine from the shard fixtures split as `format` (`dir` or `tar.zst`), killed at its
/// fault points and at timed moments, with `$TMPDIR` an empty directory: nothing at the final
/// path but the complete output, the next run sweeps every temporary, and nothing is ever
/// written to `$TMPDIR` (tarball shards are unpacked into the output's stage, not extracted
/// to a temporary directory).
/// The shard fixtures split into `dir/shards` as `format` (`dir` or `tar.zst`), and a
/// packaging configuration `dir/packaging.json`; returns the arguments of recombining them
/// into `dir/out`.
fn split_shards(dir: &Path, format: &str) -> Vec<String> {
    let shards = dir.join("shards");
    for shard in ["shard-a", "shard-b", "shard-c"] {
        kpack_ok(&[
            "split",
            "--batch",
            s(&fixture("shards").join(shard)),
            "-o",
            s(&shards.join(shard)),
            "--split-databases",
            "rocblas",
            "--output-format",
            format,
        ]);
    }
    let config = dir.join("packaging.json");
    std::fs::write(
        &config,
        r#"{"primary_shard": "shard-a", "architecture_groups": {
            "gfx9": {"architectures": ["gfx900", "gfx906", "gfx908", "gfx90a"]},
            "gfx10": {"architectures": ["gfx1030"]}}}"#,
    )
    .unwrap();
    [
        "recombine",
        "--shards",
        s(&shards),
        "--config",
        s(&config),
        "-o",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([dir.join("out").display().to_string()])
    .collect()
}

fn recombine_killed(format: &str) {
    let dir = tempfile::tempdir().unwrap();
    let args = split_shards(dir.path(), format);
    let args = as_strs(&args);
    let out = dir.path().join("out");
    let tmpdir = dir.path().join("tmpdir");
    std::fs::create_dir(&tmpdir).unwrap();
    let run = |args: &[&str]| {
        let res = kpack_cmd(args).env("TMPDIR", &tmpdir).output().unwrap();
        assert!(
            res.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&res.stderr)
        );
    };
    let nothing_in_tmpdir = |when: &str| {
        let left: Vec<_> = std::fs::read_dir(&tmpdir).unwrap().collect();
        assert!(left.is_empty(), "{format}, {when}: {left:?} in $TMPDIR");
    };
    run(&args);
    nothing_in_tmpdir("undisturbed");
    let reference = snapshot(&out);
    std::fs::remove_dir_all(&out).unwrap();
    for point in ["stage-created", "before-publish"] {
        let status = kpack_cmd(&args)
            .env("TMPDIR", &tmpdir)
            .env(FAULT_ENV, point)
            .status()
            .unwrap();
        assert_eq!(status.signal(), Some(9), "{format}: not killed at {point}");
        assert!(!out.exists(), "{format}: killed at {point}");
        assert!(
            !temporaries(dir.path()).is_empty(),
            "{format}: killed at {point}"
        );
        nothing_in_tmpdir(point);
    }
    for delay in delays() {
        let _ = std::fs::remove_dir_all(&out);
        let mut child = kpack_cmd(&args).env("TMPDIR", &tmpdir).spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        child.wait().unwrap();
        if out.exists() {
            assert_eq!(
                snapshot(&out),
                reference,
                "{format}: killed after {delay:?}"
            );
        }
        nothing_in_tmpdir(&format!("killed after {delay:?}"));
    }
    let _ = std::fs::remove_dir_all(&out);
    run(&args);
    assert!(temporaries(dir.path()).is_empty(), "{format}");
    assert_eq!(snapshot(&out), reference, "{format}");
    kpack_ok(&["verify", s(&out), "--original", s(&fixture("shards"))]);
}

#[test]
fn recombine_killed_at_any_point_leaves_no_output_and_the_next_run_sweeps() {
    recombine_killed("dir");
}

#[test]
fn recombine_of_tar_shards_killed_at_any_point_leaves_no_output_nothing_in_tmpdir_and_the_next_run_sweeps()
 {
    recombine_killed("tar.zst");
}

// ---- split-wheel ---------------------------------------------------------------------------

fn split_wheel_args(out: &Path) -> Vec<String> {
    vec![
        "split-wheel".into(),
        fixture("wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl")
            .display()
            .to_string(),
        "-o".into(),
        out.display().to_string(),
        "--split-databases".into(),
        "rocblas".into(),
        "aotriton".into(),
    ]
}

/// A file that was in the output directory before the split; it must stay as it was.
const BYSTANDER: &str = "README.txt";

/// The wheels at their final paths in `out` (nothing when `out` is missing).
fn wheels(out: &Path) -> Vec<(String, String, Vec<u8>)> {
    if !out.exists() {
        return Vec::new();
    }
    let mut now = finals(out);
    now.retain(|e| e.0 != BYSTANDER);
    now
}

/// The wheels an undisturbed run writes.
fn split_wheel_reference() -> Vec<(String, String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    kpack_ok(&as_strs(&split_wheel_args(&out)));
    wheels(&out)
}

/// The fault points `split-wheel` reaches: its wheels' stage, and each fat binary's
/// transform (staged inside the wheels' staging directory).
const SPLIT_WHEEL_POINTS: [&str; 5] = [
    "stage-created",
    "atomic-written",
    "transform-host-written",
    "before-publish",
    "publish-partial",
];

#[test]
fn split_wheel_killed_at_every_fault_point_leaves_no_partial_wheel_and_the_next_run_sweeps() {
    let reference = split_wheel_reference();
    assert_eq!(reference.len(), 10, "the host wheel and nine device wheels");
    let mut cut_between_renames = 0;
    // A new output directory (published in one rename), and one that already holds a file
    // (each wheel renamed into it: the publish that a kill can cut between renames).
    for existing in [false, true] {
        for point in SPLIT_WHEEL_POINTS {
            // Walk the point's occurrences (one per fat binary's transform, then the wheels')
            // until a run gets past the last one.
            for nth in 1.. {
                let when = format!("existing {existing}, killed at {point}:{nth}");
                let dir = tempfile::tempdir().unwrap();
                let out = dir.path().join("out");
                if existing {
                    std::fs::create_dir(&out).unwrap();
                    std::fs::write(out.join(BYSTANDER), "kept").unwrap();
                }
                let args = split_wheel_args(&out);
                let status = kpack_cmd(&as_strs(&args))
                    .env(FAULT_ENV, format!("{point}:{nth}"))
                    .status()
                    .unwrap();
                if status.signal() != Some(9) {
                    assert!(status.success(), "{when}: {status}");
                    assert!(nth > 1, "{point} is never reached");
                    assert_eq!(wheels(&out), reference, "{when}: the undisturbed run");
                    break;
                }
                let left = wheels(&out);
                for e in &left {
                    assert!(
                        reference.contains(e),
                        "{when}: {} is not a complete wheel",
                        e.0
                    );
                }
                if !existing {
                    assert!(!out.exists(), "{when}: the output directory appeared");
                }
                assert!(
                    !temporaries(dir.path()).is_empty() || !temporaries(&out).is_empty(),
                    "{when}: the staging directory is left for the sweep"
                );
                // The next run sweeps. A run killed between its renames was committed (its
                // journal written): the sweep completes it, and the run then refuses to
                // overwrite the wheels. Otherwise the sweep discards it and the run splits.
                let res = kpack_cmd(&as_strs(&args)).output().unwrap();
                let stderr = String::from_utf8_lossy(&res.stderr);
                if left.is_empty() {
                    assert!(res.status.success(), "{when}: {stderr}");
                } else {
                    cut_between_renames += 1;
                    assert_eq!(res.status.code(), Some(1), "{when}: {stderr}");
                    assert!(stderr.contains("already exists"), "{when}: {stderr}");
                }
                assert_eq!(wheels(&out), reference, "{when}: after the next run");
                assert!(temporaries(dir.path()).is_empty(), "{when}");
                assert!(temporaries(&out).is_empty(), "{when}");
                if existing {
                    assert_eq!(std::fs::read(out.join(BYSTANDER)).unwrap(), b"kept");
                }
            }
        }
    }
    assert!(
        cut_between_renames > 0,
        "no kill fell between the renames of the wheels' publish"
    );
}

#[test]
fn split_wheel_killed_at_any_moment_leaves_no_partial_wheel_and_the_next_run_sweeps() {
    let reference = split_wheel_reference();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let args = split_wheel_args(&out);
    let mut mid_run = 0;
    for delay in delays() {
        let _ = std::fs::remove_dir_all(&out);
        killed_after(delay, &as_strs(&args));
        let left = wheels(&out);
        assert!(
            left.is_empty() || left == reference,
            "killed after {delay:?}: {} of {} wheels",
            left.len(),
            reference.len()
        );
        mid_run += usize::from(!temporaries(dir.path()).is_empty());
    }
    assert!(
        mid_run > 0,
        "no timed kill hit the run while it was writing"
    );
    let _ = std::fs::remove_dir_all(&out);
    kpack_ok(&as_strs(&args));
    assert!(temporaries(dir.path()).is_empty());
    assert!(temporaries(&out).is_empty());
    assert_eq!(wheels(&out), reference);
}

// ---- a full disk -----------------------------------------------------------------------------

/// Runs `kpack args` with writes limited to `blocks` of 512 bytes (`ulimit -f`), SIGXFSZ
/// ignored so that a write past the limit fails with EFBIG as on a full disk.
fn with_file_size_limit(blocks: u32, args: &[&str]) -> std::process::Output {
    let script = format!("trap '' XFSZ; ulimit -f {blocks}; exec \"$0\" \"$@\"");
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_kpack"))
        .args(args)
        .env("CI", "1")
        .env_remove(FAULT_ENV)
        .output()
        .unwrap()
}

#[test]
fn a_full_disk_is_a_clear_error_and_leaves_nothing_partial() {
    let t = Transform::new();
    let args = t.args();
    let out = with_file_size_limit(16, &as_strs(&args));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "transform: {stderr}");
    assert!(stderr.contains("File too large"), "transform: {stderr}");
    assert!(stderr.contains("libtwo.so"), "names the file: {stderr}");
    let left: Vec<String> = snapshot(t.dir.path()).into_iter().map(|e| e.0).collect();
    assert_eq!(left, ["lib", "lib/.kpack"], "transform left {left:?}");

    let dir = tempfile::tempdir().unwrap();
    let split_out = dir.path().join("out");
    let out = with_file_size_limit(16, &as_strs(&split_args(&split_out)));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "split: {stderr}");
    assert!(stderr.contains("File too large"), "split: {stderr}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "split left something"
    );

    // Recombine of tar shards: their members are unpacked into the output's stage.
    let dir = tempfile::tempdir().unwrap();
    let args = split_shards(dir.path(), "tar.zst");
    let out = with_file_size_limit(16, &as_strs(&args));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "recombine: {stderr}");
    assert!(stderr.contains("File too large"), "recombine: {stderr}");
    assert!(
        stderr.contains(".tar.zst/"),
        "names the tarball member: {stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "recombine left {left:?}");

    let dir = tempfile::tempdir().unwrap();
    let out = with_file_size_limit(16, &as_strs(&split_wheel_args(&dir.path().join("out"))));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "split-wheel: {stderr}");
    assert!(stderr.contains("File too large"), "split-wheel: {stderr}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "split-wheel left something"
    );
}

#[test]
fn restore_killed_at_any_point_leaves_no_output_and_the_next_run_sweeps() {
    let dir = tempfile::tempdir().unwrap();
    let lib = common::transformed_libtwo(dir.path());
    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join("libtwo.so");
    let args = ["restore", s(&lib), "-o", s(&out)];
    kpack_ok(&args);
    let reference = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    for point in ["restore-bundles-written", "atomic-written"] {
        killed_at(point, &args);
        assert!(
            !out.exists(),
            "killed at {point}: a restored binary was published"
        );
        assert!(!temporaries(&out_dir).is_empty(), "killed at {point}");
        kpack_ok(&args);
        assert_eq!(
            std::fs::read(&out).unwrap(),
            reference,
            "after a kill at {point}"
        );
        assert!(
            temporaries(&out_dir).is_empty(),
            "killed at {point}: not swept"
        );
        std::fs::remove_file(&out).unwrap();
    }
}
