//! `kpack prune` on every linked fat fixture, witnessed by clang-offload-bundler (15 for
//! uncompressed bundles, LLVM 22 for CCOB): every bundle of the pruned binary lists exactly
//! the host entry and the kept targets' entries of the original bundle, byte for byte; the
//! binary loads under the stand-in HIP runtime, whose wrappers lead (in memory, after
//! relocation) to those pruned bundles, and still does after `strip` and `patchelf`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_prune::{Action, PruneReport, Selection, prune};
use kpack_target::TargetId;
use kpack_testkit::{
    LINKED_FAT, PLATFORM_FIXTURES, Standin, fatbin_bundles, fixture, run_tool, standin,
    witness_entries,
};

/// The processor of a bundle entry id (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+` → `gfx90a`),
/// read from the id as the witness prints it; `None` for the host entry.
fn processor_of(triple: &str) -> Option<&str> {
    let (_, target) = triple.split_once("--")?;
    Some(target.split(':').next().unwrap())
}

/// Every bundle's entries as the witness unbundles them.
fn witnessed(path: &Path, tmp: &Path) -> Vec<BTreeMap<String, Vec<u8>>> {
    fatbin_bundles(path, tmp)
        .iter()
        .map(|b| witness_entries(b, tmp))
        .collect()
}

/// The processors of `bundles`, sorted.
fn processors(bundles: &[BTreeMap<String, Vec<u8>>]) -> Vec<String> {
    let set: BTreeSet<&str> = bundles
        .iter()
        .flat_map(|b| b.keys().filter_map(|t| processor_of(t)))
        .collect();
    set.into_iter().map(str::to_owned).collect()
}

/// The original's bundles with only the host entry and `keep`'s processors.
fn expected(
    original: &[BTreeMap<String, Vec<u8>>],
    keep: &[String],
) -> Vec<BTreeMap<String, Vec<u8>>> {
    original
        .iter()
        .map(|b| {
            b.iter()
                .filter(|(t, _)| processor_of(t).is_none_or(|p| keep.iter().any(|k| k == p)))
                .map(|(t, d)| (t.clone(), d.clone()))
                .collect()
        })
        .collect()
}

fn keep(targets: &[String]) -> Selection {
    Selection::Keep(
        targets
            .iter()
            .map(|t| TargetId::parse(t).unwrap())
            .collect(),
    )
}

fn prune_one(input: &Path, output: &Path, selection: &Selection) -> PruneReport {
    prune(&[input.to_owned()], output, selection, false)
        .unwrap_or_else(|e| panic!("{}: {e}", input.display()))
}

/// Prunes `rel` to its first two processors (all of them when it has fewer than three) and
/// checks every bundle against the witness; returns the pruned file and its bundles.
fn prune_and_witness(rel: &str, dir: &Path) -> (PathBuf, Vec<Vec<u8>>) {
    let input = fixture(rel);
    let original = witnessed(&input, dir);
    let all = processors(&original);
    let kept: Vec<String> = all.iter().take(2).cloned().collect();
    let output = dir.join(input.file_name().unwrap());
    let report = prune_one(&input, &output, &keep(&kept));
    let Action::Pruned(summary) = &report.files[0].action else {
        panic!("{rel}: not pruned");
    };
    let pruned = witnessed(&output, dir);
    assert_eq!(pruned.len(), original.len(), "{rel}: bundle count");
    assert_eq!(pruned, expected(&original, &kept), "{rel}: kept {kept:?}");
    // Whole pages leave the file, or (a small section) it is pruned in place: never larger.
    assert!(summary.output_size <= summary.input_size, "{rel}");
    if all.len() > 2 {
        assert!(summary.pruned_fatbin_size < summary.fatbin_size, "{rel}");
        assert!(summary.bundles_rewritten > 0, "{rel}");
    } else {
        assert_eq!(summary.bundles_rewritten, 0, "{rel}: nothing to drop");
    }
    (output.clone(), fatbin_bundles(&output, dir))
}

/// Loads `binary` under the stand-in and checks every wrapper led to one of `bundles` (as
/// the stand-in read it from memory).
fn loads_with_pruned_bundles(loader: &Standin, binary: &Path, bundles: &[Vec<u8>], work: &Path) {
    let regs = loader.load(binary, &[], work);
    assert!(!regs.is_empty(), "{}: registers nothing", binary.display());
    for (n, r) in regs.iter().enumerate() {
        assert_eq!(r.magic, "HIPF", "{}", binary.display());
        let loaded = Standin::loaded_bundle(work, n);
        assert!(
            bundles.contains(&loaded),
            "{}: wrapper {n} leads to bytes that are no pruned bundle",
            binary.display()
        );
    }
}

#[test]
fn pruned_fixtures_hold_exactly_the_kept_targets_byte_identical_per_the_bundler() {
    for rel in LINKED_FAT {
        let dir = tempfile::tempdir().unwrap();
        prune_and_witness(rel, dir.path());
    }
}

#[test]
fn pruned_platform_fixtures_hold_exactly_the_kept_targets() {
    for (rel, _) in PLATFORM_FIXTURES {
        let dir = tempfile::tempdir().unwrap();
        prune_and_witness(rel, dir.path());
    }
}

