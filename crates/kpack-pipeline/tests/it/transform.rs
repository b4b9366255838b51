//! `transform` end to end on every linked fat fixture: archives round-trip every code object,
//! and the rewritten binaries load under the system's dynamic loader against a stand-in HIP
//! runtime (kpack-testkit's, without librocm_kpack), which sees HIPK wrappers leading to the
//! marker. Loading the code objects through the runtime is kpack-capi's `end_to_end` test.

use std::path::{Path, PathBuf};

use kpack_archive::{Archive, Compression};
use kpack_hostbin::marker::MarkerMetadata;
use kpack_pipeline::source::device_code_objects;
use kpack_pipeline::transform::{Outcome, TransformOptions, TransformSummary, transform};
use kpack_testkit::{
    JAX_VERSIONS, LINKED_FAT, fixture, jax_wheel_dir, librocsparse, run_tool, standin,
};

fn run_transform(rel: &str, root: &Path, compression: Compression) -> (PathBuf, TransformSummary) {
    kpack_testkit::transform_into(&fixture(rel), root, compression)
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs gcc and Linux's ld.so (the stand-in HIP runtime)"
)]
fn rewritten_binaries_hand_the_runtime_hipk_wrappers_pointing_at_the_marker() {
    for rel in LINKED_FAT {
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("standin");
        let original = standin(None).load(&fixture(rel), &[], &work);
        assert!(
            !original.is_empty(),
            "{rel}: the original registers nothing"
        );
        for r in &original {
            assert_eq!(r.magic, "HIPF", "{rel}");
            assert!(
                r.bytes.starts_with(b"__CLANG_OFFLOAD_BUNDLE__") || r.bytes.starts_with(b"CCOB"),
                "{rel}: the original pointer leads to a bundle"
            );
        }
        let (output, summary) = run_transform(rel, root.path(), Compression::zstd());
        let regs = standin(None).load(&output, &[], &work);
        assert_eq!(regs.len(), original.len(), "{rel}");
        let name = output.file_name().unwrap().to_string_lossy().into_owned();
        let group = name.split('.').next().unwrap();
        // The original's host entry id is recorded when it is not clang 22's, which restore
        // writes by default (clang 15 wrote `host-x86_64-unknown-linux`).
        let host = crate::restore::entry_ids(&fixture(rel))[0][0].clone();
        let want = MarkerMetadata {
            kernel_name: name.clone(),
            search_paths: vec![format!("../.kpack/{group}_@GFXARCH@.kpack")],
            host_entry_id: (host != "host-x86_64-unknown-linux-gnu-").then_some(host),
        };
        assert_eq!(summary.search_paths, want.search_paths);
        let mut seen: Vec<u64> = Vec::new();
        for r in &regs {
            assert_eq!(r.magic, "HIPK", "{rel}");
            assert_eq!(r.version, 1, "{rel}");
            let (meta, used) = MarkerMetadata::decode(&r.bytes).unwrap();
            assert_eq!(used, r.bytes.len());
            assert_eq!(meta, want, "{rel}");
            seen.push(r.reserved1);
        }
        // strip and patchelf --add-rpath leave a file that still loads and hands the runtime
        // the same wrappers and marker.
        for (tool, args) in [
            ("strip", &[][..]),
            ("patchelf", &["--add-rpath", "/opt/kpack-test"][..]),
        ] {
            let edited = output.with_file_name(format!("{tool}-{name}"));
            std::fs::copy(&output, &edited).unwrap();
            let mut argv = args.to_vec();
            argv.push(edited.to_str().unwrap());
            run_tool(tool, &argv);
            assert_eq!(
                standin(None).load(&edited, &[], &work),
                regs,
                "{rel} after {tool}"
            );
        }
        // Each registered wrapper carries its own index (in -fgpu-rdc output only the
        // device-linked wrapper is registered, so not every index need appear).
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), regs.len(), "{rel}");
        assert!(
            seen.iter().all(|&i| i < summary.wrappers as u64),
            "{rel}: {seen:?}"
        );
    }
}

