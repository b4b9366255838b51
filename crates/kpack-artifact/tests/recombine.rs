//! `kpack recombine` and `kpack verify` on the hipcc shards: groups by configuration, every
//! validation flag both ways, strict identity. (The overlaid install tree loading through the
//! runtime for every target is kpack-capi's `end_to_end` test.)

use std::path::Path;

use kpack_archive::kpm::KpmManifest;
use kpack_artifact::ArtifactError;
use kpack_artifact::recombine::{PackagingConfig, RecombineOptions, recombine};
use kpack_artifact::verify::{VerifyOptions, verify};
use kpack_testkit::{copy_tree, fixture, snapshot, split_shards};

fn config(validation: &str, groups: &str) -> PackagingConfig {
    PackagingConfig::parse(&format!(
        r#"{{"primary_shard": "shard-a", "architecture_groups": {groups}, "validation": {validation}}}"#
    ))
    .unwrap()
}

const GROUPS: &str = r#"{"gfx9": {"display_name": "GFX9", "architectures": ["gfx900", "gfx906", "gfx908", "gfx90a"]},
                        "gfx103X": {"architectures": ["gfx1030"]}}"#;
const STRICT: &str = r#"{"error_on_duplicate_device_code": true, "verify_generic_artifacts_match": true, "error_on_missing_architecture": true}"#;

fn run(
    shards: &Path,
    cfg: &PackagingConfig,
    out: &Path,
) -> Result<kpack_artifact::recombine::RecombineSummary, ArtifactError> {
    recombine(shards, cfg, out, &RecombineOptions::default())
}

#[test]
fn recombined_groups_verify_with_strict_identity_and_index_every_architecture() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    let out = tmp.path().join("out");
    let summary = run(&shards, &config(STRICT, GROUPS), &out).unwrap();
    let lib = &summary
        .components
        .iter()
        .find(|c| c.component == "demo_lib")
        .unwrap();
    assert_eq!(lib.groups.len(), 2);
    assert!(
        summary
            .components
            .iter()
            .any(|c| c.component == "demo_host" && c.generic_only && c.groups.is_empty())
    );
    let mut names: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "demo_host_generic",
            "demo_lib_generic",
            "demo_lib_gfx103X",
            "demo_lib_gfx9"
        ]
    );
    // The group holds archives and database files only.
    for (rel, _, bytes) in snapshot(&out.join("demo_lib_gfx9")) {
        if bytes.starts_with(b"\x7fELF") {
            assert!(
                rel.ends_with(".hsaco"),
                "host code {rel} in a group artifact"
            );
        }
    }
    let kpm =
        std::fs::read(out.join("demo_lib_gfx9/demo/stage/.kpack/lib_libdemo.so.1.kpm")).unwrap();
    let kpm = KpmManifest::decode(&kpm).unwrap();
    assert_eq!(kpm.component_name, "demo_lib");
    assert_eq!(kpm.prefix, "demo/stage");
    let targets: Vec<&str> = kpm.kpack_files.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        targets,
        [
            "gfx900",
            "gfx906",
            "gfx908",
            "gfx90a:xnack+",
            "gfx90a:xnack-"
        ]
    );
    assert!(kpm.kpack_files.iter().all(|(_, e)| e.kernel_count == 2));
    let report = verify_against_shards(&out);
    assert_eq!(report.failures, Vec::<String>::new());
    // (exe 1 + lib 2 wrappers) × 6 targets; per shard 6 files + 2 per target built
    assert_eq!(report.code_objects, 3 * 6);
    assert_eq!(report.original_files, 3 * 6 + 2 * 6);
}

fn validation_error(e: ArtifactError) -> String {
    match e {
        ArtifactError::Validation { what, problems } => format!("{what}: {problems:?}"),
        other => panic!("expected a validation error, got {other}"),
    }
}

#[test]
fn duplicate_device_code_is_an_error_or_the_first_shard_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    // A fourth shard building gfx1030 again.
    let dup = shards.join("shard-d");
    copy_tree(
        &shards.join("shard-c/demo_lib_gfx1030"),
        &dup.join("demo_lib_gfx1030"),
    );
    let err = run(&shards, &config(STRICT, GROUPS), &tmp.path().join("o1")).unwrap_err();
    let msg = validation_error(err);
    assert!(
        msg.contains("demo_lib_gfx1030 is provided by shards shard-c, shard-d"),
        "{msg}"
    );
    assert!(!tmp.path().join("o1").exists());
    let lenient = r#"{"error_on_duplicate_device_code": false}"#;
    let s = run(&shards, &config(lenient, GROUPS), &tmp.path().join("o2")).unwrap();
    let lib = s
        .components
        .iter()
        .find(|c| c.component == "demo_lib")
        .unwrap();
    assert_eq!(lib.ignored_duplicates, ["demo_lib_gfx1030 of shard-d"]);
    assert_eq!(lib.groups[1].architectures["gfx1030"], "shard-c");
}

