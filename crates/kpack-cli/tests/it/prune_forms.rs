//! `kpack prune` of every form device code comes in: a wheel and the artifact tarballs give
//! the files that pruning their unpacked trees gives, in a container of the same form
//! (a wheel with a matching RECORD, a tarball in the same compression), and the same
//! refusals, writing nothing.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{TARBALLS, WHEEL, json, kpack, kpack_ok, s, unpacked};
use kpack_testkit::{fixture, snapshot};

/// Every file `kpack unbundle` writes for `input` (`--target` each of `targets`), by name.
fn unbundled(input: &Path, targets: &[&str]) -> BTreeMap<String, Vec<u8>> {
    let out = tempfile::tempdir().unwrap();
    let mut args = vec!["unbundle", "-o", s(out.path()), s(input)];
    for t in targets {
        args.extend(["--target", t]);
    }
    common::kpack_ok(&args);
    std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Asserts that `a` and `b` hold the same code objects, naming the differing ones.
fn assert_same_objects(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>, what: &str) {
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(a), names(b), "{what}");
    for (name, bytes) in a {
        assert!(bytes == &b[name], "{what}: {name} differs");
    }
    assert!(!a.is_empty(), "{what}: no code objects");
}

/// The files of `tree` (path, content), RECORD excepted.
fn files_but_record(tree: &Path) -> Vec<(String, Vec<u8>)> {
    snapshot(tree)
        .into_iter()
        .filter(|(p, _, c)| !p.ends_with(".dist-info/RECORD") && !c.is_empty())
        .map(|(p, _, c)| (p, c))
        .collect()
}

/// Checks the wheel as pip does: every file listed in RECORD with its SHA-256 and size,
/// and nothing else listed.
fn assert_record_matches(wheel: &Path) {
    let files = kpack_wheelfile::reader::read_zip(
        wheel,
        std::fs::File::open(wheel).unwrap(),
        &kpack_wheelfile::Limits::default(),
        None,
    )
    .unwrap();
    let record = files
        .iter()
        .find(|f| f.path.ends_with(".dist-info/RECORD"))
        .expect("a RECORD");
    let text = {
        let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
        let mut entry = zip.by_name(&record.path).unwrap();
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut text).unwrap();
        text
    };
    let rows = kpack_wheelfile::metadata::parse_record(&text).unwrap();
    let listed: BTreeMap<&str, (&str, Option<u64>)> = rows
        .iter()
        .map(|r| (r.path.as_str(), (r.hash.as_str(), r.size)))
        .collect();
    assert_eq!(listed.len(), files.len(), "{listed:?}");
    for f in &files {
        let (hash, size) = listed[f.path.as_str()];
        if f.path == record.path {
            assert_eq!((hash, size), ("", None));
        } else {
            let expected = kpack_wheelfile::metadata::record_hash(&f.sha256);
            assert_eq!(
                (hash, size),
                (expected.as_str(), Some(f.size)),
                "{}",
                f.path
            );
        }
    }
}

#[test]
fn a_pruned_wheel_holds_what_its_unpacked_tree_prunes_to_with_a_matching_record() {
    let tmp = tempfile::tempdir().unwrap();
    let wheel = fixture(WHEEL);
    let out = tmp.path().join("pruned.whl");
    let keep = ["--keep", "gfx900", "gfx1100"];
    let mut args = vec!["prune", s(&wheel), "-o", s(&out), "--json"];
    args.extend(keep);
    let report = json(&args);
    // Per member: what was pruned, copied and left out, named inside the containers.
    let actions: BTreeMap<String, (String, String)> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let input = f["input"].as_str().unwrap();
            let member = input.split_once(".whl!").unwrap().1.to_owned();
            let output = f["output"].as_str().unwrap_or("-").to_owned();
            (member, (f["action"].as_str().unwrap().to_owned(), output))
        })
        .collect();
    let lib = "kpack_demo/lib/libone.so";
    assert_eq!(
        actions[lib],
        ("pruned".into(), format!("{}!{lib}", s(&out)))
    );
    assert_eq!(
        actions["kpack_demo/lib/rocblas/library/TensileLibrary_gfx1030.co"],
        ("omitted".into(), "-".into())
    );
    assert_eq!(actions["kpack_demo/__init__.py"].0, "copied");
    assert_eq!(
        report["kept"],
        serde_json::json!(["gfx1100", "gfx900"]),
        "{report}"
    );

    // The same files as the prune of the unpacked wheel, byte for byte.
    let tree = unpacked(&wheel);
    let pruned_tree = tmp.path().join("tree");
    let mut args = vec!["prune", s(tree.path()), "-o", s(&pruned_tree)];
    args.extend(keep);
    common::kpack_ok(&args);
    let ours = unpacked(&out);
    assert_eq!(
        files_but_record(ours.path()),
        files_but_record(&pruned_tree)
    );
    assert_record_matches(&out);

    // The kept code objects are the original's; the dropped ones are gone. (The aotriton
    // database file under `amd-gfx110x/` stays with its family.)
    let kept = unbundled(&out, &[]);
    assert_same_objects(
        &kept,
        &unbundled(&pruned_tree, &[]),
        "against the pruned tree",
    );
    let binaries = |m: BTreeMap<String, Vec<u8>>| -> BTreeMap<_, _> {
        m.into_iter()
            .filter(|(n, _)| !n.starts_with("attn_fwd."))
            .collect()
    };
    let original = binaries(unbundled(&wheel, &["gfx900", "gfx1100"]));
    assert_same_objects(&binaries(kept), &original, "against the original's");

    // Deterministic.
    let again = tmp.path().join("again.whl");
    let mut args = vec!["prune", s(&wheel), "-o", s(&again)];
    args.extend(keep);
    common::kpack_ok(&args);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&out).unwrap());
}

