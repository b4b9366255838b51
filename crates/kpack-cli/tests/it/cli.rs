//! The `kpack` command on the repository's real fixtures: the documented JSON of `inspect`,
//! `unbundle` naming and filtering, `pack` / `list` / `extract` round trips, and the errors
//! users see on bad input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use kpack_testkit::fixture;

use crate::common;

use common::{json, kpack, kpack_ok, s};

/// (fixture, kind, state, wrapper -> bundle, bundle count, {target: count}).
type Expected = (
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static [Option<u64>],
    usize,
    &'static [(&'static str, u64)],
);

const SIX: &[(&str, u64)] = &[
    ("gfx1030", 1),
    ("gfx900", 1),
    ("gfx906", 1),
    ("gfx908", 1),
    ("gfx90a:xnack+", 1),
    ("gfx90a:xnack-", 1),
];
const MODERN: &[(&str, u64)] = &[
    ("gfx11-generic", 1),
    ("gfx1100", 1),
    ("gfx942:sramecc+:xnack-", 1),
];
const PAIR: &[(&str, u64)] = &[("gfx1030", 1), ("gfx90a:xnack+", 1)];
const WIDE: &[(&str, u64)] = &[
    ("gfx10-3-generic", 1),
    ("gfx1030", 1),
    ("gfx11-generic", 1),
    ("gfx1100", 1),
    ("gfx1101", 1),
    ("gfx1151", 1),
    ("gfx12-generic", 1),
    ("gfx1200", 1),
    ("gfx1201", 1),
    ("gfx9-4-generic", 1),
    ("gfx908", 1),
    ("gfx90a:xnack+", 1),
    ("gfx90a:xnack-", 1),
    ("gfx942", 1),
    ("gfx950", 1),
];

