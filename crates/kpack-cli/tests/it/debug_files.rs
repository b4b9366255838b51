//! Separated debug files (`objcopy --only-keep-debug`, `fixtures/debug/build_debug.sh`), as
//! distributions and TheRock's `_dbg` components ship them beside their libraries: the
//! library's section headers with `.hip_fatbin` and `.hipFatBinSegment` `SHT_NOBITS`. They
//! hold no device code: `inspect` says so, `transform` has nothing to do, `prune`, `split`
//! and `verify --original` treat them as the host files they are.

use std::path::{Path, PathBuf};

use kpack_testkit::{DEBUG_FIXTURES, copy_tree, fixture, run_tool};
use serde_json::Value;

use crate::common;

use common::{json, kpack, kpack_ok, s};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What `inspect` (text and `--json`) says of the debug file `path`: a debug-only ELF with
/// `.hip_fatbin` NOBITS, no wrapper, bundle or device code.
fn assert_inspected_as_debug_only(path: &Path) {
    let report = json(&["inspect", "--json", s(path)]);
    let r = &report[0];
    assert_eq!(r["kind"], "elf", "{r}");
    assert_eq!(r["details"]["state"], "debug-only", "{r}");
    assert_eq!(r["details"]["fatbin"]["nobits"], true, "{r}");
    assert_eq!(r["details"]["wrappers"], serde_json::json!([]), "{r}");
    assert_eq!(r["details"]["bundles"], serde_json::json!([]), "{r}");
    assert_eq!(r["totals"], serde_json::json!([]), "{r}");

    let text = stdout(&kpack_ok(&["inspect", s(path)]));
    assert!(text.contains(", debug-only\n"), "{text}");
    assert!(
        text.contains("a separated debug file (objcopy --only-keep-debug): no device code"),
        "{text}"
    );
    assert!(!text.contains("totals"), "{text}");
}

/// `transform` of the debug file `input` succeeds, says there is nothing to do and writes
/// nothing (as for an already kpacked input); `--check` calls it debug-only.
fn assert_transform_has_nothing_to_do(input: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let (out, kpack_dir) = (dir.path().join("out.so"), dir.path().join(".kpack"));
    let args = [
        "transform",
        s(input),
        "-o",
        s(&out),
        "--kpack-dir",
        s(&kpack_dir),
    ];
    let text = stdout(&kpack_ok(&args));
    assert_eq!(
        text,
        format!(
            "{}: a separated debug file (objcopy --only-keep-debug), no device code: nothing to do\n",
            input.display()
        )
    );
    let mut with_json = args.to_vec();
    with_json.push("--json");
    assert_eq!(
        json(&with_json),
        serde_json::json!({"status": "debug-only", "input": s(input)})
    );
    assert!(!out.exists() && !kpack_dir.exists(), "nothing is written");
    assert_eq!(
        json(&["transform", "--check", s(input), "--json"]),
        serde_json::json!([{"file": s(input), "state": "debug-only"}])
    );
}

/// `prune` of the debug file `input` alone (naming targets it cannot hold) copies it as it
/// is and reports it copied.
fn assert_prune_copies_unchanged(input: &Path) {
    let dir = tempfile::tempdir().unwrap();
    for selection in [["--keep", "gfx90a"], ["--drop", "gfx1030"]] {
        let out = dir.path().join(format!("pruned{}", selection[0]));
        let report = json(&[
            "prune",
            s(input),
            "-o",
            s(&out),
            selection[0],
            selection[1],
            "--json",
        ]);
        assert_eq!(report["files"][0]["action"], "copied", "{report}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(input).unwrap(),
            "{}",
            input.display()
        );
    }
}

#[test]
fn inspect_describes_debug_files_as_debug_only_without_device_code() {
    for rel in DEBUG_FIXTURES {
        assert_inspected_as_debug_only(&fixture(rel));
    }
}

#[test]
fn transform_of_a_debug_file_says_nothing_to_do_exits_0_and_writes_nothing() {
    for rel in DEBUG_FIXTURES {
        assert_transform_has_nothing_to_do(&fixture(rel));
    }
}

#[test]
fn prune_copies_a_debug_file_unchanged() {
    for rel in DEBUG_FIXTURES {
        assert_prune_copies_unchanged(&fixture(rel));
    }
}

#[test]
fn a_debug_file_beside_a_fat_library_in_a_tree_is_copied_while_the_library_is_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("tree/lib");
    std::fs::create_dir_all(lib.join(".debug")).unwrap();
    std::fs::copy(fixture("bin/libtwo.so"), lib.join("libtwo.so")).unwrap();
    let debug = fixture("debug/libtwo.so.debug");
    std::fs::copy(&debug, lib.join(".debug/libtwo.so.debug")).unwrap();
    let out = dir.path().join("out");
    let report = json(&[
        "prune",
        s(&dir.path().join("tree")),
        "-o",
        s(&out),
        "--keep",
        "gfx90a",
        "--json",
    ]);
    let actions: Vec<(&str, &str)> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let input = f["input"].as_str().unwrap();
            let name = input.rsplit('/').next().unwrap();
            (name, f["action"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        actions,
        [("libtwo.so.debug", "copied"), ("libtwo.so", "pruned")]
    );
    assert_eq!(
        std::fs::read(out.join("lib/.debug/libtwo.so.debug")).unwrap(),
        std::fs::read(&debug).unwrap()
    );
}

