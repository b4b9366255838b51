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
    /// What the ELF specification forbids but loaders accept: reported, not a failure.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

fn shown(issues: &[impl ToString]) -> Vec<String> {
    issues.iter().map(ToString::to_string).collect()
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let mut results = Vec::new();
    for path in &args.files {
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let map = kpack_pipeline::map_file(&file, path)?;
        let found = kpack_pipeline::transform::verify_binary(&map);
        results.push(FileResult {
            file: path.display().to_string(),
            issues: shown(&found.issues),
            warnings: shown(&found.warnings),
        });
    }
    if args.json {
        output::print_json(&results)?;
    } else {
        for r in &results {
            for w in &r.warnings {
                outln!("{}: warning: {w}", r.file);
            }
            if r.issues.is_empty() {
                outln!("{}: ok", r.file);
            }
            for i in &r.issues {
                outln!("{}: {i}", r.file);
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
