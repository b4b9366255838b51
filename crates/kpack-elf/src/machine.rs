//! What depends on the target machine, in one place: the page size the rewrite keeps
//! offsets congruent for, and how each machine's relocation types compute a pointer.
//!
//! Only x86-64 files are rewritten; aarch64 types are classified so that inspection
//! describes aarch64 wrappers too. A new machine adds its page size and relocation
//! types here.

use object::elf::{
    EM_AARCH64, EM_X86_64, R_AARCH64_ABS64, R_AARCH64_RELATIVE, R_X86_64_64, R_X86_64_RELATIVE,
};

/// The page size the rewrite keeps `p_offset ≡ p_vaddr` for (x86-64).
pub const PAGE: u64 = 4096;

/// The `e_machine` the rewrite supports.
pub const REWRITE_MACHINE: u16 = EM_X86_64;

/// The relocation type a rewritten wrapper pointer gets: `B + A` on x86-64.
pub const RELATIVE: u32 = R_X86_64_RELATIVE;

/// How a relocation type computes the relocated value, per machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelocKind {
    /// `B + A` (`R_X86_64_RELATIVE`, `R_AARCH64_RELATIVE`).
    Relative,
    /// `S + A`, 64 bits (`R_X86_64_64`, `R_AARCH64_ABS64`).
    Absolute64,
    /// Anything else; listed as-is, never interpreted.
    Other,
}

/// Classifies `r_type` for `e_machine`.
pub fn reloc_kind(machine: u16, r_type: u32) -> RelocKind {
    match (machine, r_type) {
        (EM_X86_64, R_X86_64_RELATIVE) | (EM_AARCH64, R_AARCH64_RELATIVE) => RelocKind::Relative,
        (EM_X86_64, R_X86_64_64) | (EM_AARCH64, R_AARCH64_ABS64) => RelocKind::Absolute64,
        _ => RelocKind::Other,
    }
}
