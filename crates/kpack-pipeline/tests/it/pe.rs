//! `transform` on the Windows PE32+ fixtures (`fixtures/platforms`: lld-link DLL and EXE, a
//! 2-wrapper DLL rebased by a base-address collision, a `/fixed` EXE without `.reloc`, a mingw
//! GNU ld DLL with long section names), loaded for real under wine64 against the stand-in
//! `amdhip64.dll`, which reports each wrapper (magic, version, index, the bytes its pointer
//! leads to). The test decodes the marker the stand-in saw and fetches every code object from
//! the archives that marker names, byte for byte the original's. The originals load too
//! (HIPF). Also: `inspect`, `unbundle`, `--check` and malformed-input errors through the
//! pipeline.

use std::path::Path;

use kpack_archive::Compression;
use kpack_pipeline::source::{FileKind, device_code_objects};
use kpack_pipeline::unbundle::{TargetFilter, Unbundler};
use kpack_testkit::{
    PE_FIXTURES, PeFixture, Wine, assert_fetched_are_the_originals, fetch_through_markers, fixture,
};

/// The test binary's wine prefix (created once, reused by every test).
fn wine() -> Wine {
    Wine::new(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("kpack-wineprefix"))
}

/// Copies the stand-in runtime and the loader next to `binary`'s directory and runs it:
/// `loader.exe NAME` for a DLL, the EXE itself otherwise.
fn load(wine: &Wine, f: &PeFixture, binary: &Path) -> Vec<kpack_testkit::WineRegistration> {
    let dir = binary.parent().unwrap();
    for helper in ["amdhip64.dll", "loader.exe"] {
        std::fs::copy(fixture(&format!("platforms/{helper}")), dir.join(helper)).unwrap();
    }
    let name = binary.file_name().unwrap().to_str().unwrap();
    let (regs, stdout) = if f.dll {
        wine.run(dir, "loader.exe", &[name])
    } else {
        wine.run(dir, name, &[])
    };
    if f.dll {
        assert!(stdout.contains("hipapp_hello() == 42"), "{stdout}");
    } else {
        assert!(stdout.contains("[hipexe] main"), "{stdout}");
    }
    regs
}

/// The preferred image range `[ImageBase, ImageBase + SizeOfImage)` of a PE file.
fn preferred_range(bytes: &[u8]) -> std::ops::Range<u64> {
    let pe = kpack_pe::PeFile::parse(bytes).unwrap();
    pe.image_base..pe.image_base + u64::from(pe.size_of_image)
}

#[test]
#[cfg_attr(windows, ignore = "needs Linux's wine")]
fn pe_fixtures_transform_verify_load_under_wine_and_lead_to_their_code_objects() {
    let wine = wine();
    for f in PE_FIXTURES {
        let input = fixture(f.path);
        let what = f.path;
        let original_bytes = std::fs::read(&input).unwrap();
        let objects = device_code_objects(&original_bytes).unwrap();
        assert_eq!(objects.len(), 3 * f.wrappers, "{what}: 3 targets per TU");

        // The original, copied alone into a directory of its own, registers HIPF bundles.
        let plain = tempfile::tempdir().unwrap();
        let copy = plain.path().join(input.file_name().unwrap());
        std::fs::copy(&input, &copy).unwrap();
        let original = load(&wine, f, &copy);
        assert_eq!(original.len(), f.wrappers, "{what}");
        for r in &original {
            let r = &r.registration;
            assert_eq!((r.magic.as_str(), r.version), ("HIPF", 1), "{what}");
            assert!(
                r.bytes.starts_with(b"CCOB"),
                "{what}: the pointer leads to the bundle"
            );
        }

        let root = tempfile::tempdir().unwrap();
        let (output, summary) =
            kpack_testkit::transform_into(&input, root.path(), Compression::zstd());
        let out_bytes = std::fs::read(&output).unwrap();
        kpack_pe::verify(&out_bytes).unwrap_or_else(|i| panic!("{what}: {i:?}"));
        assert_eq!(summary.wrappers, f.wrappers);
        assert_eq!(summary.code_objects, objects.len());
        assert!(summary.removed > 0 && summary.removed % 512 == 0, "{what}");

        let regs = load(&wine, f, &output);
        assert_eq!(regs.len(), f.wrappers, "{what}");
        let preferred = preferred_range(&out_bytes);
        for (i, r) in regs.iter().enumerate() {
            assert_eq!(
                preferred.contains(&r.wrapper),
                !f.rebased,
                "{what}: wrapper at {:#x}, preferred image {preferred:x?}",
                r.wrapper
            );
            let r = &r.registration;
            assert_eq!(
                (r.magic.as_str(), r.version, r.reserved1),
                ("HIPK", 1, i as u64),
                "{what}"
            );
        }
        let registrations: Vec<_> = regs.into_iter().map(|r| r.registration).collect();
        let fetched = fetch_through_markers(&registrations, &output, &objects);
        assert_eq!(fetched.len(), objects.len(), "{what}");
        assert_fetched_are_the_originals(&fetched, &objects, what);
    }
}

