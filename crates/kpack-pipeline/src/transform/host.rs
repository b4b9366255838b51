//! The host rewrite of either format, chosen by the file's magic: planned, streamed and
//! verified through `kpack-elf` for ELF files and `kpack-pe` for PE images.

use kpack_elf::Findings;
use kpack_elf::rewrite::Rewrite;
use kpack_pe::PeRewrite;

use super::{HostState, TransformError, check};
use crate::error::SourceError;

/// Checks the structure of a host binary as every transform output is checked: the ELF
/// verifier ([`kpack_elf::verify::findings`], with its warnings) or the PE one
/// ([`kpack_pe::verify()`]), by magic.
pub fn verify_binary(bytes: &[u8]) -> Findings {
    if kpack_pe::is_pe(bytes) {
        Findings {
            issues: kpack_pe::verify(bytes).err().unwrap_or_default(),
            warnings: Vec::new(),
        }
    } else {
        kpack_elf::verify::findings(bytes)
    }
}

/// The host rewrite of either format.
pub enum HostRewrite {
    /// An ELF file's ([`kpack_elf::rewrite`]).
    Elf(Rewrite),
    /// A PE image's ([`kpack_pe::rewrite`]).
    Pe(PeRewrite),
}

/// Plans the host rewrite of `input` with `marker` as the marker's content, for the format
/// its magic says.
pub fn plan_host(input: &[u8], marker: &[u8]) -> Result<HostRewrite, TransformError> {
    Ok(if kpack_pe::is_pe(input) {
        HostRewrite::Pe(kpack_pe::rewrite::plan(input, marker)?)
    } else {
        HostRewrite::Elf(kpack_elf::rewrite::plan(input, marker)?)
    })
}

/// What a kpacked host binary refers to: its marker and its wrappers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KpackedMarker {
    /// The marker section's bytes (`.rocm_kpack_ref`, `.kpackrf`).
    pub bytes: Vec<u8>,
    /// Where they start in the file, so that a damaged marker is reported where it lies.
    pub offset: u64,
    /// The wrapper slots.
    pub wrappers: Vec<usize>,
}

/// The marker and wrappers of a kpacked host binary (ELF or PE); `None` when the file is not
/// kpacked or not a host binary.
pub fn kpacked_marker(bytes: &[u8]) -> Result<Option<KpackedMarker>, TransformError> {
    if check(bytes)? != HostState::Kpacked {
        return Ok(None);
    }
    let (name, raw, wrappers) = if kpack_pe::is_pe(bytes) {
        let fat = kpack_pe::inspect(bytes).map_err(SourceError::from)?;
        let raw = fat.marker.as_ref().map(|m| m.bytes(bytes));
        (
            kpack_pe::MARKER_SECTION,
            raw,
            fat.wrappers.iter().map(|w| w.index).collect(),
        )
    } else {
        let fat = kpack_elf::inspect(bytes)?;
        let raw = fat.marker.as_ref().map(|m| m.bytes(bytes));
        (
            kpack_elf::MARKER_SECTION,
            raw,
            fat.wrappers.iter().map(|w| w.index).collect(),
        )
    };
    let missing = |what: String| TransformError::Options(format!("kpacked, but {what}"));
    let raw = raw
        .ok_or_else(|| missing(format!("without a {name} section")))?
        .ok_or_else(|| missing(format!("the {name} section lies outside the file")))?;
    Ok(Some(KpackedMarker {
        offset: (raw.as_ptr() as usize - bytes.as_ptr() as usize) as u64,
        bytes: raw.to_vec(),
        wrappers,
    }))
}

/// What a host rewrite did, in the numbers both formats share.
pub(super) struct HostSummary {
    pub(super) input_len: u64,
    pub(super) output_len: u64,
    pub(super) removed: u64,
    pub(super) wrappers: usize,
    pub(super) marker_vaddr: u64,
}

impl HostRewrite {
    /// Streams the output; `input` must be the bytes planned from.
    pub fn write_to<W: std::io::Write>(&self, input: &[u8], out: W) -> std::io::Result<()> {
        match self {
            HostRewrite::Elf(r) => r.write_to(input, out),
            HostRewrite::Pe(r) => r.write_to(input, out),
        }
    }

    pub(super) fn summary(&self) -> HostSummary {
        match self {
            HostRewrite::Elf(r) => HostSummary {
                input_len: r.summary.input_len,
                output_len: r.summary.output_len,
                removed: r.summary.removed,
                wrappers: r.summary.wrappers,
                marker_vaddr: r.summary.marker_vaddr,
            },
            HostRewrite::Pe(r) => HostSummary {
                input_len: r.summary.input_len,
                output_len: r.summary.output_len,
                removed: r.summary.removed,
                wrappers: r.summary.wrappers,
                marker_vaddr: r.summary.marker_vaddr,
            },
        }
    }
}
