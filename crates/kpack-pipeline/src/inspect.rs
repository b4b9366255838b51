//! What `kpack inspect` reports about a file: a serialisable description whose JSON form
//! is a stable interface (documented in docs/json.md).

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

use kpack_bundle::{BundleFormat, CompressionMethod};
use kpack_elf::{FatBinary, FatBinaryKind, PointerSource};
use kpack_pe::PeFatBinary;
use kpack_target::TargetId;

use crate::error::SourceError;
use crate::source::{self, DeviceCode, FileKind, FoundBundle, FoundImage, Visitor};

/// One input file.
#[derive(Debug, Serialize)]
pub struct FileReport {
    /// The path as given (or found under a directory).
    pub path: String,
    /// What the file is (`elf`, `pe`, `ar-archive`, `offload-bundle`,
    /// `compressed-offload-bundle`, `code-object`, `kpack-archive`, `offload-binary`, `other`).
    pub kind: &'static str,
    /// Kind-specific details.
    pub details: Details,
    /// Device code per target (host entries excluded), sorted by target.
    pub totals: Vec<TargetTotal>,
}

/// Count and bytes of the device code objects of one target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetTotal {
    /// Canonical target id, e.g. `gfx90a:xnack-`.
    pub target: String,
    /// Number of code objects.
    pub count: u64,
    /// Their total size in bytes (uncompressed).
    pub bytes: u64,
    /// The target is the portable SPIR-V (`amdgcnspirv`): SPIR-V modules the HIP runtime
    /// translates for a GPU that has no native code object. Present only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub portable: bool,
}

impl TargetTotal {
    fn new(target: String, count: u64, bytes: u64) -> TargetTotal {
        let portable = target == kpack_target::SPIRV;
        TargetTotal {
            target,
            count,
            bytes,
            portable,
        }
    }
}

/// Kind-specific part of a report.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Details {
    /// ELF files, and PE images (in the same shape, see [`ElfReport`]).
    Elf(ElfReport),
    /// `ar` archives.
    Ar {
        /// Its ELF members, in archive order.
        members: Vec<ElfReport>,
    },
    /// Raw bundle and CCOB files.
    Bundles {
        /// The bundles, in file order.
        bundles: Vec<BundleReport>,
    },
    /// A bare code object.
    CodeObject(CodeObjectReport),
    /// A `.kpack` archive.
    Archive(ArchiveReport),
    /// An LLVM OffloadBinary file.
    Offload {
        /// Its images, in file order.
        offload_images: Vec<OffloadImageReport>,
    },
    /// Nothing to say.
    None {},
}

/// An ELF file or `ar` member, or a PE image: its `elf_type` is then `dll` or `executable`,
/// its `machine` the COFF machine (0x8664), its addresses absolute at the preferred base
/// (`ImageBase + RVA`) and its wrapper pointers `dir64` (fixed up by an
/// `IMAGE_REL_BASED_DIR64` base relocation) or `in-place`.
#[derive(Debug, Serialize)]
pub struct ElfReport {
    /// The `ar` member name, for archive members.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// `executable`, `shared-object` or `relocatable`.
    pub elf_type: &'static str,
    /// `e_machine`.
    pub machine: u16,
    /// `fat` (device code inside), `kpacked` (rewritten to reference `.kpack` archives),
    /// `rdc` (a `-fgpu-rdc` object carrying bitcode), `host-only`, or `debug-only` (a
    /// separated debug file: its device sections are headers without bytes).
    pub state: &'static str,
    /// The `.hip_fatbin` section.
    pub fatbin: Option<SectionReport>,
    /// The `.hipFatBinSegment` wrappers, in slot order.
    pub wrappers: Vec<WrapperReport>,
    /// The bundles of `.hip_fatbin`, in section order.
    pub bundles: Vec<BundleReport>,
    /// Per-target bitcode sections of `-fgpu-rdc` objects.
    pub rdc_sections: Vec<RdcReport>,
    /// The images of its `.llvm.offloading` sections (new offload driver), in file order;
    /// absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub offload_images: Vec<OffloadImageReport>,
}