#[test]
fn every_code_object_round_trips_through_the_marker_key() {
    for rel in LINKED_FAT {
        for compression in [Compression::None, Compression::zstd()] {
            let root = tempfile::tempdir().unwrap();
            let (_, summary) = run_transform(rel, root.path(), compression);
            let original = std::fs::read(fixture(rel)).unwrap();
            let objects = device_code_objects(&original).unwrap();
            let mut checked = 0;
            for obj in &objects {
                let target = obj.bundle_id.target().unwrap().to_string();
                let path = root.path().join(".kpack").join(format!(
                    "{}_{}.kpack",
                    rel.rsplit('/').next().unwrap().split('.').next().unwrap(),
                    kpack_target::file_name_spelling(&target, cfg!(windows))
                ));
                let archive = Archive::open(&path).unwrap();
                assert_eq!(archive.gfx_arches(), std::slice::from_ref(&target), "{rel}");
                assert!(!obj.wrappers.is_empty());
                for w in &obj.wrappers {
                    let key = format!("{}#{w}", summary.kernel_name);
                    let got = archive.get(&key, &target).unwrap();
                    assert_eq!(&got[..], &obj.data[..], "{rel}: {key} {target}");
                    checked += 1;
                }
            }
            assert_eq!(checked, summary.code_objects, "{rel}");
            let entries: usize = summary.archives.iter().map(|a| a.entries).sum();
            assert_eq!(entries, checked, "{rel}");
        }
    }
}

#[test]
fn a_second_transform_says_already_kpacked_and_changes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let (output, _) = run_transform("bin/libone.so", root.path(), Compression::zstd());
    let before = std::fs::read(&output).unwrap();
    let opts = TransformOptions {
        output: root.path().join("again.so"),
        kpack_dir: root.path().join("other"),
        group: None,
        kernel_name: None,
        search_paths: Vec::new(),
        compression: Compression::zstd(),
        names: kpack_pipeline::transform::NameRules::for_output(false),
    };
    assert_eq!(transform(&output, &opts).unwrap(), Outcome::AlreadyKpacked);
    assert_eq!(std::fs::read(&output).unwrap(), before);
    assert!(!opts.output.exists() && !opts.kpack_dir.exists());
}

#[test]
fn refused_inputs_leave_nothing_behind() {
    for rel in [
        "bin/k1.o",
        "bin/rdc_a.o",
        "bin/libhostonly.so",
        "bin/libtwo.a",
    ] {
        let root = tempfile::tempdir().unwrap();
        let opts = TransformOptions {
            output: root.path().join("out"),
            kpack_dir: root.path().join(".kpack"),
            group: Some("g".into()),
            kernel_name: None,
            search_paths: vec!["x_@GFXARCH@.kpack".into()],
            compression: Compression::zstd(),
            names: kpack_pipeline::transform::NameRules::for_output(false),
        };
        assert!(transform(&fixture(rel), &opts).is_err(), "{rel}");
        let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
        assert!(left.is_empty(), "{rel}: {left:?}");
    }
}

#[test]
fn the_output_keeps_the_input_mode_and_explicit_names() {
    let root = tempfile::tempdir().unwrap();
    let input = root.path().join("in.so");
    std::fs::copy(fixture("bin/libtwo.so"), &input).unwrap();
    // Windows keeps one permission bit, read-only: a read-only input gives a read-only
    // output there.
    let input_mode = if cfg!(windows) { 0o444 } else { 0o751 };
    kpack_fs::set_mode(&input, input_mode).unwrap();
    let opts = TransformOptions {
        output: root.path().join("out/libx.so.1"),
        kpack_dir: root.path().join("k"),
        group: Some("grp".into()),
        kernel_name: Some("lib/libx.so.1".into()),
        search_paths: vec!["a/@GFXARCH@.kpack".into(), "b.kpack".into()],
        compression: Compression::None,
        names: kpack_pipeline::transform::NameRules::for_output(false),
    };
    std::fs::create_dir_all(root.path().join("out")).unwrap();
    let Outcome::Transformed(s) = transform(&input, &opts).unwrap() else {
        panic!()
    };
    let mode = kpack_fs::mode(&std::fs::metadata(&opts.output).unwrap());
    assert_eq!(mode & 0o777, input_mode);
    // Writable again, so that the temporary directory can be removed on Windows.
    for path in [&input, &opts.output] {
        kpack_fs::set_mode(path, 0o644).unwrap();
    }
    assert_eq!(s.search_paths, opts.search_paths);
    assert!(s.archives.iter().all(|a| {
        a.path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("grp_")
    }));
    let fat = kpack_elf::inspect(&std::fs::read(&opts.output).unwrap()).unwrap();
    let out = std::fs::read(&opts.output).unwrap();
    let meta = MarkerMetadata::decode(fat.marker.unwrap().bytes(&out).unwrap())
        .unwrap()
        .0;
    assert_eq!(meta.kernel_name, "lib/libx.so.1");
}

