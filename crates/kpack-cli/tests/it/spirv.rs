//! The portable SPIR-V target (`--offload-arch=amdgcnspirv`) on clang-22's own output
//! (`fixtures/spirv`): inspect names it, every command carries it byte for byte, and `which`,
//! `detect` and `split-wheel` fall back to it for a GPU without native code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_testkit::{copy_tree, fixture, originals};

use crate::common;

use common::{json, kpack_ok, s};

/// The fat SPIR-V fixtures: amdgcnspirv beside gfx1100, CCOB v3 and uncompressed.
const LIBS: [&str; 2] = ["spirv/libspirv_v3.so", "spirv/libspirv_nocompress.so"];
const SPIRV_ID: &str = "hipv4-spirv64-amd-amdhsa--amdgcnspirv";
const SPIRV_MAGIC: [u8; 4] = 0x0723_0203u32.to_le_bytes();

/// The original code objects of `lib` whose target is in `targets`.
fn originals_of(lib: &Path, targets: &[&str]) -> BTreeMap<(u64, String), Vec<u8>> {
    let mut all = originals(lib);
    all.retain(|(_, t), _| targets.contains(&t.as_str()));
    all
}

#[test]
fn inspect_names_the_spirv_entry_portable_in_text_and_json() {
    for f in LIBS.iter().chain(&["spirv/spirv_genco.hsaco"]) {
        let path = fixture(f);
        let v = json(&["inspect", "--json", s(&path)]);
        let entries = v[0]["details"]["bundles"][0]["entries"].as_array().unwrap();
        let spirv = entries.iter().find(|e| e["bundle_id"] == SPIRV_ID).unwrap();
        assert_eq!(spirv["target"], "amdgcnspirv", "{f}");
        assert_eq!(spirv["portable"], true, "{f}");
        let native = entries.iter().find(|e| e["target"] == "gfx1100").unwrap();
        assert!(native.get("portable").is_none(), "{f}");
        let totals = v[0]["totals"].as_array().unwrap();
        assert_eq!(totals[0]["target"], "amdgcnspirv", "{f}");
        assert_eq!(totals[0]["portable"], true, "{f}");
        assert!(totals[1].get("portable").is_none(), "{f}");
        let text = String::from_utf8(kpack_ok(&["inspect", s(&path)]).stdout).unwrap();
        let line = text.lines().find(|l| l.contains(SPIRV_ID)).unwrap();
        assert!(
            line.ends_with("portable SPIR-V (for GPUs without native code)"),
            "{line}"
        );
    }
    // The entry is a SPIR-V module, not an ELF code object.
    let spirv = originals_of(&fixture(LIBS[0]), &["amdgcnspirv"]);
    assert_eq!(spirv.values().next().unwrap()[..4], SPIRV_MAGIC);
}

#[test]
fn transform_writes_the_spirv_archive_and_restore_gives_back_every_entry_byte_for_byte() {
    for f in LIBS {
        let dir = tempfile::tempdir().unwrap();
        let input = fixture(f);
        let host = dir.path().join("lib/libspirv.so");
        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
        let kpack_dir = dir.path().join(".kpack");
        kpack_ok(&[
            "transform",
            s(&input),
            "-o",
            s(&host),
            "--kpack-dir",
            s(&kpack_dir),
        ]);
        assert!(
            kpack_dir.join("libspirv_amdgcnspirv.kpack").is_file(),
            "{f}"
        );
        let restored = dir.path().join("restored.so");
        kpack_ok(&["restore", s(&host), "-o", s(&restored)]);
        assert_eq!(originals(&restored), originals(&input), "{f}");
    }
}

#[test]
fn prune_keeps_or_drops_the_spirv_entry_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    for f in LIBS {
        let input = fixture(f);
        for (how, kept) in [("--keep", "amdgcnspirv"), ("--drop", "gfx1100")] {
            let out = dir.path().join(format!("{how}.so"));
            kpack_ok(&["prune", s(&input), "-o", s(&out), how, "amdgcnspirv"]);
            assert_eq!(originals(&out), originals_of(&input, &[kept]), "{f} {how}");
        }
    }
}

