//! One module per subcommand.

pub mod detect;
pub mod extract;
pub mod inspect;
pub mod list;
pub mod pack;
pub mod prune;
pub mod recombine;
pub mod recompress;
pub mod report;
pub mod restore;
pub mod split;
pub mod split_wheel;
pub mod transform;
pub mod unbundle;
pub mod verify;
pub mod verify_elf;
pub mod which;

use kpack_archive::Compression;

#[derive(Clone, Copy, clap::ValueEnum)]
enum Scheme {
    /// Version 1, code objects stored as they are.
    None,
    /// Version 1, one zstd frame per code object (what deployed HIP runtimes read).
    Zstd,
    /// Version 2: zstd frames coded against a sibling target's or kernel's code (smaller;
    /// read by kpack's runtime and librocm_kpack only).
    Unified,
}

/// `--compression none|zstd|unified` and `--level N`, for every command that writes archives.
#[derive(clap::Args)]
pub struct CompressionArgs {
    /// Compression of each code object in the archives.
    #[arg(long, value_enum, default_value = "zstd")]
    compression: Scheme,
    /// zstd level (default 3 for `zstd`, 19 for `unified`).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=22))]
    level: Option<i32>,
}

impl CompressionArgs {
    /// The archive compression these options select.
    pub fn compression(&self) -> Compression {
        match self.compression {
            Scheme::None => Compression::None,
            Scheme::Zstd => Compression::Zstd {
                level: self.level.unwrap_or(kpack_archive::DEFAULT_ZSTD_LEVEL),
            },
            Scheme::Unified => Compression::Unified {
                level: self.level.unwrap_or(kpack_archive::DEFAULT_UNIFIED_LEVEL),
            },
        }
    }
}

/// `--output-format dir|tar.zst`, for the commands that write artifacts.
#[derive(Clone, Copy, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// One directory per artifact.
    #[default]
    Dir,
    /// One reproducible `<artifact>.tar.zst` per artifact.
    #[value(name = "tar.zst")]
    TarZst,
}

impl From<OutputFormat> for kpack_artifact::tarball::OutputFormat {
    fn from(f: OutputFormat) -> Self {
        match f {
            OutputFormat::Dir => Self::Dir,
            OutputFormat::TarZst => Self::TarZst,
        }
    }
}
