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

/// Bytes from which split, recombine and verify serve an allocation with its own mapping
/// ([`return_large_buffers_to_the_system`]).
pub const ARTIFACT_MAPPED_FROM: usize = 1 << 20;

/// Bytes from which `pack --compression unified` serves an allocation with its own mapping
/// ([`return_large_buffers_to_the_system`]): well above the zstd contexts of levels 3 and 4
/// (at most 3.5 MiB, made afresh for each trial), below a large kernel (the 14 MB kernels
/// of a 200 MB bundle of 14 targets, read back as references, and their frame buffers). On
/// the memory bench's synthetic library with 8 threads, the kernels' buffers kept in the
/// workers' heaps took the peak to 529 MiB; with this threshold it was 360 MiB (with 4 MiB,
/// 361 MiB), at the same CPU time (docs/memory.md).
pub const UNIFIED_MAPPED_FROM: usize = 8 << 20;

/// Serves every allocation of `mapped_from` bytes or more with its own mapping, so that
/// freeing it returns it to the system (glibc only): [`ARTIFACT_MAPPED_FROM`] for the
/// commands that walk whole artifacts (split, recombine, verify), [`UNIFIED_MAPPED_FROM`]
/// for a `unified` pack.
///
/// glibc raises its mmap threshold to the size of each mapped block freed, up to 32 MiB, so
/// after the first code objects of a run most buffers of a few MB come from the heaps of
/// the worker threads, which keep them when freed. Over a package of a hundred fat
/// executables that retention grew `kpack split`'s peak (librocprim-tests) to 653 MiB, where
/// its hungriest member alone peaks at 442 MiB; with the threshold fixed at 1 MiB (which
/// also stops the raising) the package peaks at 449 MiB, at the same user CPU time
/// (docs/distribution.md). Not at 1 MiB for the `unified` coder: it creates a zstd context
/// and a frame buffer of a few MB per trial, and mapping each afresh took `pack --compression
/// unified --level 3` of librocsparse.so.1.0 from 66 s to 111 s (88 s of page faults).
///
/// A heap also keeps up to `mapped_from` bytes free at its top instead of returning them
/// (glibc's trim threshold): fixing the mmap threshold fixes the trim threshold at its
/// 128 KiB default too, so that a freed zstd context of a few MB at the top of a heap went
/// back to the system and the next one was faulted in afresh. On a one-core `unified` pack
/// of jax's plugin (27 targets, 2.9 MB of code objects) that was 6,400 of its 12,600 page
/// faults, and half its system time.
pub fn return_large_buffers_to_the_system(mapped_from: usize) {
    // Only glibc's policy is set; other allocators are left as they are.
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = mapped_from;
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only changes glibc's allocation policy, for allocations made after it;
    // M_MMAP_THRESHOLD takes any value up to 32 MiB, M_TRIM_THRESHOLD any value.
    unsafe {
        let mapped_from = mapped_from.min(32 << 20) as libc::c_int;
        libc::mallopt(libc::M_MMAP_THRESHOLD, mapped_from);
        libc::mallopt(libc::M_TRIM_THRESHOLD, mapped_from);
    }
}

/// Has glibc keep at most one heap (arena) per worker ([`kpack_concurrency::threads::count`]),
/// for the commands that walk whole artifacts (split, recombine, verify).
///
/// glibc gives threads heaps of their own, up to eight per core, and a heap keeps what its
/// threads freed for their next allocations. `split --batch` runs artifacts, their fat
/// binaries and their bundles on nested workers (14 threads alive at its peak on 2 cores):
/// in two runs each, the split of the distribution's 22 packages peaked at 465 and 473 MiB
/// with a heap per thread, at 447 and 409 MiB with two heaps, in the same time (186-190 s);
/// docs/memory.md.
pub fn one_heap_per_worker() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only changes glibc's allocation policy; M_ARENA_MAX takes any positive
    // count, and threads made before it keep the heaps they have.
    unsafe {
        let workers = kpack_concurrency::threads::count(0).clamp(1, libc::c_int::MAX as usize);
        libc::mallopt(libc::M_ARENA_MAX, workers as libc::c_int);
    }
}
