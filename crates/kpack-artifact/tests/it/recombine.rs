//! `kpack recombine` and `kpack verify` on the hipcc shards: groups by configuration, the
//! index in the generic package, packages that install side by side, every validation flag
//! both ways, the configuration's typed errors, strict identity. (The overlaid install tree
//! loading through the runtime for every target is kpack-capi's `end_to_end` test.)

use std::path::Path;

use kpack_archive::Compression;
use kpack_archive::kpm::KpmManifest;
use kpack_artifact::ArtifactError;
use kpack_artifact::recombine::{ConfigError, PackagingConfig, RecombineOptions, recombine};
use kpack_artifact::verify::{VerifyOptions, verify};
use kpack_testkit::{
    assert_no_debug_formatting, copy_tree, fixture, shared_installed_paths, snapshot, split_shards,
};

fn config(validation: &str, groups: &str) -> PackagingConfig {
    PackagingConfig::parse(&format!(
        r#"{{"primary_shard": "shard-a", "architecture_groups": {groups}, "validation": {validation}}}"#
    ))
    .unwrap()
}

/// The groups of issue 14's scenario.
const GROUPS: &str = r#"{"gfx9": {"display_name": "GFX9", "architectures": ["gfx900", "gfx906"]},
                        "gfx90X": {"display_name": "GFX90X", "architectures": ["gfx908", "gfx90a"]},
                        "gfx103X": {"display_name": "GFX103X", "architectures": ["gfx1030"]}}"#;
const STRICT: &str = r#"{"error_on_duplicate_device_code": true, "verify_generic_artifacts_match": true, "error_on_missing_architecture": true}"#;

fn run(
    shards: &Path,
    cfg: &PackagingConfig,
    out: &Path,
) -> Result<kpack_artifact::recombine::RecombineSummary, ArtifactError> {
    recombine(shards, cfg, out, &RecombineOptions::default())
}

#[test]
fn the_generic_package_indexes_every_architecture_and_the_packages_install_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    let out = tmp.path().join("out");
    let summary = run(&shards, &config(STRICT, GROUPS), &out).unwrap();
    let lib = &summary
        .components
        .iter()
        .find(|c| c.component == "demo_lib")
        .unwrap();
    assert_eq!(lib.groups.len(), 3);
    assert_eq!(
        lib.indexes,
        [
            "demo_lib_generic/demo/stage/.kpack/bin_demo.kpm",
            "demo_lib_generic/demo/stage/.kpack/lib_libdemo.so.1.kpm"
        ]
    );
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
            "demo_lib_gfx9",
            "demo_lib_gfx90X"
        ]
    );
    // Groups hold archives and database files only: no host code, no index.
    for group in ["demo_lib_gfx9", "demo_lib_gfx90X", "demo_lib_gfx103X"] {
        for (rel, _, bytes) in snapshot(&out.join(group)) {
            assert!(!rel.ends_with(".kpm"), "an index {rel} in {group}");
            if bytes.starts_with(b"\x7fELF") {
                assert!(rel.ends_with(".hsaco"), "host code {rel} in {group}");
            }
        }
    }
    // The generic package's .kpack/ holds exactly one index per module.
    let kpack_dir = out.join("demo_lib_generic/demo/stage/.kpack");
    let mut in_kpack_dir: Vec<_> = std::fs::read_dir(&kpack_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    in_kpack_dir.sort();
    assert_eq!(in_kpack_dir, ["bin_demo.kpm", "lib_libdemo.so.1.kpm"]);
    let package_of = [
        ("gfx1030", "demo_lib_gfx103X"),
        ("gfx900", "demo_lib_gfx9"),
        ("gfx906", "demo_lib_gfx9"),
        ("gfx908", "demo_lib_gfx90X"),
        ("gfx90a:xnack+", "demo_lib_gfx90X"),
        ("gfx90a:xnack-", "demo_lib_gfx90X"),
    ];
    for (module, kernels) in [("bin_demo", 1), ("lib_libdemo.so.1", 2)] {
        let kpm = std::fs::read(kpack_dir.join(format!("{module}.kpm"))).unwrap();
        let kpm = KpmManifest::decode(&kpm).unwrap();
        assert_eq!(kpm.format_version, 1);
        assert_eq!(kpm.component_name, "demo_lib");
        assert_eq!(
            kpm.prefix, ".",
            "relative to the install root, not demo/stage"
        );
        let listed: Vec<(&str, &str)> = kpm
            .kpack_files
            .iter()
            .map(|(t, e)| (t.as_str(), e.package.as_deref().unwrap()))
            .collect();
        assert_eq!(listed, package_of, "{module}");
        for (target, e) in &kpm.kpack_files {
            assert_eq!(e.file, format!("{module}_{target}.kpack"));
            assert_eq!(e.kernel_count, kernels, "{module} {target}");
        }
        assert_indexed_sizes(&out, &kpm);
    }
    let report = installs_side_by_side_and_verifies(&out);
    // (exe 1 + lib 2 wrappers) × 6 targets; per shard 6 files + 2 per target built
    assert_eq!(report.code_objects, 3 * 6);
    assert_eq!(report.original_files, 3 * 6 + 2 * 6);
    // Without its index, the recombined tree no longer verifies.
    std::fs::remove_file(kpack_dir.join("bin_demo.kpm")).unwrap();
    let report = verify(&out, &VerifyOptions::default()).unwrap();
    assert_eq!(
        report.lines(),
        [format!(
            "{}: missing; demo_lib_generic must index .kpack/bin_demo.kpm (gfx1030, gfx900, gfx906, gfx908, gfx90a:xnack+, gfx90a:xnack-)",
            kpack_dir.join("bin_demo.kpm").display()
        )]
    );
}

