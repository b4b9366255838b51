//! The loader end to end on real archives: search order, matching, caching, failures.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kpack_archive::Compression;
use kpack_runtime::{Cache, Config, ErrorCode, LoadError};
use sha2::{Digest, Sha256};
use support::*;

fn sha_prefix(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn load(
    cache: &Cache,
    kernel: &str,
    paths: &[&str],
    binary: &Path,
    co: u32,
    isas: &[&str],
) -> Result<(Vec<u8>, String), LoadError> {
    cache.load_with(&meta(kernel, paths), binary, co, isas, |f| {
        (f.bytes.to_vec(), f.arch.to_owned())
    })
}

#[test]
fn reference_vectors_load_by_kernel_name_index_and_arch() {
    let cache = Cache::new(Config::default());
    let binary = fixture("vectors/fake_binary.so");
    let (bytes, arch) = load(
        &cache,
        "lib/libtest.so",
        &["test_noop.kpack"],
        &binary,
        0,
        &["gfx906"],
    )
    .unwrap();
    assert_eq!((bytes.len(), arch.as_str()), (219, "gfx906"));
    assert_eq!(sha_prefix(&bytes), "12b6177c7d7619c6");
    let (bytes, _) = load(
        &cache,
        "bin/testapp",
        &["test_noop.kpack"],
        &binary,
        0,
        &["amdgcn-amd-amdhsa--gfx900"],
    )
    .unwrap();
    assert_eq!(sha_prefix(&bytes), "77033f5412bc6d7b");
    let (bytes, arch) = load(
        &cache,
        "lib/libhip.so",
        &["test_zstd.kpack"],
        &binary,
        0,
        &["gfx1101"],
    )
    .unwrap();
    assert_eq!((bytes.len(), arch.as_str()), (619, "gfx1101"));
    assert_eq!(sha_prefix(&bytes), "9f8e72947f029de7");
    let err = load(
        &cache,
        "lib/libtest.so",
        &["test_noop.kpack"],
        &binary,
        999,
        &["gfx900"],
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::KernelNotFound);
}

#[test]
fn isa_priority_beats_archive_order() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (gfx1030(), gfx90a_xnackp());
    write_archive(
        &tmp.path().join("first.kpack"),
        Compression::None,
        &[("lib/x.so#0", "gfx90a:xnack+", &b)],
        None,
    );
    write_archive(
        &tmp.path().join("second.kpack"),
        Compression::zstd(),
        &[("lib/x.so#0", "gfx1030", &a)],
        None,
    );
    let cache = Cache::new(Config::default());
    let bin = tmp.path().join("x.so");
    let (bytes, arch) = load(
        &cache,
        "lib/x.so",
        &["first.kpack", "second.kpack"],
        &bin,
        0,
        &["gfx1030", "gfx90a:xnack+"],
    )
    .unwrap();
    assert_eq!((bytes, arch.as_str()), (a, "gfx1030"));
}

#[test]
fn an_archive_listing_the_target_without_the_kernel_falls_through_to_the_next_archive() {
    // TheRock#7081: two archives share a target; the first lacks this binary's kernel.
    let tmp = tempfile::tempdir().unwrap();
    let co = gfx1030();
    write_archive(
        &tmp.path().join("other.kpack"),
        Compression::None,
        &[("lib/other.so#0", "gfx1030", &co)],
        None,
    );
    write_archive(
        &tmp.path().join("mine.kpack"),
        Compression::zstd(),
        &[("lib/mine.so#0", "gfx1030", &co)],
        None,
    );
    let cache = Cache::new(Config::default());
    let bin = tmp.path().join("mine.so");
    let (bytes, _) = load(
        &cache,
        "lib/mine.so",
        &["other.kpack", "mine.kpack"],
        &bin,
        0,
        &["gfx1030"],
    )
    .unwrap();
    assert_eq!(bytes, co);
    // With the kernel nowhere, the archive that listed the target explains why.
    let err = load(
        &cache,
        "lib/mine.so",
        &["other.kpack", "mine.kpack"],
        &bin,
        1,
        &["gfx1030"],
    )
    .unwrap_err();
    assert!(
        matches!(&err, LoadError::KernelNotFound { key, .. } if key == "lib/mine.so#1"),
        "{err}"
    );
}

