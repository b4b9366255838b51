//! The fat binaries of a wheel: found, transformed in place, their archives moved into the
//! device wheels (and, with multi-target archives, grouped).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use kpack_pipeline::transform::{self, HostState, Outcome, TransformOptions};
use kpack_target::TargetId;
use kpack_wheelfile::metadata::Identity;
use kpack_wheelfile::reader::InputFile;

use super::{Device, FatBinary, Moved, Progress, SplitOptions, Work, move_file};
use crate::error::{WheelError, entry, io};
use crate::hierarchy::BundleKey;

/// The fat binaries to split: those under the overlay root, with their paths below it and
/// the module names their archives take.
pub(super) struct FatBinaries<'a> {
    pub(super) overlay: String,
    paths: Vec<&'a str>,
    rels: Vec<&'a str>,
    modules: Vec<String>,
}

impl<'a> FatBinaries<'a> {
    pub(super) fn find(
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
pub(super) fn transform_fat_binaries(
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
                names: opts.names,
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
pub(super) fn group_archives(
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
