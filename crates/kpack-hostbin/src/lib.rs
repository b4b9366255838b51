//! What the ELF and PE host-binary rewrites share: bounds-checked reads of untrusted bytes
//! (`bytes`), the output planned as edits of the input and streamed (`splice`), the HIP
//! fat-binary wrapper's layout and magics and the checks of a kpacked wrapper that do not
//! depend on the format (`wrapper`), the HIPK marker record the kpacked wrappers point at
//! (`marker`), and the verifiers' issue and findings records.
//!
//! It depends only on `kpack-msgpack` (the marker's encoding): `kpack-elf` and `kpack-pe`
//! both build on it, so that neither needs the other nor the archive crate.
//!
//! Depends on `kpack-msgpack` (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

use std::fmt;

pub mod bytes;
pub mod marker;
pub mod splice;
mod wrapper;

pub use wrapper::{
    FatBinaryKind, HIPF_MAGIC, HIPK_MAGIC, WRAPPER_POINTER_OFFSET, WRAPPER_SIZE, WrapperMagic,
    hipk_wrapper_issues,
};

/// One problem a verifier of a host rewrite (`kpack_elf::verify`, `kpack_pe::verify`)
/// found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyIssue {
    /// The file offset the problem is about, when there is one.
    pub offset: Option<u64>,
    /// What is wrong, and what was expected.
    pub message: String,
}

/// Everything a verifier of a host binary found: what it refuses, and what the ELF
/// specification forbids but loaders accept (a file with only warnings loads, and is
/// rewritten).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// What makes the file unsafe to load or to rewrite.
    pub issues: Vec<VerifyIssue>,
    /// What loaders accept anyway.
    pub warnings: Vec<VerifyIssue>,
}

impl Findings {
    /// `Ok` when nothing is refused (warnings aside), else the refusals.
    pub fn refusals(self) -> Result<(), Vec<VerifyIssue>> {
        if self.issues.is_empty() {
            Ok(())
        } else {
            Err(self.issues)
        }
    }
}

impl fmt::Display for VerifyIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(f, "offset {o:#x}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}
