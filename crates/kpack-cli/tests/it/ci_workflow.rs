//! The example GitHub Actions workflow (`examples/github-actions/multi-arch-split.yml`):
//! valid against GitHub's workflow schema, and its jobs run locally on the hipcc shard
//! fixtures (`scripts/ci-dry-run.py`: every `run:` step as written, the matrix fanned out,
//! artifact upload/download as local copies), ending in verified per-group packages.

use crate::common;

use std::path::{Path, PathBuf};

use kpack_testkit::{SHARDS, fixture, run_tool};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn workflow() -> PathBuf {
    repo().join("examples/github-actions/multi-arch-split.yml")
}

/// The Python with PyYAML that `scripts/setup.sh` installs (`$KPACK_CI_VENV`).
fn python() -> String {
    let venv = std::env::var("KPACK_CI_VENV").unwrap_or_else(|_| "/opt/kpack-ci-venv".into());
    format!("{venv}/bin/python")
}

#[test]
fn example_workflow_is_valid_against_the_github_workflow_schema() {
    let out = run_tool(
        "check-jsonschema",
        &[
            "--builtin-schema",
            "vendor.github-workflows",
            workflow().to_str().unwrap(),
        ],
    );
    assert!(String::from_utf8_lossy(&out).contains("ok"));
}

#[test]
fn example_workflow_splits_recombines_verifies_and_publishes_the_shard_fixtures() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    // What the build jobs would have uploaded: each shard's artifacts as .tar.zst.
    for shard in SHARDS {
        let dir = store.join(format!("artifacts-{shard}"));
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(fixture(&format!("shards/{shard}"))).unwrap() {
            let artifact = e.unwrap().path();
            let name = artifact.file_name().unwrap().to_str().unwrap().to_owned();
            let out = dir.join(format!("{name}.tar.zst"));
            run_tool(
                "tar",
                &[
                    "--zstd",
                    "-cf",
                    out.to_str().unwrap(),
                    "-C",
                    artifact.to_str().unwrap(),
                    ".",
                ],
            );
        }
    }
    let config = tmp.path().join("packaging.json");
    std::fs::write(
        &config,
        r#"{"primary_shard": "shard-a",
            "architecture_groups": {"gfx9": {"architectures": ["gfx900", "gfx906", "gfx908", "gfx90a"]},
                                    "gfx103X": {"architectures": ["gfx1030"]}},
            "validation": {"error_on_duplicate_device_code": true, "verify_generic_artifacts_match": true,
                           "error_on_missing_architecture": true}}"#,
    )
    .unwrap();
    let kpack_bin = Path::new(env!("CARGO_BIN_EXE_kpack")).parent().unwrap();
    let work = tmp.path().join("work");
    let out = run_tool(
        &python(),
        &[
            repo().join("scripts/ci-dry-run.py").to_str().unwrap(),
            workflow().to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--work",
            work.to_str().unwrap(),
            "--kpack-bin",
            kpack_bin.to_str().unwrap(),
            "--matrix",
            &format!("split.shard={}", SHARDS.join(",")),
            "--env",
            &format!("KPACK_CONFIG={}", config.display()),
            "--env",
            "KPACK_DATABASES=rocblas",
            "--input",
            "build-run-id=1",
        ],
    );
    let log = String::from_utf8_lossy(&out);
    assert!(
        log.contains("3 jobs passed: split, recombine, publish"),
        "{log}"
    );
    // One publish job per group, each uploading the group's package with the generic ones.
    for group in ["gfx103X", "gfx9"] {
        let dir = store.join(format!("kpack-package-{group}/{group}"));
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}\n{log}", dir.display()))
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "demo_host_generic.tar.zst".to_owned(),
                "demo_lib_generic.tar.zst".to_owned(),
                format!("demo_lib_{group}.tar.zst"),
            ],
            "{group}"
        );
    }
    // The packages the reduce job uploaded verify against the fixture directories too.
    let report = common::json(&[
        "verify",
        store.join("kpack-packages").to_str().unwrap(),
        "--original",
        fixture("shards").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(report["failures"], serde_json::json!([]));
    assert!(report["code_objects"].as_u64().unwrap() > 0);
}
