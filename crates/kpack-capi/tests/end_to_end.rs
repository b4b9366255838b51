//! kpack end to end: binaries rewritten by `transform` (or split and recombined), loaded by
//! the system's dynamic loader against kpack-testkit's stand-in HIP runtime built on the
//! installed librocm_kpack. On each HIPK wrapper the stand-in does what a kpack-aware HIP
//! runtime (CLR) does: find the binary from the wrapper's address
//! (`kpack_discover_binary_path`), then `kpack_load_code_object` with the marker, that path,
//! the wrapper's index and the agent's ISA names. Every code object it returns must be the
//! original bundle's, byte for byte.
//! Needs gcc (`scripts/setup.sh` installs it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_archive::Compression;
use kpack_archive::kpm::KpmManifest;
use kpack_artifact::recombine::{PackagingConfig, RecombineOptions, recombine};
use kpack_pipeline::source::{DeviceCode, Visitor, device_code_objects, walk};
use kpack_testkit::{LINKED_FAT, Registration, SHARDS, Standin, fixture, sha256_hex, standin};

/// `KPACK_ERROR_ARCHIVE_NOT_FOUND`: with one archive per target, no search path expands to
/// an existing file.
const ARCHIVE_NOT_FOUND: i32 = 13;

/// librocm_kpack installed under `dir/prefix` with its documented command, and the stand-in
/// built against it.
fn runtime(dir: &Path) -> &'static Standin {
    let prefix = dir.join("prefix");
    let out = Command::new(env!("CARGO_BIN_EXE_install-rocm-kpack"))
        .arg("--prefix")
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "install-rocm-kpack: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    standin(Some(&prefix))
}

/// The ISA name the HIP runtime passes for an agent of `target` (CLR's `isaName()`).
fn isa(target: &str) -> String {
    format!("amdgcn-amd-amdhsa--{target}")
}

/// What the runtime handed the stand-in for one registration.
fn loaded(r: &Registration) -> Result<Vec<u8>, i32> {
    assert_eq!((r.magic.as_str(), r.version), ("HIPK", 1));
    match r.code_object.as_ref().expect("the runtime was asked") {
        Ok(path) => Ok(std::fs::read(path).unwrap()),
        Err(e) => Err(*e),
    }
}

/// `input` transformed into an install-like tree: `root/lib/<name>` and `root/.kpack/`.
fn install(input: &Path, root: &Path, compression: Compression) -> PathBuf {
    kpack_testkit::transform_into(input, root, compression).0
}

/// The original code objects of a fat binary by (wrapper index, target).
fn originals(binary: &Path) -> BTreeMap<(u64, String), Vec<u8>> {
    let bytes = std::fs::read(binary).unwrap();
    let mut out = BTreeMap::new();
    for obj in device_code_objects(&bytes).unwrap() {
        let target = obj.bundle_id.target().unwrap().to_string();
        for &w in &obj.wrappers {
            out.insert((w as u64, target.clone()), obj.data.to_vec());
        }
    }
    out
}

/// Asserts the runtime returned exactly `want` (naming only sizes: objects are large).
fn same(got: Result<Vec<u8>, i32>, want: &[u8], what: &str) {
    let got = got.unwrap_or_else(|e| panic!("{what}: kpack_load_code_object returned {e}"));
    assert!(
        got == want,
        "{what}: {} bytes returned, not the original's {}",
        got.len(),
        want.len()
    );
}

