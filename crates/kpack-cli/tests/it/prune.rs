//! `kpack prune` from the command line: what it writes for files and trees, the same bytes
//! every run, and clear refusals that write nothing.

use crate::common;

use common::{json, kpack, s};
use kpack_testkit::{fixture, snapshot};

/// Runs `kpack prune`, which must fail with exit status `code`, a message containing every
/// one of `needles`, and nothing written at `out` or beside it.
fn refused(args: &[&str], code: i32, needles: &[&str], out: &std::path::Path) {
    let o = kpack(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
    }
    assert!(!out.exists(), "{args:?} wrote {}", out.display());
    let dir = out.parent().unwrap();
    assert_eq!(
        std::fs::read_dir(dir).unwrap().count(),
        0,
        "{args:?} left something in {}",
        dir.display()
    );
}

#[test]
fn prune_refuses_absent_targets_bad_names_and_empty_results_writing_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.so");
    let lib = fixture("bin/libtwo.so");
    let (lib, o) = (s(&lib), s(&out));
    // gfx1100 is a processor, but libtwo.so has no code for it.
    refused(
        &["prune", lib, "-o", o, "--keep", "gfx90a", "gfx1100"],
        1,
        &["gfx1100 matches no code object", "gfx1030", "gfx90a:xnack+"],
        &out,
    );
    refused(
        &["prune", lib, "-o", o, "--drop", "gfx942"],
        1,
        &["gfx942 matches no code object"],
        &out,
    );
    refused(
        &[
            "prune", lib, "-o", o, "--keep", "gfx90a", "--drop", "gfx900",
        ],
        2,
        &["--keep", "--drop"],
        &out,
    );
    refused(&["prune", lib, "-o", o], 2, &["--keep", "--drop"], &out);
    refused(
        &["prune", lib, "-o", o, "--keep", "gfx9000"],
        2,
        &["\"gfx9000\" is not an AMDGPU processor"],
        &out,
    );
    refused(
        &["prune", lib, "-o", o, "--keep", "gfx90a:xnack"],
        2,
        &["gfx90a:xnack"],
        &out,
    );
    refused(
        &[
            "prune", lib, "-o", o, "--drop", "gfx1030", "gfx900", "gfx906", "gfx908", "gfx90a",
        ],
        1,
        &["removes every device target", "--allow-empty"],
        &out,
    );
    let host_only = fixture("bin/libhostonly.so");
    refused(
        &["prune", s(&host_only), "-o", o, "--keep", "gfx90a"],
        1,
        &["libhostonly.so", "no device code"],
        &out,
    );
}

#[test]
fn prune_allow_empty_keeps_only_the_host_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.so");
    let lib = fixture("bin/libtwo.so");
    let report = json(&[
        "prune",
        s(&lib),
        "-o",
        s(&out),
        "--drop",
        "gfx1030",
        "gfx900",
        "gfx906",
        "gfx908",
        "gfx90a",
        "--allow-empty",
        "--json",
    ]);
    assert_eq!(report["kept"], serde_json::json!([]));
    let inspected = json(&["inspect", "--json", s(&out)]);
    assert_eq!(inspected[0]["totals"], serde_json::json!([]));
    let bundles = inspected[0]["details"]["bundles"].as_array().unwrap();
    assert_eq!(bundles.len(), 2);
    for b in bundles {
        let entries = b["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{b}");
        assert!(
            entries[0]["bundle_id"]
                .as_str()
                .unwrap()
                .starts_with("host-")
        );
    }
}

#[test]
fn prune_output_is_the_same_bytes_every_run() {
    let tmp = tempfile::tempdir().unwrap();
    for (lib, keep) in [
        ("bin/libtwo.so", "gfx90a"),
        ("modern/libmodern_two_v3.so", "gfx11-generic"),
        ("bin/librdc.so", "gfx1030"),
    ] {
        let input = fixture(lib);
        let outs: Vec<Vec<u8>> = (0..2)
            .map(|run| {
                let out = tmp.path().join(format!("{run}.so"));
                json(&["prune", s(&input), "-o", s(&out), "--keep", keep, "--json"]);
                std::fs::read(&out).unwrap()
            })
            .collect();
        assert!(outs[0] == outs[1], "{lib}");
    }
}

#[test]
fn prune_of_a_tree_prunes_binaries_and_leaves_out_dropped_databases() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("install");
    let lib = tree.join("lib");
    let db = lib.join("rocblas/library");
    std::fs::create_dir_all(&db).unwrap();
    std::fs::copy(fixture("bin/libtwo.so"), lib.join("libtwo.so.1")).unwrap();
    std::os::unix::fs::symlink("libtwo.so.1", lib.join("libtwo.so")).unwrap();
    std::fs::copy(fixture("bin/libhostonly.so"), lib.join("libhostonly.so")).unwrap();
    for name in [
        "Kernels.so-000-gfx90a-xnack+.hsaco",
        "TensileLibrary_gfx1030.dat",
        "TensileLibrary_gfx906.dat",
        "TensileLibrary_fallback.dat",
    ] {
        std::fs::write(db.join(name), name).unwrap();
    }
    let out = tmp.path().join("pruned");
    let report = json(&[
        "prune",
        s(&tree),
        "-o",
        s(&out),
        "--keep",
        "gfx90a",
        "gfx1030",
        "--json",
    ]);
    assert_eq!(
        report["dropped"],
        serde_json::json!(["gfx900", "gfx906", "gfx908"])
    );
    let names: Vec<String> = snapshot(&out).into_iter().map(|(p, _, _)| p).collect();
    assert_eq!(
        names,
        [
            "lib",
            "lib/libhostonly.so",
            "lib/libtwo.so",
            "lib/libtwo.so.1",
            "lib/rocblas",
            "lib/rocblas/library",
            "lib/rocblas/library/Kernels.so-000-gfx90a-xnack+.hsaco",
            "lib/rocblas/library/TensileLibrary_fallback.dat",
            "lib/rocblas/library/TensileLibrary_gfx1030.dat",
        ]
    );
    assert_eq!(
        std::fs::read_link(out.join("lib/libtwo.so")).unwrap(),
        std::path::Path::new("libtwo.so.1")
    );
    assert_eq!(
        std::fs::read(out.join("lib/libhostonly.so")).unwrap(),
        std::fs::read(fixture("bin/libhostonly.so")).unwrap()
    );
    let inspected = json(&["inspect", "--json", s(&out.join("lib/libtwo.so.1"))]);
    let targets: Vec<&str> = inspected[0]["totals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["gfx1030", "gfx90a:xnack+", "gfx90a:xnack-"]);
    // The output tree exists now: a second run refuses to merge into it.
    let again = kpack(&["prune", s(&tree), "-o", s(&out), "--keep", "gfx90a"]);
    assert_eq!(again.status.code(), Some(1));
}
