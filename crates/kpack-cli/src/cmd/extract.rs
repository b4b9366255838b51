//! `kpack extract ARCHIVE BINARY ARCH -o FILE`

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_archive::Archive;
use kpack_pipeline::unbundle::write_atomically;

use crate::output::Error;

#[derive(clap::Args)]
pub struct Args {
    /// A .kpack archive.
    archive: PathBuf,
    /// The binary key, e.g. `lib/librocsparse.so.0.1#3`.
    binary: String,
    /// The architecture key, e.g. `gfx90a:xnack-`.
    arch: String,
    /// Where to write the code object.
    #[arg(short, long)]
    output: PathBuf,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let archive = Archive::open(&args.archive)?;
    let binary = args.binary.strip_prefix("./").unwrap_or(&args.binary);
    if !archive.binaries().any(|b| b == binary) {
        let known: Vec<&str> = archive.binaries().collect();
        return Err(format!(
            "{}: no binary {binary}; the archive holds: {}",
            args.archive.display(),
            known.join(", ")
        )
        .into());
    }
    if !archive.contains(binary, &args.arch) {
        let arches: Vec<&str> = archive
            .entries()
            .filter(|(b, _, _)| *b == binary)
            .map(|(_, a, _)| a)
            .collect();
        return Err(format!(
            "{}: binary {binary} has no code object for {}; it has: {}",
            args.archive.display(),
            args.arch,
            arches.join(", ")
        )
        .into());
    }
    let data = archive.get(binary, &args.arch)?;
    // What a killed extract to the same place left (housekeeping: never a reason to fail).
    let _ = kpack_fs::sweep(kpack_fs::parent_dir(&args.output));
    write_atomically(&args.output, |f| {
        std::io::Write::write_all(f, &data).map_err(|source| kpack_pipeline::SourceError::Io {
            path: args.output.clone(),
            source,
        })
    })?;
    Ok(ExitCode::SUCCESS)
}
