//! Artifacts as `.tar.zst` (TheRock's CI format) on the hipcc shard fixtures: split from a
//! tarball gives the directory split's bytes, tar output holds them too, recombine and
//! verify read tar shards; the tarballs written are reproducible; unsafe members are refused
//! with nothing written.

use std::path::{Path, PathBuf};

use kpack_artifact::recombine::{PackagingConfig, RecombineOptions, recombine};
use kpack_artifact::split::{SplitOptions, split, split_batch};
use kpack_artifact::tarball::OutputFormat;
use kpack_artifact::verify::{VerifyOptions, verify};
use kpack_package::handlers::Handler;
use kpack_tar::PackOptions;
use kpack_testkit::{SHARDS, fixture, run_tool, snapshot};

fn opts(output: OutputFormat) -> SplitOptions {
    SplitOptions {
        handlers: vec![Handler::Rocblas],
        output,
        ..SplitOptions::default()
    }
}

/// Each shard's artifact directories as tarballs: the first shard packed by the `tar` CLI as
/// `.tar.zst` (GNU tar: `./` names, directories first, the builder's uid and mtimes), the
/// second by kpack's writer, the third by the `tar` CLI as `.tar.xz`.
fn tar_shards(into: &Path) -> PathBuf {
    for (i, shard) in SHARDS.iter().enumerate() {
        let dir = into.join(shard);
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(fixture(&format!("shards/{shard}"))).unwrap() {
            let artifact = e.unwrap().path();
            let name = artifact.file_name().unwrap().to_str().unwrap().to_owned();
            let (flag, suffix) = if i == 2 {
                ("--xz", "xz")
            } else {
                ("--zstd", "zst")
            };
            let out = dir.join(format!("{name}.tar.{suffix}"));
            if i == 1 {
                kpack_tar::pack_dir(&artifact, &out, PackOptions::from_env()).unwrap();
            } else {
                run_tool(
                    "tar",
                    &[
                        flag,
                        "-cf",
                        out.to_str().unwrap(),
                        "-C",
                        artifact.to_str().unwrap(),
                        ".",
                    ],
                );
            }
        }
    }
    into.to_owned()
}

/// Every `<name>.tar.zst` below `dir` unpacked by the `tar` CLI (the witness) into
/// `<name>/`, the tarball removed.
fn untar_all(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            untar_all(&p);
            continue;
        }
        let name = p.file_name().unwrap().to_str().unwrap();
        let stem = name
            .strip_suffix(".tar.zst")
            .expect("only tarballs are written");
        let to = dir.join(stem);
        std::fs::create_dir(&to).unwrap();
        run_tool(
            "tar",
            &[
                "--zstd",
                "-xf",
                p.to_str().unwrap(),
                "-C",
                to.to_str().unwrap(),
            ],
        );
        std::fs::remove_file(&p).unwrap();
    }
}

fn config() -> PackagingConfig {
    PackagingConfig::parse(
        r#"{"primary_shard": "shard-a",
            "architecture_groups": {"gfx9": {"architectures": ["gfx900", "gfx906", "gfx908", "gfx90a"]},
                                    "gfx103X": {"architectures": ["gfx1030"]}},
            "validation": {"error_on_duplicate_device_code": true, "verify_generic_artifacts_match": true,
                           "error_on_missing_architecture": true}}"#,
    )
    .unwrap()
}

