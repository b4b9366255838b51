//! `kpack unbundle` writes exactly what an independent clang-offload-bundler writes.
//!
//! Uncompressed fixtures are checked live against Debian's `clang-offload-bundler-15`;
//! compressed (CCOB) fixtures against the LLVM 22 bundler's output recorded in
//! `fixtures/reference/unbundle_llvm22.tsv` (LLVM 15 cannot read CCOB; the script beside the
//! TSV regenerates it).

use std::collections::BTreeMap;
use std::path::Path;

use kpack_pipeline::unbundle::{TargetFilter, Unbundler};
use kpack_testkit::{fatbin_bundles, fixture, fixtures, run_tool, sha256_hex};

fn unbundle_with_kpack(path: &Path, out: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut unbundler = Unbundler::new(out, TargetFilter::default()).unwrap();
    unbundler.unbundle_file(path).unwrap();
    unbundler
        .publish()
        .unwrap()
        .into_iter()
        .map(|w| {
            let name = w.path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&w.path).unwrap())
        })
        .collect()
}

const UNCOMPRESSED: &[&str] = &[
    "bin/libone.so",
    "bin/libone_gfx906.so",
    "bin/libone_stripped.so",
    "bin/libtwo.so",
    "bin/librdc.so",
    "bin/exe_pie",
    "bin/exe_nopie",
    "bin/k1.o",
    "bin/k2.o",
    "bin/k1_genco.hsaco",
    "bin/k1_gfx90a.hsaco",
    "modern/libmodern_nocompress.so",
    "modern/mk_gfx1201_plain.hsaco",
    "modern/plain_align1_llvm22.bundle",
    "modern/plain_align4096_llvm22.bundle",
];

#[test]
#[cfg_attr(windows, ignore = "needs objcopy and clang-offload-bundler-15")]
fn uncompressed_fixtures_unbundle_byte_identical_to_clang_offload_bundler_15() {
    for rel in UNCOMPRESSED {
        let path = fixture(rel);
        let tmp = tempfile::tempdir().unwrap();
        let ours = unbundle_with_kpack(&path, &tmp.path().join("ours"));
        let stem = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut witnessed = 0;
        for (index, bundle) in fatbin_bundles(&path, tmp.path()).iter().enumerate() {
            let input = tmp.path().join(format!("bundle{index}"));
            std::fs::write(&input, bundle).unwrap();
            let input_arg = format!("--input={}", input.display());
            let listing = run_tool(
                "clang-offload-bundler-15",
                &["--list", "--type=o", &input_arg],
            );
            for triple in String::from_utf8(listing).unwrap().split_whitespace() {
                if triple.starts_with("host-") {
                    continue;
                }
                let output = tmp.path().join("witness.co");
                run_tool(
                    "clang-offload-bundler-15",
                    &[
                        "--unbundle",
                        "--type=o",
                        &input_arg,
                        &format!("--targets={triple}"),
                        &format!("--output={}", output.display()),
                    ],
                );
                let expected = std::fs::read(&output).unwrap();
                let name = format!("{stem}.{index}.{triple}.co");
                let got = ours
                    .get(&name)
                    .unwrap_or_else(|| panic!("{rel}: kpack did not write {name}"));
                assert!(
                    got == &expected,
                    "{rel}: {name} differs from clang-offload-bundler-15 ({} vs {} bytes)",
                    got.len(),
                    expected.len()
                );
                witnessed += 1;
            }
        }
        assert_eq!(
            witnessed,
            ours.len(),
            "{rel}: kpack wrote objects the witness does not list"
        );
        assert!(witnessed > 0, "{rel}: no device code");
    }
}

#[test]
fn compressed_fixtures_unbundle_byte_identical_to_llvm22_bundler() {
    let tsv = std::fs::read_to_string(fixtures().join("reference/unbundle_llvm22.tsv")).unwrap();
    let mut expected: BTreeMap<String, BTreeMap<String, (u64, String)>> = BTreeMap::new();
    for line in tsv.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        let (fixture_name, bundle, triple, size, sha) = (f[0], f[1], f[2], f[3], f[4]);
        if triple.starts_with("host-") {
            continue;
        }
        expected.entry(fixture_name.to_owned()).or_default().insert(
            format!("{fixture_name}.{bundle}.{triple}.co"),
            (size.parse().unwrap(), sha.to_owned()),
        );
    }
    assert!(expected.len() >= 11, "reference TSV lists too few fixtures");
    for (name, objects) in &expected {
        let tmp = tempfile::tempdir().unwrap();
        let ours = unbundle_with_kpack(&fixture(&format!("modern/{name}")), tmp.path());
        let ours: BTreeMap<String, (u64, String)> = ours
            .into_iter()
            .map(|(n, d)| (n, (d.len() as u64, sha256_hex(&d))))
            .collect();
        assert_eq!(&ours, objects, "{name}: differs from the LLVM 22 bundler");
    }
}
