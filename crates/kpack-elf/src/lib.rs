//! ELF fat-binary inspection (HIP wrappers, relocations, bundles), and behind the `rewrite`
//! feature the host rewrite, its way back, `shrink` and the verifier.
//!
//! # What is parsed
//! [`ElfFile`] is a strict ELF64 little-endian parser over `&[u8]` (ELF32,
//! big-endian and non-ELF input are distinct [`ElfError`]s). It keeps every header
//! field as stored, because the host rewrite built on it must reproduce and edit
//! them exactly:
//! * the ELF header, all program headers and all section headers with names
//!   (extended numbering through section 0 is honoured);
//! * vaddr ↔ file offset mapping through `PT_LOAD` segments: `.hip_fatbin` may
//!   sit at a file offset different from its address, and an address in the
//!   `p_memsz` tail beyond `p_filesz` has no file offset;
//! * symbols of `.symtab`/`.dynsym`, the dynamic section, and relocation sections:
//!   `SHT_RELA`, `SHT_REL` and `SHT_RELR` (bitmap encoding decoded by [`relr`]).
//!
//! Parsing validates the file range of every section and segment against the
//! input, table entry sizes and counts against `sh_size`/`sh_entsize`, and every
//! name against its string table. Nothing panics on malformed input, and no
//! allocation exceeds what the input length justifies. Errors name the file
//! offset or section and what was expected.
//!
//! # Fat binaries
//! [`inspect`] describes a HIP host file ([`FatBinary`]):
//! * `.hip_fatbin`: position, and its bundles as found by
//!   [`kpack_bundle::walk_fatbin`] (which walks bundle headers, so padding and
//!   ROCm 5's trailing NUL are skipped and magic bytes inside compressed data are
//!   never mistaken for bundles);
//! * `.hipFatBinSegment`: one 24-byte `__CudaFatBinaryWrapper` per translation
//!   unit (`magic`, `version`, binary pointer, `reserved1`); the size must be a
//!   multiple of 24;
//! * for each wrapper, how its pointer is filled ([`PointerSource`]): in place
//!   (non-PIE `ET_EXEC`: the file value is the pointer), `R_X86_64_RELATIVE`
//!   (pointer = base + addend), `R_X86_64_64` against `__hip_fatbin` or the
//!   `.hip_fatbin` section symbol (symbol + addend; `-fgpu-rdc` libraries and
//!   relocatable objects), `SHT_REL` or `SHT_RELR` (base + value in the file);
//! * the `.rocm_kpack_ref` marker of transformed files and the per-target bitcode
//!   sections of `-fgpu-rdc` objects.
//!
//! ## Wrapper → bundle mapping comes from pointers
//! Which bundle a wrapper registers is derived from where its pointer resolves
//! (resolved address == `.hip_fatbin` address + bundle offset), never from the
//! wrapper's position: in `-fgpu-rdc` output several wrappers share one
//! device-linked bundle, and nothing guarantees that wrapper *i* describes bundle
//! *i* (upstream's assumption, reference spec §9 B10).
//!
//! # Archives
//! [`inspect_ar`] inspects the ELF members of a static library; the `ar` format is
//! `kpack-ar`'s.
//!
//! # Readers apart from rewriters
//! By default the crate is the reader and inspection above (with [`landing`]: where a
//! wrapper's pointer lands), all that a consumer of fat or kpacked binaries needs. The
//! `rewrite` feature adds `rewrite`, `restore`, `shrink` and `verify`, for the crates
//! that write host binaries (`kpack-pipeline`, `kpack-prune`), as `object` gates its writer.
//!
//! # Modules
//! Dependencies point one way: `shrink` → `rewrite` → `verify` → [`landing`] →
//! `fatbin` → `elf` → [`relr`]. Records and constants come from `object::elf`, read under the range checks of
//! `kpack_hostbin::bytes` (shared with the PE reader); [`machine`] holds what depends on the
//! target machine (page size, relocation kinds), so a new machine is added in one place.
//!
//! Depends on `kpack-ar`, `kpack-bundle` and `kpack-hostbin` (the layering:
//! docs/CONTRIBUTING.md).

#![warn(missing_docs)]

mod ar_members;
mod elf;
mod error;
mod fatbin;
pub mod landing;
pub mod machine;
pub mod relr;
#[cfg(feature = "rewrite")]
pub mod restore;
#[cfg(feature = "rewrite")]
pub mod rewrite;
#[cfg(feature = "rewrite")]
pub mod shrink;
#[cfg(feature = "rewrite")]
pub mod verify;

pub use ar_members::{InspectArError, InspectedMember, inspect_ar};

pub use elf::{
    DynEntry, ElfFile, ElfHeader, ProgramHeader, Rel, Rela, RelocationEntries, RelocationSection,
    SectionHeader, Symbol, is_elf,
};
pub use error::ElfError;
pub use fatbin::{
    FATBIN_SECTION, FatBinary, FatbinSection, MARKER_SECTION, MarkerSection, PointerSource,
    RDC_SECTION_PREFIX, RdcSection, WRAPPER_SECTION, Wrapper, inspect, inspect_elf,
};
// What the PE rewrite shares, re-exported because this crate's API is made of it (a
// `Rewrite` is a `Splice`, `inspect` reports `WrapperMagic`s, `verify` `VerifyIssue`s).
pub use kpack_bundle::LocatedBundle;
pub use kpack_hostbin::{
    FatBinaryKind, Findings, HIPF_MAGIC, HIPK_MAGIC, VerifyIssue, WRAPPER_POINTER_OFFSET,
    WRAPPER_SIZE, WrapperMagic, splice,
};
pub use landing::{Misdirected, marker_offset};
pub use machine::{RelocKind, reloc_kind};
pub use relr::RelrEntry;
#[cfg(feature = "rewrite")]
pub use rewrite::{FatbinEdit, Rewrite, RewriteError, RewriteSummary};
#[cfg(feature = "rewrite")]
pub use verify::verify;
