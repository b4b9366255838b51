//! `kpack list ARCHIVE`

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_archive::Archive;
use serde::Serialize;

use crate::output::{self, Error, grouped};

#[derive(clap::Args)]
pub struct Args {
    /// A .kpack archive.
    archive: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Listing<'a> {
    path: String,
    group_name: &'a str,
    gfx_arch_family: &'a str,
    gfx_arches: &'a [String],
    compression_scheme: String,
    entries: Vec<Entry<'a>>,
}

#[derive(Serialize)]
struct Entry<'a> {
    binary: &'a str,
    arch: &'a str,
    ordinal: u64,
    size: u64,
    stored_size: u64,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let archive = Archive::open(&args.archive)?;
    // Opening reads only the TOC; a listing vouches for the whole archive.
    archive.validate()?;
    let entries: Vec<Entry> = archive
        .entries()
        .map(|(binary, arch, info)| Entry {
            binary,
            arch,
            ordinal: info.ordinal.into(),
            size: info.original_size,
            stored_size: info.stored_size,
        })
        .collect();
    if args.json {
        output::print_json(&Listing {
            path: args.archive.display().to_string(),
            group_name: archive.group_name(),
            gfx_arch_family: archive.gfx_arch_family(),
            gfx_arches: archive.gfx_arches(),
            compression_scheme: archive.compression_scheme().name().to_owned(),
            entries,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{}: group {}, family {}, scheme {}, arches {}",
        args.archive.display(),
        archive.group_name(),
        archive.gfx_arch_family(),
        archive.compression_scheme().name(),
        archive.gfx_arches().join(", ")
    );
    for e in &entries {
        outln!(
            "  {:<50} {:<24} {:>14} bytes  (stored {}, blob {})",
            e.binary,
            e.arch,
            grouped(e.size),
            grouped(e.stored_size),
            e.ordinal
        );
    }
    Ok(ExitCode::SUCCESS)
}