#[test]
fn a_missing_kernel_falls_through_to_a_less_specific_target_and_the_next_isa() {
    let tmp = tempfile::tempdir().unwrap();
    let (generic, native) = (gfx1030(), gfx90a_xnackp());
    // Lists gfx90a:xnack+ but only holds another binary's kernel for it.
    write_archive(
        &tmp.path().join("a.kpack"),
        Compression::None,
        &[("lib/y.so#0", "gfx90a:xnack+", &native)],
        None,
    );
    write_archive(
        &tmp.path().join("b.kpack"),
        Compression::None,
        &[("lib/x.so#0", "gfx90a", &native)],
        None,
    );
    write_archive(
        &tmp.path().join("c.kpack"),
        Compression::None,
        &[("lib/x.so#1", "gfx1030", &generic)],
        None,
    );
    let cache = Cache::new(Config::default());
    let bin = tmp.path().join("x.so");
    let paths = ["a.kpack", "b.kpack", "c.kpack"];
    let (_, arch) = load(&cache, "lib/x.so", &paths, &bin, 0, &["gfx90a:xnack+"]).unwrap();
    assert_eq!(arch, "gfx90a");
    let (bytes, arch) = load(
        &cache,
        "lib/x.so",
        &paths,
        &bin,
        1,
        &["gfx90a:xnack+", "gfx1030"],
    )
    .unwrap();
    assert_eq!((bytes, arch.as_str()), (generic, "gfx1030"));
}

#[test]
fn targets_match_whatever_the_order_of_their_features() {
    let tmp = tempfile::tempdir().unwrap();
    let co = gfx942();
    write_archive(
        &tmp.path().join("a.kpack"),
        Compression::zstd(),
        &[("lib/x.so#0", "gfx942:xnack-:sramecc+", &co)],
        None,
    );
    let cache = Cache::new(Config::default());
    let (bytes, arch) = load(
        &cache,
        "lib/x.so",
        &["a.kpack"],
        &tmp.path().join("x.so"),
        0,
        &["amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"],
    )
    .unwrap();
    assert_eq!((bytes, arch.as_str()), (co, "gfx942:xnack-:sramecc+"));
    // The opposite feature state is another target.
    let err = load(
        &cache,
        "lib/x.so",
        &["a.kpack"],
        &tmp.path().join("x.so"),
        0,
        &["gfx942:sramecc-:xnack-"],
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ArchNotFound);
}

#[test]
fn gfxarch_paths_resolve_from_the_binary_directory_per_candidate_target() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (a, b) = (gfx1030(), gfx942());
    // The splitter's layout: lib/libx.so embeds ../.kpack/blas_lib_@GFXARCH@.kpack.
    write_archive(
        &root.join(".kpack/blas_lib_gfx1030.kpack"),
        Compression::None,
        &[("lib/libx.so#0", "gfx1030", &a)],
        None,
    );
    write_archive(
        &root.join(".kpack/blas_lib_gfx942.kpack"),
        Compression::zstd(),
        &[("lib/libx.so#0", "gfx942", &b)],
        None,
    );
    let cache = Cache::new(Config::default());
    let bin = root.join("lib/libx.so");
    let paths = ["../.kpack/blas_lib_@GFXARCH@.kpack"];
    let (bytes, _) = load(&cache, "lib/libx.so", &paths, &bin, 0, &["gfx1030"]).unwrap();
    assert_eq!(bytes, a);
    let (bytes, arch) = load(
        &cache,
        "lib/libx.so",
        &paths,
        &bin,
        0,
        &["gfx942:sramecc+:xnack-"],
    )
    .unwrap();
    assert_eq!((bytes, arch.as_str()), (b, "gfx942"));
}