/// The artifact `demo_lib_gfx90X` of shard-a.
const DEMO_LIB: &str = "demo_lib_gfx90X/demo/stage";

/// shard-a copied into `dir/shard-a` with the debug files of its fat binaries laid out as
/// distributions ship them: `lib/.debug/libdemo.so.1.debug` and `bin/demo.dbg`. Returns the
/// shard and the debug files (path in the artifact, fixture).
fn shard_with_debug_files(dir: &Path) -> (PathBuf, [(&'static str, PathBuf); 2]) {
    let shard = dir.join("shard-a");
    copy_tree(&fixture("shards/shard-a"), &shard);
    let placed = [
        (
            "lib/.debug/libdemo.so.1.debug",
            fixture("debug/libdemo.so.1.debug"),
        ),
        ("bin/demo.dbg", fixture("debug/demo.debug")),
    ];
    for (rel, from) in &placed {
        let to = shard.join(DEMO_LIB).join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to).unwrap();
    }
    (shard, placed)
}

#[test]
fn split_puts_debug_files_in_the_generic_artifact_unchanged_and_verify_original_passes() {
    let dir = tempfile::tempdir().unwrap();
    let (shard, placed) = shard_with_debug_files(dir.path());
    let out = dir.path().join("split");
    let summary = json(&[
        "split",
        "--batch",
        s(&shard),
        "-o",
        s(&out),
        "--split-databases",
        "rocblas",
        "--json",
    ]);
    let demo_lib = summary
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["component"] == "demo_lib")
        .unwrap();
    // The two fat binaries are split; their debug files are not counted as such.
    assert_eq!(demo_lib["fat_binaries"], 2, "{demo_lib}");

    let generic = out.join("demo_lib_generic/demo/stage");
    for (rel, from) in &placed {
        assert_eq!(
            std::fs::read(generic.join(rel)).unwrap(),
            std::fs::read(from).unwrap(),
            "{rel} is in the generic artifact byte for byte"
        );
        for arch in ["demo_lib_gfx900", "demo_lib_gfx906"] {
            let in_arch = out.join(arch).join("demo/stage").join(rel);
            assert!(!in_arch.exists(), "{rel} is not in {arch}");
        }
    }

    let res = kpack(&["verify", s(&out), "--original", s(&shard), "--json"]);
    assert!(
        res.status.success(),
        "verify: {}{}",
        stdout(&res),
        String::from_utf8_lossy(&res.stderr)
    );
    let report: Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(report["failures"], serde_json::json!([]), "{report}");
    // Every original file below the manifests' prefixes, the debug files included, was
    // compared with its output.
    let originals = kpack_fs::walk(&shard)
        .map(|e| e.unwrap())
        .filter(|e| e.file_type.is_file() && e.rel.file_name().unwrap() != "artifact_manifest.txt")
        .count();
    assert_eq!(report["original_files"], originals, "{report}");

    // And a debug file that is not the original's fails it, by name.
    let changed = generic.join(placed[1].0);
    let mut bytes = std::fs::read(&changed).unwrap();
    bytes[0x100] ^= 0xff;
    std::fs::write(&changed, bytes).unwrap();
    let res = kpack(&["verify", s(&out), "--original", s(&shard)]);
    assert_eq!(res.status.code(), Some(1));
    let text = stdout(&res);
    assert!(
        text.contains("bin/demo.dbg: differs from the original"),
        "{text}"
    );
}

/// Real libraries' separated debug files, made by `objcopy --only-keep-debug` (the binutils
/// of the machine; its absence fails the test) from bookworm's librocsparse (uncompressed
/// bundles) and Debian ROCm 7.2.4's librocblas (CCOB v3), both stripped as shipped: inspect,
/// transform and prune treat them as the fixtures'.
#[test]
#[ignore = "real-world"]
fn real_librarys_debug_files_are_described_left_alone_by_transform_and_copied_by_prune() {
    let dir = tempfile::tempdir().unwrap();
    for lib in [kpack_testkit::librocsparse(), kpack_testkit::librocblas()] {
        let name = lib.file_name().unwrap().to_str().unwrap();
        let debug = dir.path().join(format!("{name}.debug"));
        run_tool("objcopy", &["--only-keep-debug", s(&lib), s(&debug)]);
        assert_inspected_as_debug_only(&debug);
        assert_transform_has_nothing_to_do(&debug);
        assert_prune_copies_unchanged(&debug);
    }
}
