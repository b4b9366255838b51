//! `kpack verify-elf FILE...` (alias `verify-binary`): the structural checks every rewrite
//! output passes, ELF or PE.

use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// ELF files or PE images to check.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct FileResult {
    file: String,
    issues: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let mut results = Vec::new();
    for path in &args.files {
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let map = kpack_pipeline::map_file(&file, path)?;
        let issues = match kpack_pipeline::transform::verify_binary(&map) {
            Ok(()) => Vec::new(),
            Err(issues) => issues.iter().map(ToString::to_string).collect(),
        };
        results.push(FileResult {
            file: path.display().to_string(),
            issues,
        });
    }
    if args.json {
        output::print_json(&results)?;
    } else {
        for r in &results {
            if r.issues.is_empty() {
                println!("{}: ok", r.file);
            }
            for i in &r.issues {
                println!("{}: {i}", r.file);
            }
        }
    }
    let failed = results.iter().any(|r| !r.issues.is_empty());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
