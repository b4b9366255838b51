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

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use kpack_archive::Compression;
use kpack_package::handlers::{self, Handler};
use kpack_pipeline::transform::{self, HostState, Outcome, TransformOptions};
use kpack_target::TargetId;

use kpack_wheelfile::WheelFileError;
use kpack_wheelfile::metadata::{self, Identity};
use kpack_wheelfile::reader::{self, InputFile, Limits};
use kpack_wheelfile::record::Listed;
use kpack_wheelfile::writer::{self, OutputFormat, Published};

use crate::dist_info::{self, DeviceDist};
use crate::error::{WheelError, entry, io};
use crate::hierarchy::{BundleKey, Level};

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
    let mut stage = kpack_fs::Stage::new();
    let staged = stage
        .add_tree(&opts.output, |_| false)
        .map_err(kpack_artifact::ArtifactError::from)?;
    let work = Work::new(staged.join(".work"));
    std::fs::create_dir_all(&work.host).map_err(io(&work.host))?;

    progress("read", 0, 1);
    let (files, input_stem) = read_input(input, meta.is_dir(), &opts.limits, &work.host)?;
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
    std::fs::remove_dir_all(&work.dir).map_err(io(&work.dir))?;
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
fn read_input(
    input: &Path,
    is_dir: bool,
    limits: &Limits,
    host_root: &Path,
) -> Result<(Vec<InputFile>, Option<String>), WheelError> {
    if is_dir {
        return Ok((reader::read_dir(input, host_root)?, None));
    }
    let file = std::fs::File::open(input).map_err(io(input))?;
    let files = reader::read_zip(
        input,
        std::io::BufReader::with_capacity(1 << 20, file),
        limits,
        Some(host_root),
    )?;
    let stem = input
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".whl"))
        .filter(|s| matches!(s.split('-').count(), 5 | 6))
        .map(str::to_owned);
    Ok((files, stem))
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

/// The fat binaries to split: those under the overlay root, with their paths below it and
/// the module names their archives take.
struct FatBinaries<'a> {
    overlay: String,
    paths: Vec<&'a str>,
    rels: Vec<&'a str>,
    modules: Vec<String>,
}

impl<'a> FatBinaries<'a> {
    fn find(
        input: &Path,
        opts: &SplitOptions,
        host_root: &Path,
        files: &'a [InputFile],
        id: &Identity,
    ) -> Result<FatBinaries<'a>, WheelError> {
        let fat = find_fat(input, host_root, files, id)?;
        let overlay = overlay_root(input, opts, &fat, files)?;
        let prefix = format!("{overlay}/");
        let paths: Vec<&str> = fat.into_iter().filter(|p| p.starts_with(&prefix)).collect();
        if paths.is_empty() {
            return Err(WheelError::NoFatBinaries {
                wheel: input.to_owned(),
                overlay_root: overlay,
            });
        }
        let rels: Vec<&str> = paths.iter().map(|p| &p[prefix.len()..]).collect();
        let modules = kpack_artifact::split::module_names(&rels).map_err(|(a, b, name)| {
            entry(
                input,
                paths[a],
                format!(
                    "its archives would be named {name:?} like those of {}",
                    paths[b]
                ),
            )
        })?;
        Ok(FatBinaries {
            overlay,
            paths,
            rels,
            modules,
        })
    }
}