#[test]
fn tarball_artifacts_split_recombine_and_verify_to_the_same_bytes_as_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let tars = tar_shards(&t.join("tars"));
    for shard in SHARDS {
        let from_dir = t.join("split-dir").join(shard);
        let from_tar = t.join("split-tar").join(shard);
        let tar_to_tar = t.join("split-tar-zst").join(shard);
        let dir_to_tar = t.join("split-dir-zst").join(shard);
        let a = split_batch(
            &fixture(&format!("shards/{shard}")),
            &from_dir,
            &opts(OutputFormat::Dir),
            &|_, _| {},
        )
        .unwrap();
        let b = split_batch(
            &tars.join(shard),
            &from_tar,
            &opts(OutputFormat::Dir),
            &|_, _| {},
        )
        .unwrap();
        split_batch(
            &tars.join(shard),
            &tar_to_tar,
            &opts(OutputFormat::TarZst),
            &|_, _| {},
        )
        .unwrap();
        split_batch(
            &fixture(&format!("shards/{shard}")),
            &dir_to_tar,
            &opts(OutputFormat::TarZst),
            &|_, _| {},
        )
        .unwrap();
        // Same summaries apart from the input path; real work was done.
        assert_eq!(a.len(), b.len(), "{shard}");
        for (a, b) in a.iter().zip(&b) {
            assert_eq!(
                (
                    a.fat_binaries,
                    a.code_objects,
                    a.database_files,
                    &a.artifacts
                ),
                (
                    b.fat_binaries,
                    b.code_objects,
                    b.database_files,
                    &b.artifacts
                ),
                "{shard}"
            );
        }
        assert!(a.iter().map(|s| s.code_objects).sum::<usize>() > 0);
        // Tar output is one reproducible file per artifact, whatever the input.
        for e in std::fs::read_dir(&tar_to_tar).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_str().unwrap().to_owned();
            assert!(name.ends_with(".tar.zst"), "{}", p.display());
            assert_eq!(
                std::fs::read(&p).unwrap(),
                std::fs::read(dir_to_tar.join(&name)).unwrap(),
                "{shard}/{name}"
            );
        }
        let want = snapshot(&from_dir);
        assert_eq!(snapshot(&from_tar), want, "{shard}: tar input");
        untar_all(&tar_to_tar);
        assert_eq!(snapshot(&tar_to_tar), want, "{shard}: tar input and output");
    }

    // Recombine and verify from tar shards: the same packages, verified against the tarball
    // originals.
    let rec_dir = t.join("rec-dir");
    let rec_tar = t.join("rec-tar");
    let cfg = config();
    recombine(
        &t.join("split-dir"),
        &cfg,
        &rec_dir,
        &RecombineOptions::default(),
    )
    .unwrap();
    recombine(
        &t.join("split-dir-zst"),
        &cfg,
        &rec_tar,
        &RecombineOptions {
            output: OutputFormat::TarZst,
            ..RecombineOptions::default()
        },
    )
    .unwrap();
    for (checked, original) in [
        (&rec_tar, &tars),
        (&t.join("split-dir-zst/shard-b"), &tars.join("shard-b")),
    ] {
        let report = verify(
            checked,
            &VerifyOptions {
                original: Some(original.clone()),
                threads: 0,
            },
        )
        .unwrap();
        assert_eq!(
            report.lines(),
            Vec::<String>::new(),
            "{}",
            checked.display()
        );
        assert!(report.code_objects > 0 && report.original_files > 0);
    }
    // One original tarball also works as --original.
    let one = verify(
        &t.join("split-dir-zst/shard-b"),
        &VerifyOptions {
            original: Some(tars.join("shard-b/demo_lib_gfx90a.tar.zst")),
            threads: 0,
        },
    )
    .unwrap();
    assert!(one.code_objects > 0);
    // A failure inside a tarball names the tarball and the member, not a temporary path.
    let lone = t.join("lone");
    std::fs::create_dir(&lone).unwrap();
    let arch = "demo_lib_gfx90a.tar.zst";
    std::fs::copy(t.join("split-dir-zst/shard-b").join(arch), lone.join(arch)).unwrap();
    let report = verify(&lone, &VerifyOptions::default()).unwrap();
    let want = format!(
        "{}/demo/stage/.kpack/bin_demo_gfx90a:xnack+.kpack: no binary's marker reaches this archive",
        lone.join(arch).display()
    );
    assert!(report.lines().contains(&want), "{:?}", report.lines());
    assert!(
        !report
            .lines()
            .iter()
            .any(|f| f.contains(kpack_fs::TEMP_PREFIX))
    );

    untar_all(&rec_tar);
    assert_eq!(snapshot(&rec_tar), snapshot(&rec_dir));
}

