//! External witnesses: the tools (binutils, clang-offload-bundler, LLVM 22) whose reading of
//! a file a test compares with kpack's.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::corpus::corpus_file;
#[cfg(feature = "transform")]
use crate::{AARCH64, PPC64LE};

/// Runs an external witness tool, which the test suite's set-up installs; its absence is a
/// failure, not a skip, so a green run always means the witness was consulted. Returns its
/// standard output.
pub fn run_tool(program: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} is required (scripts/setup.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs a tool of LLVM 22 (`clang-offload-bundler`, `llvm-objdump`, `llvm-offload-binary`, …)
/// from the trixie root `scripts/setup.sh` unpacks into the corpus, through its own `ld.so`
/// (it needs glibc 2.38+). Like [`run_tool`], a missing tool fails the test. Returns its
/// standard output.
pub fn run_llvm22(tool: &str, args: &[&str]) -> Vec<u8> {
    let wrapper = corpus_file("llvmv");
    let mut full = vec!["22", tool];
    full.extend_from_slice(args);
    run_tool(wrapper.to_str().expect("corpus path is UTF-8"), &full)
}

/// The bundles of `.hip_fatbin` in `path` as stored: the section dumped by `objcopy` (the
/// file's machine's; an independent reader), cut at the offsets `kpack inspect` reports; a raw bundle or CCOB file
/// is one bundle.
#[cfg(feature = "transform")]
pub fn fatbin_bundles(path: &Path, tmp: &Path) -> Vec<Vec<u8>> {
    use kpack_pipeline::inspect::{self, Details};
    let bytes = std::fs::read(path).unwrap();
    let report = inspect::inspect(&path.display().to_string(), &bytes).unwrap();
    match report.details {
        Details::Elf(elf) => {
            let section = tmp.join("fatbin.bin");
            let machine = u16::from_le_bytes([bytes[18], bytes[19]]);
            let objcopy = [&AARCH64, &PPC64LE]
                .into_iter()
                .find(|m| m.e_machine == machine)
                .map_or_else(|| "objcopy".to_owned(), |m| m.tool("objcopy"));
            run_tool(
                &objcopy,
                &[
                    &format!("--dump-section=.hip_fatbin={}", section.display()),
                    path.to_str().unwrap(),
                    tmp.join("discard.o").to_str().unwrap(),
                ],
            );
            let data = std::fs::read(&section).unwrap();
            let base = elf.fatbin.unwrap().offset;
            elf.bundles
                .iter()
                .map(|b| {
                    let start = (b.offset - base) as usize;
                    data[start..start + b.size as usize].to_vec()
                })
                .collect()
        }
        Details::Bundles { .. } => vec![bytes],
        other => panic!("{}: not a bundle container: {other:?}", path.display()),
    }
}

/// Every entry of `bundle` (an uncompressed bundle or a CCOB) as clang-offload-bundler lists
/// and unbundles it: `clang-offload-bundler-15` for an uncompressed bundle, LLVM 22's for a
/// CCOB (LLVM 15 cannot read one). Keyed by bundle entry id, host entry included.
pub fn witness_entries(bundle: &[u8], tmp: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let input = tmp.join("witness.bundle");
    std::fs::write(&input, bundle).unwrap();
    let run = |args: &[&str]| {
        if bundle.starts_with(b"CCOB") {
            run_llvm22("clang-offload-bundler", args)
        } else {
            run_tool("clang-offload-bundler-15", args)
        }
    };
    let input_arg = format!("--input={}", input.display());
    let listing = run(&["--list", "--type=o", &input_arg]);
    let triples: Vec<String> = String::from_utf8(listing)
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    // One call unbundles every entry (a CCOB is decompressed once).
    let outputs: Vec<PathBuf> = (0..triples.len())
        .map(|i| tmp.join(format!("witness{i}.co")))
        .collect();
    let mut args = vec![
        "--unbundle".to_owned(),
        "--type=o".to_owned(),
        input_arg.clone(),
        format!("--targets={}", triples.join(",")),
    ];
    args.extend(outputs.iter().map(|o| format!("--output={}", o.display())));
    run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    triples
        .into_iter()
        .zip(&outputs)
        .map(|(t, o)| (t, std::fs::read(o).unwrap()))
        .collect()
}
