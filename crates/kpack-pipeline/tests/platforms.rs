//! `transform` on the aarch64 and ppc64le fixtures (`fixtures/platforms`), loaded for real:
//! qemu-user runs the cross libc's dynamic loader, which loads the library against a stand-in
//! HIP runtime cross-compiled for that machine. The stand-in reports each wrapper (magic,
//! version, index, the bytes its pointer leads to); the test decodes the marker it saw and
//! fetches every code object from the archives that marker names, byte for byte the
//! original's. The originals load too (HIPF), and so do the outputs after the machine's
//! GNU `strip`.

use std::path::Path;

use kpack_archive::marker::MarkerMetadata;
use kpack_archive::{Archive, Compression};
use kpack_pipeline::source::{OwnedDeviceCode, device_code_objects};
use kpack_testkit::{PLATFORM_FIXTURES, Registration, fixture, foreign_standin, run_tool};

/// The code objects a kpacked binary's registrations lead to: for each one, the marker's
/// search paths (relative to the binary's directory, `@GFXARCH@` per target) name the
/// archive, and `kernel_name#reserved1` the entry. Returns them with their wrapper index.
fn fetch_through_markers(
    regs: &[Registration],
    binary: &Path,
    objects: &[OwnedDeviceCode],
) -> Vec<(u64, String, Vec<u8>)> {
    let dir = binary.parent().unwrap();
    let mut fetched = Vec::new();
    for r in regs {
        let (meta, used) = MarkerMetadata::decode(&r.bytes).unwrap();
        assert_eq!(used, r.bytes.len());
        let key = format!("{}#{}", meta.kernel_name, r.reserved1);
        for obj in objects
            .iter()
            .filter(|o| o.wrappers.contains(&(r.reserved1 as usize)))
        {
            let target = obj.bundle_id.target().unwrap().to_string();
            let archive = meta
                .search_paths
                .iter()
                .map(|p| dir.join(p.replace("@GFXARCH@", &target)))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("no archive for {target} in {:?}", meta.search_paths));
            let archive = Archive::open(&archive).unwrap();
            let data = archive.get(&key, &target).unwrap().into_owned();
            fetched.push((r.reserved1, target, data));
        }
    }
    fetched
}

#[test]
fn aarch64_and_ppc64le_libraries_load_under_qemu_and_their_markers_lead_to_the_code_objects() {
    for &(rel, machine) in PLATFORM_FIXTURES {
        let standin = foreign_standin(machine);
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("standin");
        let input = fixture(rel);
        let original_bytes = std::fs::read(&input).unwrap();
        let objects = device_code_objects(&original_bytes).unwrap();

        let original = standin.load(&input, &[], &work);
        assert!(
            !original.is_empty(),
            "{rel}: the original registers nothing"
        );
        for r in &original {
            assert_eq!((r.magic.as_str(), r.version), ("HIPF", 1), "{rel}");
            assert!(
                r.bytes.starts_with(b"__CLANG_OFFLOAD_BUNDLE__") || r.bytes.starts_with(b"CCOB"),
                "{rel}: the original pointer leads to a bundle"
            );
        }

        let (output, summary) =
            kpack_testkit::transform_into(&input, root.path(), Compression::zstd());
        let out_bytes = std::fs::read(&output).unwrap();
        kpack_elf::verify(&out_bytes).unwrap_or_else(|issues| panic!("{rel}: {issues:?}"));
        assert_eq!(
            kpack_elf::inspect(&out_bytes).unwrap().machine,
            machine.e_machine,
            "{rel}"
        );

        let regs = standin.load(&output, &[], &work);
        assert_eq!(regs.len(), original.len(), "{rel}");
        let mut indices: Vec<u64> = regs.iter().map(|r| r.reserved1).collect();
        indices.sort();
        indices.dedup();
        assert_eq!(
            indices.len(),
            regs.len(),
            "{rel}: each wrapper carries its own index"
        );
        for r in &regs {
            assert_eq!((r.magic.as_str(), r.version), ("HIPK", 1), "{rel}");
        }
        let fetched = fetch_through_markers(&regs, &output, &objects);
        assert_eq!(fetched.len(), summary.code_objects, "{rel}");
        for (wrapper, target, data) in &fetched {
            let want = objects
                .iter()
                .find(|o| {
                    o.wrappers.contains(&(*wrapper as usize))
                        && o.bundle_id.target().unwrap().to_string() == *target
                })
                .unwrap();
            assert_eq!(data[..], want.data[..], "{rel}: wrapper {wrapper} {target}");
        }

        // The machine's own GNU strip re-lays the file out; it still loads and hands the
        // runtime the same wrappers and marker.
        let stripped = output.with_file_name(format!(
            "stripped-{}",
            output.file_name().unwrap().to_string_lossy()
        ));
        std::fs::copy(&output, &stripped).unwrap();
        run_tool(&machine.tool("strip"), &[stripped.to_str().unwrap()]);
        kpack_elf::verify(&std::fs::read(&stripped).unwrap())
            .unwrap_or_else(|issues| panic!("{rel} after strip: {issues:?}"));
        assert_eq!(
            standin.load(&stripped, &[], &work),
            regs,
            "{rel} after strip"
        );
    }
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
                let path = root
                    .path()
                    .join(".kpack")
                    .join(format!("{group}_{target}.kpack"));
                let archive = Archive::open(&path).unwrap();
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
