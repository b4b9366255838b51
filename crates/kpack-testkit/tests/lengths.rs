//! No non-test source file is over 800 lines (issue 35): a file that long no longer does one
//! job. Its twin for functions, 150 lines, is clippy's `too_many_lines`
//! (`too-many-lines-threshold` in `clippy.toml`, denied in the workspace's lints), which counts
//! the lines of a body that hold code, leaving out blank and comment-only lines.
//!
//! What counts: every `.rs` file under `crates/*/src/`, its lines counted as `wc -l` counts
//! them, less its test modules: a top-level inline `#[cfg(test)] mod … { … }` (from the
//! attribute to its closing `}` at the start of a line, as rustfmt writes it), and the file
//! (or directory) of a `#[cfg(test)] mod …;`. Integration tests, benches and fuzz targets are
//! not under `src/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most lines a non-test source file may have.
const MAX_FILE_LINES: usize = 800;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The name of the module a `#[cfg(test)]` line's next line declares, and whether it is
/// declared inline (`mod tests {`) rather than as a file (`mod tests;`).
fn test_module(next_line: &str) -> Option<(&str, bool)> {
    let rest = next_line
        .strip_prefix("pub(crate) ")
        .or_else(|| next_line.strip_prefix("pub(super) "))
        .or_else(|| next_line.strip_prefix("pub "))
        .unwrap_or(next_line)
        .strip_prefix("mod ")?;
    if let Some(name) = rest.strip_suffix(';') {
        Some((name, false))
    } else {
        Some((rest.strip_suffix(" {")?, true))
    }
}

/// The directory holding the files of `file`'s child modules.
fn module_dir(file: &Path) -> PathBuf {
    let name = file.file_name().unwrap().to_str().unwrap();
    if matches!(name, "lib.rs" | "main.rs" | "mod.rs") {
        file.parent().unwrap().to_owned()
    } else {
        file.with_extension("")
    }
}

/// `text`'s lines less its inline test modules, and the paths of its test modules' files
/// (`<dir>/<name>`, standing for `<name>.rs` and everything below `<name>/`).
fn count_lines(file: &Path, text: &str) -> (usize, Vec<PathBuf>) {
    let lines: Vec<&str> = text.lines().collect();
    let (mut count, mut test_files, mut i) = (0, Vec::new(), 0);
    while i < lines.len() {
        let declared = (lines[i] == "#[cfg(test)]")
            .then(|| lines.get(i + 1).and_then(|next| test_module(next)))
            .flatten();
        match declared {
            Some((_, true)) => {
                let close = lines[i..]
                    .iter()
                    .position(|l| *l == "}")
                    .unwrap_or_else(|| {
                        panic!(
                            "{}:{}: test module without a closing }}",
                            file.display(),
                            i + 1
                        )
                    });
                i += close + 1;
            }
            Some((name, false)) => {
                test_files.push(module_dir(file).join(name));
                count += 1;
                i += 1;
            }
            None => {
                count += 1;
                i += 1;
            }
        }
    }
    (count, test_files)
}

/// Per non-test source file of the workspace (path from the root), its lines as counted above.
fn non_test_lines(root: &Path) -> BTreeMap<String, usize> {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let mut counts = BTreeMap::new();
    let mut test_files = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let (count, tests) = count_lines(file, &text);
        test_files.extend(tests);
        counts.insert(file.clone(), count);
    }
    counts
        .into_iter()
        .filter(|(file, _)| {
            !test_files
                .iter()
                .any(|t| *file == t.with_extension("rs") || file.starts_with(t))
        })
        .map(|(file, count)| {
            let rel = file.strip_prefix(root).unwrap();
            (rel.to_str().unwrap().to_owned(), count)
        })
        .collect()
}

#[test]
fn no_source_file_is_over_800_lines() {
    let over: Vec<String> = non_test_lines(&workspace_root())
        .iter()
        .filter(|(_, n)| **n > MAX_FILE_LINES)
        .map(|(file, n)| format!("  {file}: {n} lines"))
        .collect();
    assert!(
        over.is_empty(),
        "non-test source files over {MAX_FILE_LINES} lines (split them along their seams):\n{}",
        over.join("\n")
    );
}

/// The counting itself: an inline test module is left out, a test module's file is not a
/// source file, and any other line counts.
#[test]
fn test_modules_do_not_count_and_everything_else_does() {
    let file = Path::new("crates/x/src/parser.rs");
    let text = "//! Doc.\n\nfn f() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
    assert_eq!(count_lines(file, text), (3, Vec::new()));
    let text = "fn f() {}\n#[cfg(test)]\nmod tests;\n";
    assert_eq!(
        count_lines(file, text),
        (3, vec![PathBuf::from("crates/x/src/parser/tests")])
    );
    let lib = Path::new("crates/x/src/lib.rs");
    assert_eq!(
        count_lines(lib, "#[cfg(test)]\npub(crate) mod fixtures;\n").1,
        vec![PathBuf::from("crates/x/src/fixtures")]
    );
    // A `#[cfg(test)]` item that is not a module counts.
    assert_eq!(count_lines(file, "#[cfg(test)]\nfn helper() {}\n").0, 2);
}
