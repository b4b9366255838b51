//! `kpack verify ARTIFACTS_DIR [--original ORIGINAL_ARTIFACTS_DIR]`.

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_artifact::verify::{self, VerifyOptions};

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// Directory of split or recombined artifacts (directories or .tar.zst).
    artifacts: PathBuf,
    /// The original (unsplit) artifacts, for the strict identity check (a directory of
    /// artifacts, or of shard directories holding them; artifacts as directories or
    /// tarballs; or one tarball).
    #[arg(long)]
    original: Option<PathBuf>,
    /// Worker threads (default: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let opts = VerifyOptions {
        original: args.original.clone(),
        threads: args.threads,
    };
    let report = verify::verify(&args.artifacts, &opts)?;
    if args.json {
        output::print_json(&report)?;
    } else {
        for f in &report.failures {
            println!("FAIL {f}");
        }
        println!(
            "{}: {} artifacts, {} binaries, {} archives{}: {}",
            args.artifacts.display(),
            report.artifacts,
            report.binaries,
            report.archives,
            if opts.original.is_some() {
                format!(
                    ", {} original files and {} code objects identical",
                    report.original_files, report.code_objects
                )
            } else {
                String::new()
            },
            if report.passed() {
                "ok".to_owned()
            } else {
                format!("{} failures", report.failures.len())
            }
        );
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
