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
use kpack_package::handlers::Handler;
use kpack_pipeline::source::{DeviceCode, Visitor, walk};
use kpack_testkit::{
    LINKED_FAT, Registration, SHARDS, Standin, fixture, originals, run_tool, sha256_hex, standin,
};

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
        // Every archive encoding: the runtime copies stored objects, decodes zstd frames, or
        // (format v2) decodes a frame against its reference.
        let compressions = [
            Compression::None,
            Compression::zstd(),
            Compression::unified(),
        ];
        for compression in compressions {
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
        assert_eq!(
            checked,
            compressions.len() * before.len() * targets.len(),
            "{rel}"
        );
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

/// The portable SPIR-V target (docs/spirv.md): each ISA spelling the HIP runtime may use
/// for it loads the SPIR-V entry; the GPU's own ISA, passed first, loads the native entry
/// when the binary has one and falls through to SPIR-V when it has none.
#[test]
fn each_spirv_isa_spelling_loads_the_spirv_entry_and_a_gpus_own_isa_its_native_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let rel = "spirv/libspirv_v3.so";
    let lib = install(&fixture(rel), &tmp.path().join("root"), Compression::zstd());
    let want = originals(&fixture(rel));
    let object = |t: &str| Ok(want[&(0, t.to_owned())].clone());
    let load = |isas: &[&str]| -> Vec<_> {
        let regs = rt.load(&lib, isas, &tmp.path().join("work"));
        regs.iter().map(loaded).collect()
    };
    let (gfx1030, gfx1100) = (isa("gfx1030"), isa("gfx1100"));
    for spelling in [
        "amdgcnspirv",
        "spirv64-amd-amdhsa--amdgcnspirv",
        "amdgcn-amd-amdhsa--amdgcnspirv",
    ] {
        assert_eq!(load(&[spelling]), [object("amdgcnspirv")], "{spelling}");
        assert_eq!(
            load(&[&gfx1030, spelling]),
            [object("amdgcnspirv")],
            "gfx1030, {spelling}"
        );
        assert_eq!(
            load(&[&gfx1100, spelling]),
            [object("gfx1100")],
            "gfx1100, {spelling}"
        );
    }
}

#[test]
fn the_overlaid_install_tree_loads_every_target_through_the_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let install = recombined_install(tmp.path(), None);
    loads_every_target(rt, &tmp.path().join("work"), &install);
}

/// With group archives (`recombine --group-archives`), the markers reach each group's one
/// multi-target archive through the per-target links: librocm_kpack through the stand-in
/// HIP runtime and the Rust runtime load every target, also from copies of the tree made by
/// `cp -a` and `tar` elsewhere (the links are relative).
#[test]
fn the_overlaid_install_tree_with_group_archives_loads_every_target_through_the_runtime() {
    group_archives_load_every_target(Compression::zstd());
}

/// The same with format v2 group archives (`recombine --compression unified`): every target
/// of every group archive, coded across the group's targets, loads byte for byte.
#[test]
fn the_overlaid_install_tree_with_unified_group_archives_loads_every_target_through_the_runtime() {
    group_archives_load_every_target(Compression::unified());
}

/// Recombines the shards with group archives of `compression` and loads every target of the
/// installed tree, and of copies of it, through both runtimes.
fn group_archives_load_every_target(compression: Compression) {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let install = recombined_install(tmp.path(), Some(compression));
    let kpack = install.join(".kpack");
    assert_eq!(
        std::fs::read_link(kpack.join("lib_libdemo.so.1_gfx90a:xnack-.kpack")).unwrap(),
        Path::new("lib_libdemo.so.1_gfx90X.kpack")
    );
    let group = kpack_archive::Archive::open(kpack.join("lib_libdemo.so.1_gfx90X.kpack")).unwrap();
    assert_eq!(group.compression_scheme(), compression.scheme());
    assert_eq!(group.gfx_arches().len(), 3, "{:?}", group.gfx_arches());
    let copies = kpack_testkit::copied_elsewhere(&install, tmp.path());
    std::fs::remove_dir_all(&install).unwrap();
    for tree in &copies {
        assert!(tree.join(".kpack/bin_demo_gfx900.kpack").is_symlink());
        let loaded = loads_every_target(rt, &tmp.path().join("work"), tree);
        // The Rust runtime, for the same wrappers and targets.
        let cache = kpack_runtime::Cache::new(kpack_runtime::Config::default());
        for ((bin, w, target), data) in &loaded {
            let got = rust_runtime_load(&cache, &tree.join(bin), *w, target);
            assert!(got == *data, "{bin} #{w} {target}");
        }
    }
}

