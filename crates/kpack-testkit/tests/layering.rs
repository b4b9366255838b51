//! The crate graph follows the layering `docs/CONTRIBUTING.md` writes down: every
//! workspace crate is placed, each depends only on crates placed below it, and the tests'
//! shared crate is only ever a dev-dependency. And each crate's doc says which kpack crates it
//! depends on, as its manifest does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The layering block of `docs/CONTRIBUTING.md`: per crate, its line (0 = top), and the
/// crates that may only be dev-dependencies.
fn layering(contributing: &str) -> (BTreeMap<String, usize>, Vec<String>) {
    let block = contributing
        .split("```text\n")
        .find(|b| b.starts_with("front ends"))
        .and_then(|b| b.split("```").next())
        .expect("docs/CONTRIBUTING.md has the layering block");
    let (mut line_of, mut dev_only) = (BTreeMap::new(), Vec::new());
    for (line, text) in block.lines().enumerate() {
        for name in text.split_whitespace().filter(|w| w.starts_with("kpack-")) {
            assert!(
                line_of.insert(name.to_owned(), line).is_none(),
                "{name} is placed twice"
            );
            if text.contains("dev-dependency only") {
                dev_only.push(name.to_owned());
            }
        }
    }
    (line_of, dev_only)
}

/// `cargo metadata --no-deps` of the workspace: its `packages`.
fn workspace_packages() -> Vec<serde_json::Value> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    metadata["packages"].as_array().unwrap().clone()
}

/// Per workspace crate, its dependencies on workspace crates: (name, kind), kind `None`
/// for normal ones, as `cargo metadata` gives them.
fn workspace_graph() -> BTreeMap<String, Vec<(String, Option<String>)>> {
    let packages = workspace_packages();
    let names: Vec<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| names.contains(&d["name"].as_str().unwrap()))
                .map(|d| {
                    let kind = d["kind"].as_str().map(str::to_owned);
                    (d["name"].as_str().unwrap().to_owned(), kind)
                })
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// What breaks the layering `contributing` writes down, one line each.
fn violations(contributing: &str) -> Vec<String> {
    let (line_of, dev_only) = layering(contributing);
    let graph = workspace_graph();
    let mut found = Vec::new();
    for name in line_of.keys().filter(|n| !graph.contains_key(*n)) {
        found.push(format!("{name} is placed but is not a workspace crate"));
    }
    for (name, deps) in &graph {
        let Some(&line) = line_of.get(name) else {
            found.push(format!("{name} is not placed in the layering"));
            continue;
        };
        if dev_only.contains(name) {
            // Test support builds fixtures with any crate, and no crate's library links it.
            continue;
        }
        for (dep, kind) in deps {
            if kind.as_deref() == Some("dev") {
                continue;
            }
            if dev_only.contains(dep) {
                found.push(format!("{name} depends on {dep}, a dev-dependency only"));
            } else if line_of.get(dep).is_some_and(|&l| l <= line) {
                found.push(format!(
                    "{name} depends on {dep}, which is not below it in the layering"
                ));
            }
        }
    }
    found
}

