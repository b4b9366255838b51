//! The wheels staged (the variant copy, the device wheels' METADATA and WHEEL) and
//! published.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use kpack_wheelfile::metadata::{self, Identity};
use kpack_wheelfile::writer::{self, OutputFormat, Published};

use super::{OutputNames, Progress, SplitOptions, Work};
use crate::dist_info::{self, DeviceDist};
use crate::error::{WheelError, io};
use crate::hierarchy::BundleKey;

/// One wheel to publish: its staged tree, dist-info directory, file name and distribution.
pub(super) type Job = (PathBuf, String, PathBuf, String);

/// Writes the variant copy (when asked for) and each device wheel's METADATA and WHEEL;
/// returns every wheel to publish (the host first, then the variant, then the device
/// wheels in key order) and whether the variant is among them.
pub(super) fn stage_wheels(
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

/// Publishes every (tree, dist-info, file name) into `dir`, a few at a time; the result
/// does not depend on the order or the thread count.
pub(super) fn publish_all(
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