/// Archive names meant for Windows spell a target's `:` as `@` (NTFS refuses `:`); the
/// runtime on Windows looks for that spelling only, and elsewhere for the target ID as it is,
/// so a Linux tree is read as before.
#[test]
fn a_featured_target_is_looked_up_by_the_archive_name_spelling_of_this_system() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (linux, windows) = (gfx1030(), gfx90a_xnackp());
    write_archive(
        &root.join(".kpack/blas_lib_gfx90a@xnack+.kpack"),
        Compression::None,
        &[("lib/libx.so#0", "gfx90a:xnack+", &windows)],
        None,
    );
    if cfg!(unix) {
        write_archive(
            &root.join(".kpack/blas_lib_gfx90a:xnack+.kpack"),
            Compression::None,
            &[("lib/libx.so#0", "gfx90a:xnack+", &linux)],
            None,
        );
    }
    let bin = root.join("lib/libx.so");
    let paths = ["../.kpack/blas_lib_@GFXARCH@.kpack"];
    let isas = ["gfx90a:xnack+"];
    let cache = Cache::new(Config::default());
    let (bytes, arch) = load(&cache, "lib/libx.so", &paths, &bin, 0, &isas).unwrap();
    assert_eq!(arch, "gfx90a:xnack+");
    assert_eq!(bytes, if cfg!(windows) { windows } else { linux });
    if cfg!(unix) {
        // Only the `:` spelling is looked for here: without it, nothing is found.
        std::fs::remove_file(root.join(".kpack/blas_lib_gfx90a:xnack+.kpack")).unwrap();
        let cache = Cache::new(Config::default());
        let err = load(&cache, "lib/libx.so", &paths, &bin, 0, &isas).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ArchiveNotFound, "{err}");
    }
}

/// `dir/<module>.kpm` listing each target with its archive file.
fn write_index(dir: &Path, module: &str, files: &[(&str, &str)]) {
    use kpack_archive::kpm::{KpmEntry, KpmManifest};
    let kpm = KpmManifest {
        format_version: 1,
        component_name: "test".into(),
        prefix: ".".into(),
        kpack_files: files
            .iter()
            .map(|(t, f)| {
                let entry = KpmEntry {
                    file: f.to_string(),
                    size: 0,
                    kernel_count: 1,
                    package: Some("test-device-family".into()),
                };
                (t.to_string(), entry)
            })
            .collect(),
    };
    std::fs::write(dir.join(format!("{module}.kpm")), kpm.encode().unwrap()).unwrap();
}

#[test]
fn a_multi_target_archive_without_per_target_names_is_found_through_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let kpack = tmp.path().join(".kpack");
    let (a, b) = (gfx1030(), gfx942());
    // A family archive, as a device wheel installs it: no per-target names, no links.
    write_archive(
        &kpack.join("blas_lib_family.kpack"),
        Compression::zstd(),
        &[
            ("lib/libx.so#0", "gfx1030", &a),
            ("lib/libx.so#0", "gfx942:sramecc+", &b),
        ],
        None,
    );
    let bin = tmp.path().join("lib/libx.so");
    let paths = ["../.kpack/blas_lib_@GFXARCH@.kpack"];
    let load_for = |cache: &Cache, isa: &str| load(cache, "lib/libx.so", &paths, &bin, 0, &[isa]);
    // Without the index, nothing names it.
    let e = load_for(&Cache::new(Config::default()), "gfx1030").unwrap_err();
    assert_eq!(e.code(), ErrorCode::ArchiveNotFound);
    write_index(
        &kpack,
        "blas_lib",
        &[
            ("gfx1030", "blas_lib_family.kpack"),
            ("gfx942:sramecc+", "blas_lib_family.kpack"),
            ("gfx900", "../outside.kpack"),
        ],
    );
    let cache = Cache::new(Config::default());
    assert_eq!(load_for(&cache, "gfx1030").unwrap().0, a);
    let (bytes, arch) = load_for(&cache, "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-").unwrap();
    assert_eq!((bytes, arch.as_str()), (b.clone(), "gfx942:sramecc+"));
    // One archive opened; the index read once; warm loads touch nothing.
    let cold = cache.stats();
    assert_eq!(cold.archives_opened, 1);
    load_for(&cache, "gfx1030").unwrap();
    assert_eq!(cache.stats(), cold);
    // An index naming a file outside its directory is not followed.
    std::fs::copy(
        kpack.join("blas_lib_family.kpack"),
        tmp.path().join("outside.kpack"),
    )
    .unwrap();
    let e = load_for(&cache, "gfx900").unwrap_err();
    assert_eq!(e.code(), ErrorCode::ArchiveNotFound);
    // A per-target archive, where one exists, comes first.
    write_archive(
        &kpack.join("blas_lib_gfx1030.kpack"),
        Compression::None,
        &[("lib/libx.so#0", "gfx1030", &b)],
        None,
    );
    let cache = Cache::new(Config::default());
    assert_eq!(load_for(&cache, "gfx1030").unwrap().0, b);
    // A damaged index is no index.
    std::fs::write(kpack.join("blas_lib.kpm"), b"\x81\xa1x").unwrap();
    let e = load_for(&Cache::new(Config::default()), "gfx942").unwrap_err();
    assert_eq!(e.code(), ErrorCode::ArchiveNotFound);
}