/// The kpack crates the doc of `crate_name` (its `src/lib.rs`, or `src/main.rs` for a
/// program) says it depends on: the backquoted names of its paragraph that begins
/// `//! Depends on`.
fn documented_dependencies(crate_name: &str) -> Vec<String> {
    let src = workspace_root().join("crates").join(crate_name).join("src");
    let lib = [src.join("lib.rs"), src.join("main.rs")]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{}: neither lib.rs nor main.rs", src.display()));
    let source = std::fs::read_to_string(&lib).unwrap();
    let paragraph: String = source
        .lines()
        .skip_while(|l| !l.starts_with("//! Depends on"))
        .take_while(|l| l.starts_with("//!") && l.trim() != "//!")
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        !paragraph.is_empty(),
        "{}: the crate doc has no `Depends on` paragraph",
        lib.display()
    );
    let mut names: Vec<String> = paragraph
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|n| n.starts_with("kpack-"))
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_crate_doc_names_the_kpack_crates_it_depends_on() {
    let mut wrong = Vec::new();
    for (name, deps) in workspace_graph() {
        let mut actual: Vec<String> = deps
            .into_iter()
            .filter(|(_, kind)| kind.as_deref() != Some("dev"))
            .map(|(dep, _)| dep)
            .collect();
        actual.sort();
        actual.dedup();
        let documented = documented_dependencies(&name);
        if documented != actual {
            wrong.push(format!(
                "{name}: doc says {documented:?}, Cargo.toml {actual:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn contributing() -> String {
    std::fs::read_to_string(workspace_root().join("docs/CONTRIBUTING.md")).unwrap()
}

#[test]
fn every_crate_depends_only_on_crates_below_it_in_the_documented_layering() {
    let found = violations(&contributing());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_layering_that_puts_a_dependency_above_its_user_is_refused() {
    let contributing = contributing();
    // kpack-hostbin moved above kpack-elf, which depends on it.
    let swapped = contributing.replacen(
        "                    kpack-elf\n                    kpack-archive  kpack-tar  kpack-wheelfile\n                    kpack-hostbin\n",
        "                    kpack-hostbin\n                    kpack-archive  kpack-tar  kpack-wheelfile\n                    kpack-elf\n",
        1,
    );
    assert_ne!(swapped, contributing, "the edit applies");
    let found = violations(&swapped);
    assert!(
        found
            .iter()
            .any(|v| v.contains("kpack-elf depends on kpack-hostbin")),
        "{found:?}"
    );
}

/// The packages `cargo tree` lists under `package` through normal dependencies (what its
/// library links when built for `target`, or for any target: `all`), each with the features
/// it is built with.
fn linked_packages(package: &str, target: &str) -> BTreeMap<String, Vec<String>> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-e", "normal", "--prefix", "none"])
        .args(["--format", "{p}|{f}", "-p", package, "--target", target])
        .current_dir(workspace_root())
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let (package, features) = line.split_once('|')?;
            let name = package.split_whitespace().next()?.to_owned();
            let features = features
                .split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_owned)
                .collect();
            Some((name, features))
        })
        .collect()
}

#[test]
fn the_c_library_links_only_the_runtime_its_readers_and_libc_on_linux_and_windows() {
    // Windows as `cargo tree` resolves it (no Windows toolchain needed): the target-specific
    // dependencies (`cfg(windows)`, `cfg(unix)`) of every crate below librocm_kpack counted.
    for target in ["x86_64-unknown-linux-gnu", "x86_64-pc-windows-gnu"] {
        let linked = linked_packages("kpack-capi", target);
        let kpack: Vec<&str> = linked
            .keys()
            .map(String::as_str)
            .filter(|n| n.starts_with("kpack-"))
            .collect();
        // kpack-fs (atomic publishing, the tree walk) is what the installer needs: it must
        // not reach librocm_kpack.
        assert_eq!(
            kpack,
            [
                "kpack-archive",
                "kpack-capi",
                "kpack-hostbin",
                "kpack-msgpack",
                "kpack-runtime",
                "kpack-target"
            ],
            "the kpack crates librocm_kpack links for {target}"
        );
        assert!(
            linked.contains_key("libc"),
            "librocm_kpack links libc for {target}: {linked:?}"
        );
        assert!(
            !linked["kpack-archive"].iter().any(|f| f == "write"),
            "librocm_kpack links kpack-archive's writer for {target}: {:?}",
            linked["kpack-archive"]
        );
        // Nothing Unix-only in the Windows library: rustix (kpack-fs's signals) and nix are
        // Unix system-call crates.
        for unix_only in ["rustix", "nix"] {
            assert!(
                !linked.contains_key(unix_only),
                "librocm_kpack links {unix_only} for {target}"
            );
        }
    }
}

/// The rows of `docs/layout.md`'s crate table: crate, job.
fn layout_table() -> BTreeMap<String, String> {
    let layout = std::fs::read_to_string(workspace_root().join("docs/layout.md")).unwrap();
    layout
        .lines()
        .filter_map(|line| {
            let row = line.strip_prefix("| `")?.strip_suffix(" |")?;
            let (name, job) = row.split_once("` | ")?;
            Some((name.to_owned(), job.to_owned()))
        })
        .collect()
}

#[test]
fn the_layout_table_lists_every_crate_with_its_cargo_description() {
    let table = layout_table();
    let mut wrong = Vec::new();
    let packages = workspace_packages();
    for p in &packages {
        let name = p["name"].as_str().unwrap();
        let description = p["description"].as_str().unwrap_or("");
        match table.get(name) {
            None => wrong.push(format!("{name} has no row in docs/layout.md")),
            Some(job) if job != description => wrong.push(format!(
                "{name}: docs/layout.md says\n  {job}\nCargo.toml says\n  {description}"
            )),
            Some(_) => {}
        }
    }
    for name in table.keys() {
        if !packages.iter().any(|p| p["name"] == name.as_str()) {
            wrong.push(format!(
                "docs/layout.md lists {name}, not a workspace crate"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn contributing_describes_every_crate_by_its_modules() {
    let contributing = contributing();
    let missing: Vec<String> = workspace_graph()
        .into_keys()
        .filter(|name| !contributing.contains(&format!("\n- `crates/{name}` ")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/CONTRIBUTING.md has no entry for {}",
        missing.join(", ")
    );
}

#[test]
fn prune_and_report_do_without_the_artifact_application() {
    for package in ["kpack-prune", "kpack-report"] {
        let linked = linked_packages(package, "all");
        assert!(
            linked.contains_key("kpack-package") && !linked.contains_key("kpack-artifact"),
            "{package} links kpack-artifact, or not kpack-package's handlers"
        );
    }
}

/// Python drives the library crates, as the CLI does, rather than the CLI: its `kpack`
/// command is the `kpack` binary itself, shipped in the wheel (docs/python.md), so neither
/// the command line's dispatch nor its parser and progress bars (clap, indicatif) are built
/// into `kpack._native`. (kpack-python and kpack-cli share a line of the layering, so the
/// layering test refuses the edge too; this says why.)
#[test]
fn the_python_module_links_the_library_crates_not_the_command_line() {
    let linked = linked_packages("kpack-python", "all");
    for cli_only in ["kpack-cli", "clap", "indicatif"] {
        assert!(
            !linked.contains_key(cli_only),
            "kpack._native links {cli_only}"
        );
    }
    for library in [
        "kpack-artifact",
        "kpack-pipeline",
        "kpack-wheel",
        "kpack-prune",
    ] {
        assert!(
            linked.contains_key(library),
            "kpack._native does not link {library}"
        );
    }
}
