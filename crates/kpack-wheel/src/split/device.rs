//! What the device wheels hold besides the transforms' archives, and what the host learns
//! of them: database files moved, distributions named, the host's extras and indexes.

use std::collections::BTreeMap;
use std::path::Path;

use kpack_package::handlers;
use kpack_target::TargetId;
use kpack_wheelfile::metadata::{self, Identity};
use kpack_wheelfile::reader::InputFile;

use super::{Device, SplitOptions, Work, move_file, remove_empty_parents};
use crate::dist_info::{self, DeviceDist};
use crate::error::{WheelError, entry, io};
use crate::hierarchy::BundleKey;

/// Moves each kernel-database file under the overlay root to its architecture's device
/// wheel, at the same path; returns how many moved.
pub(super) fn move_database_files(
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
pub(super) fn device_dists(
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
pub(super) fn add_host_extras(
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

/// The host wheel's `.kpm` indexes: per module, every target of every device wheel with its
/// archive file and device distribution, at `<overlay>/.kpack/<module>.kpm`, beside where
/// the archives install.
pub(super) fn write_indexes(
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
