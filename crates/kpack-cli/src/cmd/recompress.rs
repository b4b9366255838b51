//! `kpack recompress IN -o OUT --compression none|zstd|unified [--level N]`

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_archive::Archive;
use serde::Serialize;

use crate::output::{self, Error, grouped};

#[derive(clap::Args)]
pub struct Args {
    /// A .kpack archive (version 1 or 2).
    input: PathBuf,
    /// The archive to write (replaced atomically; may be the input).
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    compression: super::CompressionArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    input: String,
    output: String,
    input_scheme: &'static str,
    compression_scheme: &'static str,
    format_version: u32,
    entries: usize,
    input_size: u64,
    output_size: u64,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let archive = Archive::open(&args.input)?;
    archive.validate()?;
    let compression = args.compression.compression()?;
    let input_size = std::fs::metadata(&args.input)
        .map_err(|e| format!("{}: {e}", args.input.display()))?
        .len();
    let output_size = kpack_archive::recompress(&archive, &args.output, compression)?;
    let scheme = compression.scheme();
    let report = Report {
        input: args.input.display().to_string(),
        output: args.output.display().to_string(),
        input_scheme: archive.compression_scheme().name(),
        compression_scheme: scheme.name(),
        format_version: scheme.format_version(),
        entries: archive.entries().count(),
        input_size,
        output_size,
    };
    if args.json {
        output::print_json(&report)?;
    } else {
        outln!(
            "{}: {} entries, {} ({} bytes) -> {}: {} (v{}, {} bytes)",
            report.input,
            report.entries,
            report.input_scheme,
            grouped(input_size),
            report.output,
            report.compression_scheme,
            report.format_version,
            grouped(output_size)
        );
    }
    Ok(ExitCode::SUCCESS)
}
