//! `verify-elf`, `restore` and `inspect` on what the reference rocm-kpack rewrote
//! (`fixtures/refmade/`): nine libraries verify (one with warnings), the RELR one is refused
//! in words and repaired by `restore`, and `inspect --resolve` finds every code object.

use std::path::PathBuf;

use kpack_testkit::assert_no_debug_formatting;
use kpack_testkit::refmade::{REFMADE_LIBRARIES, REFMADE_MISDIRECTED, refmade_library};

use crate::common::{json, kpack, kpack_ok, s};

fn libraries() -> Vec<PathBuf> {
    REFMADE_LIBRARIES
        .iter()
        .map(|(name, _)| refmade_library(name))
        .collect()
}

#[test]
fn verify_elf_passes_nine_reference_made_libraries_and_explains_the_relr_one() {
    let libs = libraries();
    let mut args = vec!["verify-elf"];
    args.extend(libs.iter().map(|p| s(p)));
    let out = kpack(&args);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_no_debug_formatting(&text);
    for lib in &libs {
        let name = lib.file_name().unwrap().to_str().unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("{}: ", lib.display())))
            .collect();
        let file = lib.display();
        match name {
            "librelr.so" => assert_eq!(
                lines,
                [format!(
                    "{file}: offset 0x5048: wrapper 0: at run time its pointer lands at load \
                     base + 0x0, the ELF header (file offset 0x0), not on the marker \
                     .rocm_kpack_ref at load base + 0x7000: under RELR (word 2 of section [10] \
                     .relr.dyn) the value stored in the file is the addend, and it is 0x0"
                )]
            ),
            "libalign2m.so" => {
                assert_eq!(lines.len(), 3, "{lines:#?}");
                assert!(lines[0].starts_with(&format!(
                    "{file}: warning: offset 0x5070: PT_LOAD [2]: p_offset 0x1d41 and p_vaddr \
                     0x2d41 differ modulo p_align 0x200000"
                )));
                assert!(lines[1].starts_with(&format!("{file}: warning: offset 0x50a8: ")));
                assert_eq!(lines[2], format!("{file}: ok"));
            }
            _ => assert_eq!(lines, [format!("{file}: ok")]),
        }
    }
    // JSON: `warnings` only where there are some.
    args.insert(1, "--json");
    let out = kpack(&args);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (r, lib) in v.as_array().unwrap().iter().zip(&libs) {
        let name = lib.file_name().unwrap().to_str().unwrap();
        assert_eq!(r["file"], lib.display().to_string());
        assert_eq!(
            r["issues"].as_array().unwrap().len(),
            usize::from(name == REFMADE_MISDIRECTED)
        );
        assert_eq!(
            r.get("warnings").is_some(),
            name == "libalign2m.so",
            "{name}"
        );
    }
}

#[test]
fn restore_repairs_the_reference_relr_library_and_says_so_and_its_output_transforms() {
    let work = tempfile::tempdir().unwrap();
    let input = refmade_library(REFMADE_MISDIRECTED);
    let out = work.path().join("restored/librelr.so");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let printed = kpack_ok(&["restore", s(&input), "-o", s(&out)]);
    let text = String::from_utf8(printed.stdout).unwrap();
    assert_no_debug_formatting(&text);
    assert!(
        text.contains(
            "  repaired wrapper 0 at file offset 0x5048: at run time its pointer lands at load \
             base + 0x0, the ELF header (file offset 0x0), not on the marker .rocm_kpack_ref at \
             load base + 0x7000: under RELR"
        ),
        "{text}"
    );
    kpack_ok(&["verify-elf", s(&out)]);
    let v = json(&["restore", "--json", s(&input), "-o", s(&out)]);
    assert_eq!(v["repaired"].as_array().unwrap().len(), 1);
    // A library whose wrappers reach the marker has nothing to repair, and says nothing.
    let other = work.path().join("libone.so");
    let v = json(&[
        "restore",
        "--json",
        s(&refmade_library("libone.so")),
        "-o",
        s(&other),
    ]);
    assert!(v.get("repaired").is_none(), "{v}");

    let kpacked = work.path().join("again/lib/librelr.so");
    kpack_ok(&[
        "transform",
        s(&out),
        "-o",
        s(&kpacked),
        "--kpack-dir",
        s(&work.path().join("again/.kpack")),
    ]);
    let verified = kpack_ok(&["verify-elf", s(&kpacked)]);
    assert_eq!(
        String::from_utf8(verified.stdout).unwrap(),
        format!("{}: ok\n", kpacked.display())
    );
}

#[test]
fn inspect_resolves_the_reference_made_markers_and_explains_the_misdirected_one() {
    for lib in libraries() {
        let name = lib.file_name().unwrap().to_str().unwrap().to_owned();
        let v = json(&["inspect", "--json", "--resolve", s(&lib)]);
        let wrappers = v[0]["resolve"]["wrappers"].as_array().unwrap();
        assert!(!wrappers.is_empty(), "{name}");
        for w in wrappers {
            if name == REFMADE_MISDIRECTED {
                let error = w["marker_error"].as_str().unwrap();
                assert_no_debug_formatting(error);
                assert!(
                    error.starts_with(
                        "wrapper 0 at file offset 0x5048: at run time its pointer lands at \
                         load base + 0x0, the ELF header"
                    ),
                    "{error}"
                );
                continue;
            }
            let targets = w["targets"].as_array().unwrap();
            assert!(!targets.is_empty(), "{name}");
            for t in targets {
                assert_eq!(t["status"], "found", "{name}: {t}");
            }
        }
    }
}
