//! Running the `kpack` binary from the command-line tests.
#![allow(dead_code)] // each test binary uses a subset

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// Runs `kpack` as CI would (no progress bars).
pub fn kpack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kpack"))
        .args(args)
        .env("CI", "1")
        .output()
        .expect("kpack runs")
}

/// Runs `kpack`, which must succeed.
pub fn kpack_ok(args: &[&str]) -> Output {
    let out = kpack(args);
    assert!(
        out.status.success(),
        "kpack {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `kpack`, which must succeed and print JSON.
pub fn json(args: &[&str]) -> Value {
    serde_json::from_slice(&kpack_ok(args).stdout).expect("valid JSON")
}

/// A path as an argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `(target, count)` of each of `inspect --json`'s totals for one file.
pub fn target_counts(report: &Value) -> Vec<(String, u64)> {
    report["totals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["target"].as_str().unwrap().to_owned(),
                t["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The fat sample wheel.
pub const WHEEL: &str = "wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl";
/// One tree as a tarball of each compression.
pub const TARBALLS: [&str; 3] = [
    "tarballs/forms.tar.zst",
    "tarballs/forms.tar.xz",
    "tarballs/forms.tar.gz",
];

/// `container` unpacked by an independent tool: the wheel by the `zip` crate, a tarball by
/// GNU tar.
pub fn unpacked(container: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if container.extension().is_some_and(|e| e == "whl") {
        let file = std::fs::File::open(container).unwrap();
        zip::ZipArchive::new(file)
            .unwrap()
            .extract(dir.path())
            .unwrap();
    } else {
        kpack_testkit::run_tool("tar", &["-xf", s(container), "-C", s(dir.path())]);
    }
    dir
}

/// `inspect --json`'s (or `report --json`'s `files`) reports keyed by the path inside the
/// container or tree, with that relative path in place of the shown one.
pub fn by_relative_path(reports: &Value, prefix: &str) -> BTreeMap<String, Value> {
    reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let shown = r["path"].as_str().unwrap();
            let rel = shown
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("{shown} is not under {prefix}"))
                .to_owned();
            let mut r = r.clone();
            r["path"] = Value::String(rel.clone());
            (rel, r)
        })
        .collect()
}

/// `fixtures/bin/libtwo.so` transformed by the CLI into `root/lib/libtwo.so`, its archives in
/// `root/.kpack`; returns the binary's path.
#[allow(dead_code)] // not every test binary that includes this module transforms
pub fn transformed_libtwo(root: &Path) -> std::path::PathBuf {
    let lib = root.join("lib/libtwo.so");
    kpack_ok(&[
        "transform",
        s(&kpack_testkit::fixture("bin/libtwo.so")),
        "-o",
        s(&lib),
        "--kpack-dir",
        s(&root.join(".kpack")),
    ]);
    lib
}
