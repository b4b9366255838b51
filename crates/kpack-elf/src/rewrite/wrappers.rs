//! Every wrapper pointed at the marker or at its bundle, in the file and in the relocation
//! that fills its pointer at load time (B2, B4).

use object::LittleEndian as LE;
use object::elf::{ET_DYN, Rel64, Rela64};
use object::pod::bytes_of;

use super::RewriteError;
use super::refuse::check_pointer_kind;
use crate::ElfError;
use crate::elf::{ElfFile, REL_SIZE, RELA_SIZE};
use crate::fatbin::{FatBinary, PointerSource, Wrapper};
use crate::machine::Machine;
use kpack_hostbin::bytes::record;
use kpack_hostbin::splice::Patches;
use kpack_hostbin::{HIPF_MAGIC, WrapperMagic};

/// Each wrapper keeps its magic (HIPF), version and `reserved1` and points at
/// `contents + bundle_offsets[i]`.
pub(super) fn point_wrappers_at_bundles(
    elf: &ElfFile<'_>,
    fat: &FatBinary,
    machine: &Machine,
    contents: u64,
    bundle_offsets: &[u64],
    patches: &mut Patches,
) -> Result<(), RewriteError> {
    let record = |w: &Wrapper| {
        let pointer = contents + bundle_offsets[w.index];
        (HIPF_MAGIC, w.version, pointer, w.reserved1)
    };
    point_wrappers(elf, fat, machine, WrapperMagic::Hipf, record, patches)
}

/// Each (HIPF) wrapper gets the `(magic, version, pointer, reserved1)` that `new_record`
/// gives it (for transform: HIPK, 1, the marker, its index, B4), the pointer set in the file
/// and in the relocation that fills it at load time (B2).
pub(crate) fn point_wrappers(
    elf: &ElfFile<'_>,
    fat: &FatBinary,
    machine: &Machine,
    expected: WrapperMagic,
    new_record: impl Fn(&Wrapper) -> (u32, u32, u64, u64),
    patches: &mut Patches,
) -> Result<(), RewriteError> {
    let h = elf.header();
    let shdrs = elf.section_headers();
    for w in &fat.wrappers {
        let problem = |m: &str| RewriteError::Wrapper {
            index: w.index,
            offset: w.offset,
            problem: m.to_owned(),
        };
        if w.magic != expected {
            let name = if expected == WrapperMagic::Hipk {
                "HIPK"
            } else {
                "HIPF"
            };
            return Err(problem(&format!("magic is not {name}")));
        }
        let (magic, version, pointer, reserved1) = new_record(w);
        let mut rec = Vec::with_capacity(24);
        rec.extend_from_slice(&magic.to_le_bytes());
        rec.extend_from_slice(&version.to_le_bytes());
        rec.extend_from_slice(&pointer.to_le_bytes());
        rec.extend_from_slice(&reserved1.to_le_bytes());
        patches.add(w.offset, rec)?;
        match &w.pointer {
            PointerSource::InPlace(_) => {
                if h.e_type == ET_DYN {
                    return Err(problem(
                        "no relocation fills the pointer of a position-independent file",
                    ));
                }
            }
            PointerSource::Rela {
                section_index,
                entry_index,
                r_type,
                ..
            } => {
                check_pointer_kind(h.e_machine, *r_type).map_err(|m| problem(&m))?;
                let at = shdrs[*section_index].sh_offset + *entry_index as u64 * RELA_SIZE;
                let mut rela: Rela64<LE> =
                    *record(elf.data(), at, "wrapper relocation").map_err(ElfError::from)?;
                rela.r_info = Rela64::r_info(LE, false, 0, machine.relative);
                rela.r_addend.set(LE, pointer as i64);
                patches.add(at, bytes_of(&rela).to_vec())?;
            }
            PointerSource::Rel {
                section_index,
                entry_index,
                r_type,
                ..
            } => {
                check_pointer_kind(h.e_machine, *r_type).map_err(|m| problem(&m))?;
                let at = shdrs[*section_index].sh_offset + *entry_index as u64 * REL_SIZE;
                let mut rel: Rel64<LE> =
                    *record(elf.data(), at, "wrapper relocation").map_err(ElfError::from)?;
                rel.r_info = Rel64::r_info(LE, 0, machine.relative);
                patches.add(at, bytes_of(&rel).to_vec())?;
            }
            PointerSource::Relr { .. } => {}
        }
    }
    Ok(())
}