#[test]
fn pe_inspect_unbundle_and_check_see_the_device_code() {
    for f in PE_FIXTURES {
        let bytes = std::fs::read(fixture(f.path)).unwrap();
        assert_eq!(kpack_pipeline::source::classify(&bytes), FileKind::Pe);
        assert_eq!(
            kpack_pipeline::transform::check(&bytes).unwrap(),
            kpack_pipeline::transform::HostState::Fat
        );
        let report = kpack_pipeline::inspect::inspect(f.path, &bytes).unwrap();
        assert_eq!(report.kind, "pe");
        let json = serde_json::to_value(&report).unwrap();
        let details = &json["details"];
        assert_eq!(
            details["elf_type"],
            if f.dll { "dll" } else { "executable" }
        );
        assert_eq!(details["machine"], 0x8664);
        assert_eq!(details["state"], "fat");
        assert_eq!(details["bundles"].as_array().unwrap().len(), f.wrappers);
        let pointer = if f.relocatable { "dir64" } else { "in-place" };
        for w in details["wrappers"].as_array().unwrap() {
            assert_eq!(w["pointer"], pointer, "{}", f.path);
            assert_eq!(w["magic"], "HIPF");
        }
        let targets: Vec<_> = report.totals.iter().map(|t| t.target.as_str()).collect();
        assert_eq!(
            targets,
            ["gfx11-generic", "gfx1100", "gfx942:sramecc+:xnack-"]
        );

        // The transformed image is kpacked, has no device code left, and says so.
        let root = tempfile::tempdir().unwrap();
        let (output, _) =
            kpack_testkit::transform_into(&fixture(f.path), root.path(), Compression::None);
        let out = std::fs::read(&output).unwrap();
        assert_eq!(
            kpack_pipeline::transform::check(&out).unwrap(),
            kpack_pipeline::transform::HostState::Kpacked
        );
        assert!(device_code_objects(&out).unwrap().is_empty());
        let again = kpack_pipeline::transform::transform(
            &output,
            &kpack_pipeline::transform::TransformOptions {
                output: root.path().join("again.dll"),
                kpack_dir: root.path().join("again"),
                group: None,
                kernel_name: None,
                search_paths: Vec::new(),
                compression: Compression::None,
                names: kpack_pipeline::transform::NameRules::for_output(false),
            },
        )
        .unwrap();
        assert_eq!(again, kpack_pipeline::transform::Outcome::AlreadyKpacked);
    }
}

#[test]
fn pe_kernel_name_with_backslashes_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let opts = kpack_pipeline::transform::TransformOptions {
        output: root.path().join("hipapp.dll"),
        kpack_dir: root.path().join(".kpack"),
        group: None,
        kernel_name: Some("bin\\hipapp.dll".into()),
        search_paths: Vec::new(),
        compression: Compression::None,
        names: kpack_pipeline::transform::NameRules::for_output(false),
    };
    let err = kpack_pipeline::transform::transform(&fixture("platforms/hipapp.dll"), &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("use `/`"), "{err}");
    assert!(!opts.output.exists());
    assert!(!opts.kpack_dir.join("hipapp_gfx1100.kpack").exists());
}

#[test]
fn pe_unbundle_writes_the_code_objects_of_the_image() {
    let input = fixture("platforms/hipapp2.dll");
    let objects = device_code_objects(&std::fs::read(&input).unwrap()).unwrap();
    assert_eq!(objects.len(), 6, "2 TUs x 3 targets");
    let out = tempfile::tempdir().unwrap();
    let mut unbundler = Unbundler::new(out.path(), TargetFilter::default()).unwrap();
    assert_eq!(unbundler.unbundle_file(&input).unwrap(), FileKind::Pe);
    let written = unbundler.publish().unwrap();
    assert_eq!(written.len(), objects.len());
    for (w, o) in written.iter().zip(&objects) {
        let data = std::fs::read(&w.path).unwrap();
        assert_eq!(data[..], o.data[..], "{}", w.path.display());
        // Real AMDGPU code objects of the target their entry names.
        let decoded = kpack_target::code_object_target(&data).unwrap();
        assert_eq!(&decoded.target, o.bundle_id.target().unwrap());
    }
}
