//! Every form inputs come in, handed to a command one file at a time: a plain file (mapped),
//! each regular file of a Python wheel (`.whl`, read in place from the zip) and each
//! regular file of an artifact tarball (`.tar.zst`, `.tar.xz`, `.tar.gz`, `.tar`, streamed
//! without unpacking to disk). Commands that read device code (`inspect`, `unbundle`,
//! `report`) walk [`read`]'s inputs as they would walk files.
//!
//! A member is shown as `<container>!<member>` (`jax.whl!jax_plugins/lib/libfoo.so`). The
//! checks are those of the readers underneath: [`kpack_wheelfile::reader::visit_zip`] (hostile
//! names, symlinks, declared sizes, zip bombs, CRC, RECORD: a member is visited only once
//! its content matches its RECORD line) and [`kpack_tar::open`] (unsafe
//! members, header budget, stream checksums); a container those refuse is an error naming
//! it, and nothing of it is visited past the refusal.
//!
//! Memory is bounded by one member, not by the container: members are read one at a time,
//! into memory when they are at most [`IN_MEMORY`] bytes, else into an unnamed temporary
//! file (gone with the process, even under `kill -9`) which is mapped, since the device-code
//! walk needs random access. Containers inside containers are not opened: a wheel inside a
//! tarball is a member like any other file.
//!
//! Depends on `kpack-pipeline`, `kpack-tar`, `kpack-wheelfile` and `kpack-fs` (a file's
//! permission bits on every system; the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use kpack_pipeline::inspect::{self, Inspection};

use kpack_pipeline::{FileBytes, SourceError};

/// Members up to this size are read into memory; larger ones spill to a temporary file.
pub const IN_MEMORY: u64 = 64 << 20;

/// What a path holds, decided from its name (as pip and TheRock's CI name them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A file read as itself.
    File,
    /// A Python wheel (`.whl`).
    Wheel,
    /// An artifact tarball (`.tar.zst`, `.tar.xz`, `.tar.gz`, `.tar`).
    Tarball,
}

impl Form {
    /// The form of the file at `path`.
    pub fn of(path: &Path) -> Form {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        if name.ends_with(".whl") {
            Form::Wheel
        } else if kpack_tar::stem(&name).is_some() {
            Form::Tarball
        } else {
            Form::File
        }
    }
}

/// One input file: a plain file, or a member of a wheel or tarball.
pub struct Input<'a> {
    /// The file given or found under a directory (the container, for a member).
    pub path: &'a Path,
    /// The member's `/`-separated path inside its container.
    pub member: Option<&'a str>,
    /// How it is named in output and errors: `path`, or `path!member`.
    pub shown: &'a Path,
    /// Whether the user named it (a member never is).
    pub given: bool,
    /// Its bytes.
    pub bytes: &'a FileBytes,
    /// The file `bytes` are mapped from, for copies by range; `None` when they are in memory.
    pub file: Option<&'a File>,
    /// Its Unix permission bits.
    pub mode: u32,
}