fn realworld(input: &Path) {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let name = input.file_name().unwrap();
    let opts = TransformOptions {
        output: root.path().join("lib").join(name),
        kpack_dir: root.path().join(".kpack"),
        group: None,
        kernel_name: None,
        search_paths: Vec::new(),
        compression: Compression::zstd(),
        names: kpack_pipeline::transform::NameRules::for_output(false),
    };
    std::fs::create_dir_all(root.path().join("lib")).unwrap();
    let Outcome::Transformed(s) = transform(input, &opts).unwrap() else {
        panic!()
    };
    let out = std::fs::read(&opts.output).unwrap();
    kpack_elf::verify(&out).unwrap();
    let file = std::fs::File::open(input).unwrap();
    let map = kpack_pipeline::map_file(&file, input).unwrap();
    struct Check<'a>(&'a Path, &'a str, usize);
    impl kpack_pipeline::source::Visitor for Check<'_> {
        fn device_code(
            &mut self,
            code: &kpack_pipeline::source::DeviceCode<'_>,
        ) -> Result<(), kpack_pipeline::SourceError> {
            let t = code.target().to_string();
            let a = Archive::open(
                self.0
                    .join(format!("{}_{t}.kpack", self.1.split('.').next().unwrap())),
            )
            .unwrap();
            for w in code.wrappers {
                let name = self.1;
                assert_eq!(&a.get(&format!("{name}#{w}"), &t).unwrap()[..], code.data);
                self.2 += 1;
            }
            Ok(())
        }
    }
    let n = name.to_string_lossy().into_owned();
    let mut check = Check(&opts.kpack_dir, &n, 0);
    kpack_pipeline::source::walk(&map, &mut check).unwrap();
    assert_eq!(check.2, s.code_objects);
    println!(
        "{}: {} -> {} bytes, {} archives, {} code objects",
        input.display(),
        s.input_size,
        s.output_size,
        s.archives.len(),
        s.code_objects
    );
}

#[test]
#[ignore = "real-world"]
fn librocsparse_transforms_round_trips_and_loads_with_111_hipk_wrappers() {
    let input = librocsparse();
    realworld(&input);
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let opts = TransformOptions {
        output: root.path().join("librocsparse.so.0.1"),
        kpack_dir: root.path().join(".kpack"),
        group: None,
        kernel_name: None,
        search_paths: Vec::new(),
        compression: Compression::None,
        names: kpack_pipeline::transform::NameRules::for_output(false),
    };
    let Outcome::Transformed(s) = transform(&input, &opts).unwrap() else {
        panic!()
    };
    assert_eq!(s.input_size, 1_310_496_488);
    assert!(s.output_size < 15_000_000, "{s:?}");
    assert_eq!(s.archives.len(), 7);
    assert_eq!(s.code_objects, 777);
    let regs = standin(None).load(&opts.output, &[], root.path());
    assert_eq!(regs.len(), 111);
    assert!(regs.iter().all(|r| r.magic == "HIPK" && r.version == 1));
}

#[test]
#[ignore = "real-world"]
fn jax_plugins_transform_verify_and_round_trip() {
    let mut found = 0;
    for version in JAX_VERSIONS {
        let dir = jax_wheel_dir(version);
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                if p.is_dir() {
                    stack.push(p);
                } else if (n.starts_with("_linalg") || n.starts_with("_solver"))
                    && n.ends_with(".so")
                {
                    realworld(&p);
                    found += 1;
                }
            }
        }
    }
    assert!(
        found >= 4,
        "found {found} jax plugin libraries: run scripts/setup.sh"
    );
}
