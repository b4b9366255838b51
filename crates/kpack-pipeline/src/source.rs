//! Device code as it is found in files: every real form ROCm device code takes.
//!
//! A file is classified from its leading bytes, then walked: an ELF's `.hip_fatbin` bundles
//! (mapped to the wrappers that point at them) or a PE image's `.hip_fat` / `.hip_fatbin`
//! bundles, the members of an `ar` archive, a raw bundle or CCOB file (as kernel databases
//! ship them), a bare code object, or LLVM's OffloadBinary: the `.llvm.offloading` sections
//! the new offload driver (`--offload-new-driver`) writes into relocatable objects (and so
//! into static libraries), and `llvm-offload-binary` files ([`kpack_offload`] reads them).
//! The walk hands each device code object to a visitor with the bytes borrowed from the
//! input (or from the decompressed bundle) and, when the object is stored uncompressed in
//! the file, its absolute byte range, so a caller can copy it without touching memory.
//!
//! A CCOB decoding to more than [`STREAM_ABOVE`] is never decoded whole, whatever the
//! visitor: it is read one entry at a time from its compressed stream
//! ([`kpack_bundle::EntryStream`]) and its device code handed over in parts of at most
//! [`PART_BUDGET`] bytes, so memory follows the work in flight, not the largest bundle
//! (real ones decode to 1.2 GB); a code object larger than a part goes in pieces, as it is
//! decoded, to a visitor that takes them ([`Visitor::code_pieces`]: transform codes it and
//! verify hashes it as it comes, so neither holds librocprim-tests' 217 MB code objects).
//! Every visitor sees the same calls for either way: the bundle's header ([`FoundBundle`]:
//! its entry table, no data), then its entries' data.

use std::borrow::Cow;
use std::ops::Range;

use kpack_bundle::LocatedBundle;
use kpack_bundle::{BundleFormat, DecodedBundle, EntryHeader, EntryStream};
use kpack_concurrency::ordered;
use kpack_elf::FatBinary;
use kpack_offload::Image;
use kpack_pe::PeFatBinary;
use kpack_target::{BundleId, TargetId};

use crate::FileBytes;
use crate::error::SourceError;

mod bundle;
mod offloading;

pub use bundle::{PART_BUDGET, STREAM_ABOVE, walk_bundle};

pub use offloading::{image_bundle_id, offloading_section_headers};
use offloading::{walk_offload, walk_offloading};

/// What a file holds, decided from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A host ELF file (shared object, executable or relocatable object).
    Elf,
    /// A Windows PE32+ image (DLL or EXE).
    Pe,
    /// An `ar` archive (`.a`), whose members are walked in turn.
    Ar,
    /// An uncompressed `__CLANG_OFFLOAD_BUNDLE__`.
    Bundle,
    /// A compressed `CCOB` bundle.
    CompressedBundle,
    /// An AMDGPU code object (ELF with `e_machine == EM_AMDGPU`).
    CodeObject,
    /// A `.kpack` archive.
    KpackArchive,
    /// An LLVM OffloadBinary file (`llvm-offload-binary`, magic `10 ff 10 ad`).
    OffloadBinary,
    /// Anything else.
    Other,
}

impl FileKind {
    /// Stable lower-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Elf => "elf",
            FileKind::Pe => "pe",
            FileKind::Ar => "ar-archive",
            FileKind::Bundle => "offload-bundle",
            FileKind::CompressedBundle => "compressed-offload-bundle",
            FileKind::CodeObject => "code-object",
            FileKind::KpackArchive => "kpack-archive",
            FileKind::OffloadBinary => "offload-binary",
            FileKind::Other => "other",
        }
    }
}

const EM_AMDGPU: u16 = 224;

