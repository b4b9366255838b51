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

/// Per workspace crate, its dependencies on workspace crates: (name, kind), kind `None`
/// for normal ones, as `cargo metadata` gives them.
fn workspace_graph() -> BTreeMap<String, Vec<(String, Option<String>)>> {
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
    let packages = metadata["packages"].as_array().unwrap();
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

/// The kpack crates the doc of `crate_name` (its `src/lib.rs`) says it depends on: the
/// backquoted names of its paragraph that begins `//! Depends on`.
fn documented_dependencies(crate_name: &str) -> Vec<String> {
    let lib = workspace_root()
        .join("crates")
        .join(crate_name)
        .join("src/lib.rs");
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
