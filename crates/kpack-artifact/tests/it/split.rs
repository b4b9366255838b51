//! `kpack split` on hipcc-built shards (the same sources built for different target sets)
//! and on hand-arranged artifacts of the repository's fixtures.

use std::path::Path;

use kpack_archive::Archive;
use kpack_artifact::recombine::compare_generic;
use kpack_artifact::split::{SplitOptions, module_name, split};
use kpack_artifact::verify::{VerifyOptions, verify};
use kpack_artifact::{ArtifactRecord, manifest};
use kpack_hostbin::marker::MarkerMetadata;
use kpack_package::handlers::Handler;
use kpack_testkit::{SHARDS, fixture, snapshot, split_shards};

fn marker(path: &Path) -> MarkerMetadata {
    let bytes = std::fs::read(path).unwrap();
    let fat = kpack_elf::inspect(&bytes).unwrap();
    MarkerMetadata::decode(fat.marker.unwrap().bytes(&bytes).unwrap())
        .unwrap()
        .0
}

#[test]
fn shards_built_for_different_targets_split_into_interchangeable_generic_artifacts() {
    let tmp = tempfile::tempdir().unwrap();
    let out = split_shards(tmp.path());
    let primary = out.join("shard-a/demo_lib_generic");
    for shard in &SHARDS[1..] {
        let other = out.join(shard).join("demo_lib_generic");
        assert_eq!(
            compare_generic(&primary, &other).unwrap(),
            Vec::<String>::new()
        );
        for bin in ["bin/demo", "lib/libdemo.so.1"] {
            let p = format!("demo/stage/{bin}");
            assert_eq!(
                marker(&primary.join(&p)),
                marker(&other.join(&p)),
                "{shard} {bin}"
            );
        }
    }
    let m = marker(&primary.join("demo/stage/lib/libdemo.so.1"));
    assert_eq!(m.kernel_name, "demo/stage/lib/libdemo.so.1");
    assert_eq!(
        m.search_paths,
        ["../.kpack/lib_libdemo.so.1_@GFXARCH@.kpack"]
    );
    let m = marker(&primary.join("demo/stage/bin/demo"));
    assert_eq!(m.search_paths, ["../.kpack/bin_demo_@GFXARCH@.kpack"]);
}

#[test]
fn feature_variants_go_into_their_processors_artifact_under_their_full_target() {
    let tmp = tempfile::tempdir().unwrap();
    let out = split_shards(tmp.path()).join("shard-b");
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        names,
        [
            "demo_host_generic",
            "demo_lib_generic",
            "demo_lib_gfx908",
            "demo_lib_gfx90a"
        ]
    );
    let a = out.join("demo_lib_gfx90a/demo/stage");
    for t in ["gfx90a:xnack+", "gfx90a:xnack-"] {
        let archive = Archive::open(a.join(format!(".kpack/lib_libdemo.so.1_{t}.kpack"))).unwrap();
        assert_eq!(archive.gfx_arches(), [t.to_owned()]);
        assert_eq!(archive.group_name(), "lib_libdemo.so.1");
        assert!(archive.contains("demo/stage/lib/libdemo.so.1#0", t));
        assert!(archive.contains("demo/stage/lib/libdemo.so.1#1", t));
        let tensile = t.replace(':', "-");
        assert!(
            a.join(format!(
                "lib/rocblas/library/Kernels.so-000-{tensile}.hsaco"
            ))
            .is_file()
        );
        assert!(
            a.join(format!(
                "lib/rocblas/library/TensileLibrary_Type_S_{tensile}.dat"
            ))
            .is_file()
        );
    }
    assert_eq!(
        manifest::read(&out.join("demo_lib_gfx90a")).unwrap(),
        ["demo/stage"]
    );
}