#[test]
fn environment_paths_override_or_prefix_with_placeholders_expanded() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (a, b) = (gfx1030(), gfx90a_xnackp());
    write_archive(
        &root.join("env/x_gfx1030.kpack"),
        Compression::None,
        &[("lib/x.so#0", "gfx1030", &b)],
        None,
    );
    write_archive(
        &root.join("embedded.kpack"),
        Compression::None,
        &[("lib/x.so#0", "gfx1030", &a)],
        None,
    );
    let bin = root.join("x.so");
    let env_pattern = root.join("env/x_@GFXARCH@.kpack");
    let isas = ["gfx1030"];

    let plain = Cache::new(Config::default());
    assert_eq!(
        load(&plain, "lib/x.so", &["embedded.kpack"], &bin, 0, &isas)
            .unwrap()
            .0,
        a
    );

    let prefixed = Cache::new(Config {
        prefix_paths: vec![env_pattern.clone()],
        ..Config::default()
    });
    assert_eq!(
        load(&prefixed, "lib/x.so", &["embedded.kpack"], &bin, 0, &isas)
            .unwrap()
            .0,
        b
    );

    let replaced = Cache::new(Config {
        override_paths: vec![root.join("nowhere.kpack")],
        ..Config::default()
    });
    let err = load(&replaced, "lib/x.so", &["embedded.kpack"], &bin, 0, &isas).unwrap_err();
    assert!(
        matches!(&err, LoadError::ArchiveNotFound { tried } if tried == &[root.join("nowhere.kpack")]),
        "{err}"
    );

    let overridden = Cache::new(Config {
        override_paths: vec![env_pattern],
        prefix_paths: vec![root.join("embedded.kpack")],
        ..Config::default()
    });
    assert_eq!(
        load(&overridden, "lib/x.so", &["embedded.kpack"], &bin, 0, &isas)
            .unwrap()
            .0,
        b
    );
}

#[test]
fn a_disabled_cache_loads_nothing() {
    let cache = Cache::new(Config {
        disabled: true,
        ..Config::default()
    });
    let err = load(
        &cache,
        "lib/libtest.so",
        &["test_noop.kpack"],
        &fixture("vectors/x.so"),
        0,
        &["gfx900"],
    )
    .unwrap_err();
    assert_eq!(
        (err.clone(), err.code()),
        (LoadError::Disabled, ErrorCode::NotImplemented)
    );
    assert_eq!(cache.stats().probes, 0);
}

#[test]
fn no_archive_and_no_target_are_told_apart() {
    let cache = Cache::new(Config::default());
    let bin = fixture("vectors/x.so");
    let err = load(
        &cache,
        "lib/libtest.so",
        &["missing_@GFXARCH@.kpack"],
        &bin,
        0,
        &["gfx900"],
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ArchiveNotFound);
    let err = load(
        &cache,
        "lib/libtest.so",
        &["test_noop.kpack"],
        &bin,
        0,
        &["gfx9999", "gfx1100"],
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ArchNotFound);
    let err = load(&cache, "lib/libtest.so", &["test_noop.kpack"], &bin, 0, &[]).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ArchNotFound);
}