/// Takes the device code out of every fat binary (in place, in the host tree), moving its
/// archives into the device wheel of their target's bundle key.
fn transform_fat_binaries(
    input: &Path,
    opts: &SplitOptions,
    work: &Work,
    fat: &FatBinaries<'_>,
    devices: &mut BTreeMap<BundleKey, Device>,
    progress: Progress<'_>,
) -> Result<(Vec<FatBinary>, Moved), WheelError> {
    let total = fat.paths.len() as u64;
    let mut moved = Moved::new();
    let mut done = Vec::with_capacity(fat.paths.len());
    let binaries = fat.paths.iter().zip(&fat.rels).zip(&fat.modules);
    for (i, ((path, rel), module)) in binaries.enumerate() {
        progress("transform", i as u64, total);
        let depth = rel.matches('/').count();
        let search = format!("{}.kpack/{module}_@GFXARCH@.kpack", "../".repeat(depth));
        let binary = work.host.join(path);
        let kpacks = work.dir.join("kpacks").join(i.to_string());
        let t = transform::transform(
            &binary,
            &TransformOptions {
                output: binary.clone(),
                kpack_dir: kpacks.clone(),
                group: Some(module.clone()),
                kernel_name: Some((*rel).to_owned()),
                search_paths: vec![search],
                compression: opts.compression,
            },
        )
        .map_err(|source| WheelError::Transform {
            wheel: input.to_owned(),
            entry: (*path).to_owned(),
            source: Box::new(source),
        })?;
        let Outcome::Transformed(t) = t else {
            return Err(entry(
                input,
                *path,
                "already kpacked: it changed while being split",
            ));
        };
        let mut targets = Vec::new();
        for a in &t.archives {
            let target = TargetId::parse(&a.target)
                .map_err(|e| entry(input, *path, format!("target {:?}: {e}", a.target)))?;
            let key =
                BundleKey::of_target(&target).map_err(|e| entry(input, *path, e.to_string()))?;
            let name = a.path.file_name().expect("archives have names");
            let to = work
                .dev_root(&key)
                .join(&fat.overlay)
                .join(".kpack")
                .join(name);
            move_file(&a.path, &to)?;
            moved
                .entry((key.clone(), module.clone()))
                .or_default()
                .push((a.target.clone(), to));
            let d = devices.entry(key).or_default();
            d.architectures.insert(a.target.clone());
            d.archives += 1;
            targets.push(a.target.clone());
        }
        done.push(FatBinary {
            path: (*path).to_owned(),
            module: module.clone(),
            code_objects: t.code_objects,
            input_size: t.input_size,
            output_size: t.output_size,
            targets,
        });
    }
    progress("transform", total, total);
    Ok((done, moved))
}

/// Makes each module's archives in one device wheel one multi-target archive,
/// `<module>_<key>.kpack`.
fn group_archives(
    opts: &SplitOptions,
    work: &Work,
    overlay: &str,
    moved: Moved,
    devices: &mut BTreeMap<BundleKey, Device>,
) -> Result<(), WheelError> {
    for ((key, module), mut sources) in moved {
        sources.sort();
        let kpack_dir = work.dev_root(&key).join(overlay).join(".kpack");
        let to = kpack_dir.join(format!("{module}_{key}.kpack"));
        kpack_package::group::write(&to, &module, key.as_str(), &sources, opts.compression)?;
        for (_, from) in sources.iter().filter(|(_, from)| *from != to) {
            std::fs::remove_file(from).map_err(io(from))?;
        }
        let d = devices.get_mut(&key).expect("a device wheel per archive");
        d.archives -= sources.len() - 1;
    }
    Ok(())
}

/// Moves each kernel-database file under the overlay root to its architecture's device
/// wheel, at the same path; returns how many moved.
fn move_database_files(
    input: &Path,
    opts: &SplitOptions,
    work: &Work,
    overlay: &str,
    files: &[InputFile],
    devices: &mut BTreeMap<BundleKey, Device>,
) -> Result<usize, WheelError> {
    let mut moved = 0;
    if opts.handlers.is_empty() {
        return Ok(moved);
    }
    let prefix = format!("{overlay}/");
    for f in files.iter().filter(|f| f.path.starts_with(&prefix)) {
        let Some(arch) = handlers::classify(&opts.handlers, &f.path[prefix.len()..]) else {
            continue;
        };
        let key = match handlers::parse_family(&arch.artifact) {
            Some(family) => BundleKey::of_family(family).ok_or_else(|| {
                entry(
                    input,
                    &f.path,
                    format!("database family {family:?} is no known packaging family"),
                )
            })?,
            None => TargetId::parse(&arch.target)
                .map_err(|e| e.to_string())
                .and_then(|t| BundleKey::of_target(&t).map_err(|e| e.to_string()))
                .map_err(|problem| entry(input, &f.path, problem))?,
        };
        move_file(&work.host.join(&f.path), &work.dev_root(&key).join(&f.path))?;
        remove_empty_parents(&work.host, &f.path, overlay)?;
        let d = devices.entry(key).or_default();
        d.architectures.insert(arch.target.clone());
        d.database_files += 1;
        moved += 1;
    }
    Ok(moved)
}

/// The device wheels' distributions, in key order.
fn device_dists(
    opts: &SplitOptions,
    id: &Identity,
    devices: &BTreeMap<BundleKey, Device>,
) -> Vec<DeviceDist> {
    let device_prefix = opts
        .device_package_prefix
        .clone()
        .unwrap_or_else(|| format!("{}-device", id.name));
    devices
        .iter()
        .map(|(key, d)| DeviceDist {
            key: key.clone(),
            dist: format!("{device_prefix}-{}", key.dist_suffix()),
            serves: key.served_targets(d.architectures.iter().map(String::as_str)),
        })
        .collect()
}