/// One image of an LLVM OffloadBinary.
#[derive(Debug, Serialize)]
pub struct OffloadImageReport {
    /// Index among the images of the file (or `ar` member).
    pub index: usize,
    /// Absolute file offset of the binary holding it.
    pub binary_offset: u64,
    /// The binary's format version.
    pub version: u32,
    /// `object`, `bitcode`, `cubin`, `fatbinary`, `ptx`, `none` or `unknown`.
    pub image_kind: &'static str,
    /// The producer: `hip`, `openmp`, `cuda`, `sycl`, `none` or `unknown`.
    pub offload_kind: &'static str,
    /// The entry's flags.
    pub flags: u32,
    /// The `triple` string.
    pub triple: Option<String>,
    /// The `arch` string as written.
    pub arch: Option<String>,
    /// The bundle id kpack gives it (`hip-amdgcn-amd-amdhsa--gfx900`), for AMDGPU images.
    pub bundle_id: Option<String>,
    /// Canonical target id, for AMDGPU images.
    pub target: Option<String>,
    /// Absolute file offset of the image.
    pub offset: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Every key/value string of the entry, in table order.
    pub strings: Vec<(String, String)>,
}

/// A section's place in the file and in memory.
#[derive(Debug, Serialize)]
pub struct SectionReport {
    /// File offset.
    pub offset: u64,
    /// Virtual address.
    pub vaddr: u64,
    /// Size in bytes.
    pub size: u64,
    /// True when the section occupies no file bytes (`SHT_NOBITS`).
    pub nobits: bool,
}

/// One `__CudaFatBinaryWrapper`.
#[derive(Debug, Serialize)]
pub struct WrapperReport {
    /// Slot index.
    pub index: usize,
    /// `HIPF`, `HIPK` or the hex value of an unknown magic.
    pub magic: String,
    /// Wrapper version.
    pub version: u32,
    /// How the loader fills the pointer: `in-place`, `rela-relative`, `rela-64`, `relr`, `rel`,
    /// `dir64` (PE).
    pub pointer: &'static str,
    /// The address the pointer resolves to (relative to the load base), when known.
    pub target_vaddr: Option<u64>,
    /// The bundle it points at.
    pub bundle: Option<usize>,
    /// The `reserved1` field.
    pub reserved1: u64,
    /// For a kpacked file, the marker the wrapper points at (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marker: Option<MarkerReport>,
}

/// The `.rocm_kpack_ref` metadata a HIPK wrapper points at, decoded.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum MarkerReport {
    /// What the runtime reads.
    Decoded {
        /// The archives' TOC key prefix.
        kernel_name: String,
        /// The archive paths searched, relative to the binary's directory.
        search_paths: Vec<String>,
        /// The TOC key of this wrapper's code objects (`kernel_name#reserved1`).
        key: String,
    },
    /// Why it cannot be read.
    Error {
        /// The problem.
        error: String,
    },
}

/// One offload bundle.
#[derive(Debug, Serialize)]
pub struct BundleReport {
    /// Index within the file or member.
    pub index: usize,
    /// Absolute file offset.
    pub offset: u64,
    /// Stored size.
    pub size: u64,
    /// `uncompressed` or `ccob`.
    pub format: &'static str,
    /// CCOB version.
    pub version: Option<u16>,
    /// CCOB method: `zstd` or `zlib`.
    pub method: Option<&'static str>,
    /// Size of the bundle after decompression.
    pub uncompressed_size: u64,
    /// `verified` for CCOB (a mismatch is an error), absent for uncompressed bundles.
    pub hash: Option<&'static str>,
    /// The wrappers pointing at this bundle.
    pub wrappers: Vec<usize>,
    /// Its entries, host entry included.
    pub entries: Vec<EntryReport>,
}

