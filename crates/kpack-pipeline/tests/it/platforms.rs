//! `transform` on the aarch64 and ppc64le fixtures (`fixtures/platforms`), loaded for real:
//! qemu-user runs the cross libc's dynamic loader, which loads the library against a stand-in
//! HIP runtime cross-compiled for that machine. The stand-in reports each wrapper (magic,
//! version, index, the bytes its pointer leads to); the test decodes the marker it saw and
//! fetches every code object from the archives that marker names, byte for byte the
//! original's. The originals load too (HIPF), and so do the outputs after the machine's
//! GNU `strip`. The real-world tier does the same with Debian's arm64 librocrand1.

use std::path::Path;

use kpack_archive::Compression;
use kpack_pipeline::source::device_code_objects;
use kpack_testkit::{
    AARCH64, Foreign, PLATFORM_FIXTURES, fetch_through_markers, fixture, foreign_standin,
    librocrand_arm64, run_tool,
};

/// Loads `input` (HIPF), transforms and verifies it, loads the output (HIPK), fetches every
/// code object through the markers the stand-in saw (byte for byte the original's), then
/// strips the output with the machine's strip and loads it again (same registrations).
fn transform_load_and_fetch(input: &Path, machine: &'static Foreign) {
    let what = input.display();
    let standin = foreign_standin(machine);
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("standin");
    let original_bytes = std::fs::read(input).unwrap();
    let objects = device_code_objects(&original_bytes).unwrap();

    let original = standin.load(input, &[], &work);
    assert!(
        !original.is_empty(),
        "{what}: the original registers nothing"
    );
    for r in &original {
        assert_eq!((r.magic.as_str(), r.version), ("HIPF", 1), "{what}");
        assert!(
            r.bytes.starts_with(b"__CLANG_OFFLOAD_BUNDLE__") || r.bytes.starts_with(b"CCOB"),
            "{what}: the original pointer leads to a bundle"
        );
    }

    let (output, summary) = kpack_testkit::transform_into(input, root.path(), Compression::zstd());
    let out_bytes = std::fs::read(&output).unwrap();
    kpack_elf::verify(&out_bytes).unwrap_or_else(|issues| panic!("{what}: {issues:?}"));
    assert_eq!(
        kpack_elf::inspect(&out_bytes).unwrap().machine,
        machine.e_machine,
        "{what}"
    );

    let regs = standin.load(&output, &[], &work);
    assert_eq!(regs.len(), original.len(), "{what}");
    let mut indices: Vec<u64> = regs.iter().map(|r| r.reserved1).collect();
    indices.sort();
    indices.dedup();
    assert_eq!(
        indices.len(),
        regs.len(),
        "{what}: each wrapper carries its own index"
    );
    for r in &regs {
        assert_eq!((r.magic.as_str(), r.version), ("HIPK", 1), "{what}");
    }
    // Every code object of every registered wrapper (in -fgpu-rdc output only the
    // device-linked wrapper is registered; the round-trip test covers the others).
    let fetched = fetch_through_markers(&regs, &output, &objects);
    let registered = objects
        .iter()
        .flat_map(|o| &o.wrappers)
        .filter(|&&w| indices.contains(&(w as u64)))
        .count();
    assert_eq!(fetched.len(), registered, "{what}");
    assert!(
        registered > 0 && registered <= summary.code_objects,
        "{what}"
    );
    kpack_testkit::assert_fetched_are_the_originals(&fetched, &objects, &what.to_string());

    // The machine's own GNU strip re-lays the file out; it still loads and hands the
    // runtime the same wrappers and marker.
    let stripped = output.with_file_name(format!(
        "stripped-{}",
        output.file_name().unwrap().to_string_lossy()
    ));
    std::fs::copy(&output, &stripped).unwrap();
    run_tool(&machine.tool("strip"), &[stripped.to_str().unwrap()]);
    kpack_elf::verify(&std::fs::read(&stripped).unwrap())
        .unwrap_or_else(|issues| panic!("{what} after strip: {issues:?}"));
    assert_eq!(
        standin.load(&stripped, &[], &work),
        regs,
        "{what} after strip"
    );
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs aarch64-linux-gnu-gcc, powerpc64le-linux-gnu-gcc and qemu-user (the stand-in HIP runtime)"
)]
fn aarch64_and_ppc64le_libraries_load_under_qemu_and_their_markers_lead_to_the_code_objects() {
    for &(rel, machine) in PLATFORM_FIXTURES {
        transform_load_and_fetch(&fixture(rel), machine);
    }
}

#[test]
#[ignore = "real-world"]
fn debian_arm64_librocrand_transforms_and_loads_under_qemu_with_its_7_targets() {
    let input = librocrand_arm64();
    let objects = device_code_objects(&std::fs::read(&input).unwrap()).unwrap();
    assert_eq!(objects.len(), 7);
    transform_load_and_fetch(&input, &AARCH64);
}

#[test]
fn aarch64_and_ppc64le_code_objects_round_trip_uncompressed_and_zstd() {
    for &(rel, _) in PLATFORM_FIXTURES {
        let objects = device_code_objects(&std::fs::read(fixture(rel)).unwrap()).unwrap();
        for compression in [Compression::None, Compression::zstd()] {
            let root = tempfile::tempdir().unwrap();
            let (_, summary) =
                kpack_testkit::transform_into(&fixture(rel), root.path(), compression);
            let group = rel.rsplit('/').next().unwrap().split('.').next().unwrap();
            let mut checked = 0;
            for obj in &objects {
                let target = obj.bundle_id.target().unwrap().to_string();
                let path = root.path().join(".kpack").join(format!(
                    "{group}_{}.kpack",
                    kpack_target::file_name_spelling(&target, cfg!(windows))
                ));
                let archive = kpack_archive::Archive::open(&path).unwrap();
                for w in &obj.wrappers {
                    let got = archive
                        .get(&format!("{}#{w}", summary.kernel_name), &target)
                        .unwrap();
                    assert_eq!(got[..], obj.data[..], "{rel}: wrapper {w} {target}");
                    checked += 1;
                }
            }
            assert_eq!(checked, summary.code_objects, "{rel}");
            assert!(checked > 0, "{rel}");
        }
    }
}