/// Classifies `bytes` by magic number.
pub fn classify(bytes: &[u8]) -> FileKind {
    if bytes.starts_with(b"\x7fELF") {
        let machine = bytes
            .get(18..20)
            .map(|m| u16::from_le_bytes([m[0], m[1]]))
            .unwrap_or(0);
        if machine == EM_AMDGPU {
            FileKind::CodeObject
        } else {
            FileKind::Elf
        }
    } else if kpack_pe::is_pe(bytes) {
        FileKind::Pe
    } else if kpack_ar::is_ar(bytes) {
        FileKind::Ar
    } else if bytes.starts_with(kpack_bundle::BUNDLE_MAGIC) {
        FileKind::Bundle
    } else if bytes.starts_with(kpack_bundle::CCOB_MAGIC) {
        FileKind::CompressedBundle
    } else if bytes.starts_with(b"KPAK") {
        FileKind::KpackArchive
    } else if kpack_offload::is_offload_binary(bytes) {
        FileKind::OffloadBinary
    } else {
        FileKind::Other
    }
}

/// What holds a device code object in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// A clang offload bundle (or CCOB), or nothing: a bare code object.
    Bundle,
    /// An LLVM OffloadBinary (a `.llvm.offloading` section, or a whole file).
    OffloadBinary,
}

/// One device code object found in a file.
#[derive(Debug)]
pub struct DeviceCode<'a> {
    /// The `ar` member holding it, if the file is an archive.
    pub member: Option<&'a str>,
    /// What holds it: a bundle, or an OffloadBinary.
    pub container: Container,
    /// Index of its bundle within the file (or member), or of its OffloadBinary image among
    /// the file's (or member's) images; 0 for a bare code object.
    pub bundle: usize,
    /// The wrappers (`.hipFatBinSegment` slots) whose pointer leads to that bundle.
    pub wrappers: &'a [usize],
    /// Index of the entry within its bundle.
    pub entry: usize,
    /// The bundle entry id (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`); for an OffloadBinary
    /// image, the id a bundle would give it: `<producer>-<triple>--<arch>`.
    pub bundle_id: &'a BundleId,
    /// The code object's bytes.
    pub data: &'a [u8],
    /// Absolute byte range of `data` in the file, when stored there uncompressed.
    pub file_range: Option<Range<u64>>,
}

impl DeviceCode<'_> {
    /// The GPU target of this code object (every device entry has one).
    pub fn target(&self) -> &TargetId {
        self.bundle_id
            .target()
            .expect("device entries are filtered to those with a target")
    }
}

/// A bundle found in a file, before its entries are visited: what its headers say, without
/// its entries' data, which arrive afterwards ([`Visitor::device_bundle`],
/// [`Visitor::other_entry`]), read from the compressed stream when it is a large CCOB.
#[derive(Debug)]
pub struct FoundBundle<'a> {
    /// The `ar` member holding it.
    pub member: Option<&'a str>,
    /// Index within the file or member.
    pub index: usize,
    /// Absolute byte offset of the bundle in the file.
    pub file_offset: u64,
    /// Its stored length in bytes.
    pub len: u64,
    /// The wrappers pointing at it.
    pub wrappers: &'a [usize],
    /// How it is stored (for a CCOB, its header's fields).
    pub format: BundleFormat,
    /// Size of the uncompressed bundle (a CCOB's decompressed payload).
    pub uncompressed_size: u64,
    /// Its entries in header order: ids, offsets in the uncompressed bundle, sizes.
    pub entries: &'a [EntryHeader],
}

/// An OffloadBinary image found in a file, before its device code (if any) is visited.
#[derive(Debug)]
pub struct FoundImage<'a> {
    /// The `ar` member holding it.
    pub member: Option<&'a str>,
    /// Index among the file's (or member's) images.
    pub index: usize,
    /// The image and its metadata, offsets absolute in the file.
    pub image: &'a Image<'a>,
    /// Its bundle id, when it is AMDGPU device code with a target (`arch`).
    pub bundle_id: Option<&'a BundleId>,
}