/// Independent facts: wrapper counts from `.hipFatBinSegment` sizes, targets from
/// `clang-offload-bundler --list` (see fixtures/reference), pointer targets from `readelf -r`.
const EXPECTED: &[Expected] = &[
    ("bin/libone.so", "elf", Some("fat"), &[Some(0)], 1, SIX),
    (
        "bin/libone_stripped.so",
        "elf",
        Some("fat"),
        &[Some(0)],
        1,
        SIX,
    ),
    (
        "bin/libone_gfx906.so",
        "elf",
        Some("fat"),
        &[Some(0)],
        1,
        &[("gfx906", 1)],
    ),
    (
        "bin/libtwo.so",
        "elf",
        Some("fat"),
        &[Some(0), Some(1)],
        2,
        &[
            ("gfx1030", 2),
            ("gfx900", 2),
            ("gfx906", 2),
            ("gfx908", 2),
            ("gfx90a:xnack+", 2),
            ("gfx90a:xnack-", 2),
        ],
    ),
    (
        "bin/librdc.so",
        "elf",
        Some("fat"),
        &[Some(0), Some(0)],
        1,
        &[("gfx1030", 1), ("gfx900", 1), ("gfx90a:xnack-", 1)],
    ),
    (
        "bin/exe_pie",
        "elf",
        Some("fat"),
        &[Some(0)],
        1,
        &[("gfx1030", 1), ("gfx900", 1), ("gfx908", 1)],
    ),
    (
        "bin/exe_nopie",
        "elf",
        Some("fat"),
        &[Some(0)],
        1,
        &[("gfx1030", 1), ("gfx900", 1), ("gfx908", 1)],
    ),
    ("bin/libhostonly.so", "elf", Some("host-only"), &[], 0, &[]),
    ("bin/k1.o", "elf", Some("fat"), &[Some(0)], 1, SIX),
    ("bin/k2.o", "elf", Some("fat"), &[Some(0)], 1, SIX),
    ("bin/rdc_a.o", "elf", Some("rdc"), &[None], 0, &[]),
    ("bin/k1_genco.hsaco", "offload-bundle", None, &[], 1, SIX),
    (
        "bin/k1_gfx90a.hsaco",
        "offload-bundle",
        None,
        &[],
        1,
        &[("gfx90a:xnack-", 1)],
    ),
    (
        "modern/libmodern_v3.so",
        "elf",
        Some("fat"),
        &[Some(0)],
        1,
        MODERN,
    ),
    (
        "modern/libmodern_v2.so",
        "elf",
        Some("fat"),
        &[Some(0)],
        1,
        MODERN,
    ),
    (
        "modern/libmodern_nocompress.so",
        "elf",
        Some("fat"),
        &[Some(0)],
        1,
        MODERN,
    ),
    (
        "modern/exe_modern_v3",
        "elf",
        Some("fat"),
        &[Some(0)],
        1,
        MODERN,
    ),
    (
        "modern/libmodern_wide_v3.so",
        "elf",
        Some("fat"),
        &[Some(0)],
        1,
        WIDE,
    ),
    (
        "modern/libmodern_two_v3.so",
        "elf",
        Some("fat"),
        &[Some(0), Some(1)],
        2,
        &[
            ("gfx11-generic", 2),
            ("gfx1100", 2),
            ("gfx942:sramecc+:xnack-", 2),
        ],
    ),
    ("modern/mk_v3.o", "elf", Some("fat"), &[Some(0)], 1, MODERN),
    ("modern/mk2_v3.o", "elf", Some("fat"), &[Some(0)], 1, MODERN),
    (
        "modern/mk_genco_v3.hsaco",
        "compressed-offload-bundle",
        None,
        &[],
        1,
        MODERN,
    ),
    (
        "modern/ccob_v1_llvm18.bundle",
        "compressed-offload-bundle",
        None,
        &[],
        1,
        PAIR,
    ),
    (
        "modern/ccob_v2_llvm19.bundle",
        "compressed-offload-bundle",
        None,
        &[],
        1,
        PAIR,
    ),
    (
        "modern/ccob_v2_llvm22.bundle",
        "compressed-offload-bundle",
        None,
        &[],
        1,
        PAIR,
    ),
    (
        "modern/ccob_v3_llvm22.bundle",
        "compressed-offload-bundle",
        None,
        &[],
        1,
        PAIR,
    ),
    (
        "modern/plain_align1_llvm22.bundle",
        "offload-bundle",
        None,
        &[],
        1,
        PAIR,
    ),
    (
        "modern/plain_align4096_llvm22.bundle",
        "offload-bundle",
        None,
        &[],
        1,
        PAIR,
    ),
    (
        "modern/mk_gfx1201_plain.hsaco",
        "offload-bundle",
        None,
        &[],
        1,
        &[("gfx1201", 1)],
    ),
    (
        "modern/mk_gfx1030.co",
        "code-object",
        None,
        &[],
        0,
        &[("gfx1030", 1)],
    ),
    (
        "modern/mk_gfx90a_xnackp.co",
        "code-object",
        None,
        &[],
        0,
        &[("gfx90a:xnack+", 1)],
    ),
];

#[test]
fn inspect_json_reports_every_fixture_with_its_kind_wrappers_bundles_and_totals() {
    let paths: Vec<PathBuf> = EXPECTED.iter().map(|e| fixture(e.0)).collect();
    let mut args = vec!["inspect", "--json"];
    args.extend(paths.iter().map(|p| s(p)));
    let reports = json(&args);
    let reports = reports.as_array().unwrap();
    assert_eq!(reports.len(), EXPECTED.len());
    for (report, (rel, kind, state, wrappers, bundles, totals)) in reports.iter().zip(EXPECTED) {
        // The documented top-level shape, in order.
        let keys: Vec<&str> = report
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["path", "kind", "details", "totals"], "{rel}");
        assert!(report["path"].as_str().unwrap().ends_with(rel));
        assert_eq!(report["kind"], *kind, "{rel}");
        let details = &report["details"];
        if let Some(state) = state {
            assert_eq!(details["state"], *state, "{rel}");
            let got: Vec<Option<u64>> = details["wrappers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["bundle"].as_u64())
                .collect();
            assert_eq!(got, *wrappers, "{rel}: wrapper -> bundle");
        }
        if *kind != "code-object" {
            assert_eq!(
                details["bundles"].as_array().unwrap().len(),
                *bundles,
                "{rel}"
            );
        }
        let got = common::target_counts(report);
        let want: Vec<(String, u64)> = totals.iter().map(|(t, c)| (t.to_string(), *c)).collect();
        assert_eq!(got, want, "{rel}: totals");
    }
}