#[test]
fn split_and_recombine_write_the_same_tarballs_at_one_two_and_eight_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let tars = tar_shards(&t.join("tars"));
    let mut written = Vec::new();
    for threads in [1, 2, 8] {
        let run = t.join(format!("threads-{threads}"));
        for shard in SHARDS {
            let split_opts = SplitOptions {
                threads,
                ..opts(OutputFormat::TarZst)
            };
            split_batch(
                &tars.join(shard),
                &run.join("split").join(shard),
                &split_opts,
                &|_, _| {},
            )
            .unwrap();
        }
        recombine(
            &run.join("split"),
            &config(),
            &run.join("recombined"),
            &RecombineOptions {
                output: OutputFormat::TarZst,
                threads,
                ..RecombineOptions::default()
            },
        )
        .unwrap();
        let report = verify(
            &run.join("recombined"),
            &VerifyOptions {
                original: Some(tars.clone()),
                threads,
            },
        )
        .unwrap();
        assert_eq!(report.lines(), Vec::<String>::new(), "{threads} threads");
        written.push((snapshot(&run), report.code_objects));
    }
    let (one, code_objects) = &written[0];
    assert!(*code_objects > 0);
    assert!(
        one.iter()
            .filter(|(path, ..)| path.ends_with(".tar.zst"))
            .count()
            > SHARDS.len()
    );
    for (other, checked) in &written[1..] {
        assert_eq!(other, one);
        assert_eq!(checked, code_objects);
    }
}

#[test]
fn written_tarballs_are_sorted_and_carry_no_build_machine_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let artifact = fixture("shards/shard-a/demo_lib_gfx90X");
    let (a, b) = (tmp.path().join("a.tar.zst"), tmp.path().join("b.tar.zst"));
    let opts = PackOptions {
        level: 3,
        mtime: 1_700_000_000,
    };
    kpack_tar::pack_dir(&artifact, &a, opts).unwrap();
    kpack_tar::pack_dir(&artifact, &b, opts).unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    // Read back with the tar crate, not ours.
    let file = std::fs::File::open(&a).unwrap();
    let mut archive = tar::Archive::new(zstd::Decoder::new(file).unwrap());
    let mut names = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for e in archive.entries().unwrap() {
        let e = e.unwrap();
        let h = e.header();
        assert_eq!(h.mtime().unwrap(), 1_700_000_000);
        assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (0, 0));
        assert_eq!(h.username_bytes().unwrap_or_default(), b"");
        assert_eq!(h.groupname_bytes().unwrap_or_default(), b"");
        kinds.insert(format!("{:?}", h.entry_type()));
        names.push(
            e.path()
                .unwrap()
                .to_str()
                .unwrap()
                .trim_end_matches('/')
                .to_owned(),
        );
        if h.entry_type().is_symlink() {
            assert_eq!(
                e.link_name().unwrap().unwrap().to_str(),
                Some("libdemo.so.1")
            );
        }
        if e.path().unwrap().ends_with("bin/demo") {
            assert_eq!(h.mode().unwrap(), 0o755);
        }
    }
    let mut sorted = names.clone();
    sorted.sort_by(|x, y| x.split('/').cmp(y.split('/')));
    assert_eq!(names, sorted);
    assert_eq!(kinds.len(), 3, "files, directories and symlinks: {kinds:?}");
}

