//! `kpack split-wheel` and `kpack detect` as a user runs them: exit status, text, JSON.

use crate::common;

use common::{json, kpack, kpack_ok, s};
use kpack_testkit::fixture;

const DEMO: &str = "wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl";

#[test]
fn detect_reports_each_gpu_its_wheel_chain_and_the_pip_extra() {
    let rdna = fixture("kfd/rdna");
    let out = kpack_ok(&["detect", "--sysfs-root", s(&rdna), "--package", "torch"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        "GPU node 1: gfx1100 (device wheels: gfx1100 -> gfx110x -> gfx11; without them the portable SPIR-V wheel amdgcnspirv)\n\
         GPU node 2: gfx1030 (device wheels: gfx1030 -> gfx10_3 -> gfx10; without them the portable SPIR-V wheel amdgcnspirv)\n\
         GPU node 3: gfx1100 (device wheels: gfx1100 -> gfx110x -> gfx11; without them the portable SPIR-V wheel amdgcnspirv)\n\
         pip install 'torch[device-gfx1100,device-gfx1030]'\n"
    );
    let mi300 = json(&[
        "detect",
        "--json",
        "--sysfs-root",
        s(&fixture("kfd/mi300x")),
    ]);
    assert_eq!(mi300["gpus"][0]["target"], "gfx942:sramecc+");
    assert_eq!(mi300["gpus"][0]["gfx_target_version"], 90402);
    assert_eq!(
        mi300["gpus"][0]["chain"],
        serde_json::json!(["gfx942", "gfx9_4", "gfx9"])
    );
    assert_eq!(mi300["extras"], serde_json::json!(["device-gfx942"]));
}

#[test]
fn detect_without_a_gpu_says_so_and_succeeds() {
    for tree in ["kfd/cpu-only", "kfd/no-such-tree"] {
        let out = kpack_ok(&["detect", "--sysfs-root", s(&fixture(tree))]);
        assert!(
            String::from_utf8(out.stdout)
                .unwrap()
                .starts_with("no AMD GPU found")
        );
        let j = json(&["detect", "--json", "--sysfs-root", s(&fixture(tree))]);
        assert_eq!(j["gpus"], serde_json::json!([]));
    }
}

#[test]
fn split_wheel_prints_json_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let j = json(&[
        "split-wheel",
        s(&fixture(DEMO)),
        "-o",
        s(&out),
        "--split-databases",
        "rocblas",
        "aotriton",
        "--json",
    ]);
    assert_eq!(j["name"], "kpack-demo");
    assert_eq!(j["overlay_root"], "kpack_demo");
    assert_eq!(j["devices"].as_array().unwrap().len(), 9);
    assert!(
        out.join("kpack_demo-1.0-py3-none-linux_x86_64.whl")
            .is_file()
    );
    // A second split into the same directory would overwrite: refused, nothing changed.
    let before = std::fs::read_dir(&out).unwrap().count();
    let again = kpack(&["split-wheel", s(&fixture(DEMO)), "-o", s(&out)]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), before);
}