#[test]
fn inspect_totals_bytes_sum_the_code_objects_of_each_target() {
    let reports = json(&["inspect", "--json", s(&fixture("bin/libtwo.so"))]);
    let totals = &reports[0]["totals"];
    // bundle 0 (k1) + bundle 1 (k2), sizes as clang-offload-bundler-15 unbundles them.
    assert_eq!(totals[0]["target"], "gfx1030");
    assert_eq!(totals[0]["bytes"], 3640 + 3632);
    assert_eq!(totals[4]["target"], "gfx90a:xnack+");
    assert_eq!(totals[4]["bytes"], 4472 + 4464);
}

#[test]
fn inspect_reports_ccob_version_method_and_verified_hash() {
    let reports = json(&[
        "inspect",
        "--json",
        s(&fixture("modern/ccob_v1_llvm18.bundle")),
        s(&fixture("modern/ccob_v2_llvm19.bundle")),
        s(&fixture("modern/ccob_v3_llvm22.bundle")),
    ]);
    for (report, version) in reports.as_array().unwrap().iter().zip([1, 2, 3]) {
        let bundle = &report["details"]["bundles"][0];
        assert_eq!(bundle["format"], "ccob");
        assert_eq!(bundle["version"], version);
        assert_eq!(bundle["method"], "zstd");
        assert_eq!(bundle["hash"], "verified");
        assert!(bundle["uncompressed_size"].as_u64().unwrap() > bundle["size"].as_u64().unwrap());
    }
}

#[test]
fn inspect_reports_archive_entries_as_totals() {
    let reports = json(&["inspect", "--json", s(&fixture("vectors/test_noop.kpack"))]);
    let report = &reports[0];
    assert_eq!(report["kind"], "kpack-archive");
    assert_eq!(
        report["details"]["gfx_arches"],
        serde_json::json!(["gfx900", "gfx906"])
    );
    assert_eq!(
        report["totals"],
        serde_json::json!([
            {"target": "gfx900", "count": 2, "bytes": 119 + 168},
            {"target": "gfx906", "count": 1, "bytes": 219},
        ])
    );
}

#[test]
fn inspect_of_a_directory_recurses_in_sorted_order_and_skips_unrelated_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("b")).unwrap();
    std::fs::copy(fixture("bin/libone.so"), dir.path().join("b/libone.so")).unwrap();
    std::fs::copy(fixture("modern/mk_gfx1030.co"), dir.path().join("a.co")).unwrap();
    std::fs::write(dir.path().join("README"), "not device code").unwrap();
    let reports = json(&["inspect", "--json", s(dir.path())]);
    let paths: Vec<&str> = reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(paths[0].ends_with("a.co") && paths[1].ends_with("b/libone.so"));
}