#[test]
fn warm_loads_make_no_file_system_calls_and_decode_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let co = gfx1030();
    write_archive(
        &tmp.path().join(".kpack/x_gfx1030.kpack"),
        Compression::zstd(),
        &[("lib/x.so#0", "gfx1030", &co)],
        None,
    );
    let cache = Cache::new(Config::default());
    let bin = tmp.path().join("lib/x.so");
    let paths = ["../.kpack/x_@GFXARCH@.kpack", "../.kpack/absent.kpack"];
    let isas = ["gfx1030:xnack-", "gfx10-3-generic"];
    assert_eq!(
        load(&cache, "lib/x.so", &paths, &bin, 0, &isas).unwrap().0,
        co
    );
    let cold = cache.stats();
    assert_eq!((cold.resolutions, cold.archives_opened), (2, 1));
    // x_gfx1030:xnack-, x_gfx1030, x_gfx10-3-generic:..., absent, and the index x.kpm
    // (absent): every path probed once.
    assert_eq!(cold.probes, 5);
    assert_eq!(cold.decodes, 1);
    for _ in 0..3 {
        assert_eq!(
            load(&cache, "lib/x.so", &paths, &bin, 0, &isas).unwrap().0,
            co
        );
    }
    assert_eq!(cache.stats(), cold);
    // The archive appearing later is not seen by this cache (negative entries live as long as
    // it does), only by a new one.
    std::fs::copy(
        tmp.path().join(".kpack/x_gfx1030.kpack"),
        tmp.path().join(".kpack/absent.kpack"),
    )
    .unwrap();
    load(&cache, "lib/x.so", &paths, &bin, 0, &isas).unwrap();
    assert_eq!(cache.stats(), cold);
}

#[test]
fn a_corrupt_archive_fails_once_and_is_not_reopened() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("bad.kpack"),
        b"KPAK\x01\x00\x00\x00garbage that is no toc offset at all, long enough to map it...",
    )
    .unwrap();
    let cache = Cache::new(Config::default());
    let bin = tmp.path().join("x.so");
    for _ in 0..3 {
        let err = load(&cache, "lib/x.so", &["bad.kpack"], &bin, 0, &["gfx1030"]).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidFormat, "{err}");
    }
    assert_eq!(cache.stats().probes, 1);
    assert_eq!(cache.stats().archives_opened, 0);
}

#[test]
fn a_damaged_zstd_frame_is_an_integrity_failure_unless_another_archive_has_the_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let co = gfx1030();
    let bad = tmp.path().join("bad.kpack");
    write_archive(
        &bad,
        Compression::zstd(),
        &[("lib/x.so#0", "gfx1030", &co)],
        None,
    );
    let mut bytes = std::fs::read(&bad).unwrap();
    // Frame payload starts after the count, the size prefix and the frame header.
    for b in &mut bytes[64 + 8 + 10..64 + 8 + 40] {
        *b ^= 0x5a;
    }
    std::fs::write(&bad, bytes).unwrap();
    write_archive(
        &tmp.path().join("good.kpack"),
        Compression::None,
        &[("lib/x.so#0", "gfx1030", &co)],
        None,
    );
    let cache = Cache::new(Config::default());
    let bin = tmp.path().join("x.so");
    let err = load(&cache, "lib/x.so", &["bad.kpack"], &bin, 0, &["gfx1030"]).unwrap_err();
    assert_eq!(err.code(), ErrorCode::IntegrityCheckFailed, "{err}");
    assert_eq!(
        load(
            &cache,
            "lib/x.so",
            &["bad.kpack", "good.kpack"],
            &bin,
            0,
            &["gfx1030"]
        )
        .unwrap()
        .0,
        co
    );
}

