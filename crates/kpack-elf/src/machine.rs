//! What depends on the target machine, in one place: which machines the rewrite supports,
//! the page size it keeps offsets congruent for, and how each machine's relocation types
//! compute a pointer. The machine always comes from `e_machine`, never from the bundle's
//! host entry (which says `host-x86_64-unknown-linux` in aarch64 builds too).
//!
//! A new machine adds its [`Machine`] to [`MACHINES`] and its types to [`reloc_kind`].

use object::elf::{
    EM_AARCH64, EM_PPC64, EM_X86_64, PT_LOAD, R_AARCH64_ABS64, R_AARCH64_RELATIVE, R_PPC64_ADDR64,
    R_PPC64_RELATIVE, R_X86_64_64, R_X86_64_RELATIVE,
};

use crate::elf::ProgramHeader;

/// The smallest page of every supported machine, and the page of x86-64.
pub const MIN_PAGE: u64 = 4096;

/// A machine the rewrite supports (little-endian ELF64 only: the parser refuses the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// `e_machine`.
    pub e_machine: u16,
    /// Its usual name.
    pub name: &'static str,
    /// The relocation type a rewritten wrapper pointer gets (`B + A`).
    pub relative: u32,
    /// Whether the kernel's page size can exceed 4 KiB (4, 16 or 64 KiB on aarch64 and
    /// ppc64): the file's largest `p_align` is then the page the layout must respect.
    pub variable_page: bool,
}

/// Every machine the rewrite supports.
pub const MACHINES: [Machine; 3] = [
    Machine {
        e_machine: EM_X86_64,
        name: "x86-64",
        relative: R_X86_64_RELATIVE,
        variable_page: false,
    },
    Machine {
        e_machine: EM_AARCH64,
        name: "aarch64",
        relative: R_AARCH64_RELATIVE,
        variable_page: true,
    },
    Machine {
        e_machine: EM_PPC64,
        name: "ppc64le",
        relative: R_PPC64_RELATIVE,
        variable_page: true,
    },
];

/// The supported machine of `e_machine`, if any.
pub fn machine(e_machine: u16) -> Option<&'static Machine> {
    MACHINES.iter().find(|m| m.e_machine == e_machine)
}

/// The names of the supported machines with their `e_machine`, for error messages.
pub fn supported_machines() -> String {
    MACHINES
        .iter()
        .map(|m| format!("{} ({})", m.name, m.e_machine))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The page the layout keeps `p_offset ≡ p_vaddr` for and removes `.hip_fatbin` in.
///
/// x86-64 Linux has 4 KiB pages only: a larger `p_align` (GNU ld's old 2 MiB) is a hint, and
/// the rewrite may lower it (B5). On aarch64 and ppc64 the kernel's page is 4, 16 or 64 KiB;
/// linkers set `p_align` to the largest page the file is made for (`-z max-page-size`,
/// 64 KiB by default), so the largest `PT_LOAD` `p_align` (at least 4 KiB) is the page size
/// there: an output congruent modulo it loads wherever the input did.
pub fn page_size(e_machine: u16, phdrs: &[ProgramHeader]) -> u64 {
    let variable = machine(e_machine).is_some_and(|m| m.variable_page);
    if !variable {
        return MIN_PAGE;
    }
    phdrs
        .iter()
        .filter(|p| p.p_type == PT_LOAD && p.p_align.is_power_of_two())
        .map(|p| p.p_align)
        .fold(MIN_PAGE, u64::max)
}

/// How a relocation type computes the relocated value, per machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelocKind {
    /// `B + A` (`R_X86_64_RELATIVE`, `R_AARCH64_RELATIVE`, `R_PPC64_RELATIVE`).
    Relative,
    /// `S + A`, 64 bits (`R_X86_64_64`, `R_AARCH64_ABS64`, `R_PPC64_ADDR64`).
    Absolute64,
    /// Anything else; listed as-is, never interpreted.
    Other,
}

/// Classifies `r_type` for `e_machine`.
pub fn reloc_kind(machine: u16, r_type: u32) -> RelocKind {
    match (machine, r_type) {
        (EM_X86_64, R_X86_64_RELATIVE)
        | (EM_AARCH64, R_AARCH64_RELATIVE)
        | (EM_PPC64, R_PPC64_RELATIVE) => RelocKind::Relative,
        (EM_X86_64, R_X86_64_64) | (EM_AARCH64, R_AARCH64_ABS64) | (EM_PPC64, R_PPC64_ADDR64) => {
            RelocKind::Absolute64
        }
        _ => RelocKind::Other,
    }
}
