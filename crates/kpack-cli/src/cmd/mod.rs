//! One module per subcommand.

pub mod extract;
pub mod inspect;
pub mod list;
pub mod pack;
pub mod recombine;
pub mod report;
pub mod split;
pub mod transform;
pub mod unbundle;
pub mod verify;
pub mod verify_elf;

use std::path::{Path, PathBuf};

use kpack_archive::Compression;

use crate::output::Error;

#[derive(Clone, Copy, clap::ValueEnum)]
enum Scheme {
    None,
    Zstd,
}

/// `--compression none|zstd` and `--level N`, for every command that writes archives.
#[derive(clap::Args)]
pub struct CompressionArgs {
    /// Compression of each code object in the archives.
    #[arg(long, value_enum, default_value = "zstd")]
    compression: Scheme,
    /// zstd level.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=22))]
    level: i32,
}

impl CompressionArgs {
    /// The archive compression these options select.
    pub fn compression(&self) -> Compression {
        match self.compression {
            Scheme::None => Compression::None,
            Scheme::Zstd => Compression::Zstd { level: self.level },
        }
    }
}

/// Expands directories into the files below them (sorted, symlinks not followed); files are
/// kept as given.
pub fn expand_inputs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.is_dir() {
            collect_dir(path, &mut files)?;
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

fn collect_dir(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), Error> {
    let mut entries = std::fs::read_dir(dir)
        .and_then(|rd| rd.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let kind = entry
            .file_type()
            .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        if kind.is_dir() {
            collect_dir(&entry.path(), files)?;
        } else if kind.is_file() {
            files.push(entry.path());
        }
    }
    Ok(())
}