#[test]
fn packages_that_would_install_one_path_twice_are_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    // gfx906 in two groups: both packages would install its archives and database files.
    let overlapping = r#"{"gfx9": {"architectures": ["gfx900", "gfx906"]},
                          "gfx906-908": {"architectures": ["gfx906", "gfx908"]}}"#;
    let out = tmp.path().join("out");
    let err = run(&shards, &config(STRICT, overlapping), &out).unwrap_err();
    let message = err.to_string();
    let ArtifactError::Validation { what, problems } = err else {
        panic!("expected a validation error, got {message}");
    };
    assert!(
        what.contains("installed paths shared by two packages"),
        "{what}"
    );
    assert_eq!(
        problems,
        [
            ".kpack/bin_demo_gfx906.kpack: installed by demo_lib_gfx9 and demo_lib_gfx906-908",
            ".kpack/lib_libdemo.so.1_gfx906.kpack: installed by demo_lib_gfx9 and demo_lib_gfx906-908",
            "lib/rocblas/library/Kernels.so-000-gfx906.hsaco: installed by demo_lib_gfx9 and demo_lib_gfx906-908",
            "lib/rocblas/library/TensileLibrary_Type_S_gfx906.dat: installed by demo_lib_gfx9 and demo_lib_gfx906-908",
        ]
    );
    assert!(!out.exists(), "a refused recombine writes nothing");
    // Into an existing directory: it is left as it was, without a staging directory.
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "kept\n").unwrap();
    let before = snapshot(&out);
    run(&shards, &config(STRICT, overlapping), &out).unwrap_err();
    assert_eq!(snapshot(&out), before);
    // Two components' generic packages installing one file (every prefix installs at the
    // install root, so a path is compared below its prefix).
    for shard in kpack_testkit::SHARDS {
        let dir = shards
            .join(shard)
            .join("demo_host_generic/other/stage/share/demo");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("readme.txt"), "another readme\n").unwrap();
        let manifest = shards
            .join(shard)
            .join("demo_host_generic/artifact_manifest.txt");
        std::fs::write(&manifest, "demo/stage\nother/stage\n").unwrap();
    }
    let err = run(&shards, &config(STRICT, GROUPS), &out).unwrap_err();
    let ArtifactError::Validation { problems, .. } = err else {
        panic!("expected a validation error, got {err}");
    };
    assert_eq!(
        problems,
        ["share/demo/readme.txt: installed by demo_host_generic and demo_lib_generic"]
    );
    assert_eq!(snapshot(&out), before);
}

