//! `kpack verify PATH... [--original ORIGINAL_ARTIFACTS_DIR]`.

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_artifact::verify::{self, VerifyOptions, VerifyReport};

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// What to check: a directory of split or recombined artifacts (directories or
    /// .tar.zst), an installed tree (packages installed into one prefix), a tree of .kpack
    /// archives, or one archive; told apart by content.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The original (unsplit) artifacts, for the strict identity check (a directory of
    /// artifacts, or of shard directories holding them; artifacts as directories or
    /// tarballs; or one tarball).
    #[arg(long)]
    original: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    super::return_large_buffers_to_the_system(super::ARTIFACT_MAPPED_FROM);
    super::one_heap_per_worker();
    let opts = VerifyOptions {
        original: args.original.clone(),
        threads: 0,
    };
    let mut report = VerifyReport::default();
    for path in &args.paths {
        report.merge(verify::verify(path, &opts)?);
    }
    if args.json {
        output::print_json(&report)?;
    } else {
        for f in &report.failures {
            outln!("FAIL {f}");
        }
        for a in &report.unproven {
            outln!(
                "WARN {}: carries no digests: every entry decoded, but could not be proven intact",
                a.display()
            );
        }
        let shown: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
        outln!(
            "{}: {} artifacts, {} binaries, {} archives, {} entries{}: {}",
            shown.join(", "),
            report.artifacts,
            report.binaries,
            report.archives,
            report.entries,
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