#[test]
fn the_generic_artifact_holds_host_code_only_and_keeps_symlinks() {
    let tmp = tempfile::tempdir().unwrap();
    let out = split_shards(tmp.path()).join("shard-a");
    let g = out.join("demo_lib_generic/demo/stage");
    assert_eq!(
        std::fs::read_link(g.join("lib/libdemo.so")).unwrap(),
        Path::new("libdemo.so.1")
    );
    assert!(
        g.join("lib/rocblas/library/TensileLibrary_Type_S_fallback.dat")
            .is_file()
    );
    assert!(!g.join(".kpack").exists());
    for (rel, _, bytes) in snapshot(&out.join("demo_lib_generic")) {
        assert!(!rel.contains("gfx9"), "{rel} stayed generic");
        if bytes.starts_with(b"\x7fELF") {
            let state = kpack_pipeline::transform::check(&bytes).unwrap();
            assert_ne!(state, kpack_pipeline::transform::HostState::Fat, "{rel}");
        }
    }
    for arch in ["gfx900", "gfx906"] {
        for (rel, _, bytes) in snapshot(&out.join(format!("demo_lib_{arch}"))) {
            if !bytes.is_empty() && !rel.ends_with(".txt") && !rel.ends_with(".json") {
                assert!(rel.contains(arch), "{rel} in the {arch} artifact");
            }
        }
    }
    let report = verify(
        &out,
        &VerifyOptions {
            original: Some(fixture("shards/shard-a")),
            threads: 0,
        },
    )
    .unwrap();
    assert_eq!(report.lines(), Vec::<String>::new());
    assert_eq!(report.code_objects, 3 * 2); // (exe + 2 wrappers) × 2 targets
}

#[test]
fn a_component_without_device_code_makes_no_arch_artifacts_and_records_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = split_shards(tmp.path()).join("shard-c");
    let dirs: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("demo_host"))
        .collect();
    assert_eq!(dirs, ["demo_host_generic"]);
    let record = ArtifactRecord::read(&out.join("demo_host_generic"))
        .unwrap()
        .unwrap();
    assert!(record.generic_only);
    let record = ArtifactRecord::read(&out.join("demo_lib_generic"))
        .unwrap()
        .unwrap();
    assert!(!record.generic_only);
}

#[test]
fn split_output_is_identical_whatever_the_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let input = fixture("shards/shard-b/demo_lib_gfx90a");
    let mut trees = Vec::new();
    for threads in [1, 2, 5] {
        let out = tmp.path().join(format!("t{threads}"));
        let opts = SplitOptions {
            handlers: vec![Handler::Rocblas],
            threads,
            ..SplitOptions::default()
        };
        split(&input, &out, "demo_lib", &opts, &|_, _| {}).unwrap();
        trees.push(snapshot(&out));
    }
    assert!(trees[0].len() > 20);
    assert_eq!(trees[0], trees[1]);
    assert_eq!(trees[0], trees[2]);
}

/// An artifact of fixtures arranged like ROCm's: two libraries, a hard link, a symlink.
fn arrange(root: &Path) -> std::path::PathBuf {
    let a = root.join("blas_lib_gfx90X");
    let lib = a.join("math-libs/BLAS/stage/lib");
    std::fs::create_dir_all(&lib).unwrap();
    manifest::write(&a, &["math-libs/BLAS/stage".to_owned()]).unwrap();
    std::fs::copy(fixture("bin/libone.so"), lib.join("librocblas.so.5.2")).unwrap();
    std::fs::hard_link(lib.join("librocblas.so.5.2"), root.join("hardlink")).unwrap();
    std::fs::copy(fixture("bin/libtwo.so"), lib.join("libhipblaslt.so.1")).unwrap();
    kpack_fs::symlink(Path::new("librocblas.so.5.2"), &lib.join("librocblas.so.5")).unwrap();
    a
}

#[test]
fn archives_are_named_per_module_and_inputs_are_never_modified() {
    assert_eq!(module_name("librocblas.so.5.2"), "rocblas");
    assert_eq!(module_name("libhipblaslt.so.1"), "hipblaslt");
    assert_eq!(module_name("foo"), "foo");
    assert_eq!(module_name("lib"), "lib");
    let tmp = tempfile::tempdir().unwrap();
    let input = arrange(tmp.path());
    let before = snapshot(&input);
    let out = tmp.path().join("out");
    split(
        &input,
        &out,
        "blas_lib",
        &SplitOptions::default(),
        &|_, _| {},
    )
    .unwrap();
    assert!(snapshot(&input) == before, "the input changed");
    assert_eq!(
        std::fs::read(tmp.path().join("hardlink")).unwrap(),
        std::fs::read(fixture("bin/libone.so")).unwrap()
    );
    let k = out.join("blas_lib_gfx90a/math-libs/BLAS/stage/.kpack");
    assert!(k.join("rocblas_gfx90a:xnack+.kpack").is_file());
    assert!(k.join("hipblaslt_gfx90a:xnack-.kpack").is_file());
    let k = out.join("blas_lib_gfx1030/math-libs/BLAS/stage/.kpack");
    assert!(
        k.join("rocblas_gfx1030.kpack").is_file() && k.join("hipblaslt_gfx1030.kpack").is_file()
    );
    let g = out.join("blas_lib_generic/math-libs/BLAS/stage/lib");
    assert_eq!(
        marker(&g.join("librocblas.so.5.2")).search_paths,
        ["../.kpack/rocblas_@GFXARCH@.kpack"]
    );
    assert_eq!(
        marker(&g.join("libhipblaslt.so.1")).kernel_name,
        "math-libs/BLAS/stage/lib/libhipblaslt.so.1"
    );
    let report = verify(
        &out,
        &VerifyOptions {
            original: Some(tmp.path().to_owned()),
            threads: 0,
        },
    )
    .unwrap();
    // The original directory also holds the output and a stray hard link; only artifacts count.
    assert_eq!(report.lines(), Vec::<String>::new());
}

