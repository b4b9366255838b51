//! `--windows-names` (issue 37): outputs meant for Windows spell a target's `:` as `@` in
//! archive names, and names Windows cannot hold are refused before anything is written.

use crate::common::{json, kpack, s};
use kpack_testkit::{assert_no_debug_formatting, copy_tree, fixture, listing};

#[test]
fn transform_for_windows_spells_features_with_at_and_refuses_a_device_name_writing_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dll = fixture("platforms/hipapp.dll");
    let out = tmp.path().join("out");
    let report = json(&[
        "transform",
        "--json",
        "--windows-names",
        s(&dll),
        "-o",
        s(&out.join("hipapp.dll")),
        "--kpack-dir",
        s(&out.join(".kpack")),
    ]);
    assert_eq!(
        listing(&out.join(".kpack")),
        [
            "hipapp_gfx11-generic.kpack",
            "hipapp_gfx1100.kpack",
            "hipapp_gfx942@sramecc+@xnack-.kpack"
        ]
    );
    // The report names the target by its ID; only the file name is spelled for Windows.
    assert_eq!(report["archives"][2]["target"], "gfx942:sramecc+:xnack-");

    let refused = tmp.path().join("refused");
    let res = kpack(&[
        "transform",
        "--windows-names",
        s(&dll),
        "-o",
        s(&refused.join("nul.dll")),
        "--kpack-dir",
        s(&refused.join(".kpack")),
    ]);
    assert!(!res.status.success());
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(
        stderr.contains(&format!(
            "{}: member nul.dll is named after the device NUL, which Windows reserves",
            refused.display()
        )),
        "{stderr}"
    );
    assert_no_debug_formatting(&stderr);
    assert_eq!(listing(tmp.path()), ["out"]);
}

#[test]
fn split_for_windows_refuses_a_reserved_name_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("demo_lib_gfx90X");
    copy_tree(&fixture("shards/shard-a/demo_lib_gfx90X"), &input);
    std::fs::write(input.join("demo/stage/share/aux.txt"), b"notes\n").unwrap();
    let out = tmp.path().join("out");
    let args = ["split", s(&input), "--component", "demo_lib", "-o", s(&out)];
    let res = kpack(&[&args[..], &["--windows-names"]].concat());
    assert!(!res.status.success());
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(
        stderr.contains(&format!(
            "{}: member demo_lib_generic/demo/stage/share/aux.txt is named after the device AUX",
            out.display()
        )),
        "{stderr}"
    );
    assert_eq!(listing(tmp.path()), ["demo_lib_gfx90X"]);
    // Not meant for Windows (and not on Windows): the name is kept.
    if cfg!(unix) {
        assert!(kpack(&args).status.success());
        assert!(
            out.join("demo_lib_generic/demo/stage/share/aux.txt")
                .is_file()
        );
    }
}