/// `forms.tar.zst` decompressed: the plain `.tar` of the same tree.
fn plain_tar(dir: &Path) -> std::path::PathBuf {
    let tar = dir.join("forms.tar");
    let zst = fixture("tarballs/forms.tar.zst");
    kpack_testkit::run_tool("zstd", &["-q", "-d", s(&zst), "-o", s(&tar)]);
    tar
}

#[test]
fn a_pruned_tarball_is_its_unpacked_tree_pruned_in_the_same_compression() {
    let tmp = tempfile::tempdir().unwrap();
    let mut tarballs: Vec<_> = TARBALLS.iter().map(|t| fixture(t)).collect();
    tarballs.push(plain_tar(tmp.path()));
    let keep = ["--keep", "gfx90a", "gfx1030"];
    for tarball in &tarballs {
        let name = tarball.file_name().unwrap().to_str().unwrap();
        let out = tmp.path().join(format!("pruned-{name}"));
        let mut args = vec!["prune", s(tarball), "-o", s(&out), "--json"];
        args.extend(keep);
        let report = json(&args);
        let pruned: Vec<&str> = report["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["action"] == "pruned")
            .map(|f| f["input"].as_str().unwrap())
            .collect();
        let expected = [
            "lib/libmk_rdc.a",
            "lib/libone.so",
            "share/offload/mk.offload",
        ]
        .map(|m| format!("{}!{m}", s(tarball)));
        assert_eq!(pruned, expected, "{name}");

        let head = |p: &Path| std::fs::read(p).unwrap()[..8].to_vec();
        assert_eq!(
            kpack_tar::Compression::sniff(&head(&out)),
            kpack_tar::Compression::sniff(&head(tarball)),
            "{name}"
        );
        let tree = unpacked(tarball);
        let pruned_tree = tmp.path().join(format!("tree-{name}"));
        let mut args = vec!["prune", s(tree.path()), "-o", s(&pruned_tree)];
        args.extend(keep);
        common::kpack_ok(&args);
        let ours = unpacked(&out);
        assert_eq!(snapshot(ours.path()), snapshot(&pruned_tree), "{name}");
        // libone.so's code objects are the kept targets' own (the static library's members
        // are checked by the static-library test).
        let libone = |m: BTreeMap<String, Vec<u8>>| -> BTreeMap<_, _> {
            m.into_iter()
                .filter(|(n, _)| n.starts_with("libone.so."))
                .collect()
        };
        let kept = libone(unbundled(&out, &[]));
        let original = libone(unbundled(tarball, &["gfx90a", "gfx1030"]));
        assert_same_objects(&kept, &original, name);

        let again = tmp.path().join(format!("again-{name}"));
        let mut args = vec!["prune", s(tarball), "-o", s(&again)];
        args.extend(keep);
        common::kpack_ok(&args);
        assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&out).unwrap());
    }
}

/// Runs `kpack prune`, which must fail with exit status 1 and a message containing every
/// one of `needles`, leaving nothing in `out`'s directory.
fn refused(args: &[&str], needles: &[&str], out: &Path) {
    let o = kpack(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
    }
    let dir = out.parent().unwrap();
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
    assert!(left.is_empty(), "{args:?} left {left:?}");
}