/// A tarball of a small valid artifact plus one member written with a raw header (the tar
/// crate's own writer refuses these names).
fn tarball_with(dir: &Path, name: &[u8], kind: tar::EntryType, link: Option<&[u8]>) -> PathBuf {
    let mut b = tar::Builder::new(Vec::new());
    let mut raw = |name: &[u8], kind: tar::EntryType, link: Option<&[u8]>, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        if let Some(l) = link {
            h.as_old_mut().linkname[..l.len()].copy_from_slice(l);
        }
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data).unwrap();
    };
    raw(
        b"artifact_manifest.txt",
        tar::EntryType::Regular,
        None,
        b"demo/stage\n",
    );
    raw(
        b"demo/stage/share/readme.txt",
        tar::EntryType::Regular,
        None,
        b"hello\n",
    );
    raw(
        b"demo/stage/lib/loop",
        tar::EntryType::Symlink,
        Some(b"."),
        b"",
    );
    raw(name, kind, link, b"payload");
    let path = dir.join("bad_lib_gfx90X.tar");
    std::fs::write(&path, b.into_inner().unwrap()).unwrap();
    path
}

#[test]
fn unsafe_tar_members_are_refused_by_name_and_nothing_is_written() {
    use tar::EntryType as T;
    /// (member name, type, link target, the problem the error names)
    type Case<'a> = (&'a [u8], T, Option<&'a [u8]>, &'a str);
    let cases: &[Case] = &[
        (b"../evil.txt", T::Regular, None, "path traversal"),
        (
            b"demo/stage/../../../evil.txt",
            T::Regular,
            None,
            "path traversal",
        ),
        (b"/tmp/kpack-evil.txt", T::Regular, None, "absolute name"),
        (b"demo/stage/dev/sda", T::Block, None, "device node"),
        (b"demo/stage/dev/null", T::Char, None, "device node"),
        (b"demo/stage/fifo", T::Fifo, None, "FIFO"),
        (
            b"demo/stage/lib/hard",
            T::Link,
            Some(b"../../../../outside"),
            "hard link",
        ),
        (
            b"demo/stage/lib/esc",
            T::Symlink,
            Some(b"../../../../etc"),
            "escapes the tree",
        ),
        (
            b"demo/stage/lib/abs",
            T::Symlink,
            Some(b"/etc/passwd"),
            "escapes the tree",
        ),
        (
            b"demo/stage/lib/loop/x.so",
            T::Regular,
            None,
            "below the symlink",
        ),
        (
            b"demo/stage/share/readme.txt",
            T::Regular,
            None,
            "appears twice",
        ),
        (
            b"demo/stage/share/readme.txt/x",
            T::Regular,
            None,
            "below the file",
        ),
    ];
    for (name, kind, link, problem) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let shown = String::from_utf8_lossy(name).into_owned();
        let input = tmp.path().join("in");
        std::fs::create_dir(&input).unwrap();
        let tarball = tarball_with(&input, name, *kind, *link);
        let work = tmp.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let out = work.join("out");
        let e = split(
            &tarball,
            &out,
            "bad_lib",
            &opts(OutputFormat::Dir),
            &|_, _| {},
        )
        .expect_err(&shown)
        .to_string();
        assert!(
            e.contains(&format!(" {shown} (header at tar offset 0x"))
                && e.contains(problem)
                && e.contains("bad_lib_gfx90X.tar"),
            "{shown}: {e}"
        );
        kpack_testkit::assert_no_debug_formatting(&e);
        assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "{shown}: {e}");
        // Reading it as a shard or an original fails the same way (recombine reads the
        // tarballs it takes a package from: here, the primary shard's generic and gfx900
        // artifacts; a shard without a generic artifact is refused before any is read).
        let e = verify(&input, &VerifyOptions::default())
            .expect_err(&shown)
            .to_string();
        assert!(e.contains(problem), "{shown}: {e}");
        let primary_in = PackagingConfig::parse(
            r#"{"primary_shard": "in",
                "architecture_groups": {"gfx9": {"architectures": ["gfx900", "gfx906"]}}}"#,
        )
        .unwrap();
        let shards = tmp.path().join("shards");
        std::fs::create_dir_all(shards.join("in")).unwrap();
        for artifact in ["bad_lib_generic", "bad_lib_gfx900"] {
            let copy = shards.join(format!("in/{artifact}.tar"));
            std::fs::copy(&tarball, copy).unwrap();
        }
        let e = recombine(
            &shards,
            &primary_in,
            &work.join("rec"),
            &RecombineOptions::default(),
        )
        .expect_err(&shown)
        .to_string();
        assert!(e.contains(problem), "{shown}: {e}");
        assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "{shown}");
    }
    assert!(!Path::new("/tmp/kpack-evil.txt").exists());
}

