//! `kpack prune PATH... -o OUT (--keep T... | --drop T...) [--allow-empty] [--json]`

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_prune::{Action, Selection, parse_target_name, prune};
use kpack_target::TargetId;

use crate::output::{self, Error};

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("selection").required(true).args(["keep", "drop"]))]
pub struct Args {
    /// Fat binaries (shared libraries, executables), directories or artifacts, Python
    /// wheels, artifact tarballs (`.tar.zst`, `.tar.xz`, `.tar.gz`, `.tar`).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The output: a file for one input file, a tree for one directory, a directory holding
    /// each input under its name for several.
    #[arg(short, long)]
    output: PathBuf,
    /// Keep only these targets (`gfx90a` keeps every variant of the processor,
    /// `gfx90a:xnack-` that variant and the code objects that run on it).
    #[arg(long, num_args = 1.., value_parser = parse_target_name)]
    keep: Vec<TargetId>,
    /// Drop these targets (`gfx90a` every variant, `gfx90a:xnack+` exactly that one).
    #[arg(long, num_args = 1.., value_parser = parse_target_name)]
    drop: Vec<TargetId>,
    /// Allow a binary to lose every device target (only its host code stays).
    #[arg(long)]
    allow_empty: bool,
    /// Print what was done as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let selection = if args.keep.is_empty() {
        Selection::Drop(args.drop)
    } else {
        Selection::Keep(args.keep)
    };
    let report = prune(&args.paths, &args.output, &selection, args.allow_empty)?;
    if args.json {
        output::print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    for f in &report.files {
        match &f.action {
            Action::Pruned(p) => outln!(
                "{}: kept {}, dropped {}; {} -> {} bytes",
                f.input.display(),
                p.kept.join(" "),
                if p.dropped.is_empty() {
                    "nothing".to_owned()
                } else {
                    p.dropped.join(" ")
                },
                output::grouped(p.input_size),
                output::grouped(p.output_size),
            ),
            Action::Omitted { handler, target } => {
                outln!(
                    "{}: left out ({handler} database, {target})",
                    f.input.display()
                )
            }
            Action::Copied => {}
        }
    }
    eprintln!("written to {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}
