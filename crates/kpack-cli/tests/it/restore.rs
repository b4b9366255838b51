//! `kpack restore` and `kpack inspect` of kpacked binaries (the marker, `--resolve`) from
//! the command line: the JSON documented in docs/json.md, the human lines, the errors.

use kpack_testkit::fixture;

use crate::common;

use common::{json, kpack, kpack_ok, s, transformed_libtwo};

/// `libtwo.so` transformed into `root/lib` with archives in `root/.kpack`.
fn transformed() -> (tempfile::TempDir, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let lib = transformed_libtwo(root.path());
    (root, lib)
}

#[test]
fn inspect_decodes_the_marker_of_each_wrapper_and_resolves_as_the_runtime() {
    let (root, lib) = transformed();
    let kpack_dir = std::fs::canonicalize(root.path().join(".kpack")).unwrap();
    let v = json(&["inspect", "--json", s(&lib)]);
    let w = &v[0]["details"]["wrappers"][1];
    assert_eq!(w["magic"], "HIPK");
    assert_eq!(w["marker"]["kernel_name"], "libtwo.so");
    assert_eq!(w["marker"]["key"], "libtwo.so#1");
    assert_eq!(
        w["marker"]["search_paths"],
        serde_json::json!(["../.kpack/libtwo_@GFXARCH@.kpack"])
    );
    assert!(v[0].get("resolve").is_none());
    // A fat binary's wrappers have no marker.
    let fat = json(&["inspect", "--json", s(&fixture("bin/libtwo.so"))]);
    assert!(fat[0]["details"]["wrappers"][0].get("marker").is_none());

    std::fs::remove_file(kpack_dir.join("libtwo_gfx900.kpack")).unwrap();
    let v = json(&[
        "inspect",
        "--json",
        "--resolve",
        "--target",
        "gfx908",
        "--target",
        "gfx900",
        s(&lib),
    ]);
    let r = &v[0]["resolve"];
    let archive = |t: &str| {
        kpack_dir
            .join(format!("libtwo_{t}.kpack"))
            .display()
            .to_string()
    };
    assert_eq!(r["patterns"], serde_json::json!([archive("@GFXARCH@")]));
    let t = &r["wrappers"][0]["targets"];
    assert_eq!(r["wrappers"][0]["key"], "libtwo.so#0");
    assert_eq!(t[0]["target"], "gfx908");
    assert_eq!(t[0]["status"], "found");
    assert_eq!(t[0]["archive"], archive("gfx908"));
    assert_eq!(t[0]["arch"], "gfx908");
    assert_eq!(t[1]["target"], "gfx900");
    assert_eq!(t[1]["status"], "no-archive");
    assert_eq!(t[1]["tried"], serde_json::json!([archive("gfx900")]));

    let out = kpack_ok(&["inspect", "--resolve", "--target", "gfx900", s(&lib)]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("marker: kernel libtwo.so (key libtwo.so#0), search paths ../.kpack/libtwo_@GFXARCH@.kpack"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "gfx900                   MISSING: no archive found at the paths tried; tried {}",
            archive("gfx900")
        )),
        "{text}"
    );
}

#[test]
fn restore_writes_a_fat_binary_and_reports_misses_without_writing() {
    let (root, lib) = transformed();
    let out = root.path().join("restored/libtwo.so");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let v = json(&[
        "restore",
        s(&lib),
        "-o",
        s(&out),
        "--compress",
        "--targets",
        "gfx90a",
        "--json",
    ]);
    assert_eq!(v["format"], "ccob");
    assert_eq!(v["wrappers"], 2);
    assert_eq!(v["bundles"], 2);
    assert_eq!(
        v["targets"],
        serde_json::json!(["gfx90a:xnack+", "gfx90a:xnack-"])
    );
    let inspected = json(&["inspect", "--json", s(&out)]);
    assert_eq!(inspected[0]["details"]["state"], "fat");
    let original = json(&["inspect", "--json", s(&fixture("bin/libtwo.so"))]);
    let kept: Vec<&serde_json::Value> = original[0]["totals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["target"].as_str().unwrap().starts_with("gfx90a"))
        .collect();
    assert_eq!(kept.len(), 2);
    assert_eq!(inspected[0]["totals"], serde_json::json!(kept));

    std::fs::remove_file(root.path().join(".kpack/libtwo_gfx1030.kpack")).unwrap();
    let missing = root.path().join("missing.so");
    let err = kpack(&[
        "restore",
        s(&lib),
        "-o",
        s(&missing),
        "--targets",
        "gfx1030",
    ]);
    assert_eq!(err.status.code(), Some(1));
    let msg = String::from_utf8(err.stderr).unwrap();
    assert!(
        msg.contains("no archive found for target gfx1030; searched")
            && msg.contains("libtwo_@GFXARCH@.kpack"),
        "{msg}"
    );
    assert!(!missing.exists());
}

#[test]
fn restore_refuses_a_damaged_archive_naming_entry_and_offset_and_writes_nothing() {
    let (root, lib) = transformed();
    let archive = root.path().join(".kpack/libtwo_gfx900.kpack");
    // Restore must read every target: damage in one refuses the whole output.
    let mut bytes = std::fs::read(&archive).unwrap();
    // One bit in the middle of the first stored code object (the data region starts at 64).
    let toc_offset = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    let at = 64 + (toc_offset - 64) / 4;
    bytes[at] ^= 0x10;
    std::fs::write(&archive, bytes).unwrap();
    let out = root.path().join("restored.so");
    let err = kpack(&["restore", s(&lib), "-o", s(&out)]);
    assert_eq!(err.status.code(), Some(1));
    let msg = String::from_utf8(err.stderr).unwrap();
    assert!(
        msg.contains("libtwo_gfx900.kpack")
            && msg.contains(", arch gfx900 at byte ")
            && msg.contains("the archive is damaged"),
        "{msg}"
    );
    kpack_testkit::assert_no_debug_formatting(&msg);
    assert!(!out.exists());
}

/// `tempfile` appends the temporary's name in Rust's debug quoting to its errors
/// (`… at path "/dir/.kpack-tmp-…"`); kpack names the directory itself.
#[test]
fn restore_into_a_missing_directory_names_it_without_debug_formatting() {
    let (root, lib) = transformed();
    let out = root.path().join("missing/restored.so");
    let err = kpack(&["restore", s(&lib), "-o", s(&out)]);
    assert_eq!(err.status.code(), Some(1));
    let msg = String::from_utf8(err.stderr).unwrap();
    assert!(
        msg.contains(&format!("{}: ", root.path().join("missing").display()))
            && msg.contains("No such file or directory")
            && !msg.contains(".kpack-tmp-"),
        "{msg}"
    );
    kpack_testkit::assert_no_debug_formatting(&msg);
    assert!(!out.exists());
}