/// Adds the `device-<target>` extras to the host METADATA; returns the new METADATA.
fn add_host_extras(
    host_root: &Path,
    id: &Identity,
    dists: &[DeviceDist],
) -> Result<String, WheelError> {
    let path = host_root.join(&id.dist_info).join("METADATA");
    let original = std::fs::read_to_string(&path).map_err(io(&path))?;
    let host_metadata =
        metadata::insert_headers(&original, &dist_info::host_extras_block(&id.version, dists));
    std::fs::write(&path, &host_metadata).map_err(io(&path))?;
    Ok(host_metadata)
}

/// One wheel to publish: its staged tree, dist-info directory, file name and distribution.
type Job = (PathBuf, String, PathBuf, String);

/// Writes the variant copy (when asked for) and each device wheel's METADATA and WHEEL;
/// returns every wheel to publish (the host first, then the variant, then the device
/// wheels in key order) and whether the variant is among them.
fn stage_wheels(
    opts: &SplitOptions,
    work: &Work,
    id: &Identity,
    dists: &[DeviceDist],
    host_metadata: &str,
    names: &OutputNames,
) -> Result<(Vec<Job>, bool), WheelError> {
    let ext = match opts.output_format {
        OutputFormat::Wheel => ".whl",
        OutputFormat::Directory => "",
    };
    let mut jobs: Vec<Job> = vec![(
        work.host.clone(),
        id.dist_info.clone(),
        format!("{}{ext}", names.host_stem).into(),
        id.name.clone(),
    )];
    let variant = opts.variants;
    if variant {
        let label = &opts.variant_label;
        if label.is_empty()
            || !label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        {
            return Err(WheelError::Usage(format!(
                "variant label {label:?}: use letters, digits, `_` and `.`"
            )));
        }
        let root = work.dir.join("variant");
        copy_tree(&work.host, &root)?;
        let di = root.join(&id.dist_info);
        let m = di.join("METADATA");
        std::fs::write(&m, dist_info::add_variant_markers(host_metadata)).map_err(io(&m))?;
        let targets = dist_info::extra_targets(dists);
        let targets: Vec<&str> = targets.iter().map(BundleKey::as_str).collect();
        let v = di.join("variant.json");
        std::fs::write(&v, dist_info::variant_json(&targets)).map_err(io(&v))?;
        let dest = format!("{}-{label}{ext}", names.host_stem);
        jobs.push((root, id.dist_info.clone(), dest.into(), id.name.clone()));
    }
    for d in dists {
        let root = work.dev_root(&d.key);
        let stem = id.stem_for(&d.dist, &names.tag_part);
        let dist_info = format!(
            "{}-{}.dist-info",
            metadata::escape_name(&d.dist),
            id.version.replace('-', "_")
        );
        let di = root.join(&dist_info);
        std::fs::create_dir_all(&di).map_err(io(&di))?;
        let m = di.join("METADATA");
        std::fs::write(
            &m,
            dist_info::device_metadata(id, d, dists, &opts.device_requires_dist),
        )
        .map_err(io(&m))?;
        let w = di.join("WHEEL");
        std::fs::write(&w, dist_info::device_wheel_file(id)).map_err(io(&w))?;
        jobs.push((
            root,
            dist_info,
            format!("{stem}{ext}").into(),
            d.dist.clone(),
        ));
    }
    Ok((jobs, variant))
}

/// The host wheel's `.kpm` indexes: per module, every target of every device wheel with its
/// archive file and device distribution, at `<overlay>/.kpack/<module>.kpm`, beside where
/// the archives install.
fn write_indexes(
    work: &Work,
    overlay: &str,
    name: &str,
    dists: &[DeviceDist],
) -> Result<(), WheelError> {
    let mut archives = Vec::new();
    for d in dists {
        let kpack_dir = work.dev_root(&d.key).join(overlay).join(".kpack");
        if !kpack_dir.is_dir() {
            continue; // database files only
        }
        for e in kpack_fs::walk(&kpack_dir) {
            let e = e?;
            if !e.file_type.is_file() {
                continue;
            }
            let rel = format!("{overlay}/.kpack/{}", e.rel.display());
            archives.extend(kpack_package::index::describe_archive(
                &e.path, &rel, &d.dist,
            )?);
        }
    }
    let indexes = kpack_package::index::build(name, archives).map_err(|problems| {
        WheelError::Usage(format!(
            "one module's archive for one target in two device wheels: {}",
            problems.join("; ")
        ))
    })?;
    for (rel, kpm) in indexes {
        let to = work.host.join(&rel);
        let bytes = kpm
            .encode()
            .map_err(|e| WheelError::Usage(format!("{rel}: encoding the index: {e}")))?;
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        std::fs::write(&to, bytes).map_err(io(&to))?;
    }
    Ok(())
}

