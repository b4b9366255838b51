//! `kpack verify` and `kpack recombine` on what the reference rocm-kpack split from our shards
//! (`fixtures/refmade/split/`), as a user moving from it runs them: its splits verify against
//! the originals, recombine and verify again; a recombine of shards split by both tools exits
//! with an error naming the archives no marker would reach, and writes nothing.

use crate::common;

use common::{kpack, kpack_ok, s, split_shards};
use kpack_testkit::{copy_tree, fixture};

#[test]
fn the_references_splits_verify_recombine_and_verify_again() {
    for shard in kpack_testkit::SHARDS {
        let split = fixture(&format!("refmade/split/{shard}"));
        let original = fixture(&format!("shards/{shard}"));
        kpack_ok(&["verify", s(&split), "--original", s(&original)]);
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    kpack_ok(&[
        "recombine",
        "--shards",
        s(&fixture("refmade/split")),
        "--config",
        s(&fixture("shards/config.json")),
        "-o",
        s(&out),
    ]);
    kpack_ok(&["verify", s(&out), "--original", s(&fixture("shards"))]);
}

#[test]
fn a_recombine_of_shards_split_by_both_tools_fails_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    split_shards(dir.path());
    let shards = dir.path().join("shards");
    std::fs::remove_dir_all(shards.join("shard-a")).unwrap();
    copy_tree(&fixture("refmade/split/shard-a"), &shards.join("shard-a"));
    let config = dir.path().join("packaging.json");
    let lenient = common::SHARDS_CONFIG.replace(
        r#""verify_generic_artifacts_match": true"#,
        r#""verify_generic_artifacts_match": false"#,
    );
    assert_ne!(lenient, common::SHARDS_CONFIG);
    std::fs::write(&config, lenient).unwrap();
    let out = dir.path().join("out");
    let run = kpack(&[
        "recombine",
        "--shards",
        s(&shards),
        "--config",
        s(&config),
        "-o",
        s(&out),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(!out.exists(), "{} was written", out.display());
    assert!(
        stderr.contains(
            "demo_lib_gfx103X/demo/stage/.kpack/lib_libdemo.so.1_gfx1030.kpack: no marker of \
             demo_lib_generic reaches this archive: it is named <module>_<target>.kpack as \
             kpack's split names archives, and the markers search \
             ../.kpack/demo_lib_@GFXARCH@.kpack, named <component>_<target>.kpack as the \
             reference's split names archives"
        ),
        "{stderr}"
    );
}