/// What the Rust runtime's `cache` loads for wrapper `w` of the installed binary `binary`
/// (its marker read from the file) for an agent of `target`.
fn rust_runtime_load(cache: &kpack_runtime::Cache, binary: &Path, w: u64, target: &str) -> Vec<u8> {
    let bytes = std::fs::read(binary).unwrap();
    let fat = kpack_elf::inspect(&bytes).unwrap();
    let marker = fat.marker.as_ref().unwrap().bytes(&bytes).unwrap();
    let (meta, _) = kpack_hostbin::marker::MarkerMetadata::decode(marker).unwrap();
    cache
        .load(&meta, binary, w as u32, &[&isa(target)])
        .unwrap_or_else(|e| panic!("{} #{w} {target}: {e}", binary.display()))
}

/// The issue 14 scenario (three groups of the hipcc shards), recombined (with group archives
/// of that compression, if any) and installed into one root, which is returned; checks the
/// packages install side by side and the index names every archive with its package.
fn recombined_install(tmp: &Path, group_archives: Option<Compression>) -> PathBuf {
    let shards = kpack_testkit::split_shards(&tmp.join("shards"));
    let out = tmp.join("out");
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
    let opts = RecombineOptions {
        group_archives,
        ..RecombineOptions::default()
    };
    recombine(&shards, &config, &out, &opts).unwrap();
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
    let install = tmp.join("install");
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
    install
}