#[test]
fn inspect_of_the_ar_archive_lists_each_member() {
    let reports = json(&["inspect", "--json", s(&fixture("bin/libtwo.a"))]);
    let members = reports[0]["details"]["members"].as_array().unwrap();
    let names: Vec<&str> = members
        .iter()
        .map(|m| m["member"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["k1.o", "k2.o"]);
    assert_eq!(reports[0]["totals"][0]["count"], 2);
}

#[test]
fn unbundle_names_keep_the_bundles_of_a_multi_bundle_binary_apart() {
    let out = tempfile::tempdir().unwrap();
    kpack_ok(&[
        "unbundle",
        s(&fixture("bin/libtwo.so")),
        "-o",
        s(out.path()),
    ]);
    let names = kpack_testkit::listing(out.path());
    assert_eq!(names.len(), 12);
    assert!(names.contains(&"libtwo.so.0.hipv4-amdgcn-amd-amdhsa--gfx900.co".to_owned()));
    assert!(names.contains(&"libtwo.so.1.hipv4-amdgcn-amd-amdhsa--gfx900.co".to_owned()));
    let k1 = std::fs::read(
        out.path()
            .join("libtwo.so.0.hipv4-amdgcn-amd-amdhsa--gfx900.co"),
    )
    .unwrap();
    let k2 = std::fs::read(
        out.path()
            .join("libtwo.so.1.hipv4-amdgcn-amd-amdhsa--gfx900.co"),
    )
    .unwrap();
    assert_ne!(k1, k2, "the two translation units hold different kernels");
}

#[test]
fn unbundle_target_filter_selects_an_exact_target_or_every_variant_of_a_processor() {
    let out = tempfile::tempdir().unwrap();
    let lib = fixture("bin/libone.so");
    kpack_ok(&[
        "unbundle",
        s(&lib),
        "-o",
        s(out.path()),
        "--target",
        "gfx90a:xnack+",
    ]);
    assert_eq!(
        kpack_testkit::listing(out.path()),
        ["libone.so.0.hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+.co"]
    );
    let out = tempfile::tempdir().unwrap();
    kpack_ok(&[
        "unbundle",
        s(&lib),
        "-o",
        s(out.path()),
        "--target",
        "gfx90a",
    ]);
    assert_eq!(kpack_testkit::listing(out.path()).len(), 2);
}

#[test]
fn unbundle_refuses_two_inputs_that_would_write_the_same_names() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("bin/libone.so"), a.path().join("lib.so")).unwrap();
    std::fs::copy(fixture("bin/libone.so"), b.path().join("lib.so")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let res = kpack(&[
        "unbundle",
        s(&a.path().join("lib.so")),
        s(&b.path().join("lib.so")),
        "-o",
        s(out.path()),
    ]);
    assert!(!res.status.success());
    assert!(String::from_utf8_lossy(&res.stderr).contains("same file"));
}

/// Every device code object of `input`, as unbundled by kpack, keyed by file name.
fn unbundled(input: &Path) -> BTreeMap<String, Vec<u8>> {
    let out = tempfile::tempdir().unwrap();
    kpack_ok(&["unbundle", s(input), "-o", s(out.path())]);
    kpack_testkit::listing(out.path())
        .into_iter()
        .map(|n| {
            let data = std::fs::read(out.path().join(&n)).unwrap();
            (n, data)
        })
        .collect()
}

#[test]
fn pack_list_and_extract_round_trip_every_code_object_under_its_wrapper_key() {
    for compression in ["none", "zstd"] {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("sample.kpack");
        let inputs = [
            fixture("bin/libtwo.so"),
            fixture("bin/librdc.so"),
            fixture("modern/libmodern_two_v3.so"),
        ];
        let mut args = vec!["pack", "-o", s(&archive), "--compression", compression];
        args.extend(inputs.iter().map(|p| s(p)));
        kpack_ok(&args);
        let listing = json(&["list", "--json", s(&archive)]);
        let scheme = if compression == "none" {
            "none"
        } else {
            "zstd-per-kernel"
        };
        assert_eq!(listing["compression_scheme"], scheme);
        let entries = listing["entries"].as_array().unwrap();
        // libtwo: 2 wrappers x 6; librdc: 2 wrappers x 3 (sharing one bundle); modern: 2 x 3.
        assert_eq!(entries.len(), 12 + 6 + 6);
        // The two RDC wrappers share one bundle: their entries share blobs.
        let rdc_ordinals = |key: &str| -> Vec<u64> {
            entries
                .iter()
                .filter(|e| e["binary"] == key)
                .map(|e| e["ordinal"].as_u64().unwrap())
                .collect()
        };
        assert_eq!(rdc_ordinals("librdc.so#0"), rdc_ordinals("librdc.so#1"));

        for input in &inputs {
            let name = input.file_name().unwrap().to_str().unwrap();
            for (file, data) in unbundled(input) {
                // "<name>.<bundle>.<bundle id>.co": wrapper i points at bundle i here, except
                // in librdc.so where both wrappers point at bundle 0.
                let rest = file.strip_prefix(&format!("{name}.")).unwrap();
                let (bundle, id) = rest.trim_end_matches(".co").split_once('.').unwrap();
                let target = id.rsplit("--").next().unwrap();
                let wrappers: &[&str] = if name == "librdc.so" {
                    &["0", "1"]
                } else {
                    &[bundle]
                };
                for w in wrappers {
                    let out = dir.path().join("extracted.co");
                    kpack_ok(&[
                        "extract",
                        s(&archive),
                        &format!("{name}#{w}"),
                        target,
                        "-o",
                        s(&out),
                    ]);
                    assert!(std::fs::read(&out).unwrap() == data, "{name}#{w} {target}");
                }
            }
        }
    }
}

