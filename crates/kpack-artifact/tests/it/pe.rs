//! `kpack split` and `kpack verify` on an artifact holding Windows PE32+ DLLs and EXEs (the
//! `fixtures/platforms` images): they are classified as fat binaries, transformed (HIPK
//! wrappers, `.kpackrf`), their code objects land in the per-processor artifacts, and verify
//! recovers every one of them byte for byte.

use kpack_artifact::manifest;
use kpack_artifact::split::{SplitOptions, split};
use kpack_artifact::verify::{VerifyOptions, verify};
use kpack_hostbin::marker::MarkerMetadata;
use kpack_testkit::fixture;

#[test]
fn an_artifact_of_dlls_and_exes_splits_and_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("hip_win_gfx110X");
    let bin = input.join("hip/stage/bin");
    std::fs::create_dir_all(&bin).unwrap();
    manifest::write(&input, &["hip/stage".to_owned()]).unwrap();
    for f in ["hipapp2.dll", "hipexe.exe", "amdhip64.dll"] {
        std::fs::copy(fixture(&format!("platforms/{f}")), bin.join(f)).unwrap();
    }
    let out = tmp.path().join("out");
    let summary = split(
        &input,
        &out,
        "hip_win",
        &SplitOptions::default(),
        &|_, _| {},
    )
    .unwrap();
    // 2 + 1 wrappers, 3 targets each.
    assert_eq!(
        (summary.fat_binaries, summary.code_objects),
        (2, 9),
        "{summary:?}"
    );

    let generic = out.join("hip_win_generic/hip/stage/bin");
    for (f, wrappers) in [("hipapp2.dll", 2), ("hipexe.exe", 1)] {
        let bytes = std::fs::read(generic.join(f)).unwrap();
        kpack_pe::verify(&bytes).unwrap_or_else(|i| panic!("{f}: {i:?}"));
        let kpacked = kpack_pipeline::transform::kpacked_marker(&bytes)
            .unwrap()
            .unwrap_or_else(|| panic!("{f} is not kpacked"));
        assert_eq!(kpacked.wrappers.len(), wrappers);
        let (meta, _) = MarkerMetadata::decode(&kpacked.bytes).unwrap();
        assert_eq!(meta.kernel_name, format!("hip/stage/bin/{f}"));
        assert!(!meta.kernel_name.contains('\\'));
    }
    // The stand-in runtime has no device code: copied as it is.
    assert_eq!(
        std::fs::read(generic.join("amdhip64.dll")).unwrap(),
        std::fs::read(fixture("platforms/amdhip64.dll")).unwrap()
    );
    for processor in ["gfx1100", "gfx942", "gfx11-generic"] {
        let kpack = out.join(format!("hip_win_{processor}/hip/stage/.kpack"));
        assert!(
            std::fs::read_dir(&kpack).unwrap().count() >= 2,
            "{}",
            kpack.display()
        );
    }
    let report = verify(
        &out,
        &VerifyOptions {
            original: Some(tmp.path().to_owned()),
            threads: 0,
        },
    )
    .unwrap();
    assert_eq!(report.lines(), Vec::<String>::new());
    assert_eq!(report.code_objects, 9);
}
