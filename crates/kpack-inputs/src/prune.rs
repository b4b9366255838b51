//! `kpack prune` of every form: directories and plain files as
//! [`kpack_artifact::prune`] prunes them, and wheels and tarballs member by member, with
//! the same decision per member as per file of a tree ([`PruneJob::member`]): fat binaries
//! pruned, database files of dropped targets left out, everything else copied byte for byte.
//!
//! A container is rewritten as it is read, one member at a time ([`read`]'s members, in
//! memory up to [`IN_MEMORY`] bytes, else spilled), so memory and temporary space stay
//! bounded by the largest member:
//! * a wheel becomes a wheel written by [`kpack_wheelfile::writer::WheelZip`] (the writer of
//!   `split-wheel`: deterministic zip, members deflated in the input's order, RECORD
//!   regenerated with every file's SHA-256 and size, last; the input's RECORD signatures,
//!   which the new RECORD voids, are left out);
//! * a tarball becomes a tarball in the same compression, written by
//!   [`kpack_tar::TarWriter`] (the writer of `split --output-format tar.zst`), members in
//!   the input's order, directories and symbolic links kept.
//!
//! The output is staged like every other prune output and appears only when the whole job
//! succeeded.

use std::io::Read;
use std::path::{Path, PathBuf};

use kpack_artifact::prune::{MemberFate, PruneJob, PruneReport, PruneTreeError, prune_each};
use kpack_fs::{Replace, Stage};
use kpack_pipeline::SourceError;
use kpack_pipeline::prune::Selection;

use crate::{Form, IN_MEMORY, Input, Stop, io_error, member_path};

/// Prunes `inputs` (files, directories, wheels, tarballs) into `output`: a file for one
/// input file (a wheel or a tarball of the same form for one container), a tree for one
/// directory, a directory holding each input under its name for several.
pub fn prune(
    inputs: &[PathBuf],
    output: &Path,
    selection: &Selection,
    allow_empty: bool,
) -> Result<PruneReport, PruneTreeError> {
    prune_each(
        inputs,
        output,
        selection,
        allow_empty,
        &mut |job, stage, input, to| match Form::of(input) {
            Form::File => Ok(false),
            Form::Wheel => prune_wheel(job, stage, input, to).map(|()| true),
            Form::Tarball => prune_tarball(job, stage, input, to).map(|()| true),
        },
    )
}

fn container_error(e: impl std::error::Error + Send + Sync + 'static) -> PruneTreeError {
    SourceError::Container(Box::new(e)).into()
}

/// Where a container's output is written, and where its pruned members are spooled.
struct Staged {
    /// The output file in the stage.
    path: PathBuf,
    /// The directory holding the member being pruned (removed with the stage).
    spool: tempfile::TempDir,
}

fn stage_output(stage: &mut Stage, to: &Path) -> Result<Staged, PruneTreeError> {
    let path = stage.add(to, Replace::Allowed)?;
    let dir = kpack_fs::parent_dir(&path);
    let spool = kpack_fs::temp_dir_in(dir).map_err(io_error(dir))?;
    Ok(Staged { path, spool })
}

/// Writes a member into a container: its length, its content, and the file the content is
/// read from (for errors).
type WriteMember<'w> = dyn FnMut(u64, &mut dyn Read, &Path) -> Result<(), PruneTreeError> + 'w;

/// Decides what becomes of the member `input` and hands `write` the bytes to write (the
/// member's own, or its pruned form from the spool), unless it is left out.
fn each_member(
    job: &mut PruneJob<'_>,
    staged: &Staged,
    to: &Path,
    input: &Input<'_>,
    write: &mut WriteMember<'_>,
) -> Result<(), PruneTreeError> {
    let rel = input.member.unwrap_or_default();
    let spool = staged.spool.path().join("member");
    let published = member_path(to, rel);
    match job.member(
        input.shown,
        rel,
        input.bytes,
        input.mode,
        &spool,
        &published,
    )? {
        MemberFate::Omitted => Ok(()),
        MemberFate::Copied => write(input.bytes.len() as u64, &mut &input.bytes[..], input.shown),
        MemberFate::Pruned => {
            let file = std::fs::File::open(&spool).map_err(io_error(&spool))?;
            let len = file.metadata().map_err(io_error(&spool))?.len();
            let mut content = std::io::BufReader::with_capacity(1 << 20, file);
            write(len, &mut content, &spool)?;
            std::fs::remove_file(&spool).map_err(io_error(&spool))?;
            Ok(())
        }
    }
}

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

fn prune_wheel(
    job: &mut PruneJob<'_>,
    stage: &mut Stage,
    wheel: &Path,
    to: &Path,
) -> Result<(), PruneTreeError> {
    let staged = stage_output(stage, to)?;
    let mut zip =
        kpack_wheelfile::writer::WheelZip::create(wheel, &staged.path).map_err(container_error)?;
    let mut dist_info = None;
    crate::read_wheel(wheel, IN_MEMORY, &mut |input: &Input<'_>| {
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

fn prune_tarball(
    job: &mut PruneJob<'_>,
    stage: &mut Stage,
    tarball: &Path,
    to: &Path,
) -> Result<(), PruneTreeError> {
    let mut head = [0u8; 8];
    let mut file = std::fs::File::open(tarball).map_err(io_error(tarball))?;
    let n = file.read(&mut head).map_err(io_error(tarball))?;
    let compression = kpack_tar::Compression::sniff(&head[..n]);
    let staged = stage_output(stage, to)?;
    let out = std::fs::File::create(&staged.path).map_err(io_error(&staged.path))?;
    let out = std::io::BufWriter::with_capacity(1 << 20, out);
    let mut writer = kpack_tar::TarWriter::new(
        out,
        compression,
        kpack_tar::PackOptions::from_env(),
        &staged.path,
    )
    .map_err(container_error)?;
    let written = |path: &Path| {
        let path = path.to_owned();
        move |e| container_error(kpack_tar::TarError::Io { path, source: e })
    };
    kpack_tar::open(tarball, |m, content| -> Result<(), Stop<PruneTreeError>> {
        let shown = member_path(tarball, &m.path);
        match &m.kind {
            kpack_tar::MemberKind::Dir => writer
                .dir(&m.path)
                .map_err(written(&staged.path))
                .map_err(Stop::Visit),
            kpack_tar::MemberKind::Symlink(target) => {
                writer
                    .symlink(&m.path, Path::new(target))
                    .map_err(written(&staged.path))
                    .map_err(Stop::Visit)?;
                job.copied(&shown, &member_path(to, &m.path));
                Ok(())
            }
            kpack_tar::MemberKind::File { .. } => {
                crate::visit_tar_member(tarball, IN_MEMORY, m, content, &mut |input: &Input<'_>| {
                    each_member(job, &staged, to, input, &mut |len, content, _| {
                        writer
                            .file(&m.path, input.mode, len, content)
                            .map_err(written(&staged.path))
                    })
                })
            }
        }
    })
    .map_err(Stop::into_error)?;
    let mut out = writer.finish().map_err(container_error)?;
    std::io::Write::flush(&mut out).map_err(io_error(&staged.path))?;
    let file = out
        .into_inner()
        .map_err(|e| io_error(&staged.path)(e.into_error()))?;
    file.sync_all().map_err(io_error(&staged.path))?;
    Ok(())
}