/// Receives what a walk finds. Every method defaults to doing nothing.
///
/// A bundle's size and hash (a CCOB's) are checked when it is decoded; for a CCOB read as a
/// stream (above [`STREAM_ABOVE`]), only after its last entry, so a visitor may have been
/// given its entries before the walk fails: nothing made from them may be published before
/// the walk ends.
pub trait Visitor {
    /// Called once per bundle, before its entries.
    fn bundle(&mut self, _bundle: &FoundBundle<'_>) -> Result<(), SourceError> {
        Ok(())
    }
    /// Called once per device (non-host) code object.
    fn device_code(&mut self, _code: &DeviceCode<'_>) -> Result<(), SourceError> {
        Ok(())
    }
    /// Called with a bundle's device code objects in entry order, while their bytes are
    /// alive; by default visits each with [`Visitor::device_code`]. A visitor that works on a
    /// bundle's code objects together (`unified` coding) takes them here, borrowed, rather
    /// than copying each as it comes. A bundle decoded whole gives them in one call (one
    /// between each two entries without a target, if any); a CCOB above [`STREAM_ABOVE`]
    /// in consecutive parts of at most [`PART_BUDGET`] bytes (a larger code object is a part
    /// alone).
    fn device_bundle(&mut self, codes: &[DeviceCode<'_>]) -> Result<(), SourceError> {
        codes.iter().try_for_each(|code| self.device_code(code))
    }
    /// For a code object of a CCOB read as a stream that is a part alone (over
    /// [`PART_BUDGET`]), a taker of its bytes in pieces as they are decoded, so that it is
    /// never held whole (librocprim-tests' are 217 MB each): `code.data` is empty and `len`
    /// is its size. `None`, the default, has it gathered and handed over whole
    /// ([`Visitor::device_bundle`]).
    fn code_pieces<'s>(
        &'s mut self,
        _code: &DeviceCode<'_>,
        _len: u64,
    ) -> Result<Option<Box<dyn CodePieces + 's>>, SourceError> {
        Ok(None)
    }
    /// Called with the data of each entry of a bundle without a GPU target (the host entry,
    /// which clang writes empty), in entry order with the [`Visitor::device_bundle`] calls.
    fn other_entry(&mut self, _entry: usize, _data: &[u8]) -> Result<(), SourceError> {
        Ok(())
    }
    /// Called once per parsed ELF (file or `ar` member) with its fat-binary inspection.
    fn elf(&mut self, _member: Option<&str>, _fat: &FatBinary) -> Result<(), SourceError> {
        Ok(())
    }
    /// Called once per OffloadBinary image (AMDGPU or not), before its device code.
    fn offload_image(&mut self, _image: &FoundImage<'_>) -> Result<(), SourceError> {
        Ok(())
    }
    /// Called once per parsed PE image with its fat-binary inspection.
    fn pe(&mut self, _fat: &PeFatBinary) -> Result<(), SourceError> {
        Ok(())
    }
}

/// A code object's bytes taken in pieces as its streamed bundle is decoded
/// ([`Visitor::code_pieces`]).
pub trait CodePieces {
    /// The next piece of the code object, in order.
    fn piece(&mut self, bytes: &[u8]) -> Result<(), SourceError>;
    /// Called once every piece was given and the code object's target checked against its
    /// entry's claim; not called when the walk fails first.
    fn finish(self: Box<Self>) -> Result<(), SourceError>;
}

/// Walks every device code object of `bytes` (a whole file), in file order.
pub fn walk(bytes: &[u8], visitor: &mut dyn Visitor) -> Result<FileKind, SourceError> {
    walk_with(bytes, None, visitor)
}

/// Like [`walk`] over a whole mapped file, dropping the pages of each bundle from the
/// resident set once it is visited (see [`FileBytes::release`]): walking a 400 MB library
/// then costs the memory of one bundle, not of the file.
pub fn walk_mapped(map: &FileBytes, visitor: &mut dyn Visitor) -> Result<FileKind, SourceError> {
    walk_with(map, Some(map), visitor)
}

