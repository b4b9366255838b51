//! `kpack prune` of LLVM OffloadBinary device code: an `llvm-offload-binary` file, or a
//! relocatable object (what `--offload-new-driver` compiles to) whose `.llvm.offloading`
//! sections hold the images. Only the AMDGPU images of the targets [`Selection`] keeps stay
//! (an image of another triple or without a target is kept); each kept image is written
//! again by [`kpack_offload::write_binary`] (a version-1 binary, as LLVM ≤ 22 writes every
//! image: for such input, the kept binaries' bytes are unchanged). A section, or file, that
//! keeps every image is left as it is.
//!
//! In an object, each rewritten section keeps its place and gets its new, shorter contents;
//! everything after it (later sections, the section header table) moves down by the bytes
//! saved, rounded down to the largest alignment of the file's sections (so every section
//! keeps its alignment; the remainder is zero padding), and the section headers and
//! `e_shoff` say so ([`kpack_elf::shrink`]). A relocatable object has no program headers and nothing addresses a
//! file offset, so nothing else changes; a relocation or symbol into a rewritten section
//! past its start, which would point elsewhere once images are gone, is refused. Objects
//! are small (the device code of one translation unit): the output is built in memory.
//!
//! The output is read again: it must parse as ELF (or as OffloadBinary), and hold exactly
//! the kept images.

use std::collections::BTreeSet;
use std::path::Path;

use kpack_elf::ElfFile;
use kpack_offload::Image;
use kpack_target::TargetId;

use kpack_pipeline::SourceError;
use kpack_pipeline::error::io_error;
use kpack_pipeline::source::{image_bundle_id, offloading_section_headers};

use crate::{PruneError, PrunedFile, Selection};

/// `ET_REL`.
const ET_REL: u16 = 1;

/// Whether `bytes` hold OffloadBinary device code this module prunes: an
/// `llvm-offload-binary` file, or a relocatable ELF object with a `.llvm.offloading` section.
pub fn holds_offload(bytes: &[u8]) -> bool {
    if kpack_offload::is_offload_binary(bytes) {
        return true;
    }
    kpack_elf::is_elf(bytes)
        && ElfFile::parse(bytes).is_ok_and(|f| {
            f.header().e_type == ET_REL && offloading_section_headers(&f).next().is_some()
        })
}

/// The images of one region (a section, or the whole file) after pruning.
struct PrunedRegion {
    /// The new contents; `None` when every image stays.
    bytes: Option<Vec<u8>>,
    kept: BTreeSet<TargetId>,
    dropped: BTreeSet<TargetId>,
}

/// Prunes the images of the binaries in `bytes` (at absolute offset `base`).
fn prune_region(
    bytes: &[u8],
    base: u64,
    selection: &Selection,
) -> Result<PrunedRegion, PruneError> {
    let images = kpack_offload::parse(bytes, base).map_err(SourceError::from)?;
    let (mut kept, mut dropped) = (BTreeSet::new(), BTreeSet::new());
    let mut stay: Vec<&Image<'_>> = Vec::with_capacity(images.len());
    for image in &images {
        let target = image_bundle_id(image)?.and_then(|id| id.target().cloned());
        match target {
            Some(t) if !selection.keeps(&t) => {
                dropped.insert(t);
            }
            t => {
                kept.extend(t);
                stay.push(image);
            }
        }
    }
    let bytes = (!dropped.is_empty()).then(|| {
        let mut out = Vec::new();
        for image in stay {
            kpack_offload::write_binary(image, &mut out);
        }
        out
    });
    Ok(PrunedRegion {
        bytes,
        kept,
        dropped,
    })
}

/// Writes the pruned `bytes` to the new file `output` with the permission bits `mode`
/// ([`kpack_fs::set_mode`]).
pub fn write_pruned(output: &Path, bytes: &[u8], mode: Option<u32>) -> Result<(), PruneError> {
    std::fs::write(output, bytes).map_err(io_error(output))?;
    if let Some(mode) = mode {
        kpack_fs::set_mode(output, mode).map_err(io_error(output))?;
    }
    Ok(())
}