#[test]
fn a_missing_architecture_is_an_error_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    let groups = r#"{"gfx94X": {"architectures": ["gfx942"]}, "gfx103X": {"architectures": ["gfx1030", "gfx1031"]}}"#;
    let err = run(&shards, &config(STRICT, groups), &tmp.path().join("o1")).unwrap_err();
    let msg = validation_error(err);
    assert!(
        msg.contains("demo_lib: no shard provides gfx942 (group gfx94X)"),
        "{msg}"
    );
    assert!(msg.contains("gfx1031"), "{msg}");
    assert!(
        !msg.contains("demo_host"),
        "a generic-only component misses nothing: {msg}"
    );
    let s = run(&shards, &config("{}", groups), &tmp.path().join("o2")).unwrap();
    let lib = s
        .components
        .iter()
        .find(|c| c.component == "demo_lib")
        .unwrap();
    assert_eq!(lib.groups.len(), 1, "no empty group artifact");
    assert_eq!(lib.groups[0].missing, ["gfx1031"]);
    assert!(!tmp.path().join("o2/demo_lib_gfx94X").exists());
}

#[test]
fn differing_generic_artifacts_are_an_error_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    let readme = shards.join("shard-b/demo_lib_generic/demo/stage/share/demo/readme.txt");
    std::fs::write(&readme, "changed\n").unwrap();
    std::fs::remove_file(shards.join("shard-c/demo_lib_generic/demo/stage/lib/libdemo.so"))
        .unwrap();
    let err = run(&shards, &config(STRICT, GROUPS), &tmp.path().join("o1")).unwrap_err();
    let msg = validation_error(err);
    assert!(msg.contains("demo_lib_generic of shard-b vs shard-a: demo/stage/share/demo/readme.txt: contents differ"), "{msg}");
    assert!(
        msg.contains(
            "demo_lib_generic of shard-c vs shard-a: demo/stage/lib/libdemo.so: only in the first"
        ),
        "{msg}"
    );
    let lenient = r#"{"verify_generic_artifacts_match": false}"#;
    run(&shards, &config(lenient, GROUPS), &tmp.path().join("o2")).unwrap();
}

#[test]
fn verify_lists_every_kind_of_loss_precisely() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    let out = tmp.path().join("out");
    run(&shards, &config(STRICT, GROUPS), &out).unwrap();
    let g9 = out.join("demo_lib_gfx9/demo/stage");
    std::fs::remove_file(g9.join(".kpack/bin_demo_gfx906.kpack")).unwrap();
    std::fs::write(
        g9.join("lib/rocblas/library/TensileLibrary_Type_S_gfx900.dat"),
        "x",
    )
    .unwrap();
    std::fs::copy(fixture("bin/libhostonly.so"), g9.join("libhost.so")).unwrap();
    std::fs::copy(
        fixture("shards/shard-c/demo_lib_gfx103X/demo/stage/lib/rocblas/library/Kernels.so-000-gfx1030.hsaco"),
        g9.join("lib/rocblas/library/Kernels.so-000-gfx1030.hsaco"),
    ).unwrap();
    std::fs::copy(
        fixture("bin/libone.so"),
        out.join("demo_lib_generic/demo/stage/lib/libfat.so"),
    )
    .unwrap();
    std::fs::remove_file(out.join("demo_host_generic/artifact_manifest.txt")).unwrap();
    let report = verify_against_shards(&out);
    let f = report.failures.join("\n");
    for want in [
        "demo_host_generic/artifact_manifest.txt",
        "demo/stage/bin/demo: code object demo/stage/bin/demo#0 for gfx906 is not recovered byte for byte",
        "bin_demo.kpm: lists bin_demo_gfx906.kpack for gfx906",
        "demo/stage/lib/rocblas/library/TensileLibrary_Type_S_gfx900.dat: differs from the original",
        "libhost.so: not an archive, index or database file",
        "Kernels.so-000-gfx1030.hsaco: a file of gfx1030 in demo_lib_gfx9",
        "libfat.so: a fat binary left in a generic artifact",
    ] {
        assert!(f.contains(want), "missing {want:?} in:\n{f}");
    }
}

/// `kpack verify` of `out` against the original shard fixtures.
fn verify_against_shards(out: &Path) -> kpack_artifact::verify::VerifyReport {
    verify(
        out,
        &VerifyOptions {
            original: Some(fixture("shards")),
            threads: 0,
        },
    )
    .unwrap()
}