/// Like [`walk_mapped`], with the bundles of an ELF's `.hip_fatbin` decoded on `threads`
/// workers, each walked by a visitor of its own (`visitor()`, within the decoding memory
/// gate and [`ordered::IN_FLIGHT`], the bytes in flight). `visited` receives the
/// visitors in file order: the one that saw the ELF ([`Visitor::elf`]), one per bundle, the
/// one that walked the `.llvm.offloading` sections; for any other kind of file, the one
/// visitor that walked it whole. A 400 MB library of 200 bundles is thus decoded on every
/// core (`verify --original`), and whatever the visitors report is merged in the same
/// order whatever the thread count.
pub fn walk_mapped_parallel<V: Visitor + Send>(
    map: &FileBytes,
    threads: usize,
    visitor: impl Fn() -> V + Sync,
    mut visited: impl FnMut(V),
) -> Result<FileKind, SourceError> {
    let bytes: &[u8] = map;
    let kind = classify(bytes);
    let mut first = visitor();
    if kind != FileKind::Elf {
        walk_with(bytes, Some(map), &mut first)?;
        visited(first);
        return Ok(kind);
    }
    let fat = kpack_elf::inspect(bytes)?;
    first.elf(None, &fat)?;
    visited(first);
    let slots = bundle_slots(&fat);
    ordered::for_each_ordered(
        slots.len(),
        threads,
        &ordered::IN_FLIGHT,
        |i| slots[i].decode_cost(bytes),
        || (),
        |_, i| {
            let mut v = visitor();
            walk_bundle(bytes, &slots[i], 0, None, Some(map), &mut v)?;
            map.release(&bytes[slots[i].range.clone()]);
            // A visitor keeps what it found (digests, counts), not the bundle it walked.
            Ok((v, 0))
        },
        |_, v| {
            visited(v);
            Ok::<(), SourceError>(())
        },
    )?;
    let mut last = visitor();
    walk_offloading(bytes, 0, None, &mut last)?;
    visited(last);
    Ok(kind)
}

fn walk_with(
    bytes: &[u8],
    mapping: Option<&FileBytes>,
    visitor: &mut dyn Visitor,
) -> Result<FileKind, SourceError> {
    let kind = classify(bytes);
    match kind {
        FileKind::Elf => walk_elf(bytes, 0, None, mapping, visitor)?,
        FileKind::Pe => {
            let fat = kpack_pe::inspect(bytes)?;
            visitor.pe(&fat)?;
            walk_slots(bytes, &pe_bundle_slots(&fat), 0, None, mapping, visitor)?;
        }
        FileKind::Ar => {
            let members = kpack_ar::members(bytes)?;
            for m in &members {
                if classify(m.data) == FileKind::Elf {
                    walk_elf(m.data, m.offset, Some(m.name.as_ref()), mapping, visitor)?;
                }
            }
        }
        FileKind::Bundle | FileKind::CompressedBundle => {
            let len = kpack_bundle::bundle_extent(bytes)?;
            let slot = BundleSlot {
                index: 0,
                range: 0..len as usize,
                wrappers: Vec::new(),
                section_offset: None,
            };
            walk_bundle(bytes, &slot, 0, None, None, visitor)?;
        }
        FileKind::OffloadBinary => walk_offload(&[(bytes, 0)], None, visitor)?,
        FileKind::CodeObject => {
            let target = kpack_target::code_object_target(bytes)?;
            let id = BundleId::parse(&hip_bundle_id(target.target.as_str()))?;
            visitor.device_code(&DeviceCode {
                member: None,
                container: Container::Bundle,
                bundle: 0,
                wrappers: &[],
                entry: 0,
                bundle_id: &id,
                data: bytes,
                file_range: Some(0..bytes.len() as u64),
            })?;
        }
        FileKind::KpackArchive | FileKind::Other => {}
    }
    Ok(kind)
}

/// The bundle entry id clang gives the HIP device code of `target`:
/// `hipv4-spirv64-amd-amdhsa--amdgcnspirv` for the portable SPIR-V (the spelling a HIP
/// runtime looks it up by), `hipv4-amdgcn-amd-amdhsa--<target>` for a GPU.
pub fn hip_bundle_id(target: &str) -> String {
    let triple = if target == kpack_target::SPIRV {
        kpack_runtime::target::SPIRV_TRIPLE_PREFIX
    } else {
        "amdgcn-amd-amdhsa--"
    };
    format!("hipv4-{triple}{target}")
}

/// The bundle entry id clang gives the (empty) host entry of an ELF for `e_machine`:
/// `host-<arch>-unknown-linux-gnu-` (clang before 16 wrote `host-x86_64-unknown-linux`).
pub fn host_bundle_id(e_machine: u16) -> &'static str {
    match e_machine {
        object::elf::EM_AARCH64 => "host-aarch64-unknown-linux-gnu-",
        object::elf::EM_PPC64 => "host-powerpc64le-unknown-linux-gnu-",
        _ => "host-x86_64-unknown-linux-gnu-",
    }
}