#[test]
fn pack_output_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.kpack");
    let b = dir.path().join("b.kpack");
    for out in [&a, &b] {
        kpack_ok(&[
            "pack",
            "-o",
            s(out),
            "--group",
            "g",
            s(&fixture("bin/libtwo.so")),
            s(&fixture("modern/mk_gfx1030.co")),
        ]);
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn extract_of_a_missing_entry_names_what_the_archive_holds() {
    let vector = fixture("vectors/test_noop.kpack");
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("x.co");
    let res = kpack(&[
        "extract",
        s(&vector),
        "lib/libtest.so#0",
        "gfx1100",
        "-o",
        s(&target),
    ]);
    assert!(!res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("gfx900") && err.contains("gfx906"), "{err}");
    assert!(!target.exists());
    let res = kpack(&[
        "extract",
        s(&vector),
        "./lib/libtest.so#0",
        "gfx906",
        "-o",
        s(&target),
    ]);
    assert!(res.status.success(), "a leading ./ is accepted");
    assert_eq!(std::fs::read(&target).unwrap().len(), 219);
}

#[test]
fn truncated_inputs_fail_with_the_file_the_offset_and_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("modern/ccob_v3_llvm22.bundle", 1000),
        ("bin/k1_genco.hsaco", 100),
        ("bin/libone.so", 30000),
        ("vectors/test_noop.kpack", 600),
    ];
    for (rel, keep) in cases {
        let bytes = std::fs::read(fixture(rel)).unwrap();
        let cut = dir.path().join(Path::new(rel).file_name().unwrap());
        std::fs::write(&cut, &bytes[..keep]).unwrap();
        let res = kpack(&["inspect", s(&cut)]);
        assert_eq!(res.status.code(), Some(1), "{rel}");
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(err.contains(s(&cut)), "{rel}: error names the file: {err}");
        assert!(
            ["offset", "at byte", "0x"].iter().any(|w| err.contains(w)),
            "{rel}: error names the offset: {err}"
        );
        assert!(
            ["expect", "need", "at most", "beyond the end"]
                .iter()
                .any(|w| err.contains(w)),
            "{rel}: says what was expected: {err}"
        );
        let res = kpack(&["unbundle", s(&cut), "-o", s(&dir.path().join("out"))]);
        assert_eq!(res.status.code(), Some(1), "{rel}");
    }
}

#[test]
fn inspect_json_of_a_bad_file_still_reports_the_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.hsaco");
    std::fs::write(
        &bad,
        &std::fs::read(fixture("bin/k1_genco.hsaco")).unwrap()[..64],
    )
    .unwrap();
    let out = kpack(&["inspect", "--json", s(&fixture("bin/libone.so")), s(&bad)]);
    assert_eq!(out.status.code(), Some(1));
    let reports: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reports[0]["kind"], "elf");
    assert_eq!(reports[1]["kind"], "error");
    assert!(reports[1]["error"].as_str().unwrap().contains("bad.hsaco"));
}

#[test]
fn pack_refuses_an_input_without_device_code() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.kpack");
    let res = kpack(&["pack", "-o", s(&out), s(&fixture("bin/libhostonly.so"))]);
    assert_eq!(res.status.code(), Some(1));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains("libhostonly.so") && err.contains("no device code"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written");
}

