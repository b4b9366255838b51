//! Real-world tier: Debian ROCm 7.2.4 kernel databases with their fat libraries, arranged as
//! TheRock artifacts (hard links into the corpus), split, recombined into at least two groups
//! and verified with strict identity; per-arch file counts match `kerneldb_tables.md` (from
//! the file names); the generic package indexes every archive of every group, and the
//! packages install side by side. Recombined with group archives, one archive per module and
//! group behind per-target links verifies the same. The rocBLAS artifact as a `.tar.zst`
//! splits to the same bytes as its directory, and its split outputs as `.tar.zst` shards
//! recombine to the same packages as the directory shards.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_archive::kpm::KpmManifest;
use kpack_artifact::manifest;
use kpack_artifact::recombine::{PackagingConfig, RecombineOptions, recombine};
use kpack_artifact::split::{SplitOptions, split, split_batch};
use kpack_artifact::tarball::OutputFormat;
use kpack_artifact::verify::{VerifyOptions, verify};
use kpack_package::handlers::Handler;

struct Package {
    deb: &'static str,
    library: &'static str,
    fat: &'static [&'static str],
    links: &'static [(&'static str, &'static str)],
    handler: Handler,
    component: &'static str,
    prefix: &'static str,
    /// Database files per processor artifact (kerneldb_tables.md, .co + .dat + .hsaco,
    /// feature variants summed into their processor).
    per_arch: &'static [(&'static str, usize)],
    /// Arch-less files that stay generic.
    generic: usize,
}

const PACKAGES: &[Package] = &[
    Package {
        deb: "librocblas5_7.2.4-1~exp1",
        library: "rocblas/5/library",
        fat: &["librocblas.so.5.2"],
        links: &[("librocblas.so.5", "librocblas.so.5.2")],
        handler: Handler::Rocblas,
        component: "blas_lib",
        prefix: "math-libs/BLAS/rocBLAS/stage",
        per_arch: &[
            ("gfx1010", 56),
            ("gfx1030", 88),
            ("gfx1100", 96),
            ("gfx1101", 96),
            ("gfx1102", 96),
            ("gfx1151", 96),
            ("gfx1200", 56),
            ("gfx1201", 56),
            ("gfx803", 72),
            ("gfx900", 128),
            ("gfx906", 156),
            ("gfx908", 172),
            ("gfx90a", 129 + 130 + 87 + 87),
            ("gfx942", 242),
        ],
        generic: 54,
    },
    Package {
        deb: "libhipblaslt1_7.2.4+dfsg-1~exp1",
        library: "hipblaslt/library",
        fat: &["libhipblaslt.so.1.2"],
        links: &[("libhipblaslt.so.1", "libhipblaslt.so.1.2")],
        handler: Handler::Hipblaslt,
        component: "blaslt_lib",
        prefix: "math-libs/BLAS/hipBLASLt/stage",
        per_arch: &[
            ("gfx1100", 95),
            ("gfx1101", 111),
            ("gfx1102", 95),
            ("gfx1151", 95),
            ("gfx1200", 287),
            ("gfx1201", 297),
            ("gfx908", 105),
            ("gfx90a", 199),
        ],
        generic: 3,
    },
    Package {
        deb: "libhipsparselt0_7.2.4+ds-1~exp1",
        library: "hipsparselt/library",
        fat: &["libhipsparselt.so.0.2"],
        links: &[("libhipsparselt.so.0", "libhipsparselt.so.0.2")],
        handler: Handler::Hipsparselt,
        component: "sparselt_lib",
        prefix: "math-libs/hipSPARSELt/stage",
        per_arch: &[("gfx942", 83), ("gfx950", 115)],
        generic: 3,
    },
];

