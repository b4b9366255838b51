//! Packing the device code of fat binaries and code objects into one `.kpack` archive.

use std::fs::File;
use std::path::{Path, PathBuf};

use kpack_archive::{ArchiveFileWriter, Compression, GroupMember};

use crate::error::{SourceError, io_error};
use crate::source::{self, DeviceCode, Visitor};

/// One input to pack and the kernel name its entries are keyed by.
#[derive(Clone, Debug)]
pub struct PackInput {
    /// The file (fat binary, bundle, CCOB or code object).
    pub path: PathBuf,
    /// The key prefix: entries are `kernel_name#co_index`.
    pub kernel_name: String,
}

/// What [`pack`] produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackSummary {
    /// Number of TOC entries.
    pub entries: usize,
    /// The archive's `gfx_arches`.
    pub gfx_arches: Vec<String>,
}

/// Packs the device code of `inputs` into an archive at `output`.
///
/// Each code object is keyed `kernel_name#co_index`, where `co_index` is the index of the
/// wrapper whose pointer leads to its bundle (so two wrappers sharing an RDC bundle both
/// resolve), or the bundle index for files without wrappers (raw bundles, code objects).
/// The archive is written to a temporary file and renamed; identical code objects are
/// stored once.
///
/// Memory is bounded by the work in flight, not by the inputs: each input is walked through
/// its mapping with the pages of every bundle dropped once visited
/// ([`source::walk_mapped`]), a bundle's code objects are one group, coded straight from the
/// decoded bundle without a copy ([`ArchiveFileWriter::add_group`]), and the stored bytes go
/// straight to the file ([`ArchiveFileWriter`], which keeps only the TOC).
pub fn pack(
    inputs: &[PackInput],
    output: &Path,
    group_name: &str,
    family: Option<&str>,
    compression: Compression,
) -> Result<PackSummary, SourceError> {
    // What a killed pack to the same place left (housekeeping: never a reason to fail).
    let _ = kpack_fs::sweep(kpack_fs::parent_dir(output));
    let mut collector = Collector {
        writer: ArchiveFileWriter::create(
            output,
            group_name,
            family.unwrap_or(group_name),
            compression,
        )?,
        kernel_name: String::new(),
        entries: 0,
    };
    for input in inputs {
        let file = File::open(&input.path).map_err(io_error(&input.path))?;
        let map = crate::map_file(&file, &input.path)?;
        collector.kernel_name.clone_from(&input.kernel_name);
        let before = collector.entries;
        let kind = source::walk_mapped(&map, &mut collector).map_err(|e| SourceError::InInput {
            path: input.path.clone(),
            source: Box::new(e),
        })?;
        if collector.entries == before {
            return Err(SourceError::NoDeviceCode {
                path: input.path.clone(),
                kind: kind.name(),
            });
        }
    }
    let Collector {
        mut writer,
        entries,
        ..
    } = collector;
    let gfx_arches = writer.gfx_arches().to_vec();
    if family.is_none() && gfx_arches.len() == 1 {
        writer.set_gfx_arch_family(&gfx_arches[0]);
    }
    writer.finish()?;
    Ok(PackSummary {
        entries,
        gfx_arches,
    })
}

/// Adds each device code object under the key of every wrapper that leads to it.
struct Collector {
    writer: ArchiveFileWriter<'static>,
    kernel_name: String,
    entries: usize,
}

impl Visitor for Collector {
    fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
        self.device_bundle(std::slice::from_ref(code))
    }

    /// A bundle's code objects (or a part of a large CCOB's) are one group (`unified` codes
    /// them together, in parallel), borrowed from the decoded bundle.
    fn device_bundle(&mut self, codes: &[DeviceCode<'_>]) -> Result<(), SourceError> {
        let keys: Vec<Vec<String>> = codes
            .iter()
            .map(|code| {
                let single = [code.bundle];
                let indices = if code.wrappers.is_empty() {
                    &single[..]
                } else {
                    code.wrappers
                };
                indices
                    .iter()
                    .map(|&co_index| kpack_archive::binary_key(&self.kernel_name, co_index as u32))
                    .collect()
            })
            .collect();
        let arches: Vec<String> = codes.iter().map(|c| c.target().to_string()).collect();
        let members: Vec<GroupMember<'_>> = (0..codes.len())
            .map(|i| GroupMember {
                keys: &keys[i],
                arch: &arches[i],
                data: codes[i].data,
            })
            .collect();
        self.writer.add_group(&members)?;
        self.entries += keys.iter().map(Vec::len).sum::<usize>();
        Ok(())
    }
}
