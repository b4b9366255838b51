//! `split_wheel`: a fat ROCm wheel becomes a host wheel plus one device wheel per bundle
//! key (reference spec §1.2, done with kpack's transform and database handlers).
//!
//! Everything is staged beside (or inside) the output directory and published only when
//! every output is complete; an error leaves no output (see `kpack_fs::Stage`).
//!
//! **Archives.** Each fat binary is transformed on its own (`kpack_pipeline::transform`),
//! so its archives are `<overlay>/.kpack/<module>_<target>.kpack`, the module named as
//! `kpack split` names it (file name up to the first `.`, without `lib`; the path when
//! two binaries share it). The reference packs all binaries of a wheel into one archive
//! per target; one per binary and target keeps each binary's code in its own file (the
//! runtime opens only what a loaded binary names) and needs no second packing pass. The
//! marker's `kernel_name` is the binary's path below the overlay root and its search path
//! `[../…]/.kpack/<module>_@GFXARCH@.kpack`, relative to the binary's directory, exactly
//! as the reference writes it (§2.3).
//!
//! Modules: `fat` (the fat binaries found and transformed, their archives moved or grouped),
//! `device` (what else the device wheels hold: database files, METADATA extras, indexes),
//! `publish` (the wheels staged and written).

mod device;
mod fat;
mod publish;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_archive::Compression;
use kpack_package::handlers::Handler;

use kpack_wheelfile::WheelFileError;
use kpack_wheelfile::metadata::{self, Identity};
use kpack_wheelfile::reader::{self, InputFile, Limits};
use kpack_wheelfile::record::Listed;
use kpack_wheelfile::writer::{OutputFormat, Published};

use crate::error::{WheelError, io};
use crate::hierarchy::{BundleKey, Level};
use device::{add_host_extras, device_dists, move_database_files, write_indexes};
use fat::{FatBinaries, group_archives, transform_fat_binaries};
use publish::{publish_all, stage_wheels};

/// How to split a wheel.
#[derive(Debug, Clone)]
pub struct SplitOptions {
    /// The output directory (created if missing; existing outputs are never overwritten).
    pub output: PathBuf,
    /// Device dist-name prefix (default `<Name>-device`).
    pub device_package_prefix: Option<String>,
    /// The package directory that holds the fat binaries and gets `.kpack/` (default: the
    /// one top-level directory holding every fat binary).
    pub overlay_root: Option<String>,
    /// Extra `Requires-Dist` of every device wheel; `@GFXARCH@` becomes the bundle key (such
    /// entries are left out of family and sub-family wheels).
    pub device_requires_dist: Vec<String>,
    /// Database handlers, tried in this order.
    pub handlers: Vec<Handler>,
    /// Whether outputs are `.whl` files or unpacked wheel directories.
    pub output_format: OutputFormat,
    /// Also write the PEP 817/825 variant copy of the host wheel (spec §4.2).
    pub variants: bool,
    /// The variant wheel's file-name label.
    pub variant_label: String,
    /// Compression of the code objects inside the `.kpack` archives.
    pub compression: Compression,
    /// One multi-target archive per module in each device wheel, `<module>_<key>.kpack`
    /// (all of the wheel's targets: `gfx90a:xnack±` in `gfx90a`, generic ISAs in their
    /// family), and the index `<overlay>/.kpack/<module>.kpm` in the host wheel, through
    /// which kpack's runtime finds them (wheels cannot hold per-target links).
    pub multi_target_archives: bool,
    /// The names the outputs may have (`kpack_fs::NameRules`): archive names spell a
    /// target's `:` as `@` for Windows.
    pub names: kpack_fs::NameRules,
    /// Bounds on what the input zip may declare (entry count, sizes), so that a hostile
    /// wheel cannot make the reader allocate or write without limit.
    pub limits: Limits,
}

