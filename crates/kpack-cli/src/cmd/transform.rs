//! `kpack transform INPUT -o OUTPUT --kpack-dir DIR [--name GROUP] [--kernel-name NAME]
//! [--search-path PATTERN...] [--compression none|zstd] [--level N]`, and
//! `kpack transform --check FILE...`.

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_pipeline::transform::{self, TransformOptions, TransformReport};
use serde::Serialize;

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// The fat binary (shared library or executable); with --check, the files to classify.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Report whether each input is fat, kpacked, host-only or a separated debug file
    /// (debug-only); write nothing.
    #[arg(long)]
    check: bool,
    /// The host-only binary to write (may be the input itself).
    #[arg(short, long, required_unless_present = "check")]
    output: Option<PathBuf>,
    /// Directory for the per-target archives `{group}_{target}.kpack`.
    #[arg(long, required_unless_present = "check")]
    kpack_dir: Option<PathBuf>,
    /// Archive group name (default: the output's file name up to its first '.').
    #[arg(long)]
    name: Option<String>,
    /// Kernel name in the marker and the archives' keys (default: the output's file name).
    #[arg(long)]
    kernel_name: Option<String>,
    /// Search path written into the marker, relative to the binary's directory; repeatable
    /// (default: the kpack directory relative to the output, `/{group}_@GFXARCH@.kpack`).
    #[arg(long = "search-path")]
    search_paths: Vec<String>,
    #[command(flatten)]
    compression: super::CompressionArgs,
    #[command(flatten)]
    names: super::NamesArgs,
    /// Print a summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct CheckLine {
    file: String,
    state: transform::HostState,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    if args.check {
        let mut lines = Vec::new();
        for path in &args.inputs {
            let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let map = kpack_pipeline::map_file(&file, path)?;
            let state = transform::check(&map).map_err(|e| format!("{}: {e}", path.display()))?;
            lines.push(CheckLine {
                file: path.display().to_string(),
                state,
            });
        }
        if args.json {
            output::print_json(&lines)?;
        } else {
            for l in &lines {
                let state = serde_json::to_value(l.state)?;
                outln!("{}: {}", l.file, state.as_str().unwrap_or_default());
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let [input] = &args.inputs[..] else {
        return Err("transform takes one INPUT (use --check to classify several files)".into());
    };
    let (Some(output), Some(kpack_dir)) = (args.output.clone(), args.kpack_dir.clone()) else {
        return Err("-o OUTPUT and --kpack-dir DIR are required".into());
    };
    let opts = TransformOptions {
        output,
        kpack_dir,
        group: args.name.clone(),
        kernel_name: args.kernel_name.clone(),
        search_paths: args.search_paths.clone(),
        compression: args.compression.compression()?,
        names: args.names.rules(),
    };
    let outcome =
        transform::transform(input, &opts).map_err(|e| format!("{}: {e}", input.display()))?;
    let report = outcome.report(input);
    if args.json {
        return output::print_json(&report).map(|()| ExitCode::SUCCESS);
    }
    match report {
        TransformReport::AlreadyKpacked { input } => {
            outln!("{input}: already kpacked, unchanged");
        }
        TransformReport::DebugOnly { input } => {
            outln!(
                "{input}: a separated debug file (objcopy --only-keep-debug), no device code: nothing to do"
            );
        }
        TransformReport::Transformed(s) => {
            outln!(
                "{}: {} -> {} bytes ({} removed), {} wrappers, {} code objects",
                opts.output.display(),
                output::grouped(s.input_size),
                output::grouped(s.output_size),
                output::grouped(s.removed),
                s.wrappers,
                s.code_objects
            );
            for a in &s.archives {
                outln!(
                    "  {} ({} entries, {} bytes)",
                    a.path.display(),
                    a.entries,
                    output::grouped(a.size)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