#[test]
fn truncated_or_damaged_archives_give_errors_never_crashes() {
    let tmp = tempfile::tempdir().unwrap();
    let co = gfx90a_xnackp();
    for compression in [Compression::None, Compression::zstd()] {
        let good = tmp.path().join("good.kpack");
        write_archive(
            &good,
            compression,
            &[("lib/x.so#0", "gfx90a:xnack+", &co)],
            None,
        );
        let bytes = std::fs::read(&good).unwrap();
        let path = tmp.path().join("damaged.kpack");
        let mut variants: Vec<Vec<u8>> = (0..bytes.len())
            .step_by(7)
            .map(|n| bytes[..n].to_vec())
            .collect();
        for at in (0..bytes.len()).step_by(5) {
            let mut v = bytes.clone();
            v[at] ^= 0xff;
            variants.push(v);
        }
        for v in variants {
            std::fs::write(&path, &v).unwrap();
            let cache = Cache::new(Config::default());
            if let Ok((got, _)) = load(
                &cache,
                "lib/x.so",
                &["damaged.kpack"],
                &tmp.path().join("x.so"),
                0,
                &["gfx90a:xnack+"],
            ) {
                // A flip in bytes nothing checks (e.g. kernel bytes of `none`) still loads.
                assert_eq!(got.len(), co.len());
            }
        }
    }
}

#[test]
fn eight_threads_sharing_a_cache_agree_with_one_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_owned();
    let cos = [gfx1030(), gfx90a_xnackp(), gfx942()];
    let arches = ["gfx1030", "gfx90a:xnack+", "gfx942:sramecc+:xnack-"];
    for (i, compression) in [Compression::None, Compression::zstd()]
        .into_iter()
        .enumerate()
    {
        let entries: Vec<(String, &str, &[u8])> = (0..6)
            .flat_map(|b| (0..3).map(move |t| (b, t)))
            .map(|(b, t)| {
                (
                    format!("lib/l{b}.so#{}", b % 2),
                    arches[t],
                    cos[(b + t) % 3].as_slice(),
                )
            })
            .collect();
        let entries: Vec<(&str, &str, &[u8])> = entries
            .iter()
            .map(|(k, a, d)| (k.as_str(), *a, *d))
            .collect();
        write_archive(
            &root.join(format!(".kpack/g{i}_@.kpack")),
            compression,
            &entries,
            None,
        );
    }
    let requests: Vec<(String, u32, Vec<&str>)> = (0..6)
        .flat_map(|b| {
            [
                (
                    format!("lib/l{b}.so"),
                    (b % 2) as u32,
                    vec!["gfx90a:xnack+"],
                ),
                (
                    format!("lib/l{b}.so"),
                    (b % 2) as u32,
                    vec!["gfx942:xnack-:sramecc+"],
                ),
                (format!("lib/l{b}.so"), 1 - (b % 2) as u32, vec!["gfx1030"]),
                (
                    format!("lib/l{b}.so"),
                    (b % 2) as u32,
                    vec!["gfx1100", "gfx1030"],
                ),
            ]
        })
        .collect();
    let paths = ["../.kpack/g0_@.kpack", "../.kpack/g1_@.kpack"];
    let bin: PathBuf = root.join("lib/x.so");
    let run = |cache: &Cache, (kernel, co, isas): &(String, u32, Vec<&str>)| {
        load(cache, kernel, &paths, &bin, *co, isas).map_err(|e| e.code())
    };
    let single = Cache::new(Config::default());
    let expected: Vec<_> = requests.iter().map(|r| run(&single, r)).collect();
    assert!(expected.iter().any(Result::is_ok) && expected.iter().any(Result::is_err));

    let shared = Arc::new(Cache::new(Config::default()));
    std::thread::scope(|s| {
        for t in 0..8 {
            let (shared, requests, expected, run) = (&shared, &requests, &expected, &run);
            s.spawn(move || {
                for round in 0..20 {
                    for i in 0..requests.len() {
                        let i = (i * 7 + t + round) % requests.len();
                        assert_eq!(
                            run(shared, &requests[i]),
                            expected[i],
                            "thread {t}, request {i}"
                        );
                    }
                }
            });
        }
    });
    assert_eq!(shared.stats(), single.stats());
}
