//! Atomic writes, staged jobs, the sweep of killed runs' temporaries, and the sorted walk.

use std::path::Path;
use std::process::Command;

use kpack_fs::{Replace, Stage, TEMP_PREFIX, sweep, walk, write_atomic};

/// The id of a process that has exited (and been reaped).
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("true runs");
    let pid = child.id();
    child.wait().unwrap();
    pid
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn failed_atomic_write_keeps_the_old_file_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.kpack");
    std::fs::write(&path, b"old").unwrap();
    let r: Result<(), String> = write_atomic(
        &path,
        |f| {
            std::io::Write::write_all(f, b"half").unwrap();
            Err("fill failed".to_owned())
        },
        |p, e| format!("{}: {e}", p.display()),
    );
    assert_eq!(r.unwrap_err(), "fill failed");
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
    assert_eq!(names(dir.path()), ["out.kpack"]);

    write_atomic(&path, |f| std::io::Write::write_all(f, b"new"), |_, e| e).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    assert_eq!(names(dir.path()), ["out.kpack"]);
    // Readable by others as a file made with the umask, not tempfile's private 0600.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_ne!(mode & 0o044, 0, "mode {mode:o}");
}

#[test]
fn sweep_removes_dead_runs_temporaries_old_names_included_and_keeps_live_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let dead = dead_pid();
    let mut live = Command::new("sleep").arg("60").spawn().unwrap();
    let dead_dir = d.join(format!("{TEMP_PREFIX}{dead}-abc"));
    std::fs::create_dir_all(dead_dir.join("C_generic/lib")).unwrap();
    std::fs::write(dead_dir.join("C_generic/lib/x"), b"x").unwrap();
    let dead_file = d.join(format!("{TEMP_PREFIX}{dead}-def"));
    std::fs::write(&dead_file, b"partial").unwrap();
    let live_dir = d.join(format!("{TEMP_PREFIX}{}-ghi", live.id()));
    std::fs::create_dir(&live_dir).unwrap();
    let own = d.join(format!("{TEMP_PREFIX}{}-jkl", std::process::id()));
    std::fs::write(&own, b"mine").unwrap();
    // What earlier kpack versions left, with the same owner rule.
    let legacy = [
        format!(".out.kpack-split-tmp-{dead}-0"),
        format!(".kpack-recombine-tmp-{dead}-3"),
        format!(".libtwo.so.kpack-tmp-{dead}"),
    ];
    for l in &legacy {
        std::fs::create_dir(d.join(l)).unwrap();
    }
    for other in [
        ".kpack",
        ".kpack-tmp-notapid-x",
        "C_generic",
        ".hidden",
        "a.kpack-split-tmp-1-2",
    ] {
        std::fs::create_dir(d.join(other)).unwrap();
    }

    let removed = sweep(d).unwrap();
    let mut expected = vec![dead_dir, dead_file];
    expected.extend(legacy.iter().map(|l| d.join(l)));
    expected.sort();
    assert_eq!(removed, expected);
    let mut kept = vec![
        "a.kpack-split-tmp-1-2".to_owned(),
        ".hidden".to_owned(),
        ".kpack".to_owned(),
        format!("{TEMP_PREFIX}{}-ghi", live.id()),
        format!("{TEMP_PREFIX}{}-jkl", std::process::id()),
        ".kpack-tmp-notapid-x".to_owned(),
        "C_generic".to_owned(),
    ];
    kept.sort();
    assert_eq!(names(d), kept);

    live.kill().unwrap();
    live.wait().unwrap();
    assert_eq!(sweep(d).unwrap(), [live_dir]);
    assert!(sweep(&d.join("missing")).unwrap().is_empty());
}

#[test]
fn unpublished_stage_leaves_nothing_and_published_stage_leaves_only_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, kp) = (dir.path().join("lib"), dir.path().join("lib/.kpack"));
    {
        let mut stage = Stage::new();
        let a = stage
            .add(&kp.join("m_gfx900.kpack"), Replace::Allowed)
            .unwrap();
        std::fs::write(a, b"archive").unwrap();
        let h = stage.add(&lib.join("libm.so"), Replace::Allowed).unwrap();
        std::fs::write(h, b"host").unwrap();
        assert!(!lib.join("libm.so").exists());
        // Dropped: an error or a panic in the job.
    }
    assert_eq!(names(&lib), [".kpack"]);
    assert!(names(&kp).is_empty());

    let mut stage = Stage::new();
    let a = stage
        .add(&kp.join("m_gfx900.kpack"), Replace::Allowed)
        .unwrap();
    std::fs::write(a, b"archive").unwrap();
    let h = stage.add(&lib.join("libm.so"), Replace::Allowed).unwrap();
    std::fs::write(h, b"host").unwrap();
    stage.publish().unwrap();
    assert_eq!(names(&lib), [".kpack", "libm.so"]);
    assert_eq!(names(&kp), ["m_gfx900.kpack"]);
}

#[test]
fn publishing_into_an_existing_directory_refuses_a_replacement_before_renaming_anything() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("B_generic")).unwrap();
    let mut stage = Stage::new();
    let root = stage.add_tree(&out, |_| false).unwrap();
    for a in ["A_generic", "B_generic"] {
        std::fs::create_dir(root.join(a)).unwrap();
        std::fs::write(root.join(a).join("f"), a).unwrap();
    }
    let err = stage.publish().unwrap_err();
    assert_eq!(err.path, out.join("B_generic"));
    assert_eq!(err.source.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(names(&out), ["B_generic"]);
    assert_eq!(names(dir.path()), ["out"]);
}

#[test]
fn a_new_output_tree_appears_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut stage = Stage::new();
    let root = stage.add_tree(&out, |_| false).unwrap();
    std::fs::create_dir(root.join("A_generic")).unwrap();
    assert!(!out.exists());
    stage.publish().unwrap();
    assert_eq!(names(&out), ["A_generic"]);
    assert_eq!(names(dir.path()), ["out"]);
}

#[test]
fn walk_is_sorted_by_file_name_with_directories_first_reached_and_reports_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for p in ["b/z", "b.c", "a"] {
        std::fs::create_dir_all(d.join(p).parent().unwrap()).unwrap();
        std::fs::write(d.join(p), b"").unwrap();
    }
    std::os::unix::fs::symlink("b", d.join("link")).unwrap();
    let entries: Vec<(String, bool)> = walk(d)
        .map(|e| e.unwrap())
        .map(|e| (e.rel.display().to_string(), e.file_type.is_symlink()))
        .collect();
    assert_eq!(
        entries,
        [
            ("a".to_owned(), false),
            ("b".to_owned(), false),
            ("b/z".to_owned(), false),
            ("b.c".to_owned(), false),
            ("link".to_owned(), true),
        ]
    );
    let missing = d.join("missing");
    let errors: Vec<_> = walk(&missing).collect();
    assert_eq!(errors.len(), 1);
    let err = errors.into_iter().next().unwrap().unwrap_err();
    assert_eq!(err.path, missing);
    assert_eq!(err.source.kind(), std::io::ErrorKind::NotFound);
}