/// Recombined again with group archives (zstd): in each group package, one archive per
/// module holding all of the group's targets, and every per-target archive name of the plain
/// recombine (`packaged`: (file, package)) a relative link to it; the packages install side
/// by side and verify with strict identity (every code object read back through the links).
fn grouped_recombine_verifies(
    p: &Package,
    root: &Path,
    config: &PackagingConfig,
    packaged: &BTreeSet<(String, String)>,
) {
    let rec = root.join("grouped");
    let opts = RecombineOptions {
        group_archives: Some(kpack_archive::Compression::zstd()),
        ..RecombineOptions::default()
    };
    let r = recombine(&root.join("split"), config, &rec, &opts).unwrap();
    let mut links = BTreeSet::new();
    let (mut plain_bytes, mut grouped_bytes) = (0, 0);
    for g in &r.components[0].groups {
        let kpack_dir = rec.join(&g.artifact).join(p.prefix).join(".kpack");
        if !kpack_dir.exists() {
            continue; // kernel-database files only
        }
        for e in std::fs::read_dir(&kpack_dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            if e.file_type().unwrap().is_symlink() {
                let to = std::fs::read_link(e.path()).unwrap();
                let to = to.to_str().unwrap();
                let module = to.strip_suffix(&format!("_{}.kpack", g.group));
                assert!(
                    module.is_some_and(|m| name.starts_with(&format!("{m}_"))),
                    "{name} -> {to}"
                );
                assert!(kpack_dir.join(to).is_file(), "{name} -> {to}");
                links.insert((name, g.artifact.clone()));
            } else {
                assert!(name.ends_with(&format!("_{}.kpack", g.group)), "{name}");
                let a = kpack_archive::Archive::open(e.path()).unwrap();
                assert!(!a.gfx_arches().is_empty());
                grouped_bytes += e.metadata().unwrap().len();
            }
        }
    }
    for (file, package) in packaged {
        plain_bytes += std::fs::metadata(
            root.join("recombined")
                .join(package)
                .join(p.prefix)
                .join(".kpack")
                .join(file),
        )
        .unwrap()
        .len();
    }
    if !packaged.is_empty() {
        println!(
            "{}: {} group archives, {grouped_bytes} bytes; {} per-target archives, {plain_bytes} bytes",
            p.component,
            r.components[0]
                .groups
                .iter()
                .map(|g| g.archives)
                .sum::<usize>(),
            packaged.len()
        );
    }
    // A group of one target named after it keeps the target's name for its archive.
    for (file, package) in packaged {
        let group = &package[p.component.len() + 1..];
        assert!(
            links.contains(&(file.clone(), package.clone()))
                || file.ends_with(&format!("_{group}.kpack")),
            "{file} in {package}"
        );
    }
    assert_eq!(
        kpack_testkit::shared_installed_paths(&rec),
        Vec::<(String, Vec<String>)>::new(),
        "{}",
        p.component
    );
    let report = verify(
        &rec,
        &VerifyOptions {
            original: Some(root.join("original")),
            threads: 0,
        },
    )
    .unwrap();
    assert_eq!(
        report.lines(),
        Vec::<String>::new(),
        "{} grouped",
        p.component
    );
    std::fs::remove_dir_all(&rec).unwrap();
}

fn link_or_copy(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

/// TheRock layout: `<artifact>/<prefix>/lib/<fat lib>` and `<prefix>/lib/<library>/…`.
fn arrange(p: &Package, root: &Path) -> PathBuf {
    let src = kpack_testkit::corpus()
        .join("x")
        .join(p.deb)
        .join("usr/lib/x86_64-linux-gnu");
    assert!(
        src.is_dir(),
        "{} is missing: run scripts/setup.sh",
        src.display()
    );
    let artifact = root.join(format!("{}_gfxall", p.component));
    let lib = artifact.join(p.prefix).join("lib");
    let db = lib.join(p.library.replace("/5/", "/"));
    std::fs::create_dir_all(&db).unwrap();
    manifest::write(&artifact, &[p.prefix.to_owned()]).unwrap();
    for f in p.fat {
        link_or_copy(&src.join(f), &lib.join(f));
    }
    for (l, t) in p.links {
        kpack_fs::symlink(Path::new(t), &lib.join(l)).unwrap();
    }
    for e in std::fs::read_dir(src.join(p.library)).unwrap() {
        let e = e.unwrap();
        link_or_copy(&e.path(), &db.join(e.file_name()));
    }
    artifact
}

fn count_files(dir: &Path) -> usize {
    if !dir.is_dir() {
        return 0;
    }
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_file())
        .count()
}

