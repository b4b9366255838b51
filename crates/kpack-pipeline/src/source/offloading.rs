//! The `.llvm.offloading` sections of an ELF: LLVM's OffloadBinary containers (clang's new
//! offload driver), walked image by image beside the clang offload bundles of the parent
//! module.

use kpack_offload::Image;
use kpack_target::BundleId;

use super::{Container, DeviceCode, FoundImage, Visitor, check_code_object_target};
use crate::error::SourceError;

/// Walks the OffloadBinaries of an ELF's `.llvm.offloading` sections, if any.
pub(super) fn walk_offloading(
    bytes: &[u8],
    base: u64,
    member: Option<&str>,
    visitor: &mut dyn Visitor,
) -> Result<(), SourceError> {
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
pub(super) fn walk_offload(
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
