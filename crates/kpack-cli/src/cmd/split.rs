//! `kpack split ARTIFACT -o OUT --component C [--split-databases H...]` and
//! `kpack split --batch PARENT_DIR -o OUT`; artifacts are directories or tarballs
//! (`.tar.zst`, `.tar.xz`), written as directories or `--output-format tar.zst`.

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_artifact::split::{self, SplitOptions, SplitSummary};
use kpack_package::handlers::Handler;

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// The artifact: a directory (with artifact_manifest.txt) or a tarball of one (.tar.zst,
    /// .tar.xz, .tar); with --batch, a directory of them.
    input: PathBuf,
    /// Output directory for `<component>_generic` and `<component>_<arch>`.
    #[arg(short, long)]
    output: PathBuf,
    /// Component name (the artifacts' name stem); required unless --batch.
    #[arg(long, required_unless_present = "batch", conflicts_with = "batch")]
    component: Option<String>,
    /// Split every artifact under INPUT, the component being each name minus its last `_` part.
    #[arg(long)]
    batch: bool,
    /// Database handlers to apply, in order.
    #[arg(long = "split-databases", num_args = 1.., value_parser = Handler::parse)]
    handlers: Vec<Handler>,
    #[command(flatten)]
    compression: super::CompressionArgs,
    #[command(flatten)]
    names: super::NamesArgs,
    /// Write each artifact as a directory or as `<artifact>.tar.zst` (mtime from
    /// SOURCE_DATE_EPOCH, else 0).
    #[arg(long, value_enum, default_value = "dir")]
    output_format: super::OutputFormat,
    /// Print a summary as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    super::return_large_buffers_to_the_system(super::ARTIFACT_MAPPED_FROM);
    super::one_heap_per_worker();
    let opts = SplitOptions {
        handlers: args.handlers.clone(),
        compression: args.compression.compression()?,
        threads: 0,
        output: args.output_format.into(),
        names: args.names.rules(),
    };
    let bar = output::progress(0, "split");
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let summaries: Vec<SplitSummary> = match &args.component {
        Some(c) if !args.batch => vec![split::split(
            &args.input,
            &args.output,
            c,
            &opts,
            &progress,
        )?],
        _ => split::split_batch(&args.input, &args.output, &opts, &progress)?,
    };
    bar.finish_and_clear();
    if args.json {
        output::print_json(&summaries)?;
    } else {
        for s in &summaries {
            outln!(
                "{}: {} fat binaries, {} code objects, {} database files{}",
                s.component,
                s.fat_binaries,
                s.code_objects,
                s.database_files,
                if s.generic_only {
                    " (generic only)"
                } else {
                    ""
                }
            );
            for a in &s.artifacts {
                outln!(
                    "  {} ({} files, {} archives, {} bytes)",
                    a.name,
                    a.files,
                    a.archives,
                    output::grouped(a.bytes)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