impl SplitOptions {
    /// Defaults for writing into `output`.
    pub fn new(output: impl Into<PathBuf>) -> SplitOptions {
        SplitOptions {
            output: output.into(),
            device_package_prefix: None,
            overlay_root: None,
            device_requires_dist: Vec::new(),
            handlers: Vec::new(),
            output_format: OutputFormat::Wheel,
            variants: false,
            variant_label: "variant".into(),
            compression: Compression::zstd(),
            multi_target_archives: false,
            names: kpack_fs::NameRules::for_output(false),
            limits: Limits::default(),
        }
    }
}

/// One fat binary rewritten.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FatBinary {
    /// Path inside the wheel.
    pub path: String,
    /// The module name its archives are named after (`<module>_<target>.kpack`), unique
    /// among the wheel's fat binaries.
    pub module: String,
    /// Code objects taken out of it, over every target.
    pub code_objects: usize,
    /// Its size in the fat wheel, in bytes.
    pub input_size: u64,
    /// Its size in the host wheel once the device code is taken out, in bytes.
    pub output_size: u64,
    /// Full target ids of its archives.
    pub targets: Vec<String>,
}

/// One output wheel.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OutputWheel {
    /// Its distribution name (the fat wheel's for the host wheel).
    pub dist: String,
    /// Where it is once published.
    pub path: PathBuf,
    /// What it holds: file count, bytes and size on disk.
    #[serde(flatten)]
    pub published: Published,
}

/// One device wheel.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceWheel {
    /// The target, sub-family or family it serves (its `device-<key>` extra of the host).
    pub key: BundleKey,
    /// Which of the three that key is.
    pub level: Level,
    /// Full target ids (archives) and database architectures it holds.
    pub architectures: Vec<String>,
    /// `.kpack` archives moved into it.
    pub archives: usize,
    /// Kernel-database files moved into it.
    pub database_files: usize,
    /// The wheel written.
    #[serde(flatten)]
    pub wheel: OutputWheel,
}

/// What [`split_wheel`] did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// The fat wheel, as given.
    pub input: PathBuf,
    /// Its `Name` from METADATA.
    pub name: String,
    /// Its `Version` from METADATA.
    pub version: String,
    /// The package directory that got `.kpack/` (given, or the one found).
    pub overlay_root: String,
    /// Every fat binary rewritten, in wheel order.
    pub fat_binaries: Vec<FatBinary>,
    /// Kernel-database files moved into device wheels, over all of them.
    pub database_files: usize,
    /// Every architecture found (archives and databases), sorted.
    pub architectures: Vec<String>,
    /// The input's members its RECORD lists with an empty hash field (accepted, as pip
    /// accepts them: only the zip's CRC-32 and a size, if given, vouched for them), in
    /// wheel order. Every output wheel lists every member with its SHA-256 and size.
    pub unhashed_members: Vec<String>,
    /// The host wheel: the rewritten binaries, everything not device-specific, and the
    /// `device-<key>` extras.
    pub host: OutputWheel,
    /// The PEP 817/825 variant copy of the host wheel, when asked for.
    pub variant: Option<OutputWheel>,
    /// One device wheel per target, sub-family and family found, in key order.
    pub devices: Vec<DeviceWheel>,
}

/// Progress: (phase, done, total).
pub type Progress<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

/// Splits the wheel `input` (a `.whl` or an unpacked wheel directory) per `opts`.
pub fn split_wheel(input: &Path, opts: &SplitOptions) -> Result<Summary, WheelError> {
    split_wheel_with_progress(input, opts, &|_, _, _| {})
}