/// One bundle entry.
#[derive(Debug, Serialize)]
pub struct EntryReport {
    /// The bundle id (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`).
    pub bundle_id: String,
    /// Canonical target id, absent for host entries.
    pub target: Option<String>,
    /// The entry is the portable SPIR-V (`amdgcnspirv`, bundle id
    /// `hipv4-spirv64-amd-amdhsa--amdgcnspirv`): a SPIR-V module, not an ELF code object.
    /// Present only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub portable: bool,
    /// Offset within the (decompressed) bundle.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

/// A per-target bitcode section of an RDC object.
#[derive(Debug, Serialize)]
pub struct RdcReport {
    /// Section name.
    pub name: String,
    /// The bundle id in the name.
    pub bundle_id: String,
    /// File offset.
    pub offset: u64,
    /// Size.
    pub size: u64,
}

/// A bare code object.
#[derive(Debug, Serialize)]
pub struct CodeObjectReport {
    /// Target decoded from `e_flags`.
    pub target: String,
    /// Code object version (4, 5, 6).
    pub code_object_version: u8,
    /// Size in bytes.
    pub size: u64,
}

/// A `.kpack` archive.
#[derive(Debug, Serialize)]
pub struct ArchiveReport {
    /// `group_name`.
    pub group_name: String,
    /// `gfx_arch_family`.
    pub gfx_arch_family: String,
    /// `gfx_arches`, in TOC order.
    pub gfx_arches: Vec<String>,
    /// `none` or `zstd-per-kernel`.
    pub compression_scheme: String,
    /// The entries, in TOC order.
    pub entries: Vec<ArchiveEntryReport>,
}

/// One archive entry.
#[derive(Debug, Serialize)]
pub struct ArchiveEntryReport {
    /// Binary key (`lib/libfoo.so#0`).
    pub binary: String,
    /// Architecture key.
    pub arch: String,
    /// Blob ordinal (shared by identical code objects).
    pub ordinal: u64,
    /// Uncompressed size.
    pub size: u64,
    /// Size as stored.
    pub stored_size: u64,
}

/// What `kpack inspect` says of one input file: its report, or why it has none. Its JSON
/// form is one element of `kpack inspect --json`'s array (a failed file is
/// `{path, kind: "error", error, details: {}, totals: []}`).
#[derive(Debug)]
pub struct Inspection {
    /// The path as given (or found under a directory).
    pub path: String,
    /// The report, or the error (which names the file).
    pub result: Result<FileReport, SourceError>,
}

impl Serialize for Inspection {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Failed<'a> {
            path: &'a str,
            kind: &'static str,
            error: String,
            details: BTreeMap<(), ()>,
            totals: [(); 0],
        }
        match &self.result {
            Ok(report) => report.serialize(serializer),
            Err(error) => Failed {
                path: &self.path,
                kind: "error",
                error: error.to_string(),
                details: BTreeMap::new(),
                totals: [],
            }
            .serialize(serializer),
        }
    }
}

/// Inspects one input, the bytes of a file or of a member of a wheel or tarball, shown as
/// `shown` (`<wheel>!<member>`); `given` says whether the user named it, rather than a
/// directory or container above it. An input found inside one that cannot hold device code
/// (kind `other`) is not worth a line: `None`. Errors name the input.
pub fn inspect_bytes(shown: &str, bytes: &crate::FileBytes, given: bool) -> Option<Inspection> {
    let result = inspect_mapped(shown, bytes).map_err(|e| SourceError::InInput {
        path: shown.into(),
        source: Box::new(e),
    });
    let shown = shown.to_owned();
    match result {
        Ok(r) if r.kind == FileKind::Other.name() && !given => None,
        result => Some(Inspection {
            path: shown,
            result,
        }),
    }
}

/// Inspects `bytes`, the whole content of the file at `path`.
pub fn inspect(path: &str, bytes: &[u8]) -> Result<FileReport, SourceError> {
    inspect_with(path, bytes, None)
}

/// Like [`inspect`] on a mapped file, whose pages are dropped from the resident set bundle
/// by bundle (see [`source::walk_mapped`]).
pub fn inspect_mapped(path: &str, map: &crate::FileBytes) -> Result<FileReport, SourceError> {
    inspect_with(path, map, Some(map))
}

fn inspect_with(
    path: &str,
    bytes: &[u8],
    mapping: Option<&crate::FileBytes>,
) -> Result<FileReport, SourceError> {
    let kind = source::classify(bytes);
    match kind {
        FileKind::KpackArchive => inspect_archive(path, bytes),
        FileKind::CodeObject => {
            let decoded = kpack_target::code_object_target(bytes)?;
            let target = decoded.target.to_string();
            Ok(FileReport {
                path: path.to_owned(),
                kind: kind.name(),
                totals: vec![TargetTotal::new(target.clone(), 1, bytes.len() as u64)],
                details: Details::CodeObject(CodeObjectReport {
                    target,
                    code_object_version: decoded.code_object_version,
                    size: bytes.len() as u64,
                }),
            })
        }
        FileKind::Other => Ok(FileReport {
            path: path.to_owned(),
            kind: kind.name(),
            details: Details::None {},
            totals: Vec::new(),
        }),
        FileKind::Elf
        | FileKind::Pe
        | FileKind::Ar
        | FileKind::Bundle
        | FileKind::CompressedBundle
        | FileKind::OffloadBinary => {
            let mut collector = Collector::default();
            match mapping {
                Some(map) => source::walk_mapped(map, &mut collector)?,
                None => source::walk(bytes, &mut collector)?,
            };
            let details = match kind {
                FileKind::Elf => {
                    let mut elf = collector
                        .elves
                        .pop()
                        .expect("walking an ELF reports the ELF");
                    describe_markers(bytes, &mut elf)?;
                    Details::Elf(elf)
                }
                FileKind::Pe => Details::Elf(
                    collector
                        .elves
                        .pop()
                        .expect("walking a PE image reports it"),
                ),
                FileKind::Ar => Details::Ar {
                    members: collector.elves,
                },
                FileKind::OffloadBinary => Details::Offload {
                    offload_images: collector.loose_images,
                },
                _ => Details::Bundles {
                    bundles: collector.loose_bundles,
                },
            };
            Ok(FileReport {
                path: path.to_owned(),
                kind: kind.name(),
                details,
                totals: totals(collector.totals),
            })
        }
    }
}