#[test]
fn a_tarball_without_a_manifest_at_its_top_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("wrapped.tar.zst");
    // A tarball of the shard (artifacts one level down) rather than of the artifact.
    run_tool(
        "tar",
        &[
            "--zstd",
            "-cf",
            t.to_str().unwrap(),
            "-C",
            fixture("shards").to_str().unwrap(),
            "shard-a",
        ],
    );
    let e = split(
        &t,
        &tmp.path().join("out"),
        "demo_lib",
        &opts(OutputFormat::Dir),
        &|_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no artifact_manifest.txt at the top"), "{e}");
    assert!(!tmp.path().join("out").exists());
}

#[test]
fn a_recombine_error_inside_a_tar_shard_names_the_tarball_and_member() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let shards = t.join("shards");
    let shard = shards.join("shard-a");
    split_batch(
        &fixture("shards/shard-a"),
        &shard,
        &opts(OutputFormat::Dir),
        &|_, _| {},
    )
    .unwrap();
    // One arch artifact as a tarball whose manifest names a prefix leaving the artifact.
    let name = "demo_lib_gfx906";
    let artifact = shard.join(name);
    std::fs::write(artifact.join("artifact_manifest.txt"), "../outside\n").unwrap();
    let tarball = shard.join(format!("{name}.tar.zst"));
    kpack_tar::pack_dir(&artifact, &tarball, PackOptions::from_env()).unwrap();
    std::fs::remove_dir_all(&artifact).unwrap();
    let out = t.join("out");
    let config = PackagingConfig::parse(
        r#"{"primary_shard": "shard-a",
            "architecture_groups": {"gfx9": {"architectures": ["gfx900", "gfx906"]}}}"#,
    )
    .unwrap();
    let e = recombine(&shards, &config, &out, &RecombineOptions::default())
        .expect_err("a manifest with '..' is refused")
        .to_string();
    assert!(
        e.starts_with(&format!("{}/artifact_manifest.txt:1:", tarball.display()))
            && e.contains("outside"),
        "{e}"
    );
    assert!(!e.contains(kpack_fs::TEMP_PREFIX), "{e}");
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(t).unwrap().count(),
        1,
        "only the shards remain"
    );
}

/// An artifact present both as a directory and as a tarball in one directory is refused,
/// naming both, its name written plainly.
#[test]
fn an_artifact_both_directory_and_tarball_is_refused_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "demo_lib_gfx90X";
    let dir = tmp.path().join(name);
    kpack_testkit::copy_tree(&fixture(&format!("shards/shard-a/{name}")), &dir);
    let tarball = tmp.path().join(format!("{name}.tar.zst"));
    kpack_tar::pack_dir(&dir, &tarball, PackOptions::from_env()).unwrap();
    let e = kpack_artifact::tarball::artifacts_in(tmp.path()).unwrap_err();
    let text = e.to_string();
    // Sorted by name then path, the directory comes first; the tarball is the one named.
    assert_eq!(
        text,
        format!(
            "{}: artifact {name} is also {}; keep one of them",
            tarball.display(),
            dir.display()
        )
    );
    kpack_testkit::assert_no_debug_formatting(&text);
}

/// A copy of the artifact `demo_lib_gfx90X` in `dir`, as `cp -a` makes it.
fn demo_lib_copy(dir: &Path) -> PathBuf {
    let copy = dir.join("demo_lib_gfx90X");
    let fixture = fixture("shards/shard-a/demo_lib_gfx90X");
    run_tool(
        "cp",
        &["-a", fixture.to_str().unwrap(), copy.to_str().unwrap()],
    );
    copy
}

/// Where `demo_lib_gfx90X`'s libraries lie.
const DEMO_LIB: &str = "demo/stage/lib";

