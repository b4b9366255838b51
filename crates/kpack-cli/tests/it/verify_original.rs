//! `kpack verify --original` takes the path `kpack split` took: the artifact directory
//! itself, or (batch mode) the shard directory holding the artifacts.

use crate::common;

use common::{kpack, kpack_ok, s};
use kpack_testkit::fixture;

#[test]
fn verify_original_accepts_the_artifact_directory_split_took_and_its_shard_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let artifact = fixture("shards/shard-a/demo_lib_gfx90X");
    kpack_ok(&[
        "split",
        s(&artifact),
        "-o",
        s(&out),
        "--component",
        "demo_lib",
    ]);
    // The shard directory, as `split --batch` took it.
    let batch_out = dir.path().join("batch");
    let shard = fixture("shards/shard-a");
    kpack_ok(&["split", "--batch", s(&shard), "-o", s(&batch_out)]);
    for (out, original) in [(&out, &artifact), (&batch_out, &shard)] {
        let res = kpack(&["verify", s(out), "--original", s(original), "--json"]);
        let report: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
        assert!(
            res.status.success(),
            "--original {}: {report}",
            original.display()
        );
        // The identity check ran: every code object was read back through the markers.
        assert!(report["code_objects"].as_u64().unwrap() > 0, "{report}");
        assert!(report["original_files"].as_u64().unwrap() > 0, "{report}");
    }
    // A directory holding no artifact is still refused, naming it.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let res = kpack(&["verify", s(&out), "--original", s(&empty)]);
    assert!(!res.status.success());
    let text =
        String::from_utf8_lossy(&res.stdout).into_owned() + &String::from_utf8_lossy(&res.stderr);
    assert!(text.contains("no original artifacts found"), "{text}");
}
