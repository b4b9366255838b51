//! A wheel pruned into a wheel written by [`kpack_wheelfile::writer::WheelZip`] (the writer of
//! `split-wheel`: deterministic zip, members deflated in the input's order, RECORD
//! regenerated with every file's SHA-256 and size, last; the input's RECORD signatures,
//! which the new RECORD voids, are left out), read member by member
//! ([`kpack_inputs::read`]'s members, in memory up to [`kpack_inputs::IN_MEMORY`] bytes,
//! else spilled), so memory and temporary space stay bounded by the largest member.

use std::path::Path;

use kpack_fs::Stage;
use kpack_inputs::Input;

use crate::PruneTreeError;
use crate::container::{container_error, each_member, stage_output};
use crate::job::PruneJob;

/// The `.dist-info` directory whose RECORD `member` is, or whether it is one of RECORD's
/// signatures.
fn record_of(member: &str) -> Option<(&str, bool)> {
    let (dir, name) = member.split_once('/')?;
    if !dir.ends_with(".dist-info") || name.contains('/') {
        return None;
    }
    match name {
        "RECORD" => Some((dir, false)),
        "RECORD.jws" | "RECORD.p7s" => Some((dir, true)),
        _ => None,
    }
}

pub(crate) fn prune_wheel(
    job: &mut PruneJob<'_>,
    stage: &mut Stage,
    wheel: &Path,
    to: &Path,
) -> Result<(), PruneTreeError> {
    let staged = stage_output(stage, to)?;
    let mut zip =
        kpack_wheelfile::writer::WheelZip::create(wheel, &staged.path).map_err(container_error)?;
    let mut dist_info = None;
    kpack_inputs::read(wheel, false, &mut |input: &Input<'_>| {
        let member = input.member.unwrap_or_default();
        if let Some((dir, signature)) = record_of(member) {
            if !signature {
                dist_info = Some(dir.to_owned());
            }
            return Ok(());
        }
        each_member(job, &staged, to, input, &mut |len, content, from| {
            zip.add(member, input.mode, true, len, from, content)
                .map_err(container_error)
        })
    })?;
    let dist_info = dist_info.ok_or_else(|| {
        container_error(kpack_wheelfile::WheelFileError::NotAWheel {
            wheel: wheel.to_owned(),
            problem: "no <name>.dist-info/RECORD".to_owned(),
        })
    })?;
    zip.finish(&dist_info).map_err(container_error)?;
    Ok(())
}