/// `fixtures/spirv/libspirv_v3.so` as a TheRock build artifact `spv_lib_gfx110X` in
/// `shards/shard-a`, split into `split/shard-a`.
fn split_artifact(dir: &Path) -> PathBuf {
    let artifact = dir.join("shards/shard-a/spv_lib_gfx110X");
    let lib = artifact.join("spv/stage/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(fixture(LIBS[0]), lib.join("libspirv.so")).unwrap();
    std::fs::write(artifact.join("artifact_manifest.txt"), "spv/stage\n").unwrap();
    let split = dir.join("split");
    let summary = json(&[
        "split",
        "--batch",
        s(&dir.join("shards/shard-a")),
        "-o",
        s(&split.join("shard-a")),
        "--json",
    ]);
    let text = summary.to_string();
    assert!(text.contains("spv_lib_amdgcnspirv"), "{text}");
    split
}

/// Packaging configurations: (groups, the package `which` names for SPIR-V, the packages
/// holding the SPIR-V archive).
const CONFIGS: [(&str, &str, &[&str]); 2] = [
    // SPIR-V in a group of its own.
    (
        r#""gfx110X": {"architectures": ["gfx1100"]},
           "spirv": {"display_name": "portable SPIR-V", "architectures": ["amdgcnspirv"]}"#,
        "spv_lib_spirv",
        &["spv_lib_spirv"],
    ),
    // SPIR-V in every group: each ships the same archive; the index names the package
    // whose name sorts first.
    (
        r#""gfx110X": {"architectures": ["gfx1100", "amdgcnspirv"]},
           "gfx103X": {"architectures": ["gfx1030", "amdgcnspirv"]}"#,
        "spv_lib_gfx103X",
        &["spv_lib_gfx110X", "spv_lib_gfx103X"],
    ),
];

#[test]
fn recombine_places_spirv_in_its_own_group_or_in_every_group_and_which_falls_back_to_it() {
    for (groups, spirv_package, spirv_packages) in CONFIGS {
        let dir = tempfile::tempdir().unwrap();
        let split = split_artifact(dir.path());
        let config = dir.path().join("packaging.json");
        let text =
            format!(r#"{{"primary_shard": "shard-a", "architecture_groups": {{{groups}}}}}"#);
        std::fs::write(&config, text).unwrap();
        let out = dir.path().join("out");
        kpack_ok(&[
            "recombine",
            "--shards",
            s(&split),
            "--config",
            s(&config),
            "-o",
            s(&out),
        ]);
        for p in spirv_packages {
            let archive = out.join(p).join("spv/stage/.kpack/spirv_amdgcnspirv.kpack");
            assert!(archive.is_file(), "{spirv_package}: {}", archive.display());
        }
        let report = json(&[
            "verify",
            s(&out),
            "--original",
            s(&dir.path().join("shards")),
            "--json",
        ]);
        assert_eq!(report["failures"], serde_json::json!([]), "{spirv_package}");

        // Installed together, the packages give back the fat binary's entries byte for byte.
        let root = dir.path().join("install");
        let mut packages = vec!["spv_lib_generic", "spv_lib_gfx110X"];
        packages.extend(spirv_packages);
        packages.dedup();
        for package in packages {
            copy_tree(&out.join(package).join("spv/stage"), &root);
        }
        let restored = dir.path().join("restored.so");
        kpack_ok(&[
            "restore",
            s(&root.join("lib/libspirv.so")),
            "-o",
            s(&restored),
        ]);
        assert_eq!(originals(&restored), originals(&fixture(LIBS[0])));

        let generic = out.join("spv_lib_generic");
        let which = |gpu: &str| json(&["which", gpu, s(&generic), "--json"]);
        // gfx1030 has neither native nor generic code: the SPIR-V package serves it.
        let answer = which("amdgcn-amd-amdhsa--gfx1030");
        assert_eq!(answer["install"], serde_json::json!([spirv_package]));
        assert_eq!(answer["modules"][0]["target"], "amdgcnspirv");
        assert_eq!(answer["unavailable"], serde_json::json!([]));
        // gfx1100 has native code.
        let answer = which("gfx1100");
        assert_eq!(answer["install"], serde_json::json!(["spv_lib_gfx110X"]));
        let text = String::from_utf8(kpack_ok(&["which", "gfx1201", s(&generic)]).stdout).unwrap();
        let said = format!("no native code; portable SPIR-V amdgcnspirv in {spirv_package}");
        assert!(text.contains(&said), "{text}");
    }
}

#[test]
fn detect_names_the_portable_spirv_wheel_as_each_gpus_fallback() {
    let v = json(&["detect", "--json", "--sysfs-root", s(&fixture("kfd/rdna"))]);
    for gpu in v["gpus"].as_array().unwrap() {
        assert_eq!(gpu["fallback"], "amdgcnspirv", "{gpu}");
    }
    let out = kpack_ok(&["detect", "--sysfs-root", s(&fixture("kfd/mi300x"))]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "gfx942 -> gfx9_4 -> gfx9; without them the portable SPIR-V wheel amdgcnspirv"
        ),
        "{text}"
    );
}

/// The fixture wheel with `kpack_demo/lib/nested/libmodern_v3.so` replaced by the SPIR-V
/// library (its RECORD line without hash and size, which the reader accepts).
fn spirv_wheel(dir: &Path) -> PathBuf {
    const MEMBER: &str = "kpack_demo/lib/nested/libmodern_v3.so";
    let wheel = dir.join("kpack_demo-1.0-py3-none-linux_x86_64.whl");
    let lib = std::fs::read(fixture(LIBS[0])).unwrap();
    kpack_testkit::rezip_wheel(&fixture(common::WHEEL), &wheel, &[], |name, data| {
        if name == MEMBER {
            data.clone_from(&lib);
        } else if name.ends_with("/RECORD") {
            *data = kpack_testkit::unhashed_record(data, |path| path == MEMBER);
        }
    });
    wheel
}

#[test]
fn split_wheel_gives_gpus_without_native_code_an_extra_that_installs_the_spirv_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = spirv_wheel(dir.path());
    let out = dir.path().join("wheels");
    kpack_ok(&["split-wheel", s(&wheel), "-o", s(&out)]);
    let host = out.join("kpack_demo-1.0-py3-none-linux_x86_64.whl");
    let unpacked = common::unpacked(&host);
    let metadata =
        std::fs::read_to_string(unpacked.path().join("kpack_demo-1.0.dist-info/METADATA")).unwrap();
    let requires = |extra: &str| -> Vec<&str> {
        let tail = format!("; extra == \"{extra}\"");
        metadata
            .lines()
            .filter_map(|l| {
                l.strip_prefix("Requires-Dist: ")?
                    .strip_suffix(tail.as_str())
            })
            .collect()
    };
    let spirv_dist = "kpack-demo-device-amdgcnspirv == 1.0";
    assert_eq!(requires("device-amdgcnspirv"), [spirv_dist]);
    // No native or generic wheel serves gfx1151 or gfx942: the SPIR-V one does.
    assert_eq!(requires("device-gfx1151"), [spirv_dist]);
    assert_eq!(requires("device-gfx942"), [spirv_dist]);
    // gfx1030 and gfx1100 have native wheels, and only those are installed for them.
    assert_eq!(
        requires("device-gfx1030"),
        ["kpack-demo-device-gfx1030 == 1.0"]
    );
    assert!(!requires("device-gfx1100").contains(&spirv_dist));

    // The host, gfx1100 and SPIR-V wheels unpacked together restore the library.
    let root = tempfile::tempdir().unwrap();
    for w in ["", "-device-gfx1100", "-device-amdgcnspirv"] {
        let name = format!(
            "kpack_demo{}-1.0-py3-none-linux_x86_64.whl",
            w.replace('-', "_")
        );
        copy_tree(common::unpacked(&out.join(name)).path(), root.path());
    }
    let restored = dir.path().join("restored.so");
    let lib = root.path().join("kpack_demo/lib/nested/libmodern_v3.so");
    kpack_ok(&["restore", s(&lib), "-o", s(&restored)]);
    assert_eq!(originals(&restored), originals(&fixture(LIBS[0])));
}