/// What the artifact `demo_lib_gfx90X` holds beyond what a Windows disk keeps of it: its
/// executables' mode and its symbolic link.
fn demo_lib_recorded() -> kpack_tar::Recorded {
    use kpack_tar::RecordedMember;
    let executables = [
        "demo/stage/bin/demo".to_owned(),
        format!("{DEMO_LIB}/libdemo.so.1"),
        format!("{DEMO_LIB}/libdemo_host.so"),
    ];
    let mut recorded: kpack_tar::Recorded = executables
        .into_iter()
        .map(|rel| (rel, RecordedMember::Mode(0o755)))
        .collect();
    recorded.insert(
        format!("{DEMO_LIB}/libdemo.so"),
        RecordedMember::Symlink("libdemo.so.1".into()),
    );
    recorded
}

/// The artifact `demo_lib_gfx90X` as the tarball `dir/demo_lib_gfx90X.tar.zst`, its files
/// given `modes` by path: packed from the fixture with [`demo_lib_recorded`], so the same
/// bytes on every system (a Windows disk keeps neither the executables' mode nor the link).
fn demo_lib_tarball(dir: &Path, modes: &[(&str, u32)]) -> PathBuf {
    let mut recorded = demo_lib_recorded();
    for (rel, mode) in modes {
        recorded.insert(rel.to_string(), kpack_tar::RecordedMember::Mode(*mode));
    }
    let out = dir.join("demo_lib_gfx90X.tar.zst");
    let artifact = fixture("shards/shard-a/demo_lib_gfx90X");
    kpack_tar::pack_dir_recorded(&artifact, &out, PackOptions::from_env(), &recorded).unwrap();
    out
}

/// Modes no default would give `demo_lib_gfx90X`'s files: read-only (the one bit a Windows
/// disk keeps), and an executable not readable by others.
const ODD_MODES: [(&str, u32); 2] = [
    ("demo/stage/share/demo/readme.txt", 0o444),
    ("demo/stage/bin/demo", 0o750),
];

/// `generic`, the generic tarball of a split or recombine of [`demo_lib_tarball`] with
/// [`ODD_MODES`], and `database`, a tarball holding its gfx906 database file: they carry the
/// input's modes and link, whatever the staged copies on disk kept.
fn assert_demo_lib_modes_and_link(generic: &Path, database: &Path) {
    let generic = members(generic);
    let find = |name: &str| {
        generic
            .iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("{name} in {generic:?}"))
            .clone()
    };
    let lib = DEMO_LIB;
    assert_eq!(
        find(&format!("{lib}/libdemo.so")),
        (
            format!("{lib}/libdemo.so"),
            0o777,
            Some("libdemo.so.1".to_owned())
        )
    );
    assert_eq!(find("demo/stage/share/demo/readme.txt").1, 0o444);
    // Fat binaries, rewritten, keep their input's modes.
    assert_eq!(find("demo/stage/bin/demo").1, 0o750);
    assert_eq!(find(&format!("{lib}/libdemo.so.1")).1, 0o755);
    // Database files keep theirs in the per-architecture artifact.
    let database = members(database);
    let dat = "demo/stage/lib/rocblas/library/TensileLibrary_Type_S_gfx906.dat";
    assert!(
        database.iter().any(|(n, m, _)| n == dat && *m == 0o644),
        "{database:?}"
    );
}

