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

use std::borrow::Cow;
use std::ops::Range;

use kpack_bundle::LocatedBundle;
use kpack_bundle::{Bundle, BundleFormat, DecodedBundle, EntryStream, StreamedEntry};
use kpack_elf::FatBinary;
use kpack_offload::Image;
use kpack_pe::PeFatBinary;
use kpack_target::{BundleId, TargetId};

use crate::FileBytes;
use crate::error::SourceError;

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

    /// True for the kinds that can hold device code.
    pub fn holds_device_code(self) -> bool {
        !matches!(self, FileKind::Other)
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
    } else if kpack_elf::ar::is_ar(bytes) {
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

/// A bundle found in a file, before its entries are visited.
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
    /// The decoded bundle (decompressed when it was a CCOB).
    pub decoded: &'a DecodedBundle<'a>,
    /// Its parsed entries.
    pub bundle: &'a Bundle<'a>,
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
pub trait Visitor {
    /// Called once per bundle, before its device entries.
    fn bundle(&mut self, _bundle: &FoundBundle<'_>) -> Result<(), SourceError> {
        Ok(())
    }
    /// Called once per device (non-host) code object.
    fn device_code(&mut self, _code: &DeviceCode<'_>) -> Result<(), SourceError> {
        Ok(())
    }
    /// Called once per bundle with all its device code objects, in entry order, while the
    /// decoded bundle is alive; by default visits each with [`Visitor::device_code`]. A
    /// visitor that works on a bundle's code objects together (`unified` coding) takes them
    /// here, borrowed, rather than copying each as it comes.
    fn device_bundle(&mut self, codes: &[DeviceCode<'_>]) -> Result<(), SourceError> {
        codes.iter().try_for_each(|code| self.device_code(code))
    }
    /// Whether this visitor takes the device code of a CCOB larger than [`STREAM_ABOVE`] in
    /// consecutive parts of at most [`PART_BUDGET`] bytes, one [`Visitor::device_bundle`]
    /// call each, read from the compressed stream one entry at a time, so that the
    /// decompressed bundle is never held whole ([`kpack_bundle::EntryStream`]). Such a bundle
    /// gets no [`Visitor::bundle`] call, and its size and hash are checked after its last
    /// part: the visitor must not publish anything before the walk ends.
    fn takes_parts(&self) -> bool {
        false
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
            let members = kpack_elf::ar::members(bytes)?;
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
            walk_bundle(bytes, &slot, 0, None, visitor)?;
        }
        FileKind::OffloadBinary => walk_offload(&[(bytes, 0)], None, visitor)?,
        FileKind::CodeObject => {
            let target = kpack_target::code_object_target(bytes)?;
            let id = BundleId::parse(&format!("hipv4-amdgcn-amd-amdhsa--{}", target.target))?;
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
    /// [`crate::ordered::for_each_ordered`]: its decompressed size for a CCOB, its stored
    /// bytes (mapped pages) otherwise. `elf` is the file the slot is in.
    pub fn decode_cost(&self, elf: &[u8]) -> u64 {
        let bytes = &elf[self.range.clone()];
        match kpack_bundle::peek_format(bytes) {
            Ok(BundleFormat::Compressed {
                uncompressed_size, ..
            }) => uncompressed_size.min(kpack_bundle::MAX_DECOMPRESSED),
            _ => bytes.len() as u64,
        }
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
    let sections = offloading_sections(bytes)?;
    if !sections.is_empty() {
        let sections: Vec<_> = sections
            .into_iter()
            .map(|(data, offset)| (data, base + offset))
            .collect();
        walk_offload(&sections, member, visitor)?;
    }
    Ok(())
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
        walk_bundle(bytes, slot, base, member, visitor)?;
        if let Some(map) = mapping {
            map.release(&bytes[slot.range.clone()]);
        }
    }
    Ok(())
}

/// `SHT_LLVM_OFFLOADING`, the section type LLVM finds OffloadBinaries by.
const SHT_LLVM_OFFLOADING: u32 = 0x6fff_4c0b;

/// The `.llvm.offloading` sections of an ELF (by type, as LLVM finds them, or by name),
/// with their offsets in `elf`.
fn offloading_sections(elf: &[u8]) -> Result<Vec<(&[u8], u64)>, SourceError> {
    let file = kpack_elf::ElfFile::parse(elf)?;
    offloading_section_headers(&file)
        .map(|s| Ok((file.section_data(s)?, s.sh_offset)))
        .collect()
}

/// The section headers of [`offloading_sections`].
pub fn offloading_section_headers<'f>(
    file: &'f kpack_elf::ElfFile<'_>,
) -> impl Iterator<Item = &'f kpack_elf::SectionHeader> {
    file.section_headers()
        .iter()
        .filter(|s| s.sh_type == SHT_LLVM_OFFLOADING || s.name == ".llvm.offloading")
}

/// Visits the images of the OffloadBinaries in `regions` (bytes and their absolute offset
/// in the file), numbering them in order across the regions.
fn walk_offload(
    regions: &[(&[u8], u64)],
    member: Option<&str>,
    visitor: &mut dyn Visitor,
) -> Result<(), SourceError> {
    let mut index = 0;
    for &(bytes, base) in regions {
        for image in kpack_offload::parse(bytes, base)? {
            let id = image_bundle_id(&image)?;
            visitor.offload_image(&FoundImage {
                member,
                index,
                image: &image,
                bundle_id: id.as_ref(),
            })?;
            if let Some(id) = &id {
                check_code_object_target(id, image.data, index, image.entry)?;
                visitor.device_code(&DeviceCode {
                    member,
                    container: Container::OffloadBinary,
                    bundle: index,
                    wrappers: &[],
                    entry: image.entry,
                    bundle_id: id,
                    data: image.data,
                    file_range: Some(image.offset..image.offset + image.data.len() as u64),
                })?;
            }
            index += 1;
        }
    }
    Ok(())
}

/// The bundle id of an AMDGPU image (`hip-amdgcn-amd-amdhsa--gfx90a:xnack+`, the offload
/// kind named as LLVM names it); `None` for other devices and for images without an arch.
pub fn image_bundle_id(image: &Image<'_>) -> Result<Option<BundleId>, SourceError> {
    match (image.triple(), image.arch()) {
        (Some(triple), Some(arch)) if triple.starts_with("amdgcn-") && !arch.is_empty() => {
            let id = format!("{}-{triple}--{arch}", image.offload_kind.name());
            Ok(Some(BundleId::parse(&id)?))
        }
        _ => Ok(None),
    }
}

/// Decodes the bundle at `slot` of `elf` (an ELF, or a raw bundle file) and visits it and its
/// device code objects; `base` is the absolute offset of `elf` in the file (an `ar` member's).
/// A CCOB whose stored hash is not that of its decompressed bytes is an error, for every
/// visitor ([`DecodedBundle::decode`]).
pub fn walk_bundle(
    elf: &[u8],
    slot: &BundleSlot,
    base: u64,
    member: Option<&str>,
    visitor: &mut dyn Visitor,
) -> Result<(), SourceError> {
    let bytes = &elf[slot.range.clone()];
    let index = slot.index;
    let file_offset = base + slot.range.start as u64;
    let wrappers = &slot.wrappers[..];
    let in_bundle = |in_payload: bool| {
        move |e: kpack_bundle::BundleError| SourceError::InBundle {
            index,
            file_offset,
            section_offset: slot.section_offset,
            in_payload,
            source: if in_payload {
                e
            } else {
                e.shifted(file_offset)
            },
        }
    };
    let decoded_size = match kpack_bundle::peek_format(bytes) {
        Ok(BundleFormat::Compressed {
            uncompressed_size, ..
        }) => uncompressed_size,
        _ => 0,
    };
    if visitor.takes_parts()
        && decoded_size > STREAM_ABOVE
        && let Some(stream) = EntryStream::open(bytes).map_err(in_bundle(false))?
    {
        let _decoding = DECODING.reserve(PART_BUDGET);
        return walk_stream(stream, slot, member, visitor).map_err(|e| match e {
            StreamError::Bundle(e) => in_bundle(true)(e),
            StreamError::Source(e) => e,
        });
    }
    let _decoding = DECODING.reserve(decoded_size);
    let decoded = DecodedBundle::decode(bytes).map_err(in_bundle(false))?;
    let compressed = !matches!(decoded.format(), BundleFormat::Uncompressed);
    let bundle = decoded.bundle().map_err(in_bundle(compressed))?;
    visitor.bundle(&FoundBundle {
        member,
        index,
        file_offset,
        len: bytes.len() as u64,
        wrappers,
        decoded: &decoded,
        bundle: &bundle,
    })?;
    let stored_in_file = !compressed;
    let mut ids = Vec::new();
    for (entry_index, entry) in bundle.entries().iter().enumerate() {
        let id = BundleId::parse(entry.triple)?;
        if id.target().is_some() {
            check_code_object_target(&id, entry.data, index, entry_index)?;
            ids.push((entry_index, id));
        }
    }
    let codes: Vec<DeviceCode<'_>> = ids
        .iter()
        .map(|(entry_index, id)| {
            let entry = &bundle.entries()[*entry_index];
            DeviceCode {
                member,
                container: Container::Bundle,
                bundle: index,
                wrappers,
                entry: *entry_index,
                bundle_id: id,
                data: entry.data,
                file_range: stored_in_file.then(|| {
                    let start = file_offset + entry.offset;
                    start..start + entry.data.len() as u64
                }),
            }
        })
        .collect();
    visitor.device_bundle(&codes)
}

/// A CCOB decoding to more than this is read in parts by visitors that take them
/// ([`Visitor::takes_parts`]): streaming holds a part ([`PART_BUDGET`]) and zstd's window (up
/// to 128 MiB, what clang's long-distance matching uses), so it saves memory only above
/// their sum.
pub const STREAM_ABOVE: u64 = 192 << 20;

/// The most bytes of code objects one part of a streamed bundle holds (a code object larger
/// than this is a part alone).
pub const PART_BUDGET: u64 = 64 << 20;

/// What can go wrong walking a streamed bundle: its bytes, or the visitor.
enum StreamError {
    Bundle(kpack_bundle::BundleError),
    Source(SourceError),
}

/// [`walk_bundle`] of a large CCOB for a visitor that takes parts: its entries are read one
/// at a time and handed over in parts of at most [`PART_BUDGET`] bytes.
fn walk_stream(
    mut stream: EntryStream<'_>,
    slot: &BundleSlot,
    member: Option<&str>,
    visitor: &mut dyn Visitor,
) -> Result<(), StreamError> {
    let mut part: Vec<(StreamedEntry, BundleId)> = Vec::new();
    let mut part_bytes = 0u64;
    let mut hand_over = |part: &mut Vec<(StreamedEntry, BundleId)>| {
        let codes: Vec<DeviceCode<'_>> = part
            .iter()
            .map(|(entry, id)| DeviceCode {
                member,
                container: Container::Bundle,
                bundle: slot.index,
                wrappers: &slot.wrappers,
                entry: entry.index,
                bundle_id: id,
                data: &entry.data,
                file_range: None,
            })
            .collect();
        let result = visitor.device_bundle(&codes);
        part.clear();
        result.map_err(StreamError::Source)
    };
    while let Some(entry) = stream.next_entry().map_err(StreamError::Bundle)? {
        let id = BundleId::parse(&entry.triple).map_err(|e| StreamError::Source(e.into()))?;
        if id.target().is_none() {
            continue;
        }
        check_code_object_target(&id, &entry.data, slot.index, entry.index)
            .map_err(StreamError::Source)?;
        let len = entry.data.len() as u64;
        if !part.is_empty() && part_bytes + len > PART_BUDGET {
            hand_over(&mut part)?;
            part_bytes = 0;
        }
        part_bytes += len;
        part.push((entry, id));
    }
    if !part.is_empty() {
        hand_over(&mut part)?;
    }
    Ok(())
}

/// The bytes of decompressed bundles alive at once in this process, across every thread and
/// walk: a bundle is decoded only while those of the others fit (or when none is), so
/// parallel walks (verify's workers, transform's) cannot each hold a 160 MB bundle at the
/// same time. A bundle is released once visited.
static DECODING: kpack_fs::MemoryGate = kpack_fs::MemoryGate::new(256 << 20);

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