#[test]
#[ignore = "real-world"]
// The length limit (issue 35) is for non-test code; this test walks one real-world run.
#[allow(clippy::too_many_lines)]
fn debian_kernel_databases_split_recombine_and_verify_with_strict_identity() {
    for p in PACKAGES {
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let shard = root.path().join("original/shard");
        let artifact = arrange(p, &shard);
        let split_out = root.path().join("split/shard");
        let opts = SplitOptions {
            handlers: vec![p.handler],
            ..SplitOptions::default()
        };
        let s = split(&artifact, &split_out, p.component, &opts, &|_, _| {}).unwrap();
        println!(
            "{}: {:?}",
            p.component,
            s.artifacts
                .iter()
                .map(|a| (&a.name, a.files))
                .collect::<Vec<_>>()
        );
        let lib_dir = |a: &str| {
            split_out
                .join(format!("{}_{a}", p.component))
                .join(p.prefix)
                .join("lib")
                .join(p.library.replace("/5/", "/"))
        };
        for (arch, n) in p.per_arch {
            assert_eq!(count_files(&lib_dir(arch)), *n, "{} {arch}", p.component);
        }
        assert_eq!(
            count_files(&lib_dir("generic")),
            p.generic,
            "{} generic",
            p.component
        );
        // No arch-named file stays generic, none arch-less moves.
        for e in std::fs::read_dir(lib_dir("generic")).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            assert!(
                p.handler
                    .classify(&format!("lib/{}/{name}", p.library))
                    .is_none(),
                "{name}"
            );
        }
        let report = verify(
            &split_out,
            &VerifyOptions {
                original: Some(shard.clone()),
                threads: 0,
            },
        )
        .unwrap();
        assert_eq!(report.lines(), Vec::<String>::new(), "{}", p.component);
        assert_eq!(
            report.code_objects > 0,
            s.fat_binaries > 0,
            "{}",
            p.component
        );

        // Recombine into groups as TheRock names them (gfx90X, gfx110X, gfx94X), covering
        // every architecture found: at least two groups per package.
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for a in &s.artifacts[1..] {
            let arch = a.name.rsplit('_').next().unwrap().to_owned();
            groups
                .entry(format!("{}X", &arch[..arch.len() - 1]))
                .or_default()
                .push(arch);
        }
        let config = PackagingConfig::parse(&serde_json::json!({
            "primary_shard": "shard",
            "architecture_groups": groups.iter().map(|(g, a)| (g.clone(), serde_json::json!({"architectures": a}))).collect::<serde_json::Map<_, _>>(),
            "validation": {"error_on_duplicate_device_code": true, "verify_generic_artifacts_match": true, "error_on_missing_architecture": true}
        }).to_string()).unwrap();
        let rec = root.path().join("recombined");
        let r = recombine(
            &root.path().join("split"),
            &config,
            &rec,
            &RecombineOptions::default(),
        )
        .unwrap();
        assert_eq!(r.components[0].groups.len(), groups.len());
        assert!(groups.len() >= 2, "{}: {groups:?}", p.component);
        assert_eq!(
            kpack_testkit::shared_installed_paths(&rec),
            Vec::<(String, Vec<String>)>::new(),
            "{}",
            p.component
        );
        // Every archive of every group, as (file, package), and what the generic package's
        // indexes list: the same, each target in the group of its processor.
        let mut packaged = BTreeSet::new();
        for (group, arches) in &groups {
            let package = format!("{}_{group}", p.component);
            let kpack_dir = rec.join(&package).join(p.prefix).join(".kpack");
            if !kpack_dir.exists() {
                continue; // kernel-database files only
            }
            for e in std::fs::read_dir(&kpack_dir).unwrap() {
                let name = e.unwrap().file_name().into_string().unwrap();
                assert!(name.ends_with(".kpack"), "{name} in {package}");
                packaged.insert((name, package.clone()));
            }
            assert!(!arches.is_empty());
        }
        let generic_kpack = rec
            .join(format!("{}_generic", p.component))
            .join(p.prefix)
            .join(".kpack");
        // Archives come from fat binaries only (hipBLASLt's library has no device code).
        assert_eq!(packaged.is_empty(), s.fat_binaries == 0, "{}", p.component);
        let mut indexed = BTreeSet::new();
        let mut indexes = 0;
        let in_generic_kpack = if packaged.is_empty() {
            assert!(!generic_kpack.exists(), "{}", p.component);
            Vec::new()
        } else {
            std::fs::read_dir(&generic_kpack)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect()
        };
        for path in in_generic_kpack {
            assert_eq!(path.extension().unwrap(), "kpm", "{}", path.display());
            let kpm = KpmManifest::decode(&std::fs::read(&path).unwrap()).unwrap();
            assert_eq!(kpm.component_name, p.component);
            assert_eq!(kpm.prefix, ".");
            for (target, entry) in kpm.kpack_files {
                let package = entry.package.unwrap();
                let processor = target.split(':').next().unwrap();
                let group = &package[p.component.len() + 1..];
                assert!(
                    groups[group].iter().any(|a| a == processor),
                    "{target} listed in {package}"
                );
                indexed.insert((entry.file, package));
            }
            indexes += 1;
        }
        assert_eq!(
            indexes, s.fat_binaries,
            "{}: one index per module",
            p.component
        );
        assert_eq!(indexed, packaged, "{}", p.component);
        let report = verify(
            &rec,
            &VerifyOptions {
                original: Some(root.path().join("original")),
                threads: 0,
            },
        )
        .unwrap();
        assert_eq!(
            report.lines(),
            Vec::<String>::new(),
            "{} recombined",
            p.component
        );
        grouped_recombine_verifies(p, root.path(), &config, &packaged);
        // The inputs (hard links into the corpus) are untouched.
        for f in p.fat {
            let a = std::fs::read(artifact.join(p.prefix).join("lib").join(f)).unwrap();
            let b = std::fs::read(
                kpack_testkit::corpus()
                    .join("x")
                    .join(p.deb)
                    .join("usr/lib/x86_64-linux-gnu")
                    .join(f),
            )
            .unwrap();
            assert!(a == b && a.starts_with(b"\x7fELF"));
        }
    }
}

