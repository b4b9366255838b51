//! Windows PE32+ fat-binary inspection (HIP wrappers, base relocations, bundles), the host
//! rewrite and its verifier: what `kpack-elf` does for ELF, for DLLs and EXEs.
//!
//! # What is parsed
//! [`PeFile`] reads a PE32+ image over `&[u8]`: the DOS header's `e_lfanew`, `PE\0\0`, the
//! COFF file header, the PE32+ optional header and its data directories, the section table
//! (long names `/N` resolved through the COFF string table, as mingw GNU ld writes
//! `.hip_fatbin` and `.hipFatBinSegment`), base relocations and the debug directory. The
//! records are `object::pe`'s plain-data types, read under the range checks of
//! `kpack_hostbin::bytes`: `object`'s PE reader reports a malformed file with a static string and no offset, and the
//! rewrite needs every header field's position to edit it; so the walking is written here.
//! Every range is checked against the file, nothing panics on malformed input, allocations
//! are bounded by the input, and errors name the absolute offset and what was expected.
//!
//! # Fat binaries
//! [`inspect`] describes the device code of an image ([`PeFatBinary`]): the fat-binary
//! section (`.hip_fat` as lld-link cuts it, `.hip_fatbin` with GNU ld) and its bundles as
//! [`kpack_bundle::walk_fatbin`] finds them; the 24-byte wrappers of `.hipFatB` /
//! `.hipFatBinSegment`, whose pointers are absolute addresses (`ImageBase + RVA`) fixed up by
//! `IMAGE_REL_BASED_DIR64` base relocations when the image is rebased (a `/fixed` image has
//! none); and the `.kpackrf` marker of transformed images. Which bundle a wrapper registers
//! comes from where its pointer leads, as for ELF.
//!
//! # Rewrite and verifier
//! `rewrite::plan` turns a fat image into a kpacked one (see its doc); `verify` checks
//! the structure of any image and runs on every output. Both sit behind the `rewrite` feature:
//! without it the crate is the reader and inspection only.
//!
//! Depends on `kpack-bundle` and `kpack-hostbin` (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

mod error;
mod fatbin;
mod pe;
#[cfg(feature = "rewrite")]
pub mod rewrite;
#[cfg(feature = "rewrite")]
pub mod verify;

pub use error::PeError;
pub use fatbin::{
    FATBIN_SECTIONS, MARKER_SECTION, PeFatBinary, PeSection, PeWrapper, WRAPPER_SECTIONS, inspect,
    inspect_pe,
};
pub use pe::{
    BaseRelocation, Checksum, DataDirectory, IMAGE_REL_BASED_DIR64, PeFile, Section, checksum_of,
    is_pe,
};
#[cfg(feature = "rewrite")]
pub use rewrite::{PeRewrite, PeRewriteError, PeRewriteSummary};
#[cfg(feature = "rewrite")]
pub use verify::{verify, verify_layout};
