//! Splits meant for Windows (issue 37): names Windows cannot hold are refused before anything
//! is written, naming the output and the member; archive names spell a target's `:` as `@`,
//! and recombine and verify read that spelling. A split is meant for Windows when asked
//! (`SplitOptions::names`), when run on Windows, or when the artifact holds a `.dll` or `.exe`.

use std::path::{Path, PathBuf};

use kpack_artifact::recombine::{PackagingConfig, RecombineOptions, recombine};
use kpack_artifact::split::{SplitOptions, split};
use kpack_artifact::verify::{VerifyOptions, verify};
use kpack_artifact::{ArtifactError, manifest};
use kpack_fs::{NameProblem, NameRules};
use kpack_package::handlers::Handler;
use kpack_testkit::{assert_no_debug_formatting, copy_tree, fixture, listing};

fn for_windows() -> SplitOptions {
    SplitOptions {
        handlers: vec![Handler::Rocblas],
        names: NameRules::for_output(true),
        ..SplitOptions::default()
    }
}

/// shard-a's `demo_lib_gfx90X` copied into `tmp`, changed by `edit` (given its prefix).
fn artifact(tmp: &Path, edit: impl FnOnce(&Path)) -> PathBuf {
    let input = tmp.join("in/demo_lib_gfx90X");
    copy_tree(&fixture("shards/shard-a/demo_lib_gfx90X"), &input);
    edit(&input.join("demo/stage"));
    input
}

/// Splits `input` for Windows into `tmp/out`: refused with `problem` for `member`, the error
/// naming both, and nothing written (no output, no staging left in `tmp`).
fn refused(tmp: &Path, input: &Path, member: &str, problem: NameProblem) {
    let out = tmp.join("out");
    let err = split(input, &out, "demo_lib", &for_windows(), &|_, _| {}).unwrap_err();
    let ArtifactError::Name(e) = &err else {
        panic!("not a name error: {err}");
    };
    assert_eq!(
        (e.output.as_path(), e.member.as_str()),
        (out.as_path(), member)
    );
    assert_eq!(e.problem, problem);
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("{}: member {member} ", out.display())),
        "{message}"
    );
    assert_no_debug_formatting(&message);
    assert_eq!(listing(tmp), ["in"]);
}

#[test]
fn a_split_for_windows_refuses_a_reserved_name_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let input = artifact(tmp.path(), |stage| {
        std::fs::rename(stage.join("lib/libdemo_host.so"), stage.join("lib/CON.so")).unwrap();
    });
    let device = NameProblem::Reserved {
        device: "CON".into(),
    };
    refused(
        tmp.path(),
        &input,
        "demo_lib_generic/demo/stage/lib/CON.so",
        device,
    );
    // Off Windows, a split not meant for it keeps the name.
    if cfg!(unix) {
        let out = tmp.path().join("linux");
        split(
            &input,
            &out,
            "demo_lib",
            &SplitOptions::default(),
            &|_, _| {},
        )
        .unwrap();
        assert!(out.join("demo_lib_generic/demo/stage/lib/CON.so").is_file());
    }
}

#[test]
fn a_split_for_windows_refuses_a_database_file_named_after_a_device_in_its_arch_artifact() {
    let tmp = tempfile::tempdir().unwrap();
    let input = artifact(tmp.path(), |stage| {
        let library = stage.join("lib/rocblas/library");
        std::fs::rename(
            library.join("Kernels.so-000-gfx906.hsaco"),
            library.join("aux.so-000-gfx906.hsaco"),
        )
        .unwrap();
    });
    let device = NameProblem::Reserved {
        device: "AUX".into(),
    };
    let member = "demo_lib_gfx906/demo/stage/lib/rocblas/library/aux.so-000-gfx906.hsaco";
    refused(tmp.path(), &input, member, device);
}

#[test]
fn a_split_for_windows_refuses_names_differing_only_in_case() {
    let tmp = tempfile::tempdir().unwrap();
    let input = artifact(tmp.path(), |stage| {
        let demo = stage.join("share/demo");
        std::fs::copy(demo.join("readme.txt"), demo.join("README.txt")).unwrap();
    });
    let collision = NameProblem::CaseCollision {
        other: "demo_lib_generic/demo/stage/share/demo/README.txt".into(),
    };
    refused(
        tmp.path(),
        &input,
        "demo_lib_generic/demo/stage/share/demo/readme.txt",
        collision,
    );
}

#[test]
fn a_split_for_windows_refuses_a_colon_in_a_name() {
    let tmp = tempfile::tempdir().unwrap();
    let input = artifact(tmp.path(), |stage| {
        let demo = stage.join("share/demo");
        std::fs::rename(demo.join("readme.txt"), demo.join("read:me.txt")).unwrap();
    });
    let member = "demo_lib_generic/demo/stage/share/demo/read:me.txt";
    refused(tmp.path(), &input, member, NameProblem::Character(':'));
}

