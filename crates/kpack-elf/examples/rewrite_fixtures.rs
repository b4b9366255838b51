//! Writes the host rewrite of every linked fat fixture into a directory, for inspection
//! with `readelf`, `eu-elflint`, a debugger or a loader:
//!
//! ```text
//! cargo run --release -p kpack-elf --example rewrite_fixtures -- DIR
//! ```
//!
//! Each output is checked by [`kpack_elf::verify`] before it is written.

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_hostbin::marker::MarkerMetadata;
use kpack_testkit::{LINKED_FAT, read_fixture};

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: rewrite_fixtures DIR");
        return ExitCode::FAILURE;
    };
    let marker = MarkerMetadata {
        kernel_name: "lib/libtest.so".into(),
        search_paths: vec!["../.kpack/test_@GFXARCH@.kpack".into()],
        host_entry_id: None,
    }
    .encode()
    .expect("the marker encodes");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("{}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let mut failed = false;
    for rel in LINKED_FAT {
        let input = read_fixture(rel);
        let output = match kpack_elf::rewrite::plan(&input, &marker) {
            Ok(rewrite) => rewrite.to_vec(&input),
            Err(e) => {
                eprintln!("{rel}: {e}");
                failed = true;
                continue;
            }
        };
        if let Err(issues) = kpack_elf::verify(&output) {
            eprintln!("{rel}: the output does not verify: {issues:?}");
            failed = true;
            continue;
        }
        let path = dir.join(rel.replace('/', "_"));
        match std::fs::write(&path, &output) {
            Ok(()) => println!("{}", path.display()),
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
