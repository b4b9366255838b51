//! Atomic writes, staged jobs, the sweep of killed runs' temporaries, and the sorted walk.

use std::path::Path;
use std::process::Command;

use kpack_fs::{
    NameProblem, NameRules, OutputNames, Replace, Stage, TEMP_PREFIX, slash_path, sweep, walk,
    write_atomic,
};

/// A command that exits at once: `true`, or on Windows `cmd /c exit`.
fn exiting() -> Command {
    if cfg!(windows) {
        let mut c = Command::new("cmd");
        c.args(["/c", "exit"]);
        c
    } else {
        Command::new("true")
    }
}

/// A process that runs until it is killed: it waits for a line on its stdin, which is a
/// pipe nobody writes to (`cat`, or on Windows `cmd /c set /p`).
fn waiting() -> std::process::Child {
    let mut c = if cfg!(windows) {
        let mut c = Command::new("cmd");
        c.args(["/c", "set /p line="]);
        c
    } else {
        Command::new("cat")
    };
    c.stdin(std::process::Stdio::piped())
        .spawn()
        .expect("the waiting child runs")
}

/// The id of a process that has exited (and been reaped).
fn dead_pid() -> u32 {
    let mut child = exiting().spawn().expect("the exiting child runs");
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
    // Readable by others as a file made with the umask, not tempfile's private 0600. Unix
    // only: Windows files have no mode bits (their ACL is the directory's).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_ne!(mode & 0o044, 0, "mode {mode:o}");
    }
}

#[test]
fn sweep_removes_dead_runs_temporaries_old_names_included_and_keeps_live_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let dead = dead_pid();
    let mut live = waiting();
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
    // wine 8 (where the Windows tests run) reports CreateSymbolicLinkW done but makes no
    // link: the symlink is Unix's.
    #[cfg(unix)]
    kpack_fs::symlink(Path::new("b"), &d.join("link")).unwrap();
    let entries: Vec<(String, bool)> = walk(d)
        .map(|e| e.unwrap())
        .map(|e| {
            (
                kpack_fs::slash_path(&e.rel).unwrap(),
                e.file_type.is_symlink(),
            )
        })
        .collect();
    let mut expected = vec![
        ("a".to_owned(), false),
        ("b".to_owned(), false),
        ("b/z".to_owned(), false),
        ("b.c".to_owned(), false),
    ];
    if cfg!(unix) {
        expected.push(("link".to_owned(), true));
    }
    assert_eq!(entries, expected);
    let missing = d.join("missing");
    let errors: Vec<_> = walk(&missing).collect();
    assert_eq!(errors.len(), 1);
    let err = errors.into_iter().next().unwrap().unwrap_err();
    assert_eq!(err.path, missing);
    assert_eq!(err.source.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_positioned_read_leaves_the_writers_position_where_it_was() {
    use std::io::{Seek, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut file = tempfile::tempfile_in(dir.path()).unwrap();
    file.write_all(b"0123456789").unwrap();
    let mut buf = [0u8; 4];
    kpack_fs::read_exact_at(&file, &mut buf, 3).unwrap();
    assert_eq!(&buf, b"3456");
    assert_eq!(file.stream_position().unwrap(), 10);
    file.write_all(b"ab").unwrap();
    let mut all = [0u8; 12];
    kpack_fs::read_exact_at(&file, &mut all, 0).unwrap();
    assert_eq!(&all, b"0123456789ab");
    let err = kpack_fs::read_exact_at(&file, &mut buf, 10).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    assert_eq!(file.stream_position().unwrap(), 12);
}

/// Set in a child run of the test below: the directory its job writes into.
const KILLED_CHILD_DIR: &str = "KPACK_FS_TEST_KILLED_CHILD_DIR";

/// Whether a child's status is that of a run `kpack_fs::fault_point` killed: `SIGKILL` on
/// Unix, `TerminateProcess` with 137 on Windows.
fn killed(status: std::process::ExitStatus) -> bool {
    #[cfg(unix)]
    return std::os::unix::process::ExitStatusExt::signal(&status) == Some(9);
    #[cfg(windows)]
    return status.code() == Some(137);
}

#[test]
fn a_killed_run_leaves_nothing_partial_at_a_final_path_and_the_next_sweep_finishes_its_job() {
    if let Some(dir) = std::env::var_os(KILLED_CHILD_DIR) {
        // The child: one file written atomically, then a job of two outputs; the fault point
        // named by the parent kills it on the way.
        let dir = Path::new(&dir);
        write_atomic(
            &dir.join("one.kpack"),
            |f| std::io::Write::write_all(f, b"one"),
            |_, e| e,
        )
        .unwrap();
        let mut stage = Stage::new();
        for name in ["a.kpack", "b.kpack"] {
            let staged = stage.add(&dir.join(name), Replace::Allowed).unwrap();
            std::fs::write(staged, name).unwrap();
        }
        stage.publish().unwrap();
        return;
    }
    let run_killed_at = |point: &str| {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_killed_run_leaves_nothing_partial_at_a_final_path_and_the_next_sweep_finishes_its_job",
                "--test-threads=1",
            ])
            .env(KILLED_CHILD_DIR, dir.path())
            .env(kpack_fs::FAULT_ENV, point)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(killed(status), "{point}: {status}");
        dir
    };
    // Killed with the temporary file written: nothing at the final path.
    let dir = run_killed_at("atomic-written");
    let left = names(dir.path());
    assert!(
        left.len() == 1 && left[0].starts_with(TEMP_PREFIX),
        "{left:?}"
    );
    assert_eq!(sweep(dir.path()).unwrap().len(), 1);
    assert!(names(dir.path()).is_empty());
    // Killed with every output staged: nothing at the final paths but the earlier file.
    let dir = run_killed_at("before-publish");
    assert_eq!(sweep(dir.path()).unwrap().len(), 1);
    assert_eq!(names(dir.path()), ["one.kpack"]);
    // Killed after the first of two renames: the sweep completes the job from its journal.
    let dir = run_killed_at("publish-partial");
    assert_eq!(sweep(dir.path()).unwrap().len(), 1);
    assert_eq!(names(dir.path()), ["a.kpack", "b.kpack", "one.kpack"]);
    assert_eq!(
        std::fs::read(dir.path().join("b.kpack")).unwrap(),
        b"b.kpack"
    );
}