#[test]
fn pruned_binaries_load_under_the_stand_in_runtime_after_strip_and_patchelf() {
    for rel in LINKED_FAT {
        let dir = tempfile::tempdir().unwrap();
        let (output, bundles) = prune_and_witness(rel, dir.path());
        let work = dir.path().join("standin");
        loads_with_pruned_bundles(standin(None), &output, &bundles, &work);
        for (tool, args) in [
            ("strip", &[][..]),
            ("patchelf", &["--set-rpath", "/opt/kpack-test"][..]),
        ] {
            let edited = dir.path().join("edited").join(output.file_name().unwrap());
            std::fs::create_dir_all(edited.parent().unwrap()).unwrap();
            std::fs::copy(&output, &edited).unwrap();
            let mut all: Vec<&str> = args.to_vec();
            all.push(edited.to_str().unwrap());
            run_tool(tool, &all);
            loads_with_pruned_bundles(standin(None), &edited, &bundles, &work);
        }
    }
}

/// The stored bytes of every `.hip_fatbin` bundle of the ELF file `map`.
fn bundles_of(map: &[u8]) -> Vec<&[u8]> {
    let fat = kpack_elf::inspect(map).unwrap();
    let section = fat.fatbin.unwrap().offset;
    fat.bundles
        .iter()
        .map(|b| {
            let start = (section + b.offset) as usize;
            &map[start..start + b.len as usize]
        })
        .collect()
}

/// How a pruned real-world library is shown usable.
enum Use {
    /// Loaded under the stand-in HIP runtime.
    Load,
    /// Its dependencies are not in the corpus (ROCm 7's libroctx64.so.4 …), so it cannot be
    /// loaded: its wrappers are shown to lead to the pruned bundles in the file instead.
    Inspect,
}

/// Every wrapper of the ELF file `path` leads to one of `bundles`.
fn wrappers_lead_to_pruned_bundles(path: &Path, bundles: &[Vec<u8>]) {
    let f = std::fs::File::open(path).unwrap();
    let map = kpack_pipeline::map_file(&f, path).unwrap();
    let found = bundles_of(&map);
    let fat = kpack_elf::inspect(&map).unwrap();
    assert!(!fat.wrappers.is_empty());
    for w in &fat.wrappers {
        let b = w.bundle.expect("every wrapper leads to a bundle");
        assert!(
            bundles.iter().any(|p| p[..] == *found[b]),
            "wrapper {}",
            w.index
        );
    }
}

/// A real-world library pruned to `kept` processors: every bundle witnessed one at a time
/// (the library does not fit in memory decompressed), the result loaded under the stand-in
/// (or inspected, see [`Use`]), also after `strip` and `patchelf`.
fn prune_real_world(input: &Path, kept: &[&str], usable: Use) {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join(input.file_name().unwrap());
    let kept: Vec<String> = kept.iter().map(|k| k.to_string()).collect();
    let report = prune_one(input, &output, &keep(&kept));
    let Action::Pruned(summary) = &report.files[0].action else {
        panic!("not pruned");
    };
    assert!(summary.output_size < summary.input_size / 2, "{summary:?}");
    let open = |p: &Path| {
        let f = std::fs::File::open(p).unwrap();
        kpack_pipeline::map_file(&f, p).unwrap()
    };
    let (original, pruned) = (open(input), open(&output));
    let (before, after) = (bundles_of(&original), bundles_of(&pruned));
    assert_eq!(before.len(), after.len());
    let digests = |entries: BTreeMap<String, Vec<u8>>| -> BTreeMap<String, String> {
        entries
            .into_iter()
            .map(|(t, d)| (t, kpack_testkit::sha256_hex(&d)))
            .collect()
    };
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        let want = expected(&[witness_entries(b, dir.path())], &kept).remove(0);
        let got = witness_entries(a, dir.path());
        assert!(
            got.keys().any(|t| processor_of(t).is_some()),
            "bundle {i} kept no device code"
        );
        assert_eq!(digests(got), digests(want), "bundle {i}");
    }
    let bundles: Vec<Vec<u8>> = after.iter().map(|b| b.to_vec()).collect();
    drop((original, pruned));
    let work = dir.path().join("standin");
    let check = |binary: &Path| match usable {
        Use::Load => loads_with_pruned_bundles(standin(None), binary, &bundles, &work),
        Use::Inspect => wrappers_lead_to_pruned_bundles(binary, &bundles),
    };
    check(&output);
    let edited = dir.path().join("edited").join(output.file_name().unwrap());
    std::fs::create_dir_all(edited.parent().unwrap()).unwrap();
    std::fs::copy(&output, &edited).unwrap();
    run_tool("strip", &[edited.to_str().unwrap()]);
    run_tool(
        "patchelf",
        &["--set-rpath", "/opt/kpack-test", edited.to_str().unwrap()],
    );
    check(&edited);
}

#[test]
#[ignore = "real-world"]
fn librocsparse_pruned_to_two_targets_matches_the_bundler_and_loads() {
    prune_real_world(
        &kpack_testkit::librocsparse(),
        &["gfx90a", "gfx1030"],
        Use::Load,
    );
}

#[test]
#[ignore = "real-world"]
fn librocblas_ccob_v3_pruned_to_two_targets_matches_the_bundler_and_loads() {
    prune_real_world(
        &kpack_testkit::librocblas(),
        &["gfx90a", "gfx1100"],
        Use::Inspect,
    );
}