/// Prunes the OffloadBinary device code of `input` ([`holds_offload`]) in memory: the
/// pruned bytes (checked) and what was done. As [`crate::fatbin::prune_elf`], a result
/// without device code is returned too ([`PrunedFile::check_not_empty`]). In the result,
/// `bundles` counts the regions holding binaries (the file, or the sections) and
/// `bundles_rewritten` those rewritten; `fatbin_size` and `pruned_fatbin_size` are their
/// bytes before and after.
pub fn prune_offload_bytes(
    input: &[u8],
    selection: &Selection,
) -> Result<(Vec<u8>, PrunedFile), PruneError> {
    let (bytes, regions, before, after, kept, dropped) = if kpack_offload::is_offload_binary(input)
    {
        let r = prune_region(input, 0, selection)?;
        let after = r.bytes.as_ref().map_or(input.len(), Vec::len) as u64;
        let rewritten = usize::from(r.bytes.is_some());
        let out = r.bytes.unwrap_or_else(|| input.to_vec());
        (
            out,
            (1, rewritten),
            input.len() as u64,
            after,
            r.kept,
            r.dropped,
        )
    } else {
        prune_object(input, selection)?
    };
    check_written(&bytes, kpack_offload::is_offload_binary(input), &kept)?;
    let pruned = PrunedFile {
        input_size: input.len() as u64,
        output_size: bytes.len() as u64,
        fatbin_size: before,
        pruned_fatbin_size: after,
        removed: (input.len() - bytes.len()) as u64,
        bundles_rewritten: regions.1,
        bundles: regions.0,
        wrappers: 0,
        kept: kept.iter().map(ToString::to_string).collect(),
        dropped: dropped.iter().map(ToString::to_string).collect(),
    };
    Ok((bytes, pruned))
}

/// The pruned object, its (regions, rewritten) counts, region bytes before and after, and
/// the targets kept and dropped.
type PrunedObject = (
    Vec<u8>,
    (usize, usize),
    u64,
    u64,
    BTreeSet<TargetId>,
    BTreeSet<TargetId>,
);

fn prune_object(input: &[u8], selection: &Selection) -> Result<PrunedObject, PruneError> {
    let file = ElfFile::parse(input)?;
    if file.header().e_type != ET_REL {
        return Err(PruneError::NotFat(
            "OffloadBinary device code is pruned in relocatable objects only",
        ));
    }
    let (mut kept, mut dropped) = (BTreeSet::new(), BTreeSet::new());
    let (mut before, mut after) = (0, 0);
    // (section index, new contents), in file order.
    let mut edits: Vec<(usize, Vec<u8>)> = Vec::new();
    let sections: Vec<_> = offloading_section_headers(&file).collect();
    for s in &sections {
        let data = file.section_data(s)?;
        let r = prune_region(data, s.sh_offset, selection)?;
        before += s.sh_size;
        after += r.bytes.as_ref().map_or(s.sh_size, |b| b.len() as u64);
        kept.extend(r.kept);
        dropped.extend(r.dropped);
        if let Some(bytes) = r.bytes {
            check_unreferenced(&file, s.index)?;
            edits.push((s.index, bytes));
        }
    }
    edits.sort_by_key(|(index, _)| file.section_headers()[*index].sh_offset);
    let counts = (sections.len(), edits.len());
    Ok((
        kpack_elf::shrink::plan(&file, &edits)?.to_vec(input),
        counts,
        before,
        after,
        kept,
        dropped,
    ))
}

/// Refuses a relocation applied to section `index`, or a symbol defined inside it past its
/// start: both would point at other bytes once images are gone.
fn check_unreferenced(file: &ElfFile<'_>, index: usize) -> Result<(), PruneError> {
    let refused = |what: &str| {
        PruneError::Unexpected(format!(
            "section {index} ({}) is referred to by {what}; its images cannot move",
            file.section_headers()[index].name
        ))
    };
    use object::elf::{SHT_REL, SHT_RELA, SHT_SYMTAB};
    let headers = file.section_headers();
    if headers
        .iter()
        .any(|s| matches!(s.sh_type, SHT_REL | SHT_RELA) && s.sh_info as usize == index)
    {
        return Err(refused("a relocation section"));
    }
    for symtab in headers.iter().filter(|s| s.sh_type == SHT_SYMTAB) {
        for sym in file.symbols(symtab)? {
            if sym.st_shndx as usize == index && sym.st_value != 0 {
                return Err(refused(&format!("symbol {:?}", sym.name)));
            }
        }
    }
    Ok(())
}

/// Reads the output again (`whole`: an `llvm-offload-binary` file, which may be empty now;
/// else an object): it must hold exactly the kept images' targets.
fn check_written(bytes: &[u8], whole: bool, kept: &BTreeSet<TargetId>) -> Result<(), PruneError> {
    let regions: Vec<(&[u8], u64)> = if whole {
        vec![(bytes, 0)]
    } else {
        let file = ElfFile::parse(bytes)?;
        offloading_section_headers(&file)
            .map(|s| Ok((file.section_data(s)?, s.sh_offset)))
            .collect::<Result<_, PruneError>>()?
    };
    let mut found = BTreeSet::new();
    for (data, base) in regions {
        for image in kpack_offload::parse(data, base).map_err(SourceError::from)? {
            found.extend(image_bundle_id(&image)?.and_then(|id| id.target().cloned()));
        }
    }
    if &found != kept {
        return Err(PruneError::Unexpected(format!(
            "the output holds images for {found:?}, expected {kept:?}"
        )));
    }
    Ok(())
}
