//! `kpack split-wheel WHEEL -o DIR`: a fat Python wheel becomes a host wheel plus device
//! wheels (see kpack-wheel).

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_package::handlers::Handler;
use kpack_wheel::{OutputFormat, SplitOptions, split_wheel_with_progress};

use crate::output::{self, Error};

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Wheel,
    Directory,
}

#[derive(clap::Args)]
pub struct Args {
    /// The fat wheel: a .whl file or an unpacked wheel directory.
    input: PathBuf,
    /// Output directory (created if missing; existing wheels there are never overwritten).
    #[arg(short, long)]
    output: PathBuf,
    /// Distribution-name prefix of the device wheels [default: <Name>-device].
    #[arg(long)]
    device_package_prefix: Option<String>,
    /// The package directory holding the fat binaries, which gets `.kpack/` [default: the
    /// one top-level directory holding them all].
    #[arg(long)]
    overlay_root: Option<String>,
    /// Extra Requires-Dist of each device wheel; @GFXARCH@ becomes its bundle key (left out
    /// of family and sub-family wheels).
    #[arg(long, num_args = 1..)]
    device_requires_dist: Vec<String>,
    /// Database handlers to apply, in order.
    #[arg(long = "split-databases", num_args = 1.., value_parser = Handler::parse)]
    handlers: Vec<Handler>,
    /// Write .whl files or unpacked wheel directories.
    #[arg(long, value_enum, default_value = "wheel")]
    output_format: Format,
    /// Also write the PEP 817/825 variant copy of the host wheel with variant.json.
    #[arg(long)]
    variants: bool,
    /// File-name label of the variant wheel.
    #[arg(long, default_value = "variant")]
    variant_label: String,
    #[command(flatten)]
    compression: super::CompressionArgs,
    #[command(flatten)]
    names: super::NamesArgs,
    /// One multi-target archive per module in each device wheel (`<module>_<key>.kpack`),
    /// found through the host wheel's `.kpm` index by kpack's runtime.
    #[arg(long)]
    multi_target_archives: bool,
    /// Print a summary as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let mut opts = SplitOptions::new(&args.output);
    opts.device_package_prefix = args.device_package_prefix;
    opts.overlay_root = args.overlay_root;
    opts.device_requires_dist = args.device_requires_dist;
    opts.handlers = args.handlers;
    opts.output_format = match args.output_format {
        Format::Wheel => OutputFormat::Wheel,
        Format::Directory => OutputFormat::Directory,
    };
    opts.variants = args.variants;
    opts.variant_label = args.variant_label;
    opts.compression = args.compression.compression()?;
    opts.multi_target_archives = args.multi_target_archives;
    opts.names = args.names.rules();
    let bar = output::progress(0, "split-wheel");
    let progress = |phase: &str, done: u64, total: u64| {
        bar.set_message(phase.to_owned());
        bar.set_length(total);
        bar.set_position(done);
    };
    let summary = split_wheel_with_progress(&args.input, &opts, &progress)?;
    bar.finish_and_clear();
    if args.json {
        output::print_json(&summary)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} {}: {} fat binaries, {} database files, {} architectures",
        summary.name,
        summary.version,
        summary.fat_binaries.len(),
        summary.database_files,
        summary.architectures.len()
    );
    if !summary.unhashed_members.is_empty() {
        outln!(
            "  {} members listed in RECORD without a hash (checked by the zip's CRC-32 only; --json lists them)",
            summary.unhashed_members.len()
        );
    }
    let line = |what: &str, w: &kpack_wheel::OutputWheel| {
        outln!(
            "  {what:<8} {} ({} bytes)",
            w.path.display(),
            output::grouped(w.published.size)
        );
    };
    line("host", &summary.host);
    if let Some(v) = &summary.variant {
        line("variant", v);
    }
    for d in &summary.devices {
        line(d.key.as_str(), &d.wheel);
    }
    Ok(ExitCode::SUCCESS)
}
