//! `kpack restore FILE -o OUT [--kpack-dir DIR...] [--targets T...] [--compress] [--json]`

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_pipeline::restore::{self, RestoreOptions};
use kpack_target::TargetId;

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// The kpacked binary (output of `kpack transform` or `split`).
    input: PathBuf,
    /// The fat binary to write (may be the input itself).
    #[arg(short, long)]
    output: PathBuf,
    /// Directories holding the archives, searched instead of the marker's search paths (for
    /// the same file names); repeatable.
    #[arg(long = "kpack-dir")]
    kpack_dirs: Vec<PathBuf>,
    /// Targets to restore (`gfx90a:xnack+` exactly; `gfx90a` every variant); default: every
    /// target of the archives found.
    #[arg(long, num_args = 1..)]
    targets: Vec<String>,
    /// Write compressed (CCOB v3, zstd) bundles instead of uncompressed ones.
    #[arg(long)]
    compress: bool,
    /// Print a summary as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let targets = args
        .targets
        .iter()
        .map(|t| TargetId::parse(t).map_err(|e| format!("--targets {t}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let opts = RestoreOptions {
        output: args.output.clone(),
        kpack_dirs: args.kpack_dirs.clone(),
        targets,
        compress: args.compress,
    };
    let bar = output::progress(0, "restoring");
    let summary = restore::restore(&args.input, &opts, &|done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })
    .map_err(|e| format!("{}: {e}", args.input.display()))?;
    bar.finish_and_clear();
    if args.json {
        return output::print_json(&summary).map(|()| ExitCode::SUCCESS);
    }
    outln!(
        "{}: {} -> {} bytes, {} wrappers -> {} {} bundles ({} bytes), targets {}",
        args.output.display(),
        output::grouped(summary.input_size),
        output::grouped(summary.output_size),
        summary.wrappers,
        summary.bundles,
        summary.format,
        output::grouped(summary.fatbin_size),
        summary.targets.join(", ")
    );
    for a in &summary.archives {
        outln!("  from {}", a.display());
    }
    for r in &summary.repaired {
        outln!("  repaired {r}");
    }
    Ok(ExitCode::SUCCESS)
}
