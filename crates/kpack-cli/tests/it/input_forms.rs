//! Every form device code comes in, for `inspect` and `unbundle` (`report`: in report.rs):
//! wheels read in place and tarballs streamed, each checked against the same content as plain files (the
//! tree `unzip`/GNU tar unpack); LLVM OffloadBinary (`.llvm.offloading` sections of
//! new-driver objects and static libraries, and `llvm-offload-binary` files) checked against
//! LLVM 22's own readers as witnesses.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{
    TARBALLS, WHEEL, by_relative_path, json, kpack_ok, llvm_extracts, objdump_images, s, unpacked,
};
use kpack_testkit::fixture;
use serde_json::Value;

/// Every file `kpack unbundle` writes for `inputs`, by name.
fn unbundled(inputs: &[&Path]) -> BTreeMap<String, Vec<u8>> {
    let out = tempfile::tempdir().unwrap();
    let mut args = vec!["unbundle", "-o", s(out.path())];
    args.extend(inputs.iter().map(|p| s(p)));
    kpack_ok(&args);
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(out.path()).unwrap() {
        let e = e.unwrap();
        files.insert(
            e.file_name().to_string_lossy().into_owned(),
            std::fs::read(e.path()).unwrap(),
        );
    }
    files
}

/// The images `kpack inspect --json` reports for one file, in the same shape.
fn inspected_images(report: &Value) -> Vec<[String; 5]> {
    let from = |member: &str, images: &Value| -> Vec<[String; 5]> {
        images
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|i| {
                        [
                            member.to_owned(),
                            i["image_kind"].as_str().unwrap().to_owned(),
                            i["arch"].as_str().unwrap().to_owned(),
                            i["triple"].as_str().unwrap().to_owned(),
                            i["offload_kind"].as_str().unwrap().to_owned(),
                        ]
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let details = &report["details"];
    match details["members"].as_array() {
        Some(members) => members
            .iter()
            .flat_map(|m| from(m["member"].as_str().unwrap(), &m["offload_images"]))
            .collect(),
        None => from("", &details["offload_images"]),
    }
}

const OFFLOAD_FIXTURES: [&str; 4] = [
    "offload/mk.offload",
    "offload/mk_embedded.o",
    "offload/mk_rdc.o",
    "offload/libmk_rdc.a",
];

#[test]
fn inspect_lists_the_offload_images_llvm_objdump_lists() {
    for rel in OFFLOAD_FIXTURES {
        let path = fixture(rel);
        let report = &json(&["inspect", "--json", s(&path)])[0];
        let ours = inspected_images(report);
        assert!(!ours.is_empty(), "{rel}: no images");
        assert_eq!(ours, objdump_images(&path), "{rel}");
    }
}

#[test]
fn inspect_totals_count_every_amdgpu_offload_image() {
    let report = &json(&["inspect", "--json", s(&fixture("offload/libmk_rdc.a"))])[0];
    assert_eq!(report["kind"], "ar-archive");
    let totals = common::target_counts(report);
    assert_eq!(
        totals,
        [("gfx1030".to_owned(), 2), ("gfx900".to_owned(), 2)]
    );
    let file = &json(&["inspect", "--json", s(&fixture("offload/mk.offload"))])[0];
    assert_eq!(file["kind"], "offload-binary");
    assert_eq!(file["totals"].as_array().unwrap().len(), 3);
}

#[test]
fn offload_binary_file_and_object_unbundle_to_what_llvm_offload_binary_extracts() {
    for (rel, arches) in [
        (
            "offload/mk.offload",
            &["gfx900", "gfx1030", "gfx90a:xnack+"][..],
        ),
        (
            "offload/mk_embedded.o",
            &["gfx900", "gfx1030", "gfx90a:xnack+"][..],
        ),
        ("offload/mk_rdc.o", &["gfx1030", "gfx900"][..]),
    ] {
        let path = fixture(rel);
        let ours = unbundled(&[&path]);
        assert_eq!(ours.len(), arches.len(), "{rel}: {:?}", ours.keys());
        let stem = path.file_name().unwrap().to_str().unwrap();
        for (i, arch) in arches.iter().enumerate() {
            let name = format!("{stem}.offload{i}.hip-amdgcn-amd-amdhsa--{arch}.co");
            let written = ours
                .get(&name)
                .unwrap_or_else(|| panic!("{rel}: {name} missing from {:?}", ours.keys()));
            assert_eq!(written, &llvm_extracts(&path, arch, None), "{rel} {arch}");
        }
    }
}

#[test]
fn offload_images_in_the_code_objects_are_the_linked_device_objects() {
    // mk.offload packs the code objects the fixture script built: the same bytes come out.
    let ours = unbundled(&[&fixture("offload/mk.offload")]);
    for (i, (arch, co)) in [
        ("gfx900", "mk_gfx900.co"),
        ("gfx1030", "mk_gfx1030.co"),
        ("gfx90a:xnack+", "mk_gfx90a_xnackp.co"),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("mk.offload.offload{i}.hip-amdgcn-amd-amdhsa--{arch}.co");
        assert_eq!(
            ours[&name],
            kpack_testkit::read_fixture(&format!("offload/{co}"))
        );
    }
}

#[test]
fn static_library_members_unbundle_to_what_llvm_offload_binary_archives() {
    let lib = fixture("offload/libmk_rdc.a");
    let ours = unbundled(&[&lib]);
    assert_eq!(ours.len(), 4, "{:?}", ours.keys());
    for member in ["mk_rdc.o", "mk2_rdc.o"] {
        for (i, arch) in ["gfx1030", "gfx900"].into_iter().enumerate() {
            let name = format!("libmk_rdc.a@{member}.offload{i}.hip-amdgcn-amd-amdhsa--{arch}.co");
            assert_eq!(
                ours[&name],
                llvm_extracts(&lib, arch, Some(member)),
                "{member} {arch}"
            );
            assert!(ours[&name].starts_with(b"BC\xc0\xde"), "{name} is bitcode");
        }
    }
}

#[test]
fn a_corrupt_offload_binary_fails_with_the_file_offset_and_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let good = fixture("offload/mk.offload");
    let report = &json(&["inspect", "--json", s(&good)])[0];
    let second = report["details"]["offload_images"][1]["binary_offset"]
        .as_u64()
        .unwrap() as usize;
    assert!(second > 0);
    // The second binary claims more bytes than the file has.
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[second + 8..second + 16].copy_from_slice(&u64::MAX.to_le_bytes());
    let bad = dir.path().join("bad.offload");
    std::fs::write(&bad, &bytes).unwrap();
    let out = common::kpack(&["inspect", s(&bad)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.offload"), "{err}");
    let at = format!("binary size at offset {:#x}", second + 8);
    assert!(err.contains(&at), "{err} lacks {at}");
    assert!(err.contains("expected"), "{err}");
}

#[test]
fn wheel_and_tarballs_inspect_as_their_unpacked_trees() {
    for rel in std::iter::once(WHEEL).chain(TARBALLS) {
        let container = fixture(rel);
        let tree = unpacked(&container);
        let ours = json(&["inspect", "--json", s(&container)]);
        let plain = json(&["inspect", "--json", s(tree.path())]);
        let ours = by_relative_path(&ours, &format!("{}!", s(&container)));
        let plain = by_relative_path(&plain, &format!("{}/", s(tree.path())));
        assert!(ours.len() >= 5, "{rel}: {:?}", ours.keys());
        assert_eq!(ours, plain, "{rel}");
        assert!(ours.values().all(|r| r["kind"] != "error"), "{rel}");
    }
}

#[test]
fn wheel_and_tarballs_unbundle_as_their_unpacked_trees() {
    for rel in std::iter::once(WHEEL).chain(TARBALLS) {
        let container = fixture(rel);
        let tree = unpacked(&container);
        let ours = unbundled(&[&container]);
        assert!(ours.len() >= 10, "{rel}: {:?}", ours.keys());
        assert_eq!(ours, unbundled(&[tree.path()]), "{rel}");
    }
}

#[test]
fn a_truncated_tarball_or_wheel_is_reported_as_an_error_of_the_container() {
    let dir = tempfile::tempdir().unwrap();
    for rel in [WHEEL, "tarballs/forms.tar.zst"] {
        let bytes = kpack_testkit::read_fixture(rel);
        let name = Path::new(rel).file_name().unwrap();
        let bad = dir.path().join(name);
        std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
        let out = common::kpack(&["inspect", "--json", s(&bad)]);
        assert!(!out.status.success(), "{rel}");
        let reports: Value = serde_json::from_slice(&out.stdout).unwrap();
        let last = reports.as_array().unwrap().last().unwrap();
        assert_eq!(last["kind"], "error", "{rel}");
        assert_eq!(last["path"], s(&bad), "{rel}");
        assert!(
            last["error"].as_str().unwrap().contains(s(&bad)),
            "{rel}: {last}"
        );
        let out = common::kpack(&["unbundle", "-o", s(&dir.path().join("out")), s(&bad)]);
        assert!(!out.status.success(), "{rel}");
    }
}

#[test]
#[ignore = "real-world"]
fn corpus_wheels_inspect_and_unbundle_as_their_unpacked_trees() {
    for (name, version) in [("jax_rocm7_plugin", "0.12.0"), ("cupy_rocm_7_0", "14.2.0")] {
        let wheel = kpack_testkit::corpus_wheel(name, version);
        // scripts/setup.sh unzips every corpus wheel into wx/<wheel name without .whl>.
        let stem = wheel.file_stem().unwrap();
        let tree = kpack_testkit::corpus().join("wx").join(stem);
        let ours = json(&["inspect", "--json", s(&wheel)]);
        let plain = json(&["inspect", "--json", s(&tree)]);
        let ours = by_relative_path(&ours, &format!("{}!", s(&wheel)));
        let plain = by_relative_path(&plain, &format!("{}/", s(&tree)));
        assert!(
            ours.values()
                .any(|r| !r["totals"].as_array().unwrap().is_empty()),
            "{name}: no device code"
        );
        assert_eq!(ours, plain, "{name}");
    }
    let wheel = kpack_testkit::corpus_wheel("jax_rocm7_plugin", "0.12.0");
    let tree = kpack_testkit::jax_wheel_dir("0.12.0");
    let ours = unbundled(&[&wheel]);
    assert!(!ours.is_empty());
    assert_eq!(ours, unbundled(&[&tree]));
}