/// The host entry id of the first of the bundles `slots` of the ELF `elf` when it is not
/// [`host_bundle_id`]`(e_machine)`: what a restore must write back, and so what the marker
/// records (one id for the binary: one bundler writes every bundle of a link). Read from the
/// bundle's header alone (a CCOB's first decoded bytes). A bundle that does not read records
/// nothing: the walk that writes the archives reports it.
pub fn host_entry_to_record(elf: &[u8], slots: &[BundleSlot], e_machine: u16) -> Option<String> {
    let bytes = &elf[slots.first()?.range.clone()];
    // Counted as a walk's decoder is: a split planning several fat binaries at once held
    // their CCOBs' windows (134 MiB at its peak) beside the walks' own, outside every gate.
    let _decoding = bundle::reserve_decoding(bytes);
    let ids: Vec<String> = match EntryStream::open(bytes).ok()? {
        Some(stream) => stream
            .entry_headers()
            .iter()
            .map(|e| e.triple.clone())
            .collect(),
        None => {
            let decoded = DecodedBundle::decode(bytes).ok()?;
            let bundle = decoded.bundle().ok()?;
            bundle
                .entries()
                .iter()
                .map(|e| e.triple.to_owned())
                .collect()
        }
    };
    let host = ids.into_iter().find(|id| id.starts_with("host"))?;
    (host != host_bundle_id(e_machine)).then_some(host)
}

/// A bundle of an ELF's `.hip_fatbin`: where its stored bytes are and which wrappers lead
/// to it.
#[derive(Debug, Clone)]
pub struct BundleSlot {
    /// Index of the bundle within the section.
    pub index: usize,
    /// Its stored bytes within the ELF.
    pub range: Range<usize>,
    /// The wrappers (`.hipFatBinSegment` slots) whose pointer leads to it.
    pub wrappers: Vec<usize>,
    /// Its offset within `.hip_fatbin` (none for a raw bundle file).
    pub section_offset: Option<u64>,
}

/// The bundles of `fat` (the inspection of an ELF) in section order; none when
/// `.hip_fatbin` is missing or occupies no file bytes.
pub fn bundle_slots(fat: &FatBinary) -> Vec<BundleSlot> {
    let Some(section) = fat.fatbin.as_ref().filter(|s| !s.nobits) else {
        return Vec::new();
    };
    let wrappers: Vec<_> = fat.wrappers.iter().map(|w| (w.index, w.bundle)).collect();
    slots(section.offset, &fat.bundles, &wrappers)
}

/// The bundles of a PE image's fat-binary section, as [`bundle_slots`] for ELF.
pub fn pe_bundle_slots(fat: &PeFatBinary) -> Vec<BundleSlot> {
    let Some(section) = fat.fatbin.as_ref().filter(|s| !s.nobits()) else {
        return Vec::new();
    };
    let wrappers: Vec<_> = fat.wrappers.iter().map(|w| (w.index, w.bundle)).collect();
    slots(section.offset, &fat.bundles, &wrappers)
}

/// The slots of `bundles` (offsets in a section at file offset `section`), each with the
/// wrappers (`(slot, bundle it leads to)`) that lead to it.
fn slots(
    section: u64,
    bundles: &[LocatedBundle],
    wrappers: &[(usize, Option<usize>)],
) -> Vec<BundleSlot> {
    bundles
        .iter()
        .enumerate()
        .map(|(index, located)| {
            let start = (section + located.offset) as usize;
            BundleSlot {
                index,
                range: start..start + located.len as usize,
                wrappers: wrappers
                    .iter()
                    .filter(|(_, b)| *b == Some(index))
                    .map(|(w, _)| *w)
                    .collect(),
                section_offset: Some(located.offset),
            }
        })
        .collect()
}

impl BundleSlot {
    /// The memory decoding the bundle takes while in flight, for
    /// [`kpack_concurrency::ordered::for_each_ordered`]: its decompressed size for a CCOB (or
    /// what reading it as a stream holds, above [`STREAM_ABOVE`]), its stored bytes (mapped
    /// pages) otherwise. `elf` is the file the slot is in.
    pub fn decode_cost(&self, elf: &[u8]) -> u64 {
        let bytes = &elf[self.range.clone()];
        match bundle::decode_memory(bytes) {
            0 => bytes.len() as u64,
            memory => memory,
        }
    }