#[test]
fn a_failed_split_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let input = arrange(tmp.path());
    // A corrupt fat binary, found after other files were already written.
    let bad = input.join("math-libs/BLAS/stage/lib/libzz.so");
    let mut bytes = std::fs::read(fixture("bin/libone.so")).unwrap();
    let fat = kpack_elf::inspect(&bytes).unwrap();
    let at = fat.fatbin.unwrap().offset as usize + 24; // inside the first bundle's header
    bytes[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&bad, bytes).unwrap();
    for out in [tmp.path().join("new"), tmp.path().to_owned()] {
        let before: Vec<_> = snapshot(tmp.path());
        let err = split(
            &input,
            &out,
            "blas_lib",
            &SplitOptions::default(),
            &|_, _| {},
        )
        .unwrap_err();
        assert!(err.to_string().contains("libzz.so"), "{err}");
        assert!(snapshot(tmp.path()) == before, "{} changed", out.display());
    }
    // A missing prefix tree entry type: an unreadable manifest is an error naming it.
    std::fs::remove_file(input.join("artifact_manifest.txt")).unwrap();
    let err = split(
        &input,
        &tmp.path().join("x"),
        "c",
        &SplitOptions::default(),
        &|_, _| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("artifact_manifest.txt"), "{err}");
    assert!(!tmp.path().join("x").exists());
}

#[test]
fn two_fat_binaries_with_one_module_name_are_named_after_their_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let out = split_shards(tmp.path()).join("shard-c");
    let record = ArtifactRecord::read(&out.join("demo_lib_generic"))
        .unwrap()
        .unwrap();
    let modules: Vec<_> = record
        .binaries
        .iter()
        .map(|b| (b.path.as_str(), b.module.as_str(), b.wrappers))
        .collect();
    assert_eq!(
        modules,
        [
            ("demo/stage/bin/demo", "bin_demo", 1),
            ("demo/stage/lib/libdemo.so.1", "lib_libdemo.so.1", 2)
        ]
    );
}

#[test]
fn a_module_named_like_another_plus_a_suffix_does_not_claim_its_archives() {
    // rocPRIM's tests: `test_device_merge` and `test_device_merge_sort` lay their archives out
    // side by side, so `test_device_merge_@GFXARCH@.kpack` also matches
    // `test_device_merge_sort_gfx1010.kpack`: that archive is another module's, not one named
    // for a target `sort_gfx1010`.
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("prim_test_gfx90X");
    let bin = a.join("prim/stage/bin");
    std::fs::create_dir_all(&bin).unwrap();
    manifest::write(&a, &["prim/stage".to_owned()]).unwrap();
    std::fs::copy(fixture("bin/libone.so"), bin.join("libmerge.so")).unwrap();
    std::fs::copy(fixture("bin/libtwo.so"), bin.join("libmerge_sort.so")).unwrap();
    let out = tmp.path().join("out");
    split(&a, &out, "prim_test", &SplitOptions::default(), &|_, _| {}).unwrap();
    let k = out.join("prim_test_gfx1030/prim/stage/.kpack");
    assert!(
        k.join("merge_gfx1030.kpack").is_file() && k.join("merge_sort_gfx1030.kpack").is_file()
    );
    let report = verify(
        &out,
        &VerifyOptions {
            original: Some(a.clone()),
            threads: 0,
        },
    )
    .unwrap();
    assert_eq!(report.lines(), Vec::<String>::new());
}
