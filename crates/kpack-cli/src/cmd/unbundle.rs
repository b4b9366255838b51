//! `kpack unbundle PATH... -o DIR [--target T...]`

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_pipeline::source::FileKind;
use kpack_pipeline::unbundle::{TargetFilter, Unbundler};
use kpack_target::TargetId;
use serde::Serialize;

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// Fat binaries, `ar` archives, bundles, CCOB files, code objects, new-driver objects and
    /// `llvm-offload-binary` files, directories of them, wheels or tarballs (read in place).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Output directory (created if missing).
    #[arg(short, long)]
    output: PathBuf,
    /// Only these targets (`gfx90a:xnack+` exactly, or `gfx90a` for every variant).
    #[arg(long = "target", value_parser = TargetId::parse)]
    targets: Vec<TargetId>,
    /// Print what was written as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Written {
    path: String,
    bundle_id: String,
    size: u64,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let files = kpack_pipeline::expand_inputs(&args.paths)?;
    let mut unbundler = Unbundler::new(&args.output, TargetFilter::new(args.targets))?;
    let bar = output::progress(files.len() as u64, "unbundling");
    for path in &files {
        bar.inc(1);
        kpack_inputs::read(path, args.paths.contains(path), &mut |input| {
            let kind = unbundler
                .unbundle_bytes(input.shown, input.bytes, input.file)
                .map_err(|e| e.in_file(input.shown))?;
            // Inside directories and containers, files without device code are passed over;
            // a file named on the command line must hold some.
            if matches!(kind, FileKind::Other | FileKind::KpackArchive) && input.given {
                return Err(Error::from(format!(
                    "{}: a {} file holds no offload bundles{}",
                    path.display(),
                    kind.name(),
                    if kind == FileKind::KpackArchive {
                        " (use `kpack extract`)"
                    } else {
                        ""
                    }
                )));
            }
            Ok(())
        })?;
    }
    bar.finish_and_clear();
    let written = unbundler.publish()?;
    if args.json {
        let list: Vec<Written> = written
            .iter()
            .map(|w| Written {
                path: w.path.display().to_string(),
                bundle_id: w.bundle_id.clone(),
                size: w.size,
            })
            .collect();
        output::print_json(&list)?;
    } else {
        for w in &written {
            outln!("{}\t{}\t{}", w.path.display(), w.bundle_id, w.size);
        }
        eprintln!(
            "{} code objects written to {}",
            written.len(),
            args.output.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
