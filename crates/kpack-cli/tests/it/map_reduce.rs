//! `kpack split`, `recombine`, `verify` and `which` as a CI job and a user run them, on the
//! hipcc-built shards in `fixtures/shards` (the same sources built for three target sets).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common;

use common::{SHARDS_CONFIG, json, kpack, kpack_ok, recombined_shards, s, split_shards};

fn shards() -> PathBuf {
    kpack_testkit::fixture("shards")
}

#[test]
fn shards_split_recombine_and_verify_with_strict_identity() {
    let dir = tempfile::tempdir().unwrap();
    let splits = split_shards(dir.path());
    // shard-a built gfx900 and gfx906: demo_lib has two fat binaries, and demo_host none.
    let demo_lib = splits[0]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["component"] == "demo_lib")
        .unwrap();
    assert_eq!(demo_lib["fat_binaries"], 2);
    assert_eq!(demo_lib["generic_only"], false);
    let names: Vec<&str> = demo_lib["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["demo_lib_generic", "demo_lib_gfx900", "demo_lib_gfx906"]
    );

    let config = dir.path().join("packaging.json");
    std::fs::write(&config, SHARDS_CONFIG).unwrap();
    let out = dir.path().join("out");
    let summary = json(&[
        "recombine",
        "--shards",
        s(&dir.path().join("shards")),
        "--config",
        s(&config),
        "-o",
        s(&out),
        "--json",
    ]);
    let lib = summary["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["component"] == "demo_lib")
        .unwrap();
    let groups: Vec<&str> = lib["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["artifact"].as_str().unwrap())
        .collect();
    assert_eq!(
        groups,
        ["demo_lib_gfx9", "demo_lib_gfx90X", "demo_lib_gfx103X"]
    );

    let res = kpack(&["verify", s(&out), "--original", s(&shards()), "--json"]);
    assert!(
        res.status.success(),
        "verify: {}{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
}

#[test]
fn recombine_with_group_archives_verifies_and_which_names_the_group_archive() {
    let dir = tempfile::tempdir().unwrap();
    let out = recombined_shards(dir.path(), &["--group-archives", "--compression", "none"]);
    let link = out.join("demo_lib_gfx9/demo/stage/.kpack/lib_libdemo.so.1_gfx906.kpack");
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("lib_libdemo.so.1_gfx9.kpack")
    );
    let listed = json(&[
        "list",
        s(&link.with_file_name("lib_libdemo.so.1_gfx9.kpack")),
        "--json",
    ]);
    assert_eq!(listed["compression_scheme"], "none", "{listed}");
    let report = json(&["verify", s(&out), "--original", s(&shards()), "--json"]);
    assert_eq!(report["failures"], serde_json::json!([]));
    let root = dir.path().join("install");
    for package in ["demo_lib_generic", "demo_lib_gfx9"] {
        kpack_testkit::copy_tree(&out.join(package).join("demo/stage"), &root);
    }
    let text = String::from_utf8(kpack_ok(&["which", "gfx906", s(&root)]).stdout).unwrap();
    assert!(
        text.contains(
            "demo_lib lib_libdemo.so.1: gfx906 in demo_lib_gfx9 (lib_libdemo.so.1_gfx9.kpack), installed"
        ),
        "{text}"
    );
}

#[test]
fn which_names_the_package_to_install_for_a_gpu_from_the_generic_index() {
    let dir = tempfile::tempdir().unwrap();
    let out = recombined_shards(dir.path(), &[]);
    // From the recombined packages: the generic one holds the index.
    let answer = json(&[
        "which",
        "gfx1030",
        s(&out.join("demo_lib_generic")),
        "--json",
    ]);
    assert_eq!(answer["install"], serde_json::json!(["demo_lib_gfx103X"]));
    assert_eq!(answer["unavailable"], serde_json::json!([]));
    let modules = answer["modules"].as_array().unwrap();
    let names: Vec<&str> = modules
        .iter()
        .map(|m| m["module"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bin_demo", "lib_libdemo.so.1"]);
    for m in modules {
        assert_eq!(m["target"], "gfx1030");
        assert_eq!(m["package"], "demo_lib_gfx103X");
        assert_eq!(m["installed"], false);
        assert_eq!(m["available"].as_array().unwrap().len(), 6);
    }
    // An install tree holding the generic package and gfx9.
    let root = dir.path().join("install");
    for package in ["demo_lib_generic", "demo_lib_gfx9"] {
        kpack_testkit::copy_tree(&out.join(package).join("demo/stage"), &root);
    }
    // The runtime's ISA name; the index's gfx90a:xnack- serves an sramecc+ xnack- agent.
    let answer = json(&[
        "which",
        "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
        s(&root),
        "--json",
    ]);
    assert_eq!(answer["gpu"], "gfx90a:sramecc+:xnack-");
    assert_eq!(answer["install"], serde_json::json!(["demo_lib_gfx90X"]));
    assert!(
        answer["modules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["target"] == "gfx90a:xnack-")
    );
    let text = String::from_utf8(kpack_ok(&["which", "gfx906", s(&root)]).stdout).unwrap();
    assert!(
        text.contains(
            "demo_lib lib_libdemo.so.1: gfx906 in demo_lib_gfx9 (lib_libdemo.so.1_gfx906.kpack), installed"
        ),
        "{text}"
    );
    assert!(text.contains("nothing to install"), "{text}");
    // A GPU no shard built for: exit status 1, and what there is.
    let res = kpack(&["which", "gfx1100", s(&root), "--json"]);
    assert_eq!(res.status.code(), Some(1));
    let answer: Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(
        answer["unavailable"],
        serde_json::json!(["demo_lib/bin_demo", "demo_lib/lib_libdemo.so.1"])
    );
    let res = kpack(&["which", "gfx1100", s(&root)]);
    let text = String::from_utf8_lossy(&res.stdout);
    assert!(
        text.contains("no package provides it (built for gfx1030, gfx900, gfx906, gfx908, gfx90a:xnack+, gfx90a:xnack-)"),
        "{text}"
    );
    // Not a GPU name: a usage error. No index: an error naming where it looked.
    assert_eq!(kpack(&["which", "nvidia", s(&root)]).status.code(), Some(2));
    let res = kpack(&["which", "gfx906", s(&out.join("demo_lib_gfx9"))]);
    assert_eq!(res.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&res.stderr).contains("no .kpm index under"));
}

#[test]
fn recombine_refuses_a_config_with_an_unknown_field_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("packaging.json");
    std::fs::write(
        &config,
        r#"{"primary_shard": "shard-a", "architecture_groups": {"gfx9": {"architectures": ["gfx900"], "arch": []}}}"#,
    )
    .unwrap();
    let res = kpack(&[
        "recombine",
        "--shards",
        s(&shards()),
        "--config",
        s(&config),
        "-o",
        s(&dir.path().join("out")),
    ]);
    assert_eq!(res.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(
        stderr.contains("packaging.json: architecture_groups.gfx9.arch: unknown field `arch`"),
        "{stderr}"
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn verify_exits_nonzero_naming_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    split_shards(dir.path());
    let split = dir.path().join("shards/shard-a");
    // Lose one archive of the gfx906 artifact.
    let kpack_dir = split.join("demo_lib_gfx906/demo/stage/.kpack");
    let lost = std::fs::read_dir(&kpack_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "kpack"))
        .expect("an archive");
    std::fs::remove_file(&lost).unwrap();
    let res = kpack(&[
        "verify",
        s(&split),
        "--original",
        s(&shards().join("shard-a")),
    ]);
    assert_eq!(res.status.code(), Some(1));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
    assert!(text.contains("gfx906"), "{text}");
}

#[test]
fn recombine_refuses_a_missing_architecture_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    split_shards(dir.path());
    for (strict, code) in [(true, 1), (false, 0)] {
        let config = dir.path().join(format!("pkg-{strict}.json"));
        std::fs::write(
            &config,
            format!(
                r#"{{"primary_shard": "shard-a",
                    "architecture_groups": {{"mi300": {{"architectures": ["gfx942", "gfx90a"]}}}},
                    "validation": {{"error_on_missing_architecture": {strict}}}}}"#
            ),
        )
        .unwrap();
        let out = dir.path().join(format!("out-{strict}"));
        let res = kpack(&[
            "recombine",
            "--shards",
            s(&dir.path().join("shards")),
            "--config",
            s(&config),
            "-o",
            s(&out),
        ]);
        assert_eq!(res.status.code(), Some(code), "strict = {strict}");
        if strict {
            assert!(String::from_utf8_lossy(&res.stderr).contains("gfx942"));
            assert!(!out.exists(), "a refused recombine writes nothing");
        }
    }
}

#[test]
fn split_rejects_an_unknown_database_handler_as_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let res = kpack(&[
        "split",
        "--batch",
        s(&shards().join("shard-a")),
        "-o",
        s(dir.path()),
        "--split-databases",
        "tensorflow",
    ]);
    assert_eq!(res.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&res.stderr).contains("rocblas"));
}