/// [`split_wheel`], reporting progress as it goes.
pub fn split_wheel_with_progress(
    input: &Path,
    opts: &SplitOptions,
    progress: Progress<'_>,
) -> Result<Summary, WheelError> {
    let meta = std::fs::metadata(input).map_err(io(input))?;
    let opts = &SplitOptions {
        names: kpack_fs::NameRules::for_output(opts.names.windows() || windows_wheel(input)),
        ..opts.clone()
    };
    let mut stage = kpack_fs::Stage::new();
    let staged = stage
        .add_tree(&opts.output, |_| false)
        .map_err(kpack_artifact::ArtifactError::from)?;
    let work = Work::new(staged.join(".work"));
    std::fs::create_dir_all(&work.host).map_err(io(&work.host))?;

    progress("read", 0, 1);
    let (files, input_stem) = read_input(input, meta.is_dir(), opts, &work.host)?;
    progress("read", 1, 1);
    let id = read_identity(input, &work.host, &files)?;
    let names = OutputNames::new(input_stem, &id);
    let fat = FatBinaries::find(input, opts, &work.host, &files, &id)?;

    let mut devices = BTreeMap::new();
    let (fat_done, moved) =
        transform_fat_binaries(input, opts, &work, &fat, &mut devices, progress)?;
    if opts.multi_target_archives {
        group_archives(opts, &work, &fat.overlay, moved, &mut devices)?;
    }
    let database_files =
        move_database_files(input, opts, &work, &fat.overlay, &files, &mut devices)?;
    let dists = device_dists(opts, &id, &devices);
    if opts.multi_target_archives {
        write_indexes(&work, &fat.overlay, &id.name, &dists)?;
    }
    let host_metadata = add_host_extras(&work.host, &id, &dists)?;
    let (jobs, variant) = stage_wheels(opts, &work, &id, &dists, &host_metadata, &names)?;

    let zstd = matches!(opts.compression, Compression::Zstd { .. });
    let stored = |p: &str| zstd && p.ends_with(".kpack") && p.contains("/.kpack/");
    let published = publish_all(input, &staged, &jobs, opts.output_format, &stored, progress)?;
    let mut outputs = jobs
        .iter()
        .zip(published)
        .map(|((_, _, dest, dist), published)| OutputWheel {
            dist: dist.clone(),
            path: opts.output.join(dest),
            published,
        });
    let host = outputs.next().expect("the host is first");
    let variant = if variant { outputs.next() } else { None };
    let devices: Vec<DeviceWheel> = devices
        .into_iter()
        .zip(outputs)
        .map(|((key, d), wheel)| DeviceWheel {
            level: key.level(),
            key,
            architectures: d.architectures.into_iter().collect(),
            archives: d.archives,
            database_files: d.database_files,
            wheel,
        })
        .collect();
    kpack_fs::remove_tree(&work.dir).map_err(io(&work.dir))?;
    stage
        .publish()
        .map_err(kpack_artifact::ArtifactError::from)?;
    let architectures: BTreeSet<String> = devices
        .iter()
        .flat_map(|d| d.architectures.iter().cloned())
        .collect();
    Ok(Summary {
        input: input.to_owned(),
        name: id.name,
        version: id.version,
        overlay_root: fat.overlay,
        fat_binaries: fat_done,
        database_files,
        architectures: architectures.into_iter().collect(),
        unhashed_members: files
            .iter()
            .filter(|f| f.listed == Listed::Unhashed)
            .map(|f| f.path.clone())
            .collect(),
        host,
        variant,
        devices,
    })
}

/// The staging tree of a split, below the staged output directory: the host wheel's files
/// (`host`, the input read there), each device wheel's (`dev/<key>`), the variant copy and
/// the transforms' archives before they move.
struct Work {
    dir: PathBuf,
    host: PathBuf,
}

impl Work {
    fn new(dir: PathBuf) -> Work {
        let host = dir.join("host");
        Work { dir, host }
    }

    /// The staged tree of the device wheel of `key`.
    fn dev_root(&self, key: &BundleKey) -> PathBuf {
        self.dir.join("dev").join(key.as_str())
    }
}

/// What one device wheel holds, as the split fills it.
#[derive(Default)]
struct Device {
    architectures: BTreeSet<String>,
    archives: usize,
    database_files: usize,
}

/// Per device wheel and module: the archives moved there, (target, path).
type Moved = BTreeMap<(BundleKey, String), Vec<(String, PathBuf)>>;

