//! Writing every device code object of a file out as its own file.

use std::collections::HashSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use kpack_fs::{Replace, Stage};
use kpack_target::TargetId;

use crate::error::{SourceError, io_error};
use crate::source::{self, Container, DeviceCode, FileKind, Visitor};

/// Selects code objects by target.
///
/// A filter with features (`gfx90a:xnack+`) selects exactly that target id; a bare processor
/// (`gfx90a`) selects every feature variant of it.
#[derive(Clone, Debug, Default)]
pub struct TargetFilter(Vec<TargetId>);

impl TargetFilter {
    /// Selects the given targets; an empty list selects everything.
    pub fn new(targets: Vec<TargetId>) -> Self {
        TargetFilter(targets)
    }

    /// True if `target` is selected.
    pub fn selects(&self, target: &TargetId) -> bool {
        self.0.is_empty()
            || self.0.iter().any(|f| {
                f == target || (f.features().is_empty() && f.processor() == target.processor())
            })
    }
}

/// A code object written by [`Unbundler`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenCodeObject {
    /// Where it was written.
    pub path: PathBuf,
    /// Its bundle id.
    pub bundle_id: String,
    /// Its size in bytes.
    pub size: u64,
}

/// Writes device code objects into one directory, refusing name collisions within a run.
///
/// The run is one job: code objects are staged ([`kpack_fs::Stage`]) and appear in the
/// directory only when [`Unbundler::publish`] is called, so a run that fails part way (a
/// damaged bundle in a later input) leaves nothing behind, not the objects read before it.
pub struct Unbundler {
    out_dir: PathBuf,
    filter: TargetFilter,
    names: HashSet<String>,
    written: Vec<WrittenCodeObject>,
    stage: Stage,
}

impl Unbundler {
    /// Writes into `out_dir` (created if missing) the code objects `filter` selects.
    pub fn new(out_dir: impl Into<PathBuf>, filter: TargetFilter) -> Result<Self, SourceError> {
        let out_dir = out_dir.into();
        let mut stage = Stage::new();
        // Made now (and what a killed unbundle left swept), so that a bad output path fails
        // before any input is read.
        stage.dir_in(&out_dir)?;
        Ok(Unbundler {
            out_dir,
            filter,
            names: HashSet::new(),
            written: Vec::new(),
            stage,
        })
    }

    /// Unbundles one input file.
    ///
    /// Objects stored uncompressed are copied file-to-file by range (the kernel copies them;
    /// a 1.3 GB library never passes through this process's memory); compressed bundles are
    /// decoded one at a time. Returns what the file was; `.kpack` archives and unrelated
    /// files hold no bundles and write nothing.
    pub fn unbundle_file(&mut self, input: &Path) -> Result<FileKind, SourceError> {
        let file = File::open(input).map_err(io_error(input))?;
        let map = crate::map_file(&file, input)?;
        self.unbundle_bytes(input, &map, Some(&file))
    }

    /// Unbundles an input already read: `bytes`, mapped from `source` when it is given
    /// (objects are then copied by range) or held in memory. `input` names it in errors
    /// (`<wheel>!<member>` for a member) and its file name starts the output names.
    pub fn unbundle_bytes(
        &mut self,
        input: &Path,
        bytes: &crate::FileBytes,
        source: Option<&File>,
    ) -> Result<FileKind, SourceError> {
        let stem = input
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "input".to_owned());
        let mut writer = FileWriter {
            unbundler: self,
            input,
            source,
            stem: &stem,
        };
        source::walk_mapped(bytes, &mut writer)
    }

    /// Moves every staged code object into the output directory; returns what it wrote.
    /// Dropping the unbundler instead removes them.
    pub fn publish(self) -> Result<Vec<WrittenCodeObject>, SourceError> {
        self.stage.publish()?;
        Ok(self.written)
    }
}

/// The file name of a code object: input name, `ar` member, bundle index (or `offload` and
/// the OffloadBinary image index), bundle id.
///
/// The bundle index keeps multi-bundle binaries (one bundle per translation unit) apart.
pub fn code_object_file_name(stem: &str, code: &DeviceCode<'_>) -> String {
    let member = code.member.map(|m| format!("@{m}")).unwrap_or_default();
    let container = match code.container {
        Container::Bundle => "",
        Container::OffloadBinary => "offload",
    };
    format!(
        "{stem}{member}.{container}{}.{}.co",
        code.bundle, code.bundle_id
    )
}

struct FileWriter<'a> {
    unbundler: &'a mut Unbundler,
    input: &'a Path,
    source: Option<&'a File>,
    stem: &'a str,
}

impl Visitor for FileWriter<'_> {
    fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
        if !self.unbundler.filter.selects(code.target()) {
            return Ok(());
        }
        let name = code_object_file_name(self.stem, code);
        if !self.unbundler.names.insert(name.clone()) {
            return Err(SourceError::Io {
                path: self.unbundler.out_dir.join(&name),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!(
                        "two inputs named {} unbundle to the same file; unbundle them into separate directories",
                        self.stem
                    ),
                ),
            });
        }
        let path = self.unbundler.out_dir.join(&name);
        let staged = self.unbundler.stage.add(&path, Replace::Allowed)?;
        write_atomically(&staged, |out| match (&code.file_range, self.source) {
            (Some(range), Some(mut src)) => {
                src.seek(SeekFrom::Start(range.start))
                    .map_err(io_error(self.input))?;
                let len = range.end - range.start;
                // io::copy between files uses copy_file_range(2).
                let copied = std::io::copy(&mut src.take(len), out).map_err(io_error(&path))?;
                if copied != len {
                    return Err(SourceError::Io {
                        path: self.input.to_owned(),
                        source: std::io::ErrorKind::UnexpectedEof.into(),
                    });
                }
                Ok(())
            }
            _ => out.write_all(code.data).map_err(io_error(&path)),
        })?;
        self.unbundler.written.push(WrittenCodeObject {
            path,
            bundle_id: code.bundle_id.to_string(),
            size: code.data.len() as u64,
        });
        Ok(())
    }
}

/// Writes `path` whole or not at all ([`kpack_fs::write_atomic`]): through a temporary file
/// in the same directory, renamed into place only when `fill` succeeds.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut File) -> Result<(), SourceError>,
) -> Result<(), SourceError> {
    kpack_fs::write_atomic(path, fill, |at, e| io_error(at)(e))
}