#[test]
fn prune_of_a_container_refuses_absent_targets_and_empty_results_writing_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let wheel = fixture(WHEEL);
    let tarball = fixture(TARBALLS[0]);
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let whl = out_dir.join("pruned.whl");
    let tar = out_dir.join("pruned.tar.zst");
    refused(
        &["prune", s(&wheel), "-o", s(&whl), "--keep", "gfx1201"],
        &["gfx1201 matches no code object", "gfx90a:xnack+"],
        &whl,
    );
    // libone.so holds no gfx1100 code.
    refused(
        &["prune", s(&wheel), "-o", s(&whl), "--keep", "gfx1100"],
        &[
            "!kpack_demo/lib/libone.so",
            "removes every device target",
            "--allow-empty",
        ],
        &whl,
    );
    refused(
        &[
            "prune",
            s(&tarball),
            "-o",
            s(&tar),
            "--drop",
            "gfx900",
            "gfx906",
            "gfx908",
            "gfx90a",
            "gfx1030",
        ],
        // The first member with device code, in tar order, is the one named.
        &["lib/libmk_rdc.a", "removes every device target"],
        &tar,
    );
    let half = tmp.path().join("half.tar.zst");
    let bytes = std::fs::read(&tarball).unwrap();
    std::fs::write(&half, &bytes[..bytes.len() / 2]).unwrap();
    refused(
        &["prune", s(&half), "-o", s(&tar), "--keep", "gfx90a"],
        &["half.tar.zst"],
        &tar,
    );
    // With --allow-empty, the binary keeps its host code only.
    let report = json(&[
        "prune",
        s(&wheel),
        "-o",
        s(&whl),
        "--keep",
        "gfx1100",
        "--allow-empty",
        "--json",
    ]);
    let exe = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["input"]
                .as_str()
                .unwrap()
                .ends_with("!kpack_demo/lib/libone.so")
        })
        .unwrap();
    assert_eq!(exe["kept"], serde_json::json!([]));
    assert_record_matches(&whl);
}

#[test]
fn pruned_offload_binaries_hold_exactly_the_kept_images_as_llvm_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    for (rel, selection, kept, dropped) in [
        (
            "offload/mk.offload",
            &["--keep", "gfx900", "gfx90a"][..],
            &["gfx900", "gfx90a:xnack+"][..],
            &["gfx1030"][..],
        ),
        (
            "offload/mk_embedded.o",
            &["--drop", "gfx1030"][..],
            &["gfx900", "gfx90a:xnack+"][..],
            &["gfx1030"][..],
        ),
        (
            "offload/mk_rdc.o",
            &["--keep", "gfx1030"][..],
            &["gfx1030"][..],
            &["gfx900"][..],
        ),
    ] {
        let input = fixture(rel);
        let out = tmp.path().join(input.file_name().unwrap());
        let mut args = vec!["prune", s(&input), "-o", s(&out), "--json"];
        args.extend(selection);
        let report = json(&args);
        assert_eq!(report["kept"], serde_json::json!(kept), "{rel}");
        assert_eq!(report["dropped"], serde_json::json!(dropped), "{rel}");
        // LLVM's witnesses: the kept images, in order, and each byte for byte the original's.
        let before = common::objdump_images(&input);
        let after = common::objdump_images(&out);
        let expected: Vec<_> = before
            .iter()
            .filter(|i| !dropped.contains(&i[2].as_str()))
            .cloned()
            .collect();
        assert_eq!(after, expected, "{rel}");
        for arch in kept {
            assert_eq!(
                common::llvm_extracts(&out, arch, None),
                common::llvm_extracts(&input, arch, None),
                "{rel} {arch}"
            );
        }
        let size = |p: &Path| std::fs::metadata(p).unwrap().len();
        assert!(size(&out) < size(&input), "{rel} did not shrink");
        // An object stays a valid relocatable object: every section but the pruned one is
        // the original's, byte for byte.
        if rel.ends_with(".o") {
            assert_sections_kept(&input, &out);
        }
    }
}