/// Publishes every (tree, dist-info, file name) into `dir`, a few at a time; the result
/// does not depend on the order or the thread count.
fn publish_all(
    wheel: &Path,
    dir: &Path,
    jobs: &[Job],
    format: OutputFormat,
    stored: &(dyn Fn(&str) -> bool + Sync),
    progress: Progress<'_>,
) -> Result<Vec<Published>, WheelError> {
    let done = AtomicUsize::new(0);
    let total = jobs.len() as u64;
    progress("write", 0, total);
    let threads = kpack_concurrency::threads::count(0);
    kpack_concurrency::threads::map(jobs, threads, |_, (root, dist_info, dest, _)| {
        let r = writer::publish(wheel, root, dist_info, format, &dir.join(dest), stored);
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        progress("write", n as u64, total);
        Ok(r?)
    })
}

/// The fat binaries among `files` (outside the dist-info), by path.
fn find_fat<'a>(
    wheel: &Path,
    root: &Path,
    files: &'a [InputFile],
    id: &Identity,
) -> Result<Vec<&'a str>, WheelError> {
    let mut fat = Vec::new();
    for f in files {
        if f.path.starts_with(&id.dist_info) || f.size < 64 {
            continue;
        }
        let path = root.join(&f.path);
        let file = std::fs::File::open(&path).map_err(io(&path))?;
        let mut magic = [0u8; 4];
        // ELF files and PE images (`MZ`: Windows DLLs and EXEs) can be fat binaries.
        if (&file).read_exact(&mut magic).is_err()
            || (magic != *b"\x7fELF" && !magic.starts_with(b"MZ"))
        {
            continue;
        }
        let bytes = kpack_pipeline::map_file(&file, &path)
            .map_err(|e| entry(wheel, &f.path, e.to_string()))?;
        // A binary kpack cannot read is not a fat binary kpack can split: it stays as is.
        if let Ok(HostState::Fat) = transform::check(&bytes) {
            fat.push(f.path.as_str());
        }
    }
    Ok(fat)
}

/// The overlay root: given (slashes trimmed, must be a directory of the wheel), or the one
/// top-level directory holding every fat binary.
fn overlay_root(
    wheel: &Path,
    opts: &SplitOptions,
    fat: &[&str],
    files: &[InputFile],
) -> Result<String, WheelError> {
    if let Some(given) = &opts.overlay_root {
        let root = given.trim_matches('/').to_owned();
        let prefix = format!("{root}/");
        if root.is_empty() || !files.iter().any(|f| f.path.starts_with(&prefix)) {
            return Err(WheelError::Usage(format!(
                "{}: overlay root {given:?} is not a directory of the wheel",
                wheel.display()
            )));
        }
        return Ok(root);
    }
    let tops: BTreeSet<&str> = fat
        .iter()
        .map(|p| p.split_once('/').map_or("", |(t, _)| t))
        .collect();
    match tops.into_iter().collect::<Vec<_>>().as_slice() {
        [] => Err(WheelError::NoFatBinaries {
            wheel: wheel.to_owned(),
            overlay_root: String::new(),
        }),
        [""] | ["", ..] => Err(WheelError::Usage(format!(
            "{}: a fat binary lies at the top level of the wheel; give --overlay-root",
            wheel.display()
        ))),
        [one] => Ok((*one).to_owned()),
        many => Err(WheelError::Usage(format!(
            "{}: fat binaries lie under several top-level directories ({}); give --overlay-root",
            wheel.display(),
            many.join(", ")
        ))),
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

/// Copies the tree `from` to `to`, modes kept.
fn copy_tree(from: &Path, to: &Path) -> Result<(), WheelError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    for e in kpack_fs::walk(from) {
        let e = e?;
        let dst = to.join(&e.rel);
        if e.file_type.is_dir() {
            std::fs::create_dir_all(&dst).map_err(io(&dst))?;
        } else {
            std::fs::copy(&e.path, &dst).map_err(io(&dst))?;
        }
    }
    Ok(())
}