/// Loads every wrapper of both demo binaries of the install tree `install` for each of the
/// six targets through the stand-in HIP runtime `rt` (working in `work`), each the original
/// code object; returns them by (binary, wrapper, target).
fn loads_every_target(
    rt: &Standin,
    work: &Path,
    install: &Path,
) -> BTreeMap<(&'static str, u64, String), Vec<u8>> {
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
    let mut loaded_objects = 0;
    for target in &targets {
        for bin in ["bin/demo", "lib/libdemo.so.1"] {
            let regs = rt.load(&install.join(bin), &[&isa(target)], work);
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
    want
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

/// The site-packages directory of the venv at `venv`.
fn site_packages(venv: &Path) -> PathBuf {
    let lib = venv.join("lib");
    let py = std::fs::read_dir(&lib)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("python")
        })
        .unwrap();
    py.join("site-packages")
}

/// The files an installed distribution's RECORD lists, outside its dist-info.
fn installed_files(site: &Path, dist_info: &str) -> BTreeSet<String> {
    let record = std::fs::read_to_string(site.join(dist_info).join("RECORD")).unwrap();
    record
        .lines()
        .filter_map(|l| l.split(',').next())
        .filter(|p| !p.starts_with(dist_info))
        .map(str::to_owned)
        .collect()
}

/// The fixture wheel split (with rocBLAS and AOTriton databases) into `tmp/wheels`, and an
/// empty venv `tmp/venv`.
fn split_demo_wheel(tmp: &Path, multi_target_archives: bool) -> (PathBuf, PathBuf) {
    let wheels = tmp.join("wheels");
    let mut opts = kpack_wheel::SplitOptions::new(&wheels);
    opts.handlers = vec![Handler::Rocblas, Handler::Aotriton];
    opts.multi_target_archives = multi_target_archives;
    kpack_wheel::split_wheel(
        &fixture("wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl"),
        &opts,
    )
    .unwrap();
    let venv = tmp.join("venv");
    run_tool("python3", &["-m", "venv", venv.to_str().unwrap()]);
    (wheels, venv)
}

/// `pip install kpack-demo[extra]` into `venv` from the wheels in `wheels` only.
fn pip_install_extra(venv: &Path, wheels: &Path, extra: &str) -> Vec<u8> {
    run_tool(
        venv.join("bin/pip").to_str().unwrap(),
        &[
            "install",
            "--no-index",
            "--find-links",
            wheels.to_str().unwrap(),
            &format!("kpack-demo[{extra}]"),
        ],
    )
}

#[test]
fn a_split_wheel_installed_by_pip_loads_each_targets_original_code_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let (wheels, venv) = split_demo_wheel(tmp.path(), false);
    let pip = venv.join("bin/pip");
    let pip = |args: &[&str]| run_tool(pip.to_str().unwrap(), args);
    let install = |extra: &str| pip_install_extra(&venv, &wheels, extra);
    let site = site_packages(&venv);
    // The wheel's binaries and the fixtures they were packed from.
    let binaries = [
        ("kpack_demo/lib/libone.so", "bin/libone.so"),
        (
            "kpack_demo/lib/nested/libmodern_v3.so",
            "modern/libmodern_v3.so",
        ),
        ("kpack_demo/bin/exe_pie", "bin/exe_pie"),
    ];
    let work = tmp.path().join("work");
    // With `target`'s device wheel installed, every binary built for it loads its original
    // code objects for an agent of `agent`; without it, or when not built for it, the
    // runtime finds no archive. Returns how many wrappers were built for `target`.
    let loads_as = |agent: &str, target: &str, installed: bool| -> usize {
        let mut checked = 0;
        for (binary, original) in binaries {
            let want = originals(&fixture(original));
            let regs = rt.load(&site.join(binary), &[&isa(agent)], &work);
            assert!(!regs.is_empty(), "{binary} registers nothing");
            for r in &regs {
                match want.get(&(r.reserved1, target.to_owned())) {
                    Some(data) if installed => {
                        same(loaded(r), data, &format!("{binary} {agent}"));
                        checked += 1;
                    }
                    built => {
                        assert_eq!(loaded(r), Err(ARCHIVE_NOT_FOUND), "{binary} {agent}");
                        checked += usize::from(built.is_some());
                    }
                }
            }
        }
        checked
    };
    let loads = |agent: &str, target: &str| loads_as(agent, target, true);

    install("device-gfx90a");
    assert_eq!(loads("gfx90a:xnack-", "gfx90a:xnack-"), 1);
    assert_eq!(loads("gfx90a:xnack+", "gfx90a:xnack+"), 1);
    assert_eq!(
        loads_as("gfx1030", "gfx1030", false),
        2,
        "gfx1030 is not installed yet"
    );

    // A second extra installs beside the first, touching none of its files.
    install("device-gfx1030");
    let list = String::from_utf8(pip(&["list", "--format=freeze"])).unwrap();
    for dist in [
        "kpack-demo==1.0",
        "kpack-demo-device-gfx90a==1.0",
        "kpack-demo-device-gfx1030==1.0",
    ] {
        assert!(list.lines().any(|l| l == dist), "{dist} not in {list}");
    }
    let f90a = installed_files(&site, "kpack_demo_device_gfx90a-1.0.dist-info");
    let f1030 = installed_files(&site, "kpack_demo_device_gfx1030-1.0.dist-info");
    let host = installed_files(&site, "kpack_demo-1.0.dist-info");
    assert!(f90a.is_disjoint(&f1030) && host.is_disjoint(&f90a) && host.is_disjoint(&f1030));
    assert!(f1030.contains("kpack_demo/lib/rocblas/library/TensileLibrary_gfx1030.co"));
    assert_eq!(loads("gfx1030", "gfx1030"), 2, "libone and exe_pie");
    assert_eq!(loads("gfx90a:xnack-", "gfx90a:xnack-"), 1);

    // A target extra brings its sub-family and family wheels too.
    install("device-gfx1100");
    let list = String::from_utf8(pip(&["list", "--format=freeze"])).unwrap();
    for dist in [
        "kpack-demo-device-gfx1100==1.0",
        "kpack-demo-device-gfx110x==1.0",
        "kpack-demo-device-gfx11==1.0",
    ] {
        assert!(list.lines().any(|l| l == dist), "{dist} not in {list}");
    }
    assert_eq!(loads("gfx1100", "gfx1100"), 1);

    // Uninstalling one device wheel leaves the host and the others whole and loading.
    pip(&["uninstall", "-y", "kpack-demo-device-gfx90a"]);
    for f in f90a {
        assert!(!site.join(&f).exists(), "{f} left behind");
    }
    for f in host.iter().chain(&f1030) {
        assert!(site.join(f).exists(), "{f} removed");
    }
    assert_eq!(loads("gfx1030", "gfx1030"), 2);
    assert_eq!(loads_as("gfx90a:xnack-", "gfx90a:xnack-", false), 1);
}