#[test]
#[ignore = "real-world"]
fn rocblas_tarball_splits_and_recombines_to_the_same_bytes_as_its_directory() {
    let p = &PACKAGES[0];
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let artifact = arrange(p, &root.path().join("dir"));
    let tarball = root.path().join(format!("{}_gfxall.tar.zst", p.component));
    kpack_tar::pack_dir(&artifact, &tarball, kpack_tar::PackOptions::from_env()).unwrap();
    let opts = |output| SplitOptions {
        handlers: vec![p.handler],
        output,
        ..SplitOptions::default()
    };
    let from_dir = root.path().join("split-dir");
    let from_tar = root.path().join("split-tar");
    let a = split(
        &artifact,
        &from_dir,
        p.component,
        &opts(OutputFormat::Dir),
        &|_, _| {},
    )
    .unwrap();
    let b = split(
        &tarball,
        &from_tar,
        p.component,
        &opts(OutputFormat::TarZst),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!(a.artifacts, b.artifacts);
    assert!(a.code_objects > 0 && a.database_files > 1000);
    // Every output tarball unpacked by the `tar` CLI holds the directory split's bytes.
    let unpacked = root.path().join("split-tar-unpacked");
    untar_all(&from_tar, &unpacked);
    assert_eq!(
        kpack_testkit::snapshot_digests(&unpacked),
        kpack_testkit::snapshot_digests(&from_dir)
    );
    // The tar outputs verify against the tarball original, code object by code object.
    let report = verify(
        &from_tar,
        &VerifyOptions {
            original: Some(tarball.clone()),
            threads: 0,
        },
    )
    .unwrap();
    assert_eq!(report.lines(), Vec::<String>::new());
    assert!(report.code_objects > 0 && report.original_files > 1000);

    // Recombined from the tar shards (streamed into the output's stage) or the directory
    // shards: the same packages, byte for byte.
    let processors: Vec<String> = a
        .artifacts
        .iter()
        .filter_map(|w| w.name.rsplit_once('_').map(|(_, s)| s.to_owned()))
        .filter(|s| s != "generic")
        .collect();
    let config = PackagingConfig::parse(
        &serde_json::json!({
            "primary_shard": "shard-a",
            "architecture_groups": {"all": {"architectures": processors}},
        })
        .to_string(),
    )
    .unwrap();
    let mut recombined = Vec::new();
    for (name, split_out, output) in [
        ("dir", &from_dir, OutputFormat::Dir),
        ("tar", &from_tar, OutputFormat::TarZst),
    ] {
        let shards = root.path().join(format!("shards-{name}"));
        std::fs::create_dir(&shards).unwrap();
        std::fs::rename(split_out, shards.join("shard-a")).unwrap();
        let out = root.path().join(format!("recombined-{name}"));
        recombine(
            &shards,
            &config,
            &out,
            &RecombineOptions {
                output,
                ..RecombineOptions::default()
            },
        )
        .unwrap();
        recombined.push(out);
    }
    let unpacked = root.path().join("recombined-tar-unpacked");
    untar_all(&recombined[1], &unpacked);
    let want = kpack_testkit::snapshot_digests(&recombined[0]);
    assert!(want.len() > 1000);
    assert_eq!(kpack_testkit::snapshot_digests(&unpacked), want);
}

/// Every `<name>.tar.zst` in `from` unpacked by the `tar` CLI (the witness) into `into/<name>`.
fn untar_all(from: &Path, into: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let t = e.unwrap().path();
        let name = t.file_name().unwrap().to_str().unwrap();
        let to = into.join(name.strip_suffix(".tar.zst").expect("only tarballs"));
        std::fs::create_dir_all(&to).unwrap();
        kpack_testkit::run_tool(
            "tar",
            &[
                "--zstd",
                "-xf",
                t.to_str().unwrap(),
                "-C",
                to.to_str().unwrap(),
            ],
        );
    }
}

