//! Running the `kpack` binary from the command-line tests.
#![allow(dead_code)] // each test binary uses a subset

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