/// Split with multi-target archives, a device wheel holds one archive per module with all of
/// its targets (`gfx90a:xnack±` in the gfx90a wheel, `gfx11-generic` in the gfx11 family
/// wheel), which the runtime finds through the host wheel's index: installed by pip, every
/// target's original code objects load through the stand-in HIP runtime and the Rust
/// runtime.
#[test]
fn a_split_wheel_with_multi_target_archives_installed_by_pip_loads_every_target() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let (wheels, venv) = split_demo_wheel(tmp.path(), true);
    for extra in ["device-gfx90a", "device-gfx1100"] {
        pip_install_extra(&venv, &wheels, extra);
    }
    let site = site_packages(&venv);
    let kpack = site.join("kpack_demo/.kpack");
    for (file, present) in [
        ("one_gfx90a.kpack", true),
        ("one_gfx90a:xnack+.kpack", false),
        ("modern_v3_gfx11.kpack", true),
        ("modern_v3_gfx11-generic.kpack", false),
        ("modern_v3.kpm", true),
    ] {
        assert_eq!(kpack.join(file).is_file(), present, "{file}");
    }
    let archive = kpack_archive::Archive::open(kpack.join("one_gfx90a.kpack")).unwrap();
    assert_eq!(archive.gfx_arches(), ["gfx90a:xnack+", "gfx90a:xnack-"]);
    let work = tmp.path().join("work");
    let cache = kpack_runtime::Cache::new(kpack_runtime::Config::default());
    let mut checked = 0;
    for (binary, original, target) in [
        ("kpack_demo/lib/libone.so", "bin/libone.so", "gfx90a:xnack-"),
        ("kpack_demo/lib/libone.so", "bin/libone.so", "gfx90a:xnack+"),
        (
            "kpack_demo/lib/nested/libmodern_v3.so",
            "modern/libmodern_v3.so",
            "gfx1100",
        ),
        (
            "kpack_demo/lib/nested/libmodern_v3.so",
            "modern/libmodern_v3.so",
            "gfx11-generic",
        ),
    ] {
        let want = originals(&fixture(original));
        let regs = rt.load(&site.join(binary), &[&isa(target)], &work);
        assert!(!regs.is_empty(), "{binary} registers nothing");
        for r in &regs {
            let data = &want[&(r.reserved1, target.to_owned())];
            same(loaded(r), data, &format!("{binary} {target}"));
            let got = rust_runtime_load(&cache, &site.join(binary), r.reserved1, target);
            assert!(got == *data, "{binary} {target}: the Rust runtime");
            checked += 1;
        }
    }
    assert_eq!(checked, 4);
}