/// `tempfile` appends the name it tried in Rust's debug quoting (`… at path "…"`): kpack's
/// temporaries fail with the cause alone, and its kind, for the caller to name the path.
#[test]
fn a_temporary_in_a_missing_directory_fails_with_the_cause_alone() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let errors = [
        kpack_fs::temp_file_beside(&missing.join("out.bin")).unwrap_err(),
        kpack_fs::temp_dir_in(&missing).unwrap_err(),
    ];
    for e in errors {
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
        let text = e.to_string();
        assert!(
            !text.contains(" at path") && !text.contains('"') && !text.contains(TEMP_PREFIX),
            "{text}"
        );
    }
}

/// The rules for an output meant for Windows (on every system).
fn for_windows() -> OutputNames {
    OutputNames::new(Path::new("out/wheels"), NameRules::for_output(true))
}

#[test]
fn names_windows_cannot_hold_are_refused_naming_the_output_and_the_member() {
    let cases = [
        ("lib/CON.so", "device CON"),
        ("share/aux.txt", "device AUX"),
        ("pkg/Nul.py", "device NUL"),
        ("lib/hip_gfx942:xnack+.kpack", "character :"),
        ("bin/tab\tname", "character \\t"),
        ("share/readme.", "ends in a dot or a space"),
        ("share/trailing /x", "ends in a dot or a space"),
    ];
    for (member, says) in cases {
        let e = for_windows().check(member).unwrap_err();
        assert_eq!(e.member, member);
        let message = e.to_string();
        assert!(
            message.starts_with(&format!("{}: member ", Path::new("out/wheels").display()))
                && message.contains(says),
            "{member}: {message}"
        );
        assert_no_debug_quoting(&message);
    }
    for fine in [
        "lib/console.so",
        "lib/com10",
        "lib/hip_gfx942@xnack+.kpack",
        "a.b/c",
    ] {
        for_windows().check(fine).unwrap();
    }
}

/// A message names things plainly: no Rust debug quoting.
fn assert_no_debug_quoting(message: &str) {
    assert!(
        !message.contains('"') && !message.contains("Some("),
        "{message}"
    );
}

#[test]
fn members_differing_only_in_case_collide_files_and_directories_alike() {
    let mut names = for_windows();
    names
        .check_all(["lib/Foo.kpack", "lib/bar", "lib/Foo.kpack"])
        .unwrap();
    let e = names.check("lib/foo.kpack").unwrap_err();
    assert_eq!(
        e.problem,
        NameProblem::CaseCollision {
            other: "lib/Foo.kpack".into()
        }
    );
    assert!(
        e.to_string()
            .contains("member lib/foo.kpack differs only in case from lib/Foo.kpack")
    );
    // A directory spelled another way merges with the first on Windows.
    let e = names.check("LIB/baz").unwrap_err();
    assert_eq!(
        e.problem,
        NameProblem::CaseCollision {
            other: "lib".into()
        }
    );
}