/// Reads the input (an unpacked wheel directory, or a `.whl`) into `host_root`; with the
/// `.whl`'s file-name stem when it is a wheel name.
///
/// Every output wheel holds the input's members under their own names, so with Windows's
/// name rules those are checked first: a zip's on its central directory, before any member
/// is written (on Windows, writing `Nul.py` would write to the NUL device).
fn read_input(
    input: &Path,
    is_dir: bool,
    opts: &SplitOptions,
    host_root: &Path,
) -> Result<(Vec<InputFile>, Option<String>), WheelError> {
    let mut names = kpack_fs::OutputNames::new(input, opts.names);
    if is_dir {
        // A directory Windows holds has only names Windows can hold: the copy into the
        // staging tree cannot meet a device name there, and elsewhere it is staging only.
        let files = reader::read_dir(input, host_root)?;
        names.check_all(files.iter().map(|f| f.path.as_str()))?;
        return Ok((files, None));
    }
    let open = || {
        let file = std::fs::File::open(input).map_err(io(input))?;
        Ok::<_, WheelError>(std::io::BufReader::with_capacity(1 << 20, file))
    };
    if opts.names.windows() {
        let members = reader::member_names(input, open()?, &opts.limits)?;
        names.check_all(members.iter().map(String::as_str))?;
    }
    let files = reader::read_zip(input, open()?, &opts.limits, Some(host_root))?;
    let stem = input
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".whl"))
        .filter(|s| matches!(s.split('-').count(), 5 | 6))
        .map(str::to_owned);
    Ok((files, stem))
}

/// Whether the wheel file's name carries a Windows platform tag (`win_amd64`, `win32`,
/// `win_arm64`, alone or among `.`-joined tags): its outputs are meant for Windows.
fn windows_wheel(input: &Path) -> bool {
    input
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".whl"))
        .and_then(|stem| stem.rsplit('-').next())
        .is_some_and(|platform| platform.split('.').any(|tag| tag.starts_with("win")))
}

/// The identity of the wheel read into `host_root` (its METADATA and WHEEL).
fn read_identity(
    input: &Path,
    host_root: &Path,
    files: &[InputFile],
) -> Result<Identity, WheelError> {
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let read_text = |p: &str| -> Result<String, WheelFileError> {
        let full = host_root.join(p);
        let bytes = std::fs::read(&full).map_err(kpack_wheelfile::io(&full))?;
        String::from_utf8(bytes).map_err(|_| WheelFileError::Entry {
            wheel: input.to_owned(),
            entry: p.to_owned(),
            problem: "not UTF-8 text".into(),
        })
    };
    Ok(metadata::identity(input, &paths, read_text)?)
}

/// The file names of the outputs: the host's stem and the tags every output carries, the
/// input's own when its name is a wheel name.
struct OutputNames {
    host_stem: String,
    tag_part: String,
}

impl OutputNames {
    fn new(input_stem: Option<String>, id: &Identity) -> OutputNames {
        match input_stem {
            Some(stem) => {
                let parts: Vec<&str> = stem.split('-').collect();
                let tag_part = parts[2..].join("-");
                OutputNames {
                    host_stem: stem.clone(),
                    tag_part,
                }
            }
            None => {
                let tag_part = id.tag_part();
                OutputNames {
                    host_stem: id.stem_for(&id.name, &tag_part),
                    tag_part,
                }
            }
        }
    }
}

fn move_file(from: &Path, to: &Path) -> Result<(), WheelError> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::rename(from, to).map_err(io(to))
}

/// Removes the directories of `rel` (below `root`) left empty, up to the overlay root.
fn remove_empty_parents(root: &Path, rel: &str, overlay: &str) -> Result<(), WheelError> {
    let mut dir = Path::new(rel).parent();
    while let Some(d) = dir {
        if d.as_os_str().is_empty() || d == Path::new(overlay) {
            break;
        }
        let full = root.join(d);
        let empty = std::fs::read_dir(&full)
            .map_err(io(&full))?
            .next()
            .is_none();
        if !empty {
            break;
        }
        std::fs::remove_dir(&full).map_err(io(&full))?;
        dir = d.parent();
    }
    Ok(())
}