/// Every section of the object `pruned` but `.llvm.offloading` holds the bytes it held in
/// `original`, at its alignment.
fn assert_sections_kept(original: &Path, pruned: &Path) {
    use object::{Object, ObjectSection};
    let (a, b) = (
        std::fs::read(original).unwrap(),
        std::fs::read(pruned).unwrap(),
    );
    let (a, b) = (
        object::File::parse(&*a).unwrap(),
        object::File::parse(&*b).unwrap(),
    );
    let sections = |f: &object::File<'_>| -> Vec<(String, Vec<u8>)> {
        f.sections()
            .filter(|s| s.name().unwrap() != ".llvm.offloading")
            .map(|s| {
                if let Some((offset, _)) = s.file_range() {
                    assert_eq!(offset % s.align().max(1), 0, "{:?}", s.name());
                }
                (s.name().unwrap().to_owned(), s.data().unwrap().to_vec())
            })
            .collect()
    };
    assert_eq!(sections(&a), sections(&b), "{}", pruned.display());
    let offloading = |f: &object::File<'_>| f.section_by_name(".llvm.offloading").unwrap().size();
    assert!(offloading(&b) < offloading(&a));
}

#[test]
#[ignore = "real-world"]
fn corpus_wheels_prune_as_their_unpacked_trees_with_a_matching_record() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, version) in [("jax_rocm7_plugin", "0.12.0"), ("cupy_rocm_7_0", "14.2.0")] {
        let wheel = kpack_testkit::corpus_wheel(name, version);
        let out = tmp.path().join(format!("{name}.whl"));
        let keep = ["--keep", "gfx90a", "gfx1100"];
        let mut args = vec!["prune", s(&wheel), "-o", s(&out)];
        args.extend(keep);
        common::kpack_ok(&args);
        assert_record_matches(&out);
        let tree = unpacked(&wheel);
        let pruned_tree = tmp.path().join(format!("{name}-tree"));
        let mut args = vec!["prune", s(tree.path()), "-o", s(&pruned_tree)];
        args.extend(keep);
        common::kpack_ok(&args);
        let ours = unpacked(&out);
        let digests = |root: &Path| -> Vec<(String, Vec<u8>)> {
            kpack_testkit::snapshot_digests(root)
                .into_iter()
                .filter(|(p, _, c)| !p.ends_with(".dist-info/RECORD") && !c.is_empty())
                .map(|(p, _, c)| (p, c))
                .collect()
        };
        assert_eq!(digests(ours.path()), digests(&pruned_tree), "{name}");
        let size = |p: &Path| std::fs::metadata(p).unwrap().len();
        assert!(size(&out) < size(&wheel), "{name} did not shrink");
    }
}

/// Runs `ar x` (GNU) on `archive` in a new directory of `tmp` named `dir`: the members by name.
fn extracted(archive: &Path, tmp: &Path, dir: &str) -> BTreeMap<String, std::path::PathBuf> {
    let into = tmp.join(dir);
    std::fs::create_dir(&into).unwrap();
    let copy = into.join("lib.a");
    std::fs::copy(archive, &copy).unwrap();
    let status = std::process::Command::new("ar")
        .current_dir(&into)
        .args(["x", "lib.a"])
        .status()
        .expect("ar (binutils) is installed by scripts/setup.sh");
    assert!(status.success());
    std::fs::remove_file(&copy).unwrap();
    std::fs::read_dir(&into)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), e.path())
        })
        .collect()
}

