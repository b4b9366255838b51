//! A tarball pruned into a tarball in the same compression, written by
//! [`kpack_tar::TarWriter`] (the writer of `split --output-format tar.zst`), members in the
//! input's order, directories and symbolic links kept; read as it is written, one member at
//! a time, so memory and temporary space stay bounded by the largest member.

use std::io::Read;
use std::path::Path;

use kpack_fs::Stage;
use kpack_inputs::{IN_MEMORY, Input, Stop, member_path};
use kpack_pipeline::error::io_error;

use crate::PruneTreeError;
use crate::container::{container_error, each_member, stage_output};
use crate::job::PruneJob;

pub(crate) fn prune_tarball(
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
            kpack_tar::MemberKind::File { .. } => kpack_inputs::visit_tar_member(
                tarball,
                IN_MEMORY,
                m,
                content,
                &mut |input: &Input<'_>| {
                    each_member(job, &staged, to, input, &mut |len, content, _| {
                        writer
                            .file(&m.path, input.mode, len, content)
                            .map_err(written(&staged.path))
                    })
                },
            ),
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
