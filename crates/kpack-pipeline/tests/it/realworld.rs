//! Real-world tier: large real ROCm inputs fetched by `scripts/setup.sh` into
//! `$KPACK_CORPUS`. Run with `cargo test --release -- --ignored` (scripts/test.sh does).

use std::fs::File;
use std::path::{Path, PathBuf};

use kpack_bundle::BundleFormat;
use kpack_pipeline::inspect::{self, Details, TargetTotal};
use kpack_pipeline::source::{self, DeviceCode, FoundBundle, Visitor};
use kpack_pipeline::{SourceError, map_file};

#[test]
#[ignore = "real-world"]
fn librocsparse_inspects_as_111_wrappers_to_111_bundles_with_known_target_totals() {
    let path = kpack_testkit::librocsparse();
    let file = File::open(&path).unwrap();
    let bytes = map_file(&file, &path).unwrap();
    let report = inspect::inspect("librocsparse.so.0.1", &bytes).unwrap();
    let Details::Elf(elf) = &report.details else {
        panic!("not reported as ELF: {:?}", report.kind)
    };
    assert_eq!(elf.state, "fat");
    assert_eq!(elf.wrappers.len(), 111);
    assert_eq!(elf.bundles.len(), 111);
    for (i, w) in elf.wrappers.iter().enumerate() {
        assert_eq!(
            w.bundle,
            Some(i),
            "wrapper {i} points at bundle {:?}",
            w.bundle
        );
        assert_eq!(w.pointer, "rela-relative");
    }
    let expected = [
        ("gfx1030", 189_881_336),
        ("gfx803", 189_509_032),
        ("gfx900:xnack-", 186_658_384),
        ("gfx906:xnack-", 187_165_824),
        ("gfx908:xnack-", 187_330_472),
        ("gfx90a:xnack+", 177_106_432),
        ("gfx90a:xnack-", 176_979_792),
    ];
    let expected: Vec<TargetTotal> = expected
        .iter()
        .map(|(t, b)| TargetTotal {
            target: t.to_string(),
            count: 111,
            bytes: *b,
            portable: false,
        })
        .collect();
    assert_eq!(report.totals, expected);
}

/// Every `.so` of an unpacked wheel that holds device code.
fn fat_libraries(wheel_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![wheel_dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "so") {
                let bytes = std::fs::read(&path).unwrap();
                let fat = kpack_elf::inspect(&bytes).unwrap();
                if !fat.bundles.is_empty() {
                    out.push(path);
                }
            }
        }
    }
    out.sort();
    out
}

/// Per library: (wrappers, bundles and their formats, code objects checked, targets).
#[derive(Default)]
struct Census {
    wrappers: usize,
    ccob_v3_bundles: usize,
    other_bundles: usize,
    objects: usize,
    targets: std::collections::BTreeSet<String>,
}

impl Visitor for Census {
    fn elf(&mut self, _: Option<&str>, fat: &kpack_elf::FatBinary) -> Result<(), SourceError> {
        self.wrappers += fat.wrappers.len();
        assert!(
            fat.wrappers.iter().all(|w| w.bundle.is_some()),
            "every wrapper leads to a bundle"
        );
        Ok(())
    }
    fn bundle(&mut self, b: &FoundBundle<'_>) -> Result<(), SourceError> {
        match b.format {
            BundleFormat::Compressed { version: 3, .. } => self.ccob_v3_bundles += 1,
            _ => self.other_bundles += 1,
        }
        Ok(())
    }
    fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
        // The walk already refuses a disagreement; decode again here so the test states it.
        let decoded = kpack_target::code_object_target(code.data)?;
        assert_eq!(&decoded.target, code.target(), "{}", code.bundle_id);
        self.objects += 1;
        self.targets.insert(code.target().to_string());
        Ok(())
    }
}

fn census(path: &Path) -> Census {
    let bytes = std::fs::read(path).unwrap();
    let mut census = Census::default();
    source::walk(&bytes, &mut census).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    census
}

fn check_jax_wheel(version: &str) -> Vec<(String, Census)> {
    let libs = fat_libraries(&kpack_testkit::jax_wheel_dir(version));
    assert!(!libs.is_empty(), "jax {version}: no fat libraries found");
    let mut out = Vec::new();
    for lib in libs {
        let c = census(&lib);
        let name = lib.file_name().unwrap().to_string_lossy().into_owned();
        assert!(c.objects > 0, "{name}: no code objects");
        assert_eq!(c.other_bundles, 0, "{name}: every bundle is CCOB v3");
        // Unbundle for real and count what was written.
        let tmp = tempfile::tempdir().unwrap();
        let mut unbundler = kpack_pipeline::unbundle::Unbundler::new(
            tmp.path(),
            kpack_pipeline::unbundle::TargetFilter::default(),
        )
        .unwrap();
        unbundler.unbundle_file(&lib).unwrap();
        assert_eq!(unbundler.publish().unwrap().len(), c.objects, "{name}");
        out.push((name, c));
    }
    out
}