#[test]
fn a_pruned_static_library_is_each_member_pruned_alone_with_a_symbol_table_llvm_and_gnu_read() {
    let tmp = tempfile::tempdir().unwrap();
    let input = fixture("offload/libmk_rdc.a");
    let out = tmp.path().join("libmk_rdc.a");
    let report = json(&[
        "prune",
        s(&input),
        "-o",
        s(&out),
        "--keep",
        "gfx900",
        "--json",
    ]);
    assert_eq!(report["kept"], serde_json::json!(["gfx900"]));
    assert_eq!(report["dropped"], serde_json::json!(["gfx1030"]));
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert!(size(&out) < size(&input));
    // Same members in the same order, and the same symbols, each resolved through the
    // regenerated offsets to the same member, as LLVM 22 and GNU binutils read them.
    let llvm = |tool: &str, args: &[&str], p: &Path| {
        let mut full = args.to_vec();
        full.push(s(p));
        String::from_utf8(kpack_testkit::run_llvm22(tool, &full)).unwrap()
    };
    assert_eq!(
        llvm("llvm-ar", &["t"], &out),
        llvm("llvm-ar", &["t"], &input)
    );
    let armap = |p: &Path| {
        let text = llvm("llvm-nm", &["--print-armap"], p);
        text.split("\n\n").next().unwrap().to_owned()
    };
    assert!(armap(&input).contains("modern_add_one in mk_rdc.o"));
    assert_eq!(armap(&out), armap(&input));
    let gnu = |args: &[&str], p: &Path| {
        let mut full = args.to_vec();
        full.push(s(p));
        String::from_utf8(kpack_testkit::run_tool(args[0], &full[1..])).unwrap()
    };
    assert_eq!(gnu(&["ar", "t"], &out), gnu(&["ar", "t"], &input));
    let gnu_map = |p: &Path| {
        gnu(&["nm", "-s"], p)
            .split("\n\n")
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(gnu_map(&out), gnu_map(&input));
    // Each member is what pruning it alone gives, byte for byte, and holds the kept images.
    let before = extracted(&input, tmp.path(), "before");
    let after = extracted(&out, tmp.path(), "after");
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (name, original) in &before {
        let alone = tmp.path().join(format!("alone-{name}"));
        common::kpack_ok(&["prune", s(original), "-o", s(&alone), "--keep", "gfx900"]);
        assert!(
            std::fs::read(&alone).unwrap() == std::fs::read(&after[name]).unwrap(),
            "{name} differs from its prune alone"
        );
        let expected: Vec<_> = common::objdump_images(original)
            .into_iter()
            .filter(|i| i[2] == "gfx900")
            .collect();
        assert!(!expected.is_empty());
        assert_eq!(common::objdump_images(&after[name]), expected, "{name}");
    }
    // Inside a directory, the library prunes to the same bytes; the output is deterministic.
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    std::fs::copy(&input, tree.join("lib/libmk_rdc.a")).unwrap();
    let tree_out = tmp.path().join("tree-out");
    common::kpack_ok(&["prune", s(&tree), "-o", s(&tree_out), "--keep", "gfx900"]);
    assert!(
        std::fs::read(tree_out.join("lib/libmk_rdc.a")).unwrap() == std::fs::read(&out).unwrap()
    );
    // Refusals write nothing.
    let out_dir = tmp.path().join("refused");
    std::fs::create_dir(&out_dir).unwrap();
    let refused_out = out_dir.join("lib.a");
    refused(
        &[
            "prune",
            s(&input),
            "-o",
            s(&refused_out),
            "--keep",
            "gfx1201",
        ],
        &["gfx1201 matches no code object"],
        &refused_out,
    );
    refused(
        &[
            "prune",
            s(&input),
            "-o",
            s(&refused_out),
            "--drop",
            "gfx900",
            "gfx1030",
        ],
        &["libmk_rdc.a", "removes every device target"],
        &refused_out,
    );
}

#[test]
fn prune_and_inspect_of_a_wheel_check_its_record_as_split_wheel_does() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "kpack_demo-1.0-py3-none-linux_x86_64.whl";
    // Empty hash fields are accepted; the pruned wheel lists every member's SHA-256.
    let unhashed = tmp.path().join("unhashed").join(name);
    std::fs::create_dir(unhashed.parent().unwrap()).unwrap();
    kpack_testkit::rezip_wheel(&fixture(WHEEL), &unhashed, &[], |member, data| {
        if member.ends_with(".dist-info/RECORD") {
            *data = kpack_testkit::unhashed_record(data, |p| p.ends_with(".py"));
        }
    });
    let out = tmp.path().join("pruned.whl");
    kpack_ok(&[
        "prune",
        s(&unhashed),
        "-o",
        s(&out),
        "--keep",
        "gfx900",
        "gfx1100",
    ]);
    assert_record_matches(&out);
    kpack_ok(&["inspect", s(&unhashed)]);

    // A hash present and wrong is refused, naming the member, and nothing is written.
    let wrong = tmp.path().join("wrong").join(name);
    std::fs::create_dir(wrong.parent().unwrap()).unwrap();
    kpack_testkit::rezip_wheel(&fixture(WHEEL), &wrong, &[], |member, data| {
        if member == "kpack_demo/version.py" {
            *data = b"__version__ = '6.6'\n".to_vec();
        }
    });
    let dir = tmp.path().join("refused");
    std::fs::create_dir(&dir).unwrap();
    let out = dir.join("pruned.whl");
    let needles = [
        s(&wrong),
        "kpack_demo/version.py",
        "does not match its sha256 hash",
    ];
    refused(
        &[
            "prune",
            s(&wrong),
            "-o",
            s(&out),
            "--keep",
            "gfx900",
            "gfx1100",
        ],
        &needles,
        &out,
    );
    let o = kpack(&["inspect", s(&wrong)]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout) + String::from_utf8_lossy(&o.stderr);
    assert!(needles.iter().all(|n| text.contains(n)), "{text}");
}