#[test]
fn every_fixture_loads_its_original_code_objects_through_the_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let work = tmp.path().join("work");
    for rel in LINKED_FAT {
        let original = fixture(rel);
        let want = originals(&original);
        let targets: BTreeSet<&str> = want.keys().map(|(_, t)| t.as_str()).collect();
        let first = isa(targets.first().unwrap());
        let mut checked = 0;
        // The untouched binary registers HIPF wrappers, which the runtime is never asked about.
        let before = rt.load(&original, &[&first], &work);
        assert!(!before.is_empty(), "{rel} registers nothing");
        for r in &before {
            assert_eq!((r.magic.as_str(), &r.code_object), ("HIPF", &None), "{rel}");
        }
        // Both archive encodings: the runtime copies stored objects or decodes zstd frames.
        for compression in [Compression::None, Compression::zstd()] {
            let root = tmp
                .path()
                .join(format!("{}-{compression:?}", rel.replace('/', "_")));
            let lib = install(&original, &root, compression);
            for target in &targets {
                let regs = rt.load(&lib, &[&isa(target)], &work);
                assert_eq!(regs.len(), before.len(), "{rel} {target}");
                for r in &regs {
                    let key = (r.reserved1, target.to_string());
                    let data = want
                        .get(&key)
                        .unwrap_or_else(|| panic!("{rel}: {key:?} not built"));
                    same(loaded(r), data, &format!("{rel} {compression:?} {key:?}"));
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 2 * before.len() * targets.len(), "{rel}");
    }
}

/// What `rel`'s rewritten binary loads for the agent's targets `arches`, per registration.
fn load_fixture(rt: &Standin, tmp: &Path, rel: &str, arches: &[&str]) -> Vec<Result<Vec<u8>, i32>> {
    let root = tmp.join(rel.replace('/', "_"));
    let lib = match root.join("lib").join(Path::new(rel).file_name().unwrap()) {
        lib if lib.exists() => lib,
        _ => install(&fixture(rel), &root, Compression::zstd()),
    };
    let arches: Vec<String> = arches.iter().map(|a| isa(a)).collect();
    let arches: Vec<&str> = arches.iter().map(String::as_str).collect();
    let regs = rt.load(&lib, &arches, &tmp.join("work"));
    regs.iter().map(loaded).collect()
}

#[test]
fn an_sramecc_agent_loads_the_xnack_minus_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let want = originals(&fixture("bin/libone.so"));
    let minus = want[&(0, "gfx90a:xnack-".to_owned())].clone();
    assert_ne!(minus, want[&(0, "gfx90a:xnack+".to_owned())]);
    // The agent names a feature no archive is tagged with: dropping it finds xnack-.
    let got = load_fixture(rt, tmp.path(), "bin/libone.so", &["gfx90a:sramecc+:xnack-"]);
    assert_eq!(got, [Ok(minus)]);
}

#[test]
fn a_generic_target_is_used_when_listed_after_the_specific_one() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let rel = "modern/libmodern_wide_v3.so";
    let want = originals(&fixture(rel));
    let object = |t: &str| Ok(want[&(0, t.to_owned())].clone());
    assert!(!want.contains_key(&(0, "gfx1102".to_owned())));
    assert_ne!(object("gfx11-generic"), object("gfx1100"));
    let load = |arches: &[&str]| load_fixture(rt, tmp.path(), rel, arches);
    // An agent the binary was not built for gets nothing, unless the caller adds a generic
    // target the binary carries.
    assert_eq!(load(&["gfx1102"]), [Err(ARCHIVE_NOT_FOUND)]);
    assert_eq!(
        load(&["gfx1102", "gfx11-generic"]),
        [object("gfx11-generic")]
    );
    assert_eq!(load(&["gfx1100", "gfx11-generic"]), [object("gfx1100")]);
    // The caller's order is the priority, whatever the archives hold.
    assert_eq!(
        load(&["gfx11-generic", "gfx1100"]),
        [object("gfx11-generic")]
    );
}

