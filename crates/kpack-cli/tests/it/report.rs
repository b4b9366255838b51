//! `kpack report`: where the bytes go. Its JSON totals equal `kpack inspect --json`'s on the
//! same inputs, every byte of every file is attributed once, kernel-database files count
//! for their handler's target, and a failed run leaves no page behind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use kpack_testkit::{fixture, librocsparse};

use crate::common;

use common::{json, kpack, s};

/// Per target (count, bytes) summed over `kpack inspect --json`'s files.
fn inspect_totals(paths: &[&str]) -> BTreeMap<String, (u64, u64)> {
    let mut args = vec!["inspect", "--json"];
    args.extend(paths);
    let mut sums = BTreeMap::new();
    for file in json(&args).as_array().unwrap() {
        for t in file["totals"].as_array().unwrap() {
            let sum: &mut (u64, u64) = sums
                .entry(t["target"].as_str().unwrap().to_owned())
                .or_default();
            sum.0 += t["count"].as_u64().unwrap();
            sum.1 += t["bytes"].as_u64().unwrap();
        }
    }
    sums
}

/// Per target (count, bytes) of `kpack report --json`'s targets that hold code objects.
fn report_totals(report: &Value) -> BTreeMap<String, (u64, u64)> {
    report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["count"].as_u64().unwrap() > 0)
        .map(|t| {
            (
                t["target"].as_str().unwrap().to_owned(),
                (t["count"].as_u64().unwrap(), t["bytes"].as_u64().unwrap()),
            )
        })
        .collect()
}

