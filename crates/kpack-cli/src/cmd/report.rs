//! `kpack report PATH... -o report.html [--json]`

use std::path::PathBuf;
use std::process::ExitCode;

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// Files or directories (searched recursively).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The HTML page to write (one self-contained file with an SVG treemap).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Print the numbers as JSON (per-target totals equal `kpack inspect --json`'s).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    if args.output.is_none() && !args.json {
        return Err("nothing to do: give -o report.html and/or --json".into());
    }
    let files = kpack_pipeline::expand_inputs(&args.paths)?;
    let bar = output::progress(files.len() as u64, "measuring");
    let usage = kpack_report::collect(&files, &mut || bar.inc(1))?;
    bar.finish_and_clear();
    if let Some(out) = &args.output {
        let shown: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
        kpack_report::write_html(&usage, &shown.join(", "), out)?;
    }
    if args.json {
        output::print_json(&usage)?;
    }
    Ok(ExitCode::SUCCESS)
}