#[test]
fn the_overlaid_install_tree_loads_every_target_through_the_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let shards = kpack_testkit::split_shards(&tmp.path().join("shards"));
    let out = tmp.path().join("out");
    // Issue 14's scenario: three groups, the seed's configuration shape.
    let config = PackagingConfig::parse(
        r#"{"primary_shard": "shard-a",
            "architecture_groups": {
                "gfx9": {"display_name": "GFX9", "architectures": ["gfx900", "gfx906"]},
                "gfx90X": {"display_name": "GFX90X", "architectures": ["gfx908", "gfx90a"]},
                "gfx103X": {"display_name": "GFX103X", "architectures": ["gfx1030"]}},
            "validation": {"error_on_duplicate_device_code": true,
                           "verify_generic_artifacts_match": true,
                           "error_on_missing_architecture": true}}"#,
    )
    .unwrap();
    recombine(&shards, &config, &out, &RecombineOptions::default()).unwrap();
    // Every package installed into one root, as a package manager would: no path is shipped
    // by two of them (an overwrite would go unnoticed here), so none is overwritten.
    assert_eq!(
        kpack_testkit::shared_installed_paths(&out),
        Vec::<(String, Vec<String>)>::new()
    );
    let mut packages: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    packages.sort();
    assert_eq!(
        packages,
        [
            "demo_host_generic",
            "demo_lib_generic",
            "demo_lib_gfx103X",
            "demo_lib_gfx9",
            "demo_lib_gfx90X"
        ]
    );
    let install = tmp.path().join("install");
    for a in &packages {
        kpack_testkit::copy_tree(&out.join(a).join("demo/stage"), &install);
    }
    // The index, installed at `.kpack/` (its prefix "." is the install root), names every
    // archive of the tree with the package that brought it.
    for module in ["bin_demo", "lib_libdemo.so.1"] {
        let path = install.join(format!(".kpack/{module}.kpm"));
        let kpm = KpmManifest::decode(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(kpm.prefix, ".");
        assert_eq!(kpm.kpack_files.len(), 6, "{module}");
        for (target, e) in &kpm.kpack_files {
            let archive = install.join(&kpm.prefix).join(".kpack").join(&e.file);
            assert_eq!(
                std::fs::metadata(&archive).unwrap().len(),
                e.size,
                "{target}"
            );
            let from = out
                .join(e.package.as_deref().unwrap())
                .join("demo/stage/.kpack");
            assert!(from.join(&e.file).is_file(), "{target}: {from:?}");
        }
    }
    // Every target's original code objects, by (binary, wrapper, target), from the shards'
    // unsplit artifacts.
    let mut want: BTreeMap<(&str, u64, String), Vec<u8>> = BTreeMap::new();
    for shard in SHARDS {
        let dir = std::fs::read_dir(fixture(&format!("shards/{shard}")))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().contains("demo_lib"))
            .unwrap();
        for bin in ["bin/demo", "lib/libdemo.so.1"] {
            for ((w, target), data) in originals(&dir.join("demo/stage").join(bin)) {
                want.insert((bin, w, target), data);
            }
        }
    }
    let targets: BTreeSet<&str> = want.keys().map(|k| k.2.as_str()).collect();
    assert_eq!(targets.len(), 6, "{targets:?}");
    let work = tmp.path().join("work");
    let mut loaded_objects = 0;
    for target in &targets {
        for bin in ["bin/demo", "lib/libdemo.so.1"] {
            let regs = rt.load(&install.join(bin), &[&isa(target)], &work);
            assert!(!regs.is_empty(), "{bin} registers nothing");
            for r in &regs {
                let key = (bin, r.reserved1, target.to_string());
                let data = want
                    .get(&key)
                    .unwrap_or_else(|| panic!("{key:?} was not built"));
                assert!(loaded(r).as_ref() == Ok(data), "{key:?}");
                loaded_objects += 1;
            }
        }
    }
    assert_eq!(loaded_objects, want.len());
}

#[test]
#[ignore = "real-world"]
fn librocsparse_loads_every_wrapper_and_target_through_the_runtime() {
    let input = kpack_testkit::librocsparse();
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let rt = runtime(tmp.path());
    // The originals' digests by (wrapper, target), from the untouched input.
    struct Digests(BTreeMap<(u64, String), String>);
    impl Visitor for Digests {
        fn device_code(
            &mut self,
            code: &DeviceCode<'_>,
        ) -> Result<(), kpack_pipeline::SourceError> {
            let digest = sha256_hex(code.data);
            for &w in code.wrappers {
                let key = (w as u64, code.target().to_string());
                self.0.insert(key, digest.clone());
            }
            Ok(())
        }
    }
    let mut want = Digests(BTreeMap::new());
    let file = std::fs::File::open(&input).unwrap();
    walk(&kpack_pipeline::map_file(&file, &input).unwrap(), &mut want).unwrap();
    let want = want.0;
    assert_eq!(want.len(), 777);
    let lib = install(&input, &tmp.path().join("root"), Compression::zstd());
    let targets: BTreeSet<&str> = want.keys().map(|(_, t)| t.as_str()).collect();
    assert_eq!(targets.len(), 7, "{targets:?}");
    let work = tmp.path().join("work");
    let mut checked = 0;
    for target in targets {
        let regs = rt.load(&lib, &[&isa(target)], &work);
        assert_eq!(regs.len(), 111, "{target}");
        for r in &regs {
            let key = (r.reserved1, target.to_owned());
            let got = loaded(r).unwrap_or_else(|e| panic!("{key:?}: error {e}"));
            assert_eq!(sha256_hex(&got), want[&key], "{key:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, 777);
}
