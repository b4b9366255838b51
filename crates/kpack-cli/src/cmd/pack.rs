//! `kpack pack -o OUT.kpack [--compression none|zstd] [--level N] INPUTS...`

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_archive::Compression;
use kpack_pipeline::pack::{PackInput, pack};
use serde::Serialize;

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// Fat binaries, bundles, CCOB files or code objects.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The archive to write.
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    compression: super::CompressionArgs,
    /// The archive's group name (default: the output file's stem).
    #[arg(long)]
    group: Option<String>,
    /// The archive's gfx_arch_family (default: its one architecture, or the group name).
    #[arg(long)]
    family: Option<String>,
    /// Print a summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Summary {
    archive: String,
    entries: usize,
    gfx_arches: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let inputs: Vec<PackInput> = args
        .inputs
        .iter()
        .map(|path| PackInput {
            // Entries are keyed by the input's file name, as the runtime looks up
            // `kernel_name#co_index`.
            kernel_name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path: path.clone(),
        })
        .collect();
    let group = args.group.clone().unwrap_or_else(|| {
        args.output
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "kpack".to_owned())
    });
    let compression = args.compression.compression()?;
    if matches!(compression, Compression::Unified { .. }) {
        super::return_large_buffers_to_the_system(super::UNIFIED_MAPPED_FROM);
    }
    let summary = pack(
        &inputs,
        &args.output,
        &group,
        args.family.as_deref(),
        compression,
    )?;
    if args.json {
        output::print_json(&Summary {
            archive: args.output.display().to_string(),
            entries: summary.entries,
            gfx_arches: summary.gfx_arches,
        })?;
    } else {
        outln!(
            "{}: {} entries for {}",
            args.output.display(),
            summary.entries,
            summary.gfx_arches.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