/// Debian's hipSPARSELt (the CI slice's smaller package) as a `.tar.zst` artifact and, under
/// a second component, as a directory, split by one `split --batch` (the two artifacts on the
/// workers at once): split and recombine write the same tarballs at 1, 2 and 8 threads, and
/// verify finds every code object at each.
#[test]
#[ignore = "real-world"]
fn real_packages_split_as_one_batch_and_recombine_to_the_same_bytes_at_one_two_and_eight_threads() {
    let p = PACKAGES
        .iter()
        .find(|p| p.handler == Handler::Hipsparselt)
        .unwrap();
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = root.path();
    // Two artifacts split at once by `split --batch`: the package as a `.tar.zst` (the
    // streamed split) and as a directory under a second component (the directory split).
    let originals = root.join("original");
    let artifact = arrange(p, &root.join("arranged"));
    let tarball = originals.join(format!("{}_gfxall.tar.zst", p.component));
    std::fs::create_dir_all(&originals).unwrap();
    kpack_tar::pack_dir(&artifact, &tarball, kpack_tar::PackOptions::from_env()).unwrap();
    let second = format!("{}_dir", p.component);
    std::fs::rename(&artifact, originals.join(format!("{second}_gfxall"))).unwrap();
    let mut written = Vec::new();
    for threads in [1, 2, 8] {
        let run = root.join(format!("threads-{threads}"));
        let opts = SplitOptions {
            handlers: vec![p.handler],
            threads,
            output: OutputFormat::TarZst,
            ..SplitOptions::default()
        };
        let split = split_batch(&originals, &run.join("split/shard"), &opts, &|_, _| {}).unwrap();
        let components: Vec<&str> = split.iter().map(|s| s.component.as_str()).collect();
        // In the order of the artifacts' names (`sparselt_lib_dir_gfxall` first).
        assert_eq!(components, [second.as_str(), p.component]);
        let groups: Vec<String> = split[0].artifacts[1..]
            .iter()
            .map(|a| a.name.rsplit('_').next().unwrap().to_owned())
            .collect();
        let config = PackagingConfig::parse(&serde_json::json!({
            "primary_shard": "shard",
            "architecture_groups": groups.iter().map(|a| (a.clone(), serde_json::json!({"architectures": [a]}))).collect::<serde_json::Map<_, _>>(),
            "validation": {"error_on_duplicate_device_code": true, "verify_generic_artifacts_match": true, "error_on_missing_architecture": true}
        }).to_string()).unwrap();
        // Each component recombined and verified apart: both install the same paths.
        for (component, original) in [
            (p.component, tarball.clone()),
            (second.as_str(), originals.join(format!("{second}_gfxall"))),
        ] {
            let rec = run.join("recombined").join(component);
            let rec_opts = RecombineOptions {
                component: Some(component.to_owned()),
                output: OutputFormat::TarZst,
                threads,
                ..RecombineOptions::default()
            };
            recombine(&run.join("split"), &config, &rec, &rec_opts).unwrap();
            let report = verify(
                &rec,
                &VerifyOptions {
                    original: Some(original),
                    threads,
                },
            )
            .unwrap();
            assert_eq!(report.lines(), Vec::<String>::new(), "{threads} threads");
            assert!(report.code_objects > 0);
        }
        written.push(kpack_testkit::snapshot_digests(&run));
        std::fs::remove_dir_all(&run).unwrap();
    }
    assert!(written[0].len() > 2);
    assert_eq!(written[1], written[0]);
    assert_eq!(written[2], written[0]);
}
