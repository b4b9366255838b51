//! AMD GPU target IDs, clang offload bundle IDs, and code-object target
//! decoding for kpack.
//!
//! # Target IDs
//! A target ID names a GPU processor plus the target features a code object
//! was built for: `gfx90a:sramecc+:xnack-`. A feature that is absent means
//! "any". [`TargetId`] keeps features sorted by name (LLVM's canonical order),
//! so `gfx90a:xnack-:sramecc+` parses to the same value. Generic processors
//! (`gfx9-4-generic`, `gfx11-generic`, ...) contain `-`; Tensile file names
//! spell `:` as `-` too (`gfx90a-xnack+`), which
//! [`TargetId::parse_tensile`] resolves with the processor grammar.
//!
//! The kpack runtime (reference spec §4.5) looks archives up by exact target
//! string, trying [`TargetId::compatible_candidates`] of the agent ISA in
//! order: every feature subset, mask `2^n-1` down to `0`.
//!
//! The portable target [`SPIRV`] (`amdgcnspirv`) parses as a target ID like any
//! processor; [`TargetId::is_spirv`] tells it apart.
//!
//! # In file names
//! Archives are named `<module>_<target>.kpack`; outputs meant for Windows spell the
//! target's `:` as `@` ([`file_name_spelling`]), since NTFS refuses `:`.
//!
//! # Bundle IDs
//! Each entry of a clang offload bundle is named
//! `<kind>-<arch>-<vendor>-<os>[-<env>][-<target-id>]` (§3.2), e.g.
//! `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+` or
//! `host-x86_64-unknown-linux-gnu-`. [`BundleId`] parses all forms seen in
//! real files and prints the input back unchanged.
//!
//! # Code objects
//! [`code_object_target`] reads the ELF header of an AMDGPU code object:
//! `EF_AMDGPU_MACH` (`e_flags & 0xff`) gives the processor, and the xnack
//! (`0x300`) and sramecc (`0xc00`) fields give the features (v4+: on, off,
//! or any/unsupported = absent; v3: one "on" bit each). In real bundles the
//! target decoded this way always equals the target ID in the entry's
//! bundle ID.
//!
//! All parsers take untrusted input: they never panic, allocate at most in
//! proportion to the input, and report the byte offset of the problem.
//!
//! Depends on no other kpack crate (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

mod bundle_id;
mod code_object;
mod error;
mod file_name;
mod target_id;

pub use bundle_id::{BundleId, OffloadKind};
pub use code_object::{
    CodeObjectTarget, ELFOSABI_AMDGPU_HSA, EM_AMDGPU, code_object_target, processor_for_mach,
};
pub use error::TargetError;
pub use file_name::{
    WINDOWS_FEATURE_SEPARATOR, archive_stem, file_name_spelling, from_file_name_spelling,
};
pub use target_id::{
    Feature, FeatureState, GENERIC_MEMBERS, MAX_FEATURES, SPIRV, TargetId, feature_subsets,
};