/// What librocm_kpack's `kpack_load_code_object` returns for wrapper `co_index` of the
/// installed binary `binary` (its marker read from the file) and the agent ISAs `isas`.
fn load_code_object(binary: &Path, co_index: u32, isas: &[&str]) -> Result<Vec<u8>, i32> {
    use std::ffi::{CString, c_void};
    let bytes = std::fs::read(binary).unwrap();
    let fat = kpack_elf::inspect(&bytes).unwrap();
    let marker = fat.marker.as_ref().expect("a kpacked binary has a marker");
    let metadata = marker.bytes(&bytes).unwrap().to_vec();
    let path = CString::new(binary.to_str().unwrap()).unwrap();
    let isas: Vec<CString> = isas.iter().map(|i| CString::new(*i).unwrap()).collect();
    let ptrs: Vec<*const std::ffi::c_char> = isas.iter().map(|c| c.as_ptr()).collect();
    let mut cache = std::ptr::null_mut();
    let mut out: *mut c_void = std::ptr::null_mut();
    let mut size = 0usize;
    // SAFETY: every pointer is valid for the call (the C API's contract): the cache is
    // created and destroyed here, the metadata is the whole msgpack marker, the strings are
    // NUL-terminated and live across the call, the outputs are locals.
    unsafe {
        assert_eq!(rocm_kpack::kpack_cache_create(&mut cache) as i32, 0);
        let rc = rocm_kpack::kpack_load_code_object(
            cache,
            metadata.as_ptr().cast(),
            path.as_ptr(),
            co_index,
            ptrs.as_ptr(),
            ptrs.len(),
            &mut out,
            &mut size,
        ) as i32;
        let result = if rc == 0 {
            let data = std::slice::from_raw_parts(out.cast::<u8>(), size).to_vec();
            rocm_kpack::kpack_free_code_object(out);
            Ok(data)
        } else {
            Err(rc)
        };
        rocm_kpack::kpack_cache_destroy(cache);
        result
    }
}

/// The real PyPI wheels split, their host and two device wheels installed by pip (into a
/// `--target` tree for CPython 3.12, the wheels' ABI, since the machine's Python may be older), and
/// every wrapper of every rewritten binary loading, through librocm_kpack, the original
/// wheel's code object for each installed target, byte for byte.
#[test]
#[ignore = "real-world"]
fn real_split_wheels_installed_by_pip_load_their_original_code_objects() {
    for (name, version, targets) in [
        ("cupy_rocm_7_0", "14.2.0", ["gfx942", "gfx1100"]),
        ("jax_rocm7_plugin", "0.12.0", ["gfx942", "gfx1100"]),
    ] {
        let input = kpack_testkit::corpus_wheel(name, version);
        let tmp = tempfile::tempdir().unwrap();
        let wheels = tmp.path().join("wheels");
        let s = kpack_wheel::split_wheel(&input, &kpack_wheel::SplitOptions::new(&wheels)).unwrap();
        let mut install = vec![s.host.path.display().to_string()];
        for t in targets {
            let d = s.devices.iter().find(|d| d.key.as_str() == t).unwrap();
            install.push(d.wheel.path.display().to_string());
        }
        let target = tmp.path().join("site");
        let mut args = vec!["--no-deps", "--ignore-requires-python"];
        args.extend(install.iter().map(String::as_str));
        pip_install_for(&input, &target, &args);
        // The original's code objects, from the fat wheel unpacked.
        let original_root = unzipped(&input, &tmp.path().join("original"));
        let mut checked = 0;
        for f in &s.fat_binaries {
            let want = originals(&original_root.join(&f.path));
            let installed = target.join(&f.path);
            let wrappers = kpack_elf::inspect(&std::fs::read(&installed).unwrap())
                .unwrap()
                .wrappers
                .len();
            for t in targets {
                for w in 0..wrappers {
                    match want.get(&(w as u64, t.to_owned())) {
                        Some(data) => {
                            same(
                                load_code_object(&installed, w as u32, &[&isa(t)]),
                                data,
                                &format!("{name} {} #{w} {t}", f.path),
                            );
                            checked += 1;
                        }
                        None => assert_eq!(
                            load_code_object(&installed, w as u32, &[&isa(t)]),
                            Err(ARCHIVE_NOT_FOUND)
                        ),
                    }
                }
            }
        }
        assert!(
            checked >= 2 * s.fat_binaries.len(),
            "{name}: {checked} objects compared"
        );
    }
}

/// `pip install --target target` of `args` from local wheels only, for the Python and
/// platform the wheel `like` was built for (CPython 3.12 and its platform tag: the machine's
/// Python may be older).
fn pip_install_for(like: &Path, target: &Path, args: &[&str]) {
    let platform = like
        .to_string_lossy()
        .rsplit('-')
        .next()
        .unwrap()
        .trim_end_matches(".whl")
        .to_owned();
    let mut all = vec![
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-index",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--platform",
        &platform,
        "--target",
        target.to_str().unwrap(),
    ];
    all.extend(args);
    run_tool("python3", &all);
}