/// Decodes the marker of each wrapper of a kpacked file.
fn describe_markers(bytes: &[u8], elf: &mut ElfReport) -> Result<(), SourceError> {
    if elf.state != "kpacked" {
        return Ok(());
    }
    let fat = kpack_elf::inspect(bytes)?;
    for (w, m) in elf
        .wrappers
        .iter_mut()
        .zip(crate::kpacked::wrapper_markers(bytes, &fat))
    {
        w.marker = Some(match m {
            Ok(m) => MarkerReport::Decoded {
                key: kpack_archive::binary_key(&m.metadata.kernel_name, m.co_index),
                kernel_name: m.metadata.kernel_name,
                search_paths: m.metadata.search_paths,
            },
            Err(e) => MarkerReport::Error {
                error: e.to_string(),
            },
        });
    }
    Ok(())
}

fn totals(map: BTreeMap<String, (u64, u64)>) -> Vec<TargetTotal> {
    map.into_iter()
        .map(|(target, (count, bytes))| TargetTotal::new(target, count, bytes))
        .collect()
}

#[derive(Default)]
struct Collector {
    elves: Vec<ElfReport>,
    loose_bundles: Vec<BundleReport>,
    loose_images: Vec<OffloadImageReport>,
    totals: BTreeMap<String, (u64, u64)>,
}

impl Collector {
    fn bundles(&mut self) -> &mut Vec<BundleReport> {
        match self.elves.last_mut() {
            Some(elf) => &mut elf.bundles,
            None => &mut self.loose_bundles,
        }
    }
}

impl Visitor for Collector {
    fn offload_image(&mut self, found: &FoundImage<'_>) -> Result<(), SourceError> {
        let image = found.image;
        let report = OffloadImageReport {
            index: found.index,
            binary_offset: image.binary_offset,
            version: image.version,
            image_kind: image.image_kind.name(),
            offload_kind: image.offload_kind.name(),
            flags: image.flags,
            triple: image.triple().map(str::to_owned),
            arch: image.arch().map(str::to_owned),
            bundle_id: found.bundle_id.map(|id| id.to_string()),
            target: found
                .bundle_id
                .and_then(|id| id.target())
                .map(|t| t.to_string()),
            offset: image.offset,
            size: image.data.len() as u64,
            strings: image
                .strings
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        };
        match self.elves.last_mut() {
            Some(elf) => elf.offload_images.push(report),
            None => self.loose_images.push(report),
        }
        Ok(())
    }

    fn elf(&mut self, member: Option<&str>, fat: &FatBinary) -> Result<(), SourceError> {
        self.elves.push(elf_report(member, fat));
        Ok(())
    }

    fn pe(&mut self, fat: &PeFatBinary) -> Result<(), SourceError> {
        self.elves.push(pe_report(fat));
        Ok(())
    }

    fn bundle(&mut self, found: &FoundBundle<'_>) -> Result<(), SourceError> {
        let (format, version, method, hash) = match found.format {
            BundleFormat::Uncompressed => ("uncompressed", None, None, None),
            BundleFormat::Compressed {
                version, method, ..
            } => (
                "ccob",
                Some(version),
                Some(match method {
                    CompressionMethod::Zstd => "zstd",
                    CompressionMethod::Zlib => "zlib",
                }),
                Some("verified"),
            ),
        };
        let entries = found
            .entries
            .iter()
            .map(|e| {
                let target = kpack_target::BundleId::parse(&e.triple)?.target().cloned();
                Ok(EntryReport {
                    bundle_id: e.triple.clone(),
                    portable: target.as_ref().is_some_and(TargetId::is_spirv),
                    target: target.map(|t| t.to_string()),
                    offset: e.offset,
                    size: e.size,
                })
            })
            .collect::<Result<_, SourceError>>()?;
        let report = BundleReport {
            index: found.index,
            offset: found.file_offset,
            size: found.len,
            format,
            version,
            method,
            uncompressed_size: found.uncompressed_size,
            hash,
            wrappers: found.wrappers.to_vec(),
            entries,
        };
        self.bundles().push(report);
        Ok(())
    }

    fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
        let total = self.totals.entry(code.target().to_string()).or_default();
        total.0 += 1;
        total.1 += code.data.len() as u64;
        Ok(())
    }
}

const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;

fn state(kind: FatBinaryKind) -> &'static str {
    match kind {
        FatBinaryKind::Fat => "fat",
        FatBinaryKind::Kpacked => "kpacked",
        FatBinaryKind::HostOnly => "host-only",
        FatBinaryKind::Rdc => "rdc",
        FatBinaryKind::DebugOnly => "debug-only",
    }
}

fn pe_report(fat: &PeFatBinary) -> ElfReport {
    ElfReport {
        member: None,
        elf_type: if fat.dll { "dll" } else { "executable" },
        machine: fat.machine,
        state: state(fat.kind),
        fatbin: fat.fatbin.as_ref().map(|s| SectionReport {
            offset: s.offset,
            vaddr: s.vaddr,
            size: s.size,
            nobits: s.nobits(),
        }),
        wrappers: fat
            .wrappers
            .iter()
            .map(|w| WrapperReport {
                index: w.index,
                magic: w.magic.to_string(),
                version: w.version,
                pointer: if w.relocated { "dir64" } else { "in-place" },
                target_vaddr: Some(w.binary),
                bundle: w.bundle,
                reserved1: w.reserved1,
                // Marker decoding (`describe_markers`) reads ELF markers only.
                marker: None,
            })
            .collect(),
        bundles: Vec::new(),
        rdc_sections: Vec::new(),
        offload_images: Vec::new(),
    }
}

fn elf_report(member: Option<&str>, fat: &FatBinary) -> ElfReport {
    ElfReport {
        member: member.map(str::to_owned),
        elf_type: match fat.elf_type {
            ET_REL => "relocatable",
            ET_EXEC => "executable",
            ET_DYN => "shared-object",
            _ => "other",
        },
        machine: fat.machine,
        state: state(fat.kind),
        fatbin: fat.fatbin.as_ref().map(|s| SectionReport {
            offset: s.offset,
            vaddr: s.vaddr,
            size: s.size,
            nobits: s.nobits,
        }),
        wrappers: fat
            .wrappers
            .iter()
            .map(|w| WrapperReport {
                index: w.index,
                magic: w.magic.to_string(),
                version: w.version,
                pointer: match w.pointer {
                    PointerSource::InPlace(_) => "in-place",
                    PointerSource::Rela { r_type: 8, .. } => "rela-relative",
                    PointerSource::Rela { .. } => "rela-64",
                    PointerSource::Relr { .. } => "relr",
                    PointerSource::Rel { .. } => "rel",
                },
                target_vaddr: w.target,
                bundle: w.bundle,
                reserved1: w.reserved1,
                marker: None,
            })
            .collect(),
        bundles: Vec::new(),
        offload_images: Vec::new(),
        rdc_sections: fat
            .rdc_sections
            .iter()
            .map(|r| RdcReport {
                name: r.name.clone(),
                bundle_id: r.target_triple.clone(),
                offset: r.offset,
                size: r.size,
            })
            .collect(),
    }
}

fn inspect_archive(path: &str, bytes: &[u8]) -> Result<FileReport, SourceError> {
    let archive = kpack_archive::Archive::from_bytes(bytes.to_vec())?;
    archive.validate()?;
    let mut totals_map: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let entries = archive
        .entries()
        .map(|(binary, arch, info)| {
            let t = totals_map.entry(arch.to_owned()).or_default();
            t.0 += 1;
            t.1 += info.original_size;
            ArchiveEntryReport {
                binary: binary.to_owned(),
                arch: arch.to_owned(),
                ordinal: info.ordinal.into(),
                size: info.original_size,
                stored_size: info.stored_size,
            }
        })
        .collect();
    Ok(FileReport {
        path: path.to_owned(),
        kind: FileKind::KpackArchive.name(),
        details: Details::Archive(ArchiveReport {
            group_name: archive.group_name().to_owned(),
            gfx_arch_family: archive.gfx_arch_family().to_owned(),
            gfx_arches: archive.gfx_arches().to_vec(),
            compression_scheme: archive.compression_scheme().name().to_owned(),
            entries,
        }),
        totals: totals(totals_map),
    })
}