#[test]
fn a_split_for_windows_refuses_a_trailing_dot() {
    let tmp = tempfile::tempdir().unwrap();
    let input = artifact(tmp.path(), |stage| {
        let demo = stage.join("share/demo");
        std::fs::rename(demo.join("readme.txt"), demo.join("readme.")).unwrap();
    });
    let member = "demo_lib_generic/demo/stage/share/demo/readme.";
    refused(tmp.path(), &input, member, NameProblem::TrailingDotOrSpace);
}

#[test]
fn a_tarball_split_for_windows_refuses_a_reserved_member_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = artifact(tmp.path(), |stage| {
        std::fs::rename(
            stage.join("share/demo/readme.txt"),
            stage.join("share/Nul.py"),
        )
        .unwrap();
    });
    let tarball = tmp.path().join("in/demo_lib_gfx90X.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&tarball).unwrap());
    b.follow_symlinks(false);
    b.append_dir_all(".", &dir).unwrap();
    b.finish().unwrap();
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
    let device = NameProblem::Reserved {
        device: "NUL".into(),
    };
    refused(
        tmp.path(),
        &tarball,
        "demo_lib_generic/demo/stage/share/Nul.py",
        device,
    );
}

/// A file name that is not UTF-8 (Linux allows any bytes but `/` and NUL).
#[cfg(unix)]
#[test]
fn a_file_name_that_is_not_utf8_is_refused_naming_its_path_and_nothing_is_written() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let input = artifact(tmp.path(), |stage| {
        let name = std::ffi::OsStr::from_bytes(b"\xff.so");
        std::fs::copy(
            stage.join("lib/libdemo_host.so"),
            stage.join("lib").join(name),
        )
        .unwrap();
    });
    for opts in [SplitOptions::default(), for_windows()] {
        let err = split(
            &input,
            &tmp.path().join("out"),
            "demo_lib",
            &opts,
            &|_, _| {},
        )
        .unwrap_err()
        .to_string();
        let shown = input.join("demo/stage/lib/\u{FFFD}.so");
        assert_eq!(err, format!("{}: file name is not UTF-8", shown.display()));
        assert_eq!(listing(tmp.path()), ["in"]);
    }
}

/// An artifact of Windows binaries is meant for Windows without being told: a target's `:`
/// is spelled `@` in its archive names, which recombine and verify read, and a reserved
/// name beside them is refused.
#[test]
fn an_artifact_holding_dlls_is_split_for_windows_and_its_archives_spell_features_with_at() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in/hip_gfx942");
    let bin = input.join("hip/stage/bin");
    std::fs::create_dir_all(&bin).unwrap();
    manifest::write(&input, &["hip/stage".to_owned()]).unwrap();
    std::fs::copy(fixture("platforms/hipapp.dll"), bin.join("hipapp.dll")).unwrap();
    let shards = tmp.path().join("shards");
    let out = shards.join("shard-a");
    split(&input, &out, "hip", &SplitOptions::default(), &|_, _| {}).unwrap();
    let kpack = out.join("hip_gfx942/hip/stage/.kpack");
    assert_eq!(listing(&kpack), ["hipapp_gfx942@sramecc+@xnack-.kpack"]);
    let report = verify(&out, &VerifyOptions::default()).unwrap();
    assert_eq!(report.lines(), Vec::<String>::new());

    let config = PackagingConfig::parse(
        r#"{"primary_shard": "shard-a", "architecture_groups":
            {"gfx94X": {"architectures": ["gfx942", "gfx1100", "gfx11-generic"]}}}"#,
    )
    .unwrap();
    let packages = tmp.path().join("packages");
    recombine(&shards, &config, &packages, &RecombineOptions::default()).unwrap();
    let kpack = packages.join("hip_gfx94X/hip/stage/.kpack");
    assert!(listing(&kpack).contains(&"hipapp_gfx942@sramecc+@xnack-.kpack".to_owned()));
    let report = verify(&packages, &VerifyOptions::default()).unwrap();
    assert_eq!(report.lines(), Vec::<String>::new());

    std::fs::write(bin.join("LPT1.log"), b"log").unwrap();
    let err = split(
        &input,
        &tmp.path().join("again"),
        "hip",
        &SplitOptions::default(),
        &|_, _| {},
    )
    .unwrap_err();
    assert!(
        matches!(&err, ArtifactError::Name(e) if e.member == "hip_generic/hip/stage/bin/LPT1.log"),
        "{err}"
    );
    assert!(!tmp.path().join("again").exists());
}