    /// Whether [`walk_bundle`] reads this bundle as a stream: a CCOB decoding to more than
    /// [`STREAM_ABOVE`]. `elf` is the file the slot is in.
    pub fn streams(&self, elf: &[u8]) -> bool {
        decoded_size(&elf[self.range.clone()]) > STREAM_ABOVE
    }
}

/// What the CCOB at `bytes[0]` claims to decode to; 0 for anything else.
fn decoded_size(bytes: &[u8]) -> u64 {
    match kpack_bundle::peek_format(bytes) {
        Ok(BundleFormat::Compressed {
            uncompressed_size, ..
        }) => uncompressed_size,
        _ => 0,
    }
}

fn walk_elf(
    bytes: &[u8],
    base: u64,
    member: Option<&str>,
    mapping: Option<&FileBytes>,
    visitor: &mut dyn Visitor,
) -> Result<(), SourceError> {
    let fat = kpack_elf::inspect(bytes)?;
    visitor.elf(member, &fat)?;
    walk_slots(bytes, &bundle_slots(&fat), base, member, mapping, visitor)?;
    walk_offloading(bytes, base, member, visitor)
}

/// Walks the bundles of a host binary, dropping each one's pages once visited.
fn walk_slots(
    bytes: &[u8],
    slots: &[BundleSlot],
    base: u64,
    member: Option<&str>,
    mapping: Option<&FileBytes>,
    visitor: &mut dyn Visitor,
) -> Result<(), SourceError> {
    for slot in slots {
        walk_bundle(bytes, slot, base, member, mapping, visitor)?;
        if let Some(map) = mapping {
            map.release(&bytes[slot.range.clone()]);
        }
    }
    Ok(())
}

/// Checks that a code object is built for the target its bundle entry claims.
///
/// Packing an object under the wrong architecture would hand a GPU code it cannot run, so
/// a disagreement is an error. Entries that are not ELF (bitcode in `-fgpu-rdc` bundles)
/// have no header to check.
fn check_code_object_target(
    id: &BundleId,
    data: &[u8],
    bundle: usize,
    entry: usize,
) -> Result<(), SourceError> {
    let (Some(claimed), true) = (id.target(), data.starts_with(b"\x7fELF")) else {
        return Ok(());
    };
    let decoded = kpack_target::code_object_target(data)?;
    if &decoded.target != claimed {
        return Err(SourceError::TargetMismatch {
            bundle,
            entry,
            bundle_id: id.to_string(),
            decoded: decoded.target.to_string(),
        });
    }
    Ok(())
}

/// Collects every device code object of `bytes` with owned data (for small inputs and tests).
pub fn device_code_objects(bytes: &[u8]) -> Result<Vec<OwnedDeviceCode>, SourceError> {
    struct Collect(Vec<OwnedDeviceCode>);
    impl Visitor for Collect {
        fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
            self.0.push(OwnedDeviceCode {
                member: code.member.map(str::to_owned),
                container: code.container,
                bundle: code.bundle,
                wrappers: code.wrappers.to_vec(),
                entry: code.entry,
                bundle_id: code.bundle_id.clone(),
                data: Cow::Owned(code.data.to_vec()),
            });
            Ok(())
        }
    }
    let mut collect = Collect(Vec::new());
    walk(bytes, &mut collect)?;
    Ok(collect.0)
}

/// A device code object with owned bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedDeviceCode {
    /// The `ar` member holding it.
    pub member: Option<String>,
    /// What holds it.
    pub container: Container,
    /// Index of its bundle (or OffloadBinary image) within the file (or member).
    pub bundle: usize,
    /// The wrappers pointing at its bundle.
    pub wrappers: Vec<usize>,
    /// Index of the entry within its bundle.
    pub entry: usize,
    /// The bundle entry id.
    pub bundle_id: BundleId,
    /// The code object.
    pub data: Cow<'static, [u8]>,
}