/// Each member of the tarball `path`: (name, mode, link target).
fn members(path: &Path) -> Vec<(String, u32, Option<String>)> {
    let file = std::fs::File::open(path).unwrap();
    let mut archive = tar::Archive::new(zstd::Decoder::new(file).unwrap());
    let mut found = Vec::new();
    for e in archive.entries().unwrap() {
        let e = e.unwrap();
        let name = e.path().unwrap().to_str().unwrap().to_owned();
        let link = e
            .link_name()
            .unwrap()
            .map(|l| l.to_str().unwrap().to_owned());
        found.push((name, e.header().mode().unwrap(), link));
    }
    found
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs cp; its witness is the fixture's own modes and link, which a Windows disk does not hold"
)]
fn recorded_modes_and_links_give_the_tarball_of_the_tree_whatever_its_disk_copy_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let faithful = tmp.path().join("faithful.tar.zst");
    kpack_tar::pack_dir(
        &fixture("shards/shard-a/demo_lib_gfx90X"),
        &faithful,
        PackOptions::from_env(),
    )
    .unwrap();
    // What a Windows disk keeps of the tree: every file 0644, no symbolic link.
    let recorded = demo_lib_recorded();
    let lossy = demo_lib_copy(tmp.path());
    for (rel, member) in &recorded {
        match member {
            kpack_tar::RecordedMember::Mode(_) => kpack_fs::set_mode(&lossy.join(rel), 0o644),
            kpack_tar::RecordedMember::Symlink(_) => std::fs::remove_file(lossy.join(rel)),
            kpack_tar::RecordedMember::Elsewhere { .. } => unreachable!("none recorded"),
        }
        .unwrap();
    }
    let as_lost = tmp.path().join("lost.tar.zst");
    kpack_tar::pack_dir(&lossy, &as_lost, PackOptions::from_env()).unwrap();
    assert_ne!(
        std::fs::read(&as_lost).unwrap(),
        std::fs::read(&faithful).unwrap()
    );

    let packed = tmp.path().join("recorded.tar.zst");
    kpack_tar::pack_dir_recorded(&lossy, &packed, PackOptions::from_env(), &recorded).unwrap();
    assert_eq!(
        std::fs::read(&packed).unwrap(),
        std::fs::read(&faithful).unwrap()
    );
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs cp; its witness is the fixture's own modes and link, which a Windows disk does not hold"
)]
fn files_recorded_elsewhere_are_packed_from_there_as_if_in_the_tree() {
    // Recombine packs the files of its shards from where they were unpacked, not from
    // copies in the package's tree: the tarball must be the one of the tree holding them.
    let tmp = tempfile::tempdir().unwrap();
    let faithful = tmp.path().join("faithful.tar.zst");
    let artifact = fixture("shards/shard-a/demo_lib_gfx90X");
    kpack_tar::pack_dir(&artifact, &faithful, PackOptions::from_env()).unwrap();
    std::fs::create_dir(tmp.path().join("sources")).unwrap();
    let sources = demo_lib_copy(&tmp.path().join("sources"));
    let lossy = demo_lib_copy(tmp.path());
    let mut recorded = demo_lib_recorded();
    for rel in ["demo/stage/bin/demo", "demo/stage/share/demo/readme.txt"] {
        // One with its mode recorded (a tarball shard's), one with its source's.
        let mode = match recorded.get(rel) {
            Some(kpack_tar::RecordedMember::Mode(mode)) => Some(*mode),
            _ => None,
        };
        std::fs::remove_file(lossy.join(rel)).unwrap();
        let source = sources.join(rel);
        recorded.insert(
            rel.to_owned(),
            kpack_tar::RecordedMember::Elsewhere { source, mode },
        );
    }
    let packed = tmp.path().join("elsewhere.tar.zst");
    kpack_tar::pack_dir_recorded(&lossy, &packed, PackOptions::from_env(), &recorded).unwrap();
    assert_eq!(
        std::fs::read(&packed).unwrap(),
        std::fs::read(&faithful).unwrap()
    );

    // A source that is gone is an error naming it, and leaves no tarball.
    let gone = sources.join("demo/stage/bin/demo");
    std::fs::remove_file(&gone).unwrap();
    let failed = tmp.path().join("failed.tar.zst");
    let err = kpack_tar::pack_dir_recorded(&lossy, &failed, PackOptions::from_env(), &recorded)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&gone.display().to_string()), "{err}");
    assert!(!failed.exists());
}