#[test]
fn split_wheel_of_a_broken_wheel_exits_1_naming_the_entry_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The fixture wheel re-zipped with one member changed and its RECORD kept: the RECORD
    // hash of that member no longer holds.
    let bad = dir.path().join("kpack_demo-1.0-py3-none-linux_x86_64.whl");
    kpack_testkit::rezip_wheel(&fixture(DEMO), &bad, &[], |name, data| {
        if name == "kpack_demo/version.py" {
            *data = b"__version__ = '6.6'\n".to_vec();
        }
    });
    let out = dir.path().join("out");
    let r = kpack(&["split-wheel", s(&bad), "-o", s(&out)]);
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("kpack_demo/version.py") && err.contains("does not match"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn split_wheel_of_a_record_without_hashes_lists_them_in_json_and_counts_them_in_text() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("kpack_demo-1.0-py3-none-linux_x86_64.whl");
    kpack_testkit::rezip_wheel(&fixture(DEMO), &input, &[], |name, data| {
        if name.ends_with(".dist-info/RECORD") {
            *data = kpack_testkit::unhashed_record(data, |_| false);
        }
    });
    let j = json(&[
        "split-wheel",
        s(&input),
        "-o",
        s(&dir.path().join("j")),
        "--json",
    ]);
    let unhashed: Vec<&str> = j["unhashed_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(unhashed.len(), 11, "{unhashed:?}");
    assert_eq!(unhashed[0], "kpack_demo/__init__.py");
    assert!(unhashed.contains(&"kpack_demo/lib/libone.so"));
    assert!(!unhashed.iter().any(|m| m.ends_with("RECORD")));
    let out = kpack_ok(&["split-wheel", s(&input), "-o", s(&dir.path().join("t"))]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().any(|l| l
            .trim_start()
            .starts_with("11 members listed in RECORD without a hash")),
        "{text}"
    );
    // The fixture's RECORD hashes every member: an empty list, and no such line.
    let j = json(&[
        "split-wheel",
        s(&fixture(DEMO)),
        "-o",
        s(&dir.path().join("f")),
        "--json",
    ]);
    assert_eq!(j["unhashed_members"], serde_json::json!([]));
    let out = kpack_ok(&[
        "split-wheel",
        s(&fixture(DEMO)),
        "-o",
        s(&dir.path().join("g")),
    ]);
    assert!(
        !String::from_utf8(out.stdout)
            .unwrap()
            .contains("without a hash")
    );
}

#[test]
fn split_wheel_timestamps_come_from_source_date_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // 2021-06-15 12:34:56 UTC.
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_kpack"))
        .args(["split-wheel", s(&fixture(DEMO)), "-o", s(&out)])
        .env("SOURCE_DATE_EPOCH", "1623760496")
        .env("CI", "1")
        .output()
        .unwrap();
    assert!(run.status.success());
    for e in std::fs::read_dir(&out).unwrap() {
        let mut z = zip::ZipArchive::new(std::fs::File::open(e.unwrap().path()).unwrap()).unwrap();
        for i in 0..z.len() {
            let t = z.by_index(i).unwrap().last_modified().unwrap();
            let got = (
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute(),
                t.second(),
            );
            assert_eq!(got, (2021, 6, 15, 12, 34, 56));
        }
    }
}

#[test]
fn which_refuses_a_host_wheel_index_whose_entry_names_no_archive_beside_it_or_no_target() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    kpack_ok(&[
        "split-wheel",
        s(&fixture(DEMO)),
        "-o",
        s(&out),
        "--multi-target-archives",
        "--output-format",
        "directory",
    ]);
    let kpm = out.join("kpack_demo-1.0-py3-none-linux_x86_64/kpack_demo/.kpack/one.kpm");
    let good = std::fs::read(&kpm).unwrap();
    kpack_ok(&["which", "gfx900", s(&kpm)]);
    type Damage = fn(&mut kpack_archive::kpm::KpmManifest);
    let damages: [(Damage, &str); 2] = [
        (
            |m| m.kpack_files[0].1.file = "../../elsewhere.kpack".into(),
            "file ../../elsewhere.kpack: expected the name of a .kpack archive beside the index",
        ),
        (
            |m| m.kpack_files[0].0 = "sm_90".into(),
            "expected a GPU target",
        ),
    ];
    for (damage, why) in damages {
        let mut m = kpack_archive::kpm::KpmManifest::decode(&good).unwrap();
        damage(&mut m);
        std::fs::write(&kpm, m.encode().unwrap()).unwrap();
        let r = kpack(&["which", "gfx900", s(&kpm)]);
        assert_eq!(r.status.code(), Some(1));
        let err = String::from_utf8_lossy(&r.stderr);
        let entry = format!("invalid index: kpack_files entry {}: ", m.kpack_files[0].0);
        assert!(
            err.contains(s(&kpm)) && err.contains(&entry) && err.contains(why),
            "{err}"
        );
        kpack_testkit::assert_no_debug_formatting(&err);
    }
    // A GPU that is not one is named as given.
    std::fs::write(&kpm, &good).unwrap();
    let r = kpack(&["which", "sm_90", s(&kpm)]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("sm_90 is not a GPU: expected a target"),
        "{err}"
    );
    assert!(!err.contains("\"sm_90\""), "{err}");
}