/// Runs `kpack report --json -o <tmp>/report.html` on `paths` and checks what holds for
/// every report: totals equal inspect's, each file's parts add up to its size on disk, and
/// the page is one self-contained file.
fn report_matching_inspect(paths: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let mut args = vec!["report", "--json", "-o", s(&page)];
    args.extend(paths);
    let report = json(&args);

    let totals = report_totals(&report);
    let expected = inspect_totals(paths);
    assert!(!expected.is_empty());
    assert_eq!(totals, expected, "report totals differ from inspect's");

    let mut sum = 0;
    for file in report["files"].as_array().unwrap() {
        let path = PathBuf::from(file["path"].as_str().unwrap());
        let size = std::fs::metadata(&path).unwrap().len();
        let parts: u64 = file["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["disk_bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(
            file["disk_bytes"].as_u64(),
            Some(size),
            "{}",
            path.display()
        );
        assert_eq!(parts, size, "{}: parts do not add up", path.display());
        sum += size;
    }
    assert_eq!(report["disk_bytes"].as_u64(), Some(sum));
    let kinds: u64 = report["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["disk_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(kinds, sum);

    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
    for external in ["src=", "href=", "@import", "url(http", "<link"] {
        assert!(!html.contains(external), "the page loads {external}…");
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "temporary files left beside the page");
    report
}

#[test]
fn report_totals_equal_inspect_totals_on_every_fixture_form() {
    // ELF files, ar archives, bundles (plain and CCOB), code objects, .kpack archives, and
    // the new offload driver's objects, static library and llvm-offload-binary file.
    let dirs = [
        fixture("bin"),
        fixture("modern"),
        fixture("vectors"),
        fixture("offload"),
    ];
    let dirs: Vec<&str> = dirs.iter().map(|d| s(d)).collect();
    let report = report_matching_inspect(&dirs);
    let kinds: Vec<&str> = report["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["device-code", "kpack-archive", "host", "other"]);
}

#[test]
fn report_of_a_wheel_or_tarball_is_that_of_its_unpacked_tree() {
    for rel in std::iter::once(common::WHEEL).chain(common::TARBALLS) {
        let container = fixture(rel);
        let tree = common::unpacked(&container);
        let plain = report_matching_inspect(&[s(tree.path())]);
        let report = json(&["report", "--json", s(&container)]);
        assert_eq!(
            report_totals(&report),
            inspect_totals(&[s(&container)]),
            "{rel}"
        );
        for key in ["disk_bytes", "targets", "kinds"] {
            assert_eq!(report[key], plain[key], "{rel}: {key}");
        }
        assert_eq!(
            common::by_relative_path(&report["files"], &format!("{}!", s(&container))),
            common::by_relative_path(&plain["files"], &format!("{}/", s(tree.path()))),
            "{rel}"
        );
    }
}

#[test]
fn compressed_bundles_share_their_stored_bytes_in_proportion() {
    let lib = fixture("modern/libmodern_wide_v3.so");
    let report = report_matching_inspect(&[s(&lib)]);
    let parts = report["files"][0]["parts"].as_array().unwrap();
    let device: Vec<&Value> = parts
        .iter()
        .filter(|p| p["kind"] == "device-code")
        .collect();
    assert_eq!(device.len(), 15);
    for p in device {
        // CCOB v3: on disk well below the uncompressed size, but not nothing.
        let (disk, bytes) = (
            p["disk_bytes"].as_u64().unwrap(),
            p["bytes"].as_u64().unwrap(),
        );
        assert!(disk > 0 && disk < bytes, "{p}");
    }
}

/// A Debian-style rocBLAS prefix: a Tensile code object and a Tensile database file.
fn rocblas_tree(root: &Path) -> PathBuf {
    let library = root.join("usr/lib/x86_64-linux-gnu/rocblas/5/library");
    std::fs::create_dir_all(&library).unwrap();
    std::fs::copy(
        fixture("modern/mk_gfx90a_xnackp.co"),
        library.join("Kernels.so-000-gfx90a-xnack+.hsaco"),
    )
    .unwrap();
    std::fs::write(
        library.join("TensileLibrary_Type_HH_Contraction_gfx90a.dat"),
        vec![0x82; 5000],
    )
    .unwrap();
    std::fs::write(library.join("TensileLibrary_fallback.dat"), vec![0x82; 700]).unwrap();
    root.join("usr")
}

#[test]
fn kernel_database_files_count_for_their_handlers_target() {
    let dir = tempfile::tempdir().unwrap();
    let usr = rocblas_tree(dir.path());
    let report = report_matching_inspect(&[s(&usr)]);
    let by_name: BTreeMap<String, &Value> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let name = Path::new(f["path"].as_str().unwrap()).file_name().unwrap();
            (name.to_string_lossy().into_owned(), f)
        })
        .collect();
    let hsaco = by_name["Kernels.so-000-gfx90a-xnack+.hsaco"];
    assert_eq!(hsaco["handler"], "rocblas");
    assert_eq!(hsaco["parts"][0]["kind"], "database");
    assert_eq!(hsaco["parts"][0]["target"], "gfx90a:xnack+");
    assert_eq!(hsaco["parts"][0]["count"], 1);
    let dat = by_name["TensileLibrary_Type_HH_Contraction_gfx90a.dat"];
    assert_eq!(dat["parts"][0]["kind"], "database");
    assert_eq!(dat["parts"][0]["target"], "gfx90a");
    assert_eq!(dat["parts"][0]["disk_bytes"], 5000);
    // Arch-less database files belong to no target.
    let fallback = by_name["TensileLibrary_fallback.dat"];
    assert_eq!(fallback["handler"], Value::Null);
    assert_eq!(fallback["parts"][0]["kind"], "other");
}

#[test]
fn a_failed_report_leaves_no_page() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.bundle");
    std::fs::write(&bad, b"__CLANG_OFFLOAD_BUNDLE__\xff\xff\xff\xff").unwrap();
    let page = dir.path().join("report.html");
    let out = kpack(&["report", s(&bad), "-o", s(&page)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.bundle"), "{err}");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["bad.bundle"]);
}

#[test]
fn report_without_an_output_is_an_error() {
    let out = kpack(&["report", s(&fixture("bin/libone.so"))]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-o"));
}

#[test]
#[ignore = "real-world"]
fn librocsparse_report_totals_equal_inspect() {
    let lib = librocsparse();
    let report = report_matching_inspect(&[s(&lib)]);
    assert_eq!(report["targets"].as_array().unwrap().len(), 7);
    let host = &report["kinds"].as_array().unwrap().last().unwrap();
    assert_eq!(host["kind"], "host");
}

#[test]
#[ignore = "real-world"]
fn rocblas_databases_are_attributed_per_target() {
    let root = kpack_testkit::corpus().join("x/librocblas5_7.2.4-1~exp1");
    assert!(
        root.exists(),
        "{} is missing: run scripts/setup.sh",
        root.display()
    );
    let report = report_matching_inspect(&[s(&root)]);
    let kinds: BTreeMap<&str, u64> = report["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["kind"].as_str().unwrap(),
                k["disk_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let total = report["disk_bytes"].as_u64().unwrap();
    // The Tensile library is most of the package.
    assert!(kinds["database"] * 2 > total, "{kinds:?}");
    assert!(report["targets"].as_array().unwrap().len() >= 10);
}

#[test]
fn same_inputs_give_the_same_page_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fixture("bin");
    let pages: Vec<Vec<u8>> = ["a.html", "b.html"]
        .iter()
        .map(|name| {
            let page = dir.path().join(name);
            common::kpack_ok(&["report", s(&bin), "-o", s(&page)]);
            std::fs::read(&page).unwrap()
        })
        .collect();
    assert_eq!(pages[0], pages[1]);
}