#[test]
fn a_tarball_split_writes_its_members_modes_and_links_into_the_output_tarballs() {
    let tmp = tempfile::tempdir().unwrap();
    let input = demo_lib_tarball(tmp.path(), &ODD_MODES);
    let out = tmp.path().join("split");
    split(
        &input,
        &out,
        "demo_lib",
        &opts(OutputFormat::TarZst),
        &|_, _| {},
    )
    .unwrap();
    assert_demo_lib_modes_and_link(
        &out.join("demo_lib_generic.tar.zst"),
        &out.join("demo_lib_gfx906.tar.zst"),
    );
}

/// A recombine of tarball shards takes its output tarballs' modes and links from the
/// shards' member headers, not from their unpacked copies (a Windows disk keeps no execute
/// bit and, under wine, makes no link): its generic and group tarballs carry what the split
/// recorded, as the split's carry what its input recorded.
#[test]
fn a_tarball_recombine_writes_its_shards_modes_and_links_into_the_output_tarballs() {
    let tmp = tempfile::tempdir().unwrap();
    let input = demo_lib_tarball(tmp.path(), &ODD_MODES);
    let shards = tmp.path().join("shards");
    let split_opts = opts(OutputFormat::TarZst);
    split(
        &input,
        &shards.join("shard-a"),
        "demo_lib",
        &split_opts,
        &|_, _| {},
    )
    .unwrap();
    let config = PackagingConfig::parse(
        r#"{"primary_shard": "shard-a",
            "architecture_groups": {"gfx9": {"architectures": ["gfx900", "gfx906", "gfx908", "gfx90a"]}}}"#,
    )
    .unwrap();
    let out = tmp.path().join("recombined");
    let recombine_opts = RecombineOptions {
        output: OutputFormat::TarZst,
        ..RecombineOptions::default()
    };
    recombine(&shards, &config, &out, &recombine_opts).unwrap();
    assert_demo_lib_modes_and_link(
        &out.join("demo_lib_generic.tar.zst"),
        &out.join("demo_lib_gfx9.tar.zst"),
    );
}

/// The tarball split reads its input once, writing each member as it comes: here its one fat
/// binary keeps the module its file name gives, and the manifest comes last (the members
/// before it are spooled until it is read). The outputs are the directory split's bytes at
/// 1, 2 and 8 threads, as directories and as tarballs. (The shard fixtures, whose two fat
/// binaries share a module name, take the path where a second read writes them under the
/// names the whole tarball gives.)
#[test]
fn a_tarball_with_its_manifest_last_splits_to_the_directory_split_s_bytes_at_one_two_and_eight_threads()
 {
    let tmp = tempfile::tempdir().unwrap();
    let artifact = demo_lib_copy(tmp.path());
    std::fs::remove_file(artifact.join("demo/stage/bin/demo")).unwrap();
    let input = tmp.path().join("demo_lib_gfx90X.tar.zst");
    run_tool(
        "tar",
        &[
            "--zstd",
            "-cf",
            input.to_str().unwrap(),
            "-C",
            artifact.to_str().unwrap(),
            "demo",
            "artifact_manifest.txt",
        ],
    );
    let last = members(&input).pop().unwrap().0;
    assert_eq!(last, "artifact_manifest.txt");
    for output in [OutputFormat::Dir, OutputFormat::TarZst] {
        let want_dir = tmp.path().join(format!("from-dir-{output:?}"));
        let want = split(&artifact, &want_dir, "demo_lib", &opts(output), &|_, _| {}).unwrap();
        assert_eq!((want.fat_binaries, want.database_files), (1, 4));
        for threads in [1, 2, 8] {
            let out = tmp.path().join(format!("from-tar-{output:?}-{threads}"));
            let split_opts = SplitOptions {
                threads,
                ..opts(output)
            };
            let got = split(&input, &out, "demo_lib", &split_opts, &|_, _| {}).unwrap();
            assert_eq!(
                (got.code_objects, &got.artifacts),
                (want.code_objects, &want.artifacts),
                "{output:?}, {threads} threads"
            );
            assert_eq!(
                snapshot(&out),
                snapshot(&want_dir),
                "{output:?}, {threads} threads"
            );
        }
    }
}