/// The bundles of `.hip_fatbin` in `file`: (file offset, section offset), from `inspect --json`.
fn bundle_offsets(file: &Path) -> Vec<(u64, u64)> {
    let report = json(&["inspect", "--json", s(file)]);
    let details = &report[0]["details"];
    let section = details["fatbin"]["offset"].as_u64().unwrap();
    details["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let offset = b["offset"].as_u64().unwrap();
            (offset, offset - section)
        })
        .collect()
}

#[test]
fn a_ccob_hash_mismatch_names_the_bundle_and_absolute_offsets_in_hex() {
    let dir = tempfile::tempdir().unwrap();
    let good = fixture("modern/libmodern_two_v3.so");
    let (file_offset, section_offset) = bundle_offsets(&good)[1];
    let mut bytes = std::fs::read(&good).unwrap();
    // The stored hash of the second CCOB (v3: bytes 24..32 of its header).
    bytes[file_offset as usize + 24] ^= 0x55;
    let bad = dir.path().join("libmodern_two_v3.so");
    std::fs::write(&bad, &bytes).unwrap();
    let expected = format!(
        "bundle 1 at file offset {file_offset:#x} (.hip_fatbin + {section_offset:#x}): CCOB hash at offset {:#x}: stored 0x",
        file_offset + 24
    );
    for args in [
        vec!["inspect", s(&bad)],
        vec!["unbundle", s(&bad), "-o", s(&dir.path().join("out"))],
        vec![
            "transform",
            s(&bad),
            "-o",
            s(&dir.path().join("host.so")),
            "--kpack-dir",
            s(&dir.path().join("kp")),
        ],
    ] {
        let res = kpack(&args);
        assert_eq!(res.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(err.contains(s(&bad)), "{args:?}: names the file: {err}");
        assert!(
            err.contains(&expected),
            "{args:?}: {err}\nexpected: {expected}"
        );
    }
    assert!(!dir.path().join("host.so").exists(), "nothing written");
    let left: Vec<_> = std::fs::read_dir(dir.path().join("kp"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert_eq!(left, Vec::<std::ffi::OsString>::new(), "no archive left");
}

#[test]
fn an_implausible_entry_count_is_reported_as_such_with_hex_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let good = fixture("modern/libmodern_nocompress.so");
    let (file_offset, _) = bundle_offsets(&good)[0];
    let mut bytes = std::fs::read(&good).unwrap();
    let count_at = file_offset as usize + 24;
    let count = u64::from_le_bytes(bytes[count_at..count_at + 8].try_into().unwrap());
    bytes[count_at..count_at + 8].copy_from_slice(&(count + 1).to_le_bytes());
    let bad = dir.path().join("libmodern_nocompress.so");
    std::fs::write(&bad, &bytes).unwrap();
    let res = kpack(&["inspect", s(&bad)]);
    assert_eq!(res.status.code(), Some(1));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains(&format!("implausible entry count {}", count + 1)),
        "{err}"
    );
    assert!(
        err.contains(&format!("at offset {:#x}", file_offset + 24)),
        "the count's absolute offset, in hex: {err}"
    );
    assert!(
        !err.contains("triple"),
        "not reported as a triple length: {err}"
    );
}

#[test]
fn a_closed_pipe_ends_kpack_quietly_as_sigpipe_does() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    // More than a pipe holds (64 KiB on Linux), so kpack writes after the reader is gone.
    let mut child = Command::new(env!("CARGO_BIN_EXE_kpack"))
        .args(["inspect", "--json", s(&fixture(""))])
        .env("CI", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "no message, no panic: {stderr}");
    // Ended by SIGPIPE, or (where it does not end the process) with the status a shell
    // reports for that, 128 + 13.
    assert!(
        out.status.signal() == Some(13) || out.status.code() == Some(141),
        "{:?}",
        out.status
    );
}

#[test]
fn a_failed_write_to_stdout_is_an_error_naming_standard_output_not_a_panic() {
    // /dev/full fails every write with ENOSPC: the commands' one output writer reports it and
    // fails, as it ends quietly on a closed pipe.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kpack"))
        .args(["inspect", "--json", s(&fixture(""))])
        .env("CI", "1")
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("kpack: error: cannot write to standard output: ")
            && !stderr.contains("panicked"),
        "{stderr}"
    );
}