#[test]
#[ignore = "real-world"]
fn jax_rocm7_plugin_0_12_0_code_objects_unbundle_and_match_their_triples() {
    let libs = check_jax_wheel("0.12.0");
    let solver = libs
        .iter()
        .find(|(n, _)| n.starts_with("_solver"))
        .expect("_solver.so is fat");
    assert_eq!(solver.1.wrappers, 2, "_solver.so has two wrappers");
    assert_eq!(solver.1.ccob_v3_bundles, 2);
    let targets: std::collections::BTreeSet<&String> =
        libs.iter().flat_map(|(_, c)| &c.targets).collect();
    assert!(
        targets.iter().any(|t| t.as_str() == "gfx1250"),
        "{targets:?}"
    );
}

#[test]
#[ignore = "real-world"]
fn jax_rocm7_plugin_0_10_0_generic_targets_unbundle_and_match_their_triples() {
    let libs = check_jax_wheel("0.10.0");
    let targets: std::collections::BTreeSet<&String> =
        libs.iter().flat_map(|(_, c)| &c.targets).collect();
    for generic in [
        "gfx9-4-generic",
        "gfx10-3-generic",
        "gfx11-generic",
        "gfx12-generic",
    ] {
        assert!(
            targets.iter().any(|t| t.split(':').next() == Some(generic)),
            "{generic} missing from {targets:?}"
        );
    }
    let solver = libs
        .iter()
        .find(|(n, _)| n.starts_with("_solver"))
        .expect("_solver.so is fat");
    assert_eq!(solver.1.wrappers, 2, "_solver.so has two wrappers");
}

/// Debian's ROCm 7.2.4 `deb`'s library `name` (all CCOB v3) from the corpus.
fn debian_7_2_4_library(deb: &str, name: &str) -> PathBuf {
    let path = kpack_testkit::corpus()
        .join("x")
        .join(deb)
        .join("usr/lib/x86_64-linux-gnu")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup.sh",
        path.display()
    );
    path
}

/// Transforms and unbundles a CCOB library (streamed: one bundle in flight per worker) and
/// checks every code object the archives and the unbundled files hold against the device
/// entries of its CCOBs, each decoded on its own here with `kpack_bundle`.
fn check_ccob_round_trip(lib: &Path) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (host, summary) =
        kpack_testkit::transform_into(lib, dir.path(), kpack_archive::Compression::zstd());
    let archives: std::collections::BTreeMap<String, kpack_archive::Archive> = summary
        .archives
        .iter()
        .map(|a| {
            (
                a.target.clone(),
                kpack_archive::Archive::open(&a.path).unwrap(),
            )
        })
        .collect();
    let unbundled = dir.path().join("unbundled");
    let mut unbundler = kpack_pipeline::unbundle::Unbundler::new(
        &unbundled,
        kpack_pipeline::unbundle::TargetFilter::default(),
    )
    .unwrap();
    unbundler.unbundle_file(lib).unwrap();
    let unbundled_count = unbundler.publish().unwrap().len();

    let file = File::open(lib).unwrap();
    let bytes = map_file(&file, lib).unwrap();
    let fat = kpack_elf::inspect(&bytes).unwrap();
    let section = fat.fatbin.as_ref().unwrap();
    let stem = lib.file_name().unwrap().to_string_lossy().into_owned();
    let mut checked = 0;
    for (index, located) in fat.bundles.iter().enumerate() {
        assert!(
            matches!(located.format, BundleFormat::Compressed { version: 3, .. }),
            "bundle {index} is a CCOB v3"
        );
        let start = (section.offset + located.offset) as usize;
        let decoded =
            kpack_bundle::DecodedBundle::decode(&bytes[start..start + located.len as usize])
                .unwrap();
        let wrappers: Vec<usize> = fat
            .wrappers
            .iter()
            .filter(|w| w.bundle == Some(index))
            .map(|w| w.index)
            .collect();
        for entry in decoded.bundle().unwrap().entries() {
            let id = kpack_target::BundleId::parse(entry.triple).unwrap();
            let Some(target) = id.target() else { continue };
            let target = target.to_string();
            for &w in &wrappers {
                let key = kpack_archive::binary_key(&stem, w as u32);
                let stored = archives[&target].get(&key, &target).unwrap();
                assert!(*stored == *entry.data, "{key} {target}: archive differs");
                checked += 1;
            }
            let file = unbundled.join(format!("{stem}.{index}.{id}.co"));
            assert!(
                std::fs::read(&file).unwrap() == entry.data,
                "{}: unbundled file differs",
                file.display()
            );
        }
    }
    assert_eq!(checked, summary.code_objects);
    assert!(checked > 0);
    assert_eq!(unbundled_count, checked, "one wrapper per bundle");
    let host_fat = kpack_elf::inspect(&std::fs::read(&host).unwrap()).unwrap();
    assert_eq!(host_fat.kind, kpack_elf::FatBinaryKind::Kpacked);
}

#[test]
#[ignore = "real-world"]
fn librocblas_7_2_4_ccobs_round_trip_through_transform_and_unbundle() {
    check_ccob_round_trip(&debian_7_2_4_library(
        "librocblas5_7.2.4-1~exp1",
        "librocblas.so.5.2",
    ));
}

#[test]
#[ignore = "real-world"]
fn librocsparse_7_2_4_ccobs_round_trip_through_transform_and_unbundle() {
    check_ccob_round_trip(&debian_7_2_4_library(
        "librocsparse1_7.2.4-1~exp1",
        "librocsparse.so.1.0",
    ));
}
