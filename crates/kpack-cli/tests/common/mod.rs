//! Running the `kpack` binary from the command-line tests.
#![allow(dead_code)] // each test binary uses a subset

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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

/// What `llvm-offload-binary` extracts from `input` for `arch`: one image, or with
/// `member`, that member's image in the static archive it writes (`--archive`).
pub fn llvm_extracts(input: &Path, arch: &str, member: Option<&str>) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("extracted");
    let image = format!("--image=file={},arch={arch}", s(&out));
    match member {
        None => {
            kpack_testkit::run_llvm22("llvm-offload-binary", &[s(input), &image]);
            std::fs::read(&out).unwrap()
        }
        Some(member) => {
            kpack_testkit::run_llvm22("llvm-offload-binary", &[s(input), &image, "--archive"]);
            kpack_testkit::run_llvm22("llvm-ar", &["p", s(&out), member])
        }
    }
}

/// `llvm-objdump --offloading`'s images: (member or "", kind, arch, triple, producer), with
/// its kind names mapped to kpack's (`elf` → `object`, `llvm ir` → `bitcode`).
pub fn objdump_images(input: &Path) -> Vec<[String; 5]> {
    let text = String::from_utf8(kpack_testkit::run_llvm22(
        "llvm-objdump",
        &["--offloading", s(input)],
    ))
    .unwrap();
    let mut images = Vec::new();
    let mut member = String::new();
    let mut fields: BTreeMap<&str, String> = BTreeMap::new();
    let mut flush = |member: &str, fields: &mut BTreeMap<&str, String>| {
        if !fields.is_empty() {
            let kind = match fields["kind"].as_str() {
                "elf" => "object".to_owned(),
                "llvm ir" => "bitcode".to_owned(),
                other => other.to_owned(),
            };
            images.push([
                member.to_owned(),
                kind,
                fields["arch"].clone(),
                fields["triple"].clone(),
                fields["producer"].clone(),
            ]);
            fields.clear();
        }
    };
    for line in text.lines() {
        if let Some(head) = line.strip_suffix(":\tfile format elf64-x86-64") {
            flush(&member, &mut fields);
            member = head
                .split_once('(')
                .map(|(_, m)| m.trim_end_matches(')').to_owned())
                .unwrap_or_default();
        } else if line.starts_with("OFFLOADING IMAGE") {
            flush(&member, &mut fields);
        } else if let Some((key, value)) = line.split_once(char::is_whitespace) {
            if ["kind", "arch", "triple", "producer"].contains(&key) {
                fields.insert(key, value.trim().to_owned());
            }
        }
    }
    flush(&member, &mut fields);
    images
}

/// The packaging config the map/reduce tests recombine `fixtures/shards` with.
pub const SHARDS_CONFIG: &str = include_str!("../../../../fixtures/shards/config.json");

/// Splits every shard of `fixtures/shards` (batch mode, rocBLAS databases) into
/// `dir/shards/<shard>`; returns the split summaries.
pub fn split_shards(dir: &Path) -> Vec<Value> {
    ["shard-a", "shard-b", "shard-c"]
        .iter()
        .map(|shard| {
            json(&[
                "split",
                "--batch",
                s(&kpack_testkit::fixture("shards").join(shard)),
                "-o",
                s(&dir.join("shards").join(shard)),
                "--split-databases",
                "rocblas",
                "--json",
            ])
        })
        .collect()
}

/// Splits and recombines the shards with [`SHARDS_CONFIG`] (and the options `extra`) into `dir/out`.
pub fn recombined_shards(dir: &Path, extra: &[&str]) -> PathBuf {
    split_shards(dir);
    let config = dir.join("packaging.json");
    std::fs::write(&config, SHARDS_CONFIG).unwrap();
    let out = dir.join("out");
    let shards = dir.join("shards");
    let mut args = vec![
        "recombine",
        "--shards",
        s(&shards),
        "--config",
        s(&config),
        "-o",
        s(&out),
    ];
    args.extend(extra);
    kpack_ok(&args);
    out
}