#[test]
fn packaging_config_errors_are_typed_and_name_the_field() {
    let parse = |text: &str| PackagingConfig::parse(text).unwrap_err();
    let with_groups = |groups: &str| {
        parse(&format!(
            r#"{{"primary_shard": "shard-a", "architecture_groups": {groups}}}"#
        ))
    };
    let schema = |e: ConfigError| match e {
        ConfigError::Schema { path, source } => format!("{path}: {source}"),
        other => panic!("expected a schema error, got {other:?}"),
    };
    // Unknown fields, at every level.
    let e = schema(parse(
        r#"{"primary_shard": "a", "architecture_groups": {}, "groups": {}}"#,
    ));
    assert!(
        e.starts_with("groups: unknown field `groups`, expected one of"),
        "{e}"
    );
    let e = schema(with_groups(
        r#"{"gfx9": {"architectures": ["gfx900"], "colour": "red"}}"#,
    ));
    assert!(
        e.starts_with("architecture_groups.gfx9.colour: unknown field `colour`"),
        "{e}"
    );
    let e = schema(parse(
        r#"{"primary_shard": "a", "architecture_groups": {"g": {"architectures": ["gfx900"]}},
            "validation": {"error_on_everything": true}}"#,
    ));
    assert!(
        e.starts_with("validation.error_on_everything: unknown field `error_on_everything`"),
        "{e}"
    );
    // Wrong types and missing fields.
    let e = schema(parse(
        r#"{"primary_shard": "a", "architecture_groups": {"g": {"architectures": ["gfx900"]}},
            "validation": {"error_on_missing_architecture": "yes"}}"#,
    ));
    assert!(
        e.starts_with(
            "validation.error_on_missing_architecture: invalid type: string \"yes\", expected a boolean"
        ),
        "{e}"
    );
    let e = schema(with_groups(r#"{"gfx9": {"architectures": "gfx900"}}"#));
    assert!(
        e.starts_with("architecture_groups.gfx9.architectures: invalid type: string"),
        "{e}"
    );
    let e = schema(parse(r#"{"architecture_groups": {}}"#));
    assert!(e.contains("missing field `primary_shard`"), "{e}");
    let e = schema(with_groups(
        r#"{"g": {"architectures": ["gfx900"]}, "g": {"architectures": ["gfx906"]}}"#,
    ));
    assert!(e.contains("group g defined twice at line 1"), "{e}");
    assert_no_debug_formatting(&e);
    let e = schema(parse(
        r#"{"primary_shard": "a", "architecture_groups": {"g": {"architectures": ["gfx900"]}}} {}"#,
    ));
    assert!(e.contains("trailing characters"), "{e}");
    // Invalid groups.
    assert!(matches!(with_groups("{}"), ConfigError::NoGroups));
    for name in ["gfx_9", "generic", "", "a/b"] {
        let e = with_groups(&format!(r#"{{"{name}": {{"architectures": ["gfx900"]}}}}"#));
        assert!(
            matches!(&e, ConfigError::GroupName(n) if n == name),
            "{e:?}"
        );
        let shown = if name.is_empty() { "(empty)" } else { name };
        assert!(
            e.to_string()
                .starts_with(&format!("architecture_groups.{shown}: invalid group name")),
            "{e}"
        );
        assert_no_debug_formatting(&e.to_string());
    }
    let e = with_groups(r#"{"gfx9": {"architectures": []}}"#);
    assert!(
        matches!(&e, ConfigError::EmptyGroup(g) if g == "gfx9"),
        "{e:?}"
    );
    for arch in ["gfx90a:xnack+", "sm_80", "gfx9xx"] {
        let e = with_groups(&format!(
            r#"{{"gfx9": {{"architectures": ["gfx900", "{arch}"]}}}}"#
        ));
        assert!(
            matches!(&e, ConfigError::Architecture { group, architecture } if group == "gfx9" && architecture == arch),
            "{e:?}"
        );
        assert!(
            e.to_string().ends_with(&format!(
                "expected GPU processor names (gfx90a, gfx1100, gfx11-generic), got {arch}"
            )),
            "{e}"
        );
        assert_no_debug_formatting(&e.to_string());
    }
    let e = with_groups(r#"{"gfx9": {"architectures": ["gfx900", "gfx900"]}}"#);
    assert_eq!(
        e.to_string(),
        "architecture_groups.gfx9.architectures: gfx900 listed twice"
    );
    let e = parse(
        r#"{"primary_shard": "", "architecture_groups": {"g": {"architectures": ["gfx900"]}}}"#,
    );
    assert!(matches!(e, ConfigError::PrimaryShard(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "primary_shard: (empty): expected a shard directory name (non-empty, no '/')"
    );
    let e = parse(
        r#"{"primary_shard": "a/b", "architecture_groups": {"g": {"architectures": ["gfx900"]}}}"#,
    );
    assert_eq!(
        e.to_string(),
        "primary_shard: a/b: expected a shard directory name (non-empty, no '/')"
    );
    // The file's path comes first when loaded.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("packaging.json");
    std::fs::write(&path, r#"{"primary_shard": 1}"#).unwrap();
    let e = PackagingConfig::load(&path).unwrap_err();
    assert!(matches!(e, ArtifactError::Config { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!(
            "{}: primary_shard: invalid type: integer",
            path.display()
        )),
        "{e}"
    );
    // Defaults: validation is optional, display_name defaults to the group name, groups
    // keep the file's order.
    let c = PackagingConfig::parse(
        r#"{"primary_shard": "a", "architecture_groups": {"z": {"architectures": ["gfx900"]},
            "a": {"display_name": "A", "architectures": ["gfx906"]}}}"#,
    )
    .unwrap();
    assert_eq!(c.validation, Default::default());
    let groups: Vec<(&str, &str)> = c
        .architecture_groups
        .iter()
        .map(|g| (g.name.as_str(), g.display_name.as_str()))
        .collect();
    assert_eq!(groups, [("z", "z"), ("a", "A")]);
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
    assert_eq!(lib.groups[2].architectures["gfx1030"], "shard-c");
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
    // The index loses gfx908 and names the wrong package for gfx1030.
    let index = out.join("demo_lib_generic/demo/stage/.kpack/lib_libdemo.so.1.kpm");
    let mut kpm = KpmManifest::decode(&std::fs::read(&index).unwrap()).unwrap();
    kpm.kpack_files.retain(|(t, _)| t != "gfx908");
    for (t, e) in &mut kpm.kpack_files {
        if t == "gfx1030" {
            e.package = Some("demo_lib_gfx9".to_owned());
        }
    }
    std::fs::write(&index, kpm.encode().unwrap()).unwrap();
    let report = verify_against_shards(&out);
    let f = report.lines().join("\n");
    for want in [
        "demo_host_generic/artifact_manifest.txt",
        "demo/stage/bin/demo: code object demo/stage/bin/demo#0 for gfx906 is not recovered byte for byte",
        "demo_lib_generic/demo/stage/.kpack/bin_demo.kpm: lists gfx906 as bin_demo_gfx906.kpack in demo_lib_gfx9",
        "demo/stage/lib/rocblas/library/TensileLibrary_Type_S_gfx900.dat: differs from the original",
        "libhost.so: not an archive, index or database file",
        "Kernels.so-000-gfx1030.hsaco: a file of gfx1030 in demo_lib_gfx9",
        "libfat.so: a fat binary left in a generic artifact",
        "packages do not install side by side: lib/rocblas/library/Kernels.so-000-gfx1030.hsaco: installed by demo_lib_gfx103X and demo_lib_gfx9",
        "lib_libdemo.so.1.kpm: does not list gfx908, which lib_libdemo.so.1_gfx908.kpack in demo_lib_gfx90X",
        "lib_libdemo.so.1.kpm: lists gfx1030 as lib_libdemo.so.1_gfx1030.kpack in demo_lib_gfx9 (",
    ] {
        assert!(f.contains(want), "missing {want:?} in:\n{f}");
    }
}

/// `out`'s packages install side by side and verify against the shards; the report.
fn installs_side_by_side_and_verifies(out: &Path) -> kpack_artifact::verify::VerifyReport {
    assert_eq!(
        shared_installed_paths(out),
        Vec::<(String, Vec<String>)>::new()
    );
    let report = verify_against_shards(out);
    assert_eq!(report.lines(), Vec::<String>::new());
    report
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

/// Every archive the index lists has the listed size in the package it names.
fn assert_indexed_sizes(out: &Path, kpm: &KpmManifest) {
    for (target, e) in &kpm.kpack_files {
        let archive = out
            .join(e.package.as_deref().unwrap())
            .join("demo/stage/.kpack")
            .join(&e.file);
        assert_eq!(
            std::fs::metadata(&archive).unwrap().len(),
            e.size,
            "{target}"
        );
    }
}

fn run_grouped(
    shards: &Path,
    out: &Path,
    compression: Compression,
    threads: usize,
) -> kpack_artifact::recombine::RecombineSummary {
    let opts = RecombineOptions {
        group_archives: Some(compression),
        threads,
        ..RecombineOptions::default()
    };
    recombine(shards, &config(STRICT, GROUPS), out, &opts).unwrap()
}

/// Per group package: (group archive, [(target, its link)]) of `lib_libdemo.so.1`.
const GROUP_ARCHIVES: [(&str, &str, &[&str]); 3] = [
    ("demo_lib_gfx9", "gfx9", &["gfx900", "gfx906"]),
    (
        "demo_lib_gfx90X",
        "gfx90X",
        &["gfx908", "gfx90a:xnack+", "gfx90a:xnack-"],
    ),
    ("demo_lib_gfx103X", "gfx103X", &["gfx1030"]),
];

#[test]
fn group_archives_hold_every_target_of_their_group_behind_relative_per_target_links() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    let plain = tmp.path().join("plain");
    run(&shards, &config(STRICT, GROUPS), &plain).unwrap();
    let out = tmp.path().join("out");
    let summary = run_grouped(&shards, &out, Compression::None, 0);
    let lib = summary
        .components
        .iter()
        .find(|c| c.component == "demo_lib")
        .unwrap();
    // Two modules (bin_demo, lib_libdemo.so.1): one group archive each per group.
    assert_eq!(
        lib.groups.iter().map(|g| g.archives).collect::<Vec<_>>(),
        [2, 2, 2]
    );
    for (package, group, targets) in GROUP_ARCHIVES {
        let dir = out.join(package).join("demo/stage/.kpack");
        for module in ["bin_demo", "lib_libdemo.so.1"] {
            let name = format!("{module}_{group}.kpack");
            let archive = kpack_archive::Archive::open(dir.join(&name)).unwrap();
            assert_eq!(archive.gfx_arches(), targets, "{name}");
            assert_eq!(archive.gfx_arch_family(), group);
            assert_eq!(archive.group_name(), module);
            assert_eq!(
                archive.compression_scheme(),
                kpack_archive::CompressionScheme::None,
                "the caller's compression"
            );
            for target in targets {
                let link = dir.join(format!("{module}_{target}.kpack"));
                assert_eq!(std::fs::read_link(&link).unwrap(), Path::new(&name));
                // Every entry is the per-target archive's, byte for byte.
                let per_target = kpack_archive::Archive::open(
                    plain
                        .join(package)
                        .join(format!("demo/stage/.kpack/{module}_{target}.kpack")),
                )
                .unwrap();
                for (binary, arch, _) in per_target.entries() {
                    assert_eq!(
                        archive.get(binary, arch).unwrap(),
                        per_target.get(binary, arch).unwrap(),
                        "{name} {binary} {arch}"
                    );
                }
                assert_eq!(
                    archive.entries().filter(|(_, a, _)| a == target).count(),
                    per_target.entries().count()
                );
            }
        }
    }
    // The index names the group archive, its size, and each target's kernel count.
    let kpm = out.join("demo_lib_generic/demo/stage/.kpack/lib_libdemo.so.1.kpm");
    let kpm = KpmManifest::decode(&std::fs::read(kpm).unwrap()).unwrap();
    let listed: Vec<(&str, &str, u64)> = kpm
        .kpack_files
        .iter()
        .map(|(t, e)| (t.as_str(), e.file.as_str(), e.kernel_count))
        .collect();
    assert_eq!(
        listed,
        [
            ("gfx1030", "lib_libdemo.so.1_gfx103X.kpack", 2),
            ("gfx900", "lib_libdemo.so.1_gfx9.kpack", 2),
            ("gfx906", "lib_libdemo.so.1_gfx9.kpack", 2),
            ("gfx908", "lib_libdemo.so.1_gfx90X.kpack", 2),
            ("gfx90a:xnack+", "lib_libdemo.so.1_gfx90X.kpack", 2),
            ("gfx90a:xnack-", "lib_libdemo.so.1_gfx90X.kpack", 2),
        ]
    );
    assert_indexed_sizes(&out, &kpm);
    let report = installs_side_by_side_and_verifies(&out);
    assert_eq!(report.code_objects, 3 * 6, "read back through the links");

    // Same bytes for any thread count; zstd when asked.
    let again = tmp.path().join("again");
    run_grouped(&shards, &again, Compression::None, 1);
    assert_eq!(snapshot(&out), snapshot(&again));
    let zstd = tmp.path().join("zstd");
    run_grouped(&shards, &zstd, Compression::zstd(), 0);
    let a = kpack_archive::Archive::open(
        zstd.join("demo_lib_gfx9/demo/stage/.kpack/lib_libdemo.so.1_gfx9.kpack"),
    )
    .unwrap();
    assert_eq!(
        a.compression_scheme(),
        kpack_archive::CompressionScheme::ZstdPerKernel
    );
    assert_eq!(verify_against_shards(&zstd).lines(), Vec::<String>::new());
}

/// Group archives of the per-target archives' own scheme (`none` into `none`, zstd frames
/// into zstd at the level they were written with) copy the stored bytes without decoding and
/// coding them again, and come out byte for byte as coding them again would make them.
#[test]
fn group_archives_copy_stored_frames_into_the_bytes_coding_again_gives() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    let plain = tmp.path().join("plain");
    run(&shards, &config(STRICT, GROUPS), &plain).unwrap();
    for compression in [Compression::zstd(), Compression::None] {
        let out = tmp.path().join(format!("{compression:?}"));
        run_grouped(&shards, &out, compression, 0);
        for (package, group, targets) in GROUP_ARCHIVES {
            let kpack = |root: &Path| root.join(package).join("demo/stage/.kpack");
            for module in ["bin_demo", "lib_libdemo.so.1"] {
                let mut coded = kpack_archive::ArchiveWriter::new(module, group, compression);
                let sources: Vec<_> = targets
                    .iter()
                    .map(|target| {
                        let path = kpack(&plain).join(format!("{module}_{target}.kpack"));
                        kpack_archive::Archive::open(path).unwrap()
                    })
                    .collect();
                let arches = sources.iter().flat_map(|s| s.gfx_arches().to_vec());
                coded.set_gfx_arches(arches.collect()).unwrap();
                // Kernel by kernel: each binary key's targets together, in target order.
                let mut binaries: Vec<&str> = Vec::new();
                for (binary, _, _) in sources.iter().flat_map(|s| s.entries()) {
                    if !binaries.contains(&binary) {
                        binaries.push(binary);
                    }
                }
                for binary in binaries {
                    for source in &sources {
                        for (b, arch, info) in source.entries().filter(|e| e.0 == binary) {
                            let code = source.get(b, arch).unwrap().into_owned();
                            coded.add(b, arch, code, info.metadata).unwrap();
                        }
                    }
                }
                let mut want = Vec::new();
                coded.write_to(&mut want).unwrap();
                let name = format!("{module}_{group}.kpack");
                let got = std::fs::read(kpack(&out).join(&name)).unwrap();
                assert!(got == want, "{compression:?} {package} {name}");
            }
        }
    }
}

#[test]
fn group_archive_links_survive_copying_the_tree_and_verify_finds_broken_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    let out = tmp.path().join("out");
    run_grouped(&shards, &out, Compression::zstd(), 0);
    // cp -a and a tar round trip elsewhere: the links are relative, so both still verify.
    let [copied, untarred] = kpack_testkit::copied_elsewhere(&out, tmp.path());
    std::fs::remove_dir_all(&out).unwrap();
    for tree in [&copied, &untarred] {
        assert_eq!(verify_against_shards(tree).lines(), Vec::<String>::new());
        let link = tree.join("demo_lib_gfx90X/demo/stage/.kpack/bin_demo_gfx90a:xnack+.kpack");
        let a = kpack_archive::Archive::open(&link).unwrap();
        assert!(a.contains("demo/stage/bin/demo#0", "gfx90a:xnack+"));
    }
    // As .tar.zst packages, links and all.
    let tarred = tmp.path().join("tarred");
    let opts = RecombineOptions {
        group_archives: Some(Compression::zstd()),
        output: kpack_artifact::tarball::OutputFormat::TarZst,
        ..RecombineOptions::default()
    };
    recombine(&shards, &config(STRICT, GROUPS), &tarred, &opts).unwrap();
    assert!(tarred.join("demo_lib_gfx90X.tar.zst").is_file());
    assert_eq!(verify_against_shards(&tarred).lines(), Vec::<String>::new());
    // A group archive gone: its links dangle, and the markers no longer reach its targets.
    let kpack = copied.join("demo_lib_gfx9/demo/stage/.kpack");
    std::fs::remove_file(kpack.join("bin_demo_gfx9.kpack")).unwrap();
    // A link made absolute: it would break once the tree is copied.
    let abs = kpack.join("lib_libdemo.so.1_gfx906.kpack");
    std::fs::remove_file(&abs).unwrap();
    kpack_fs::symlink(&kpack.join("lib_libdemo.so.1_gfx9.kpack"), &abs).unwrap();
    // A link to the wrong group archive: it does not hold the target of its name.
    let wrong = copied.join("demo_lib_gfx90X/demo/stage/.kpack/lib_libdemo.so.1_gfx908.kpack");
    std::fs::remove_file(&wrong).unwrap();
    std::fs::copy(
        kpack.join("lib_libdemo.so.1_gfx9.kpack"),
        wrong.with_file_name("lib_libdemo.so.1_other.kpack"),
    )
    .unwrap();
    kpack_fs::symlink(Path::new("lib_libdemo.so.1_other.kpack"), &wrong).unwrap();
    let f = verify_against_shards(&copied).lines().join("\n");
    for want in [
        "demo_lib_gfx9/demo/stage/.kpack/bin_demo_gfx900.kpack: a dangling link to bin_demo_gfx9.kpack (no such file in demo_lib_gfx9)",
        "demo_lib_gfx9/demo/stage/.kpack/bin_demo_gfx906.kpack: a dangling link to bin_demo_gfx9.kpack",
        "lib_libdemo.so.1_gfx906.kpack: an absolute link to ",
        "lib_libdemo.so.1_gfx908.kpack: links to demo/stage/.kpack/lib_libdemo.so.1_other.kpack, which declares gfx_arches gfx900, gfx906, none of them the target of this name",
        "code object demo/stage/bin/demo#0 for gfx900 is not recovered byte for byte",
    ] {
        assert!(f.contains(want), "missing {want:?} in:\n{f}");
    }
}

#[test]
fn a_group_named_after_its_one_target_keeps_the_per_target_name_for_its_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    let out = tmp.path().join("out");
    let groups = GROUPS.replace("gfx103X", "gfx1030");
    let opts = RecombineOptions {
        group_archives: Some(Compression::zstd()),
        ..RecombineOptions::default()
    };
    recombine(&shards, &config(STRICT, &groups), &out, &opts).unwrap();
    let kpack = out.join("demo_lib_gfx1030/demo/stage/.kpack");
    let mut names: Vec<(String, bool)> = std::fs::read_dir(&kpack)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                e.file_type().unwrap().is_file(),
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("bin_demo_gfx1030.kpack".to_owned(), true),
            ("lib_libdemo.so.1_gfx1030.kpack".to_owned(), true)
        ]
    );
    installs_side_by_side_and_verifies(&out);
}