/// Reads the file at `path` (`given`: the user named it) and hands `visit` each input it
/// holds: itself, or each regular file of the wheel or tarball it is, in archive order.
/// Stops at the first error, from the container or from `visit`.
pub fn read<E: From<SourceError>>(
    path: &Path,
    given: bool,
    visit: &mut dyn FnMut(&Input<'_>) -> Result<(), E>,
) -> Result<(), E> {
    read_with(path, given, IN_MEMORY, visit)
}

/// [`read`], members larger than `in_memory` bytes spilled to a temporary file.
fn read_with<E: From<SourceError>>(
    path: &Path,
    given: bool,
    in_memory: u64,
    visit: &mut dyn FnMut(&Input<'_>) -> Result<(), E>,
) -> Result<(), E> {
    match Form::of(path) {
        Form::File => {
            let file = File::open(path).map_err(io_error(path))?;
            let bytes = kpack_pipeline::map_file(&file, path)?;
            let meta = file.metadata().map_err(io_error(path))?;
            visit(&Input {
                path,
                member: None,
                shown: path,
                given,
                bytes: &bytes,
                file: Some(&file),
                mode: kpack_fs::mode(&meta),
            })
        }
        Form::Wheel => read_wheel(path, in_memory, visit),
        Form::Tarball => read_tarball(path, in_memory, visit),
    }
}

/// Why a container's walk stopped: the container (or a member's spill) failed, or `visit`.
pub enum Stop<E> {
    /// The container, or a member's spill.
    Container(SourceError),
    /// The visitor.
    Visit(E),
}

impl<E> From<kpack_wheelfile::WheelFileError> for Stop<E> {
    fn from(e: kpack_wheelfile::WheelFileError) -> Self {
        Stop::Container(e.into())
    }
}

impl<E> From<kpack_tar::TarError> for Stop<E> {
    fn from(e: kpack_tar::TarError) -> Self {
        Stop::Container(e.into())
    }
}

impl<E: From<SourceError>> Stop<E> {
    /// The error, the container's in the visitor's type.
    pub fn into_error(self) -> E {
        match self {
            Stop::Container(e) => e.into(),
            Stop::Visit(e) => e,
        }
    }
}

fn read_wheel<E: From<SourceError>>(
    wheel: &Path,
    in_memory: u64,
    visit: &mut dyn FnMut(&Input<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let file = File::open(wheel).map_err(io_error(wheel))?;
    let reader = std::io::BufReader::with_capacity(1 << 20, file);
    kpack_wheelfile::reader::visit_zip(
        wheel,
        reader,
        &kpack_wheelfile::Limits::default(),
        |member| {
            let shown = member_path(wheel, member.name);
            let (loaded, ()) = Member::load(&shown, member.size, in_memory, |out| {
                member.copy_to(out).map_err(Stop::from)
            })?;
            loaded.visit(wheel, member.name, &shown, member.mode, visit)
        },
    )
    .map(drop)
    .map_err(Stop::into_error)
}

fn read_tarball<E: From<SourceError>>(
    tarball: &Path,
    in_memory: u64,
    visit: &mut dyn FnMut(&Input<'_>) -> Result<(), E>,
) -> Result<(), E> {
    kpack_tar::open(tarball, |m, content| {
        visit_tar_member(tarball, in_memory, m, content, visit)
    })
    .map(drop)
    .map_err(Stop::into_error)
}

/// Hands `visit` the tar member `m` (of `tarball`) when it is a regular file, its `content`
/// read as [`read`] reads members: for a walk of a tarball that sees its other members too
/// ([`kpack_tar::open`]).
pub fn visit_tar_member<E>(
    tarball: &Path,
    in_memory: u64,
    m: &kpack_tar::Member,
    content: &mut dyn std::io::Read,
    visit: &mut dyn FnMut(&Input<'_>) -> Result<(), E>,
) -> Result<(), Stop<E>> {
    let kpack_tar::MemberKind::File { size, mode } = m.kind else {
        return Ok(());
    };
    let shown = member_path(tarball, &m.path);
    let (member, ()) = Member::load(&shown, size, in_memory, |out| {
        let copied = std::io::copy(content, out).map_err(|e| {
            Stop::from(kpack_tar::TarError::Member {
                path: tarball.to_owned(),
                index: m.index,
                name: m.path.clone(),
                offset: m.offset,
                problem: format!("reading its content: {e}"),
            })
        })?;
        if copied != size {
            return Err(Stop::from(kpack_tar::TarError::Member {
                path: tarball.to_owned(),
                index: m.index,
                name: m.path.clone(),
                offset: m.offset,
                problem: format!("{copied} bytes of content, its header declares {size}"),
            }));
        }
        Ok(())
    })?;
    member.visit(tarball, &m.path, &shown, mode, visit)
}

/// `kpack inspect` of the file at `path` (`given`: the user named it): `each` receives the
/// inspection of every input it holds, in order ([`kpack_pipeline::inspect::inspect_bytes`]:
/// a member's own errors are its inspection), and, when the file or its container cannot be
/// read, one failed inspection naming it.
pub fn inspect(path: &Path, given: bool, each: &mut dyn FnMut(Inspection)) {
    let read = read(path, given, &mut |input| {
        let shown = input.shown.display().to_string();
        if let Some(inspection) = inspect::inspect_bytes(&shown, input.bytes, input.given) {
            each(inspection);
        }
        Ok::<_, SourceError>(())
    });
    if let Err(err) = read {
        each(Inspection {
            path: path.display().to_string(),
            result: Err(err),
        });
    }
}

/// `container!member`: how a member is shown.
pub fn member_path(container: &Path, member: &str) -> PathBuf {
    let mut shown = container.as_os_str().to_owned();
    shown.push("!");
    shown.push(member);
    PathBuf::from(shown)
}

/// A member's bytes, in memory or spilled to a mapped temporary file.
struct Member {
    bytes: FileBytes,
    spill: Option<File>,
}

impl Member {
    /// Reads a member of `size` bytes through `fill`, which writes its content: into
    /// memory up to `in_memory` bytes, else into a temporary file.
    fn load<T, E>(
        shown: &Path,
        size: u64,
        in_memory: u64,
        fill: impl FnOnce(&mut dyn Write) -> Result<T, Stop<E>>,
    ) -> Result<(Member, T), Stop<E>> {
        let spill_error = |e| Stop::Container(io_error(shown)(e));
        if size <= in_memory {
            // Bounded by `in_memory`: the declared size only sets the capacity.
            let mut bytes = Vec::with_capacity(size as usize);
            let t = fill(&mut bytes)?;
            let member = Member {
                bytes: FileBytes::Owned(bytes),
                spill: None,
            };
            return Ok((member, t));
        }
        let file = tempfile::tempfile().map_err(spill_error)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, &file);
        let t = fill(&mut out)?;
        out.flush().map_err(spill_error)?;
        drop(out);
        let bytes = kpack_pipeline::map_file(&file, shown).map_err(Stop::Container)?;
        let member = Member {
            bytes,
            spill: Some(file),
        };
        Ok((member, t))
    }

    fn visit<E>(
        &self,
        container: &Path,
        member: &str,
        shown: &Path,
        mode: u32,
        visit: &mut dyn FnMut(&Input<'_>) -> Result<(), E>,
    ) -> Result<(), Stop<E>> {
        visit(&Input {
            path: container,
            member: Some(member),
            shown,
            given: false,
            bytes: &self.bytes,
            file: self.spill.as_ref(),
            mode,
        })
        .map_err(Stop::Visit)
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> SourceError + '_ {
    move |source| SourceError::Io {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every input of `path` as (shown, member, bytes, spilled).
    fn inputs(path: &Path, in_memory: u64) -> Vec<(PathBuf, Option<String>, Vec<u8>, bool)> {
        let mut seen = Vec::new();
        read_with(path, true, in_memory, &mut |input| {
            seen.push((
                input.shown.to_owned(),
                input.member.map(str::to_owned),
                input.bytes.to_vec(),
                input.file.is_some(),
            ));
            Ok::<_, SourceError>(())
        })
        .unwrap();
        seen
    }

    #[test]
    fn forms_are_told_by_name() {
        assert_eq!(Form::of(Path::new("a/x.whl")), Form::Wheel);
        for t in ["x.tar.zst", "x.tar.xz", "x.tar.gz", "x.tar"] {
            assert_eq!(Form::of(Path::new(t)), Form::Tarball, "{t}");
        }
        assert_eq!(Form::of(Path::new("libx.so")), Form::File);
    }

    #[test]
    fn wheel_members_are_the_same_bytes_in_memory_or_spilled() {
        let wheel = kpack_testkit::fixture("wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl");
        let in_memory = inputs(&wheel, IN_MEMORY);
        let spilled = inputs(&wheel, 0);
        assert!(in_memory.iter().all(|i| !i.3) && spilled.iter().all(|i| i.3));
        let strip = |v: Vec<(PathBuf, Option<String>, Vec<u8>, bool)>| -> Vec<_> {
            v.into_iter().map(|(a, b, c, _)| (a, b, c)).collect()
        };
        let in_memory = strip(in_memory);
        assert_eq!(in_memory, strip(spilled));
        let (shown, member, bytes) = in_memory
            .iter()
            .find(|i| i.1.as_deref() == Some("kpack_demo/lib/libone.so"))
            .expect("libone.so is a member");
        assert_eq!(bytes, &kpack_testkit::read_fixture("bin/libone.so"));
        assert_eq!(member.as_deref(), Some("kpack_demo/lib/libone.so"));
        assert!(
            shown
                .to_string_lossy()
                .ends_with(".whl!kpack_demo/lib/libone.so")
        );
    }

    #[test]
    fn tarball_members_are_the_files_and_symlinks_are_passed_over() {
        for t in ["forms.tar.zst", "forms.tar.xz", "forms.tar.gz"] {
            let tarball = kpack_testkit::fixture(&format!("tarballs/{t}"));
            for in_memory in [IN_MEMORY, 0] {
                let members: Vec<_> = inputs(&tarball, in_memory)
                    .into_iter()
                    .map(|(_, m, bytes, _)| (m.unwrap(), bytes))
                    .collect();
                let names: Vec<&str> = members.iter().map(|(m, _)| m.as_str()).collect();
                assert!(!names.contains(&"lib/libone.so.1"), "{t}: {names:?}");
                let one = members.iter().find(|(m, _)| m == "lib/libone.so").unwrap();
                assert_eq!(one.1, kpack_testkit::read_fixture("bin/libone.so"), "{t}");
                assert_eq!(members.len(), 6, "{t}: {names:?}");
            }
        }
    }

    #[test]
    fn a_corrupt_container_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut gz = std::fs::read(kpack_testkit::fixture("tarballs/forms.tar.gz")).unwrap();
        let half = gz.len() / 2;
        gz.truncate(half);
        let bad = dir.path().join("bad.tar.gz");
        std::fs::write(&bad, &gz).unwrap();
        let e = read(&bad, true, &mut |_| Ok::<_, SourceError>(())).unwrap_err();
        assert!(e.to_string().contains("bad.tar.gz"), "{e}");
        let whl = dir.path().join("bad.whl");
        std::fs::write(&whl, b"not a zip").unwrap();
        let e = read(&whl, true, &mut |_| Ok::<_, SourceError>(())).unwrap_err();
        assert!(e.to_string().contains("bad.whl"), "{e}");
    }
}