#[test]
fn only_outputs_meant_for_windows_are_checked_and_on_windows_every_output_is() {
    assert!(NameRules::for_output(true).windows());
    assert_eq!(NameRules::for_output(false).windows(), cfg!(windows));
    let native = OutputNames::new(Path::new("out"), NameRules::for_output(false)).check("CON");
    assert_eq!(native.is_err(), cfg!(windows));
}

#[test]
fn a_stage_publishes_into_a_directory_nested_past_260_characters() {
    let tmp = tempfile::tempdir().unwrap();
    let mut deep = tmp.path().to_owned();
    while deep.as_os_str().len() <= 300 {
        deep.push("a-directory-of-a-long-windows-build-tree");
    }
    std::fs::create_dir_all(&deep).unwrap();
    let out = deep.join("out");
    let mut stage = Stage::new();
    let staged = stage.add_tree(&out, |_| false).unwrap();
    std::fs::create_dir_all(staged.join("lib/.kpack")).unwrap();
    std::fs::write(staged.join("lib/.kpack/x_gfx90a.kpack"), b"archive").unwrap();
    stage.publish().unwrap();
    let one = deep.join("one.kpack");
    write_atomic(&one, |f| std::io::Write::write_all(f, b"one"), |_, e| e).unwrap();
    assert!(out.join("lib/.kpack/x_gfx90a.kpack").as_os_str().len() > 260);
    assert_eq!(
        std::fs::read(out.join("lib/.kpack/x_gfx90a.kpack")).unwrap(),
        b"archive"
    );
    assert_eq!(std::fs::read(&one).unwrap(), b"one");
    assert_eq!(names(&deep), ["one.kpack", "out"]);
    let walked: Vec<_> = walk(&out).map(|e| slash_path(&e.unwrap().rel)).collect();
    assert_eq!(
        walked,
        [
            Some("lib".to_owned()),
            Some("lib/.kpack".to_owned()),
            Some("lib/.kpack/x_gfx90a.kpack".to_owned())
        ]
    );
}

/// A file name that is not valid Unicode: bytes that are not UTF-8 on Unix, an unpaired
/// UTF-16 surrogate on Windows.
fn not_unicode(stem_end: &str) -> std::ffi::OsString {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        let mut bytes = b"\xff".to_vec();
        bytes.extend_from_slice(stem_end.as_bytes());
        std::ffi::OsString::from_vec(bytes)
    }
    #[cfg(windows)]
    {
        use std::os::windows::ffi::OsStringExt;
        let mut units = vec![0xD800u16];
        units.extend(stem_end.encode_utf16());
        std::ffi::OsString::from_wide(&units)
    }
}

#[test]
fn a_name_that_is_not_unicode_has_no_member_name_is_shown_lossily_and_is_walked() {
    let rel = Path::new("lib").join(not_unicode(".so"));
    assert_eq!(slash_path(&rel), None);
    let shown = rel.display().to_string();
    assert!(shown.ends_with("\u{FFFD}.so"), "{shown}");
    // The walk reports such an entry, neither failing nor skipping it. Unix only: wine 8
    // cannot create a name holding an unpaired surrogate (its files live on a Unix file
    // system of UTF-8 names; CreateFileW says the path is not found).
    #[cfg(unix)]
    {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("lib")).unwrap();
        std::fs::write(tmp.path().join(&rel), b"x").unwrap();
        let entries: Vec<_> = walk(tmp.path()).map(Result::unwrap).collect();
        let rels: Vec<Option<String>> = entries.iter().map(|e| slash_path(&e.rel)).collect();
        assert_eq!(rels, [Some("lib".to_owned()), None]);
        assert_eq!(entries[1].rel, rel);
    }
}

#[test]
fn a_tree_holding_read_only_files_is_removed_whole() {
    // Windows (and wine) refuse to delete a read-only file, which a member whose mode lacks
    // the write bit becomes; a tarball split removes such staged trees once packed.
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    for file in ["a", "sub/b"] {
        std::fs::write(tree.join(file), b"x").unwrap();
        kpack_fs::set_mode(&tree.join(file), 0o444).unwrap();
    }
    kpack_fs::remove_tree(&tree).unwrap();
    assert!(!tree.exists());
}
