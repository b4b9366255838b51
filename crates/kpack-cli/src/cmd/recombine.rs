//! `kpack recombine --shards DIR --config packaging.json -o OUT [--component C]
//! [--group-archives [--compression ...]]`.

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_artifact::recombine::{self, PackagingConfig, RecombineOptions};

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// Directory of shards, each holding split artifacts (directories or .tar.zst).
    #[arg(long)]
    shards: PathBuf,
    /// The packaging configuration (primary_shard, architecture_groups, validation).
    #[arg(long)]
    config: PathBuf,
    /// Output directory.
    #[arg(short, long)]
    output: PathBuf,
    /// Only this component.
    #[arg(long)]
    component: Option<String>,
    /// Write each package as a directory or as `<artifact>.tar.zst` (mtime from
    /// SOURCE_DATE_EPOCH, else 0).
    #[arg(long, value_enum, default_value = "dir")]
    output_format: super::OutputFormat,
    /// Per group package and module, one archive holding all the group's targets
    /// (`<module>_<group>.kpack`, written with --compression) plus a relative link per
    /// target (`<module>_<target>.kpack`), which the markers and any runtime find.
    /// Implied by `--compression unified`, whose value is across targets.
    #[arg(long)]
    group_archives: bool,
    #[command(flatten)]
    compression: super::CompressionArgs,
    /// Print a summary as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    super::return_large_buffers_to_the_system(super::ARTIFACT_MAPPED_FROM);
    super::one_heap_per_worker();
    let config = PackagingConfig::load(&args.config)?;
    let opts = RecombineOptions {
        component: args.component.clone(),
        threads: 0,
        output: args.output_format.into(),
        group_archives: RecombineOptions::group_archives_for(
            args.group_archives,
            args.compression.compression()?,
        ),
    };
    let summary = recombine::recombine(&args.shards, &config, &args.output, &opts)?;
    if args.json {
        output::print_json(&summary)?;
    } else {
        for c in &summary.components {
            outln!(
                "{}: generic from {}{}",
                c.component,
                c.generic_from,
                if c.generic_only {
                    " (generic only)"
                } else {
                    ""
                }
            );
            for g in &c.groups {
                let arches: Vec<String> = g
                    .architectures
                    .iter()
                    .map(|(a, s)| format!("{a} from {s}"))
                    .collect();
                outln!(
                    "  {}: {} files, {} archives; {}",
                    g.artifact,
                    g.files,
                    g.archives,
                    arches.join(", ")
                );
                if !g.missing.is_empty() {
                    outln!("    missing: {}", g.missing.join(", "));
                }
            }
            for i in &c.indexes {
                outln!("  index: {i}");
            }
            for d in &c.ignored_duplicates {
                outln!("  ignored duplicate: {d}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
