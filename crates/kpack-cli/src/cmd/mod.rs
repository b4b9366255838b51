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

use crate::output::Error;

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
    /// The archive compression these options select, as the Python API selects it.
    pub fn compression(&self) -> Result<Compression, Error> {
        let scheme =
            clap::ValueEnum::to_possible_value(&self.compression).expect("every scheme has a name");
        Ok(Compression::from_args(scheme.get_name(), self.level)?)
    }
}

/// `--windows-names`, for the commands that name outputs (transform, split, split-wheel).
#[derive(clap::Args)]
pub struct NamesArgs {
    /// The outputs are meant for Windows: refuse, before writing anything, names Windows
    /// cannot hold (device names such as NUL or com1.txt, the characters <>:"|?* and control
    /// characters, a trailing dot or space, names differing only in case), and spell the `:`
    /// of a target ID as `@` in archive names. Always on when kpack runs on Windows.
    #[arg(long)]
    windows_names: bool,
}

impl NamesArgs {
    /// The name rules of the outputs.
    pub fn rules(&self) -> kpack_fs::NameRules {
        kpack_fs::NameRules::for_output(self.windows_names)
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

/// Serves every allocation of 1 MiB or more with its own mapping, so that freeing it returns
/// it to the system (glibc only), for the commands that walk whole artifacts (split,
/// recombine, verify).
///
/// glibc raises its mmap threshold to the size of each mapped block freed, up to 32 MiB, so
/// after the first code objects of a run most buffers of a few MB come from the heaps of
/// the worker threads, which keep them when freed. Over a package of a hundred fat
/// executables that retention grew `kpack split`'s peak (librocprim-tests) to 653 MiB, where
/// its hungriest member alone peaks at 442 MiB; with the threshold fixed at 1 MiB (which
/// also stops the raising) the package peaks at 449 MiB, at the same user CPU time
/// (docs/distribution.md). Not for every command: the `unified` coder creates a zstd context
/// and a frame buffer of a few MB per trial, and mapping each afresh took `pack --compression
/// unified --level 3` of librocsparse.so.1.0 from 66 s to 111 s (88 s of page faults).
pub fn return_large_buffers_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only changes glibc's allocation policy, for allocations made after it;
    // M_MMAP_THRESHOLD takes any value up to 32 MiB.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