/// `wheel` unzipped into `dir`, which is returned.
fn unzipped(wheel: &Path, dir: &Path) -> PathBuf {
    run_tool(
        "unzip",
        &["-q", wheel.to_str().unwrap(), "-d", dir.to_str().unwrap()],
    );
    dir.to_owned()
}

/// A wheel named `name` `version`, `py3-none-any`, holding only its dist-info: what pip
/// needs to satisfy a requirement on it.
fn stub_wheel(dir: &Path, name: &str, version: &str) {
    let script = "import sys, zipfile\n\
        d, n, v = sys.argv[1:]\n\
        info = f'{n}-{v}.dist-info'\n\
        z = zipfile.ZipFile(f'{d}/{n}-{v}-py3-none-any.whl', 'w')\n\
        z.writestr(f'{info}/METADATA', f'Metadata-Version: 2.1\\nName: {n}\\nVersion: {v}\\n')\n\
        z.writestr(f'{info}/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
        z.writestr(f'{info}/RECORD', '')\n\
        z.close()\n";
    run_tool(
        "python3",
        &["-c", script, dir.to_str().unwrap(), name, version],
    );
}

/// jax-rocm7-plugin 0.10.0 ships generic code objects for most GPUs (gfx9-4, gfx10-3, gfx11
/// and gfx12 generic, plus gfx908 and gfx90a). Its split gives every GPU those serve a
/// `device-<gpu>` extra; pip, resolving that extra alone (into a `--target` tree for CPython
/// 3.12, the wheel's ABI), installs the one generic device wheel that serves the GPU; and
/// librocm_kpack, given the GPU's ISAs as the HIP runtime lists them (its own, then its
/// generic one), loads from it the original wheel's generic code object, byte for byte.
#[test]
#[ignore = "real-world"]
fn generic_device_wheels_get_an_extra_per_gpu_they_serve_which_pip_installs_and_the_runtime_loads()
{
    let input = kpack_testkit::corpus_wheel("jax_rocm7_plugin", "0.10.0");
    let tmp = tempfile::tempdir().unwrap();
    let wheels = tmp.path().join("wheels");
    let s = kpack_wheel::split_wheel(&input, &kpack_wheel::SplitOptions::new(&wheels)).unwrap();
    // The host's one unconditional requirement, which is not what this test is about.
    stub_wheel(&wheels, "jax_rocm7_pjrt", "0.10.0");
    let original_root = unzipped(&input, &tmp.path().join("original"));
    for (gpu, generic, device_info) in [
        ("gfx1100", "gfx11-generic", "jax_rocm7_plugin_device_gfx11"),
        ("gfx1103", "gfx11-generic", "jax_rocm7_plugin_device_gfx11"),
        ("gfx942", "gfx9-4-generic", "jax_rocm7_plugin_device_gfx9_4"),
    ] {
        let site = tmp.path().join(format!("site-{gpu}"));
        pip_install_for(
            &input,
            &site,
            &[
                "--find-links",
                wheels.to_str().unwrap(),
                &format!("jax-rocm7-plugin[device-{gpu}]"),
            ],
        );
        let devices: Vec<String> = std::fs::read_dir(&site)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("jax_rocm7_plugin_device_") && n.ends_with(".dist-info"))
            .collect();
        assert_eq!(
            devices,
            [format!("{device_info}-0.10.0.dist-info")],
            "{gpu}"
        );
        let mut checked = 0;
        for f in &s.fat_binaries {
            let want = originals(&original_root.join(&f.path));
            let installed = site.join(&f.path);
            let wrappers = kpack_elf::inspect(&std::fs::read(&installed).unwrap())
                .unwrap()
                .wrappers
                .len();
            for w in 0..wrappers {
                if let Some(data) = want.get(&(w as u64, generic.to_owned())) {
                    same(
                        load_code_object(&installed, w as u32, &[&isa(gpu), &isa(generic)]),
                        data,
                        &format!("{} #{w} {gpu}", f.path),
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 0, "{gpu}: no {generic} code object compared");
    }
}
