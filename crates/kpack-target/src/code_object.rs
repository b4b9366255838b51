use crate::{Feature, FeatureState, TargetError, TargetId};

/// `EI_OSABI` of AMDGPU HSA code objects.
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `e_machine` of AMDGPU code objects.
pub const EM_AMDGPU: u16 = 224;

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const ELF64_HEADER_LEN: usize = 64;
const EI_CLASS: usize = 4;
const EI_DATA: usize = 5;
const EI_OSABI: usize = 7;
const EI_ABIVERSION: usize = 8;
const E_MACHINE: usize = 18;
const E_FLAGS: usize = 48;

const EF_AMDGPU_MACH: u32 = 0xff;
const EF_AMDGPU_FEATURE_XNACK_V3: u32 = 0x100;
const EF_AMDGPU_FEATURE_SRAMECC_V3: u32 = 0x200;
const EF_AMDGPU_FEATURE_XNACK_V4: u32 = 0x300;
const EF_AMDGPU_FEATURE_XNACK_OFF_V4: u32 = 0x200;
const EF_AMDGPU_FEATURE_XNACK_ON_V4: u32 = 0x300;
const EF_AMDGPU_FEATURE_SRAMECC_V4: u32 = 0xc00;
const EF_AMDGPU_FEATURE_SRAMECC_OFF_V4: u32 = 0x800;
const EF_AMDGPU_FEATURE_SRAMECC_ON_V4: u32 = 0xc00;
const EF_AMDGPU_GENERIC_VERSION_OFFSET: u32 = 24;

/// `EI_ABIVERSION` of code object v3; v4, v5, v6 follow as 2, 3, 4.
const ELFABIVERSION_AMDGPU_HSA_V3: u8 = 1;
const ELFABIVERSION_AMDGPU_HSA_V6: u8 = 4;

/// `EF_AMDGPU_MACH` values of AMDGCN processors, from LLVM's
/// `llvm/include/llvm/BinaryFormat/ELF.h` and its
/// `test/CodeGen/AMDGPU/elf-header-flags-mach.ll`. Values missing here are
/// reserved or unassigned (0x27, 0x4d, 0x56, ...). 0x40 and 0x4b were
/// gfx940 and gfx941 until LLVM 20 removed them; they stay reserved and
/// ROCm 6.0-6.2 shipped code objects for them, so they are decoded.
const MACH_TABLE: &[(u8, &str)] = &[
    (0x20, "gfx600"),
    (0x21, "gfx601"),
    (0x22, "gfx700"),
    (0x23, "gfx701"),
    (0x24, "gfx702"),
    (0x25, "gfx703"),
    (0x26, "gfx704"),
    (0x28, "gfx801"),
    (0x29, "gfx802"),
    (0x2a, "gfx803"),
    (0x2b, "gfx810"),
    (0x2c, "gfx900"),
    (0x2d, "gfx902"),
    (0x2e, "gfx904"),
    (0x2f, "gfx906"),
    (0x30, "gfx908"),
    (0x31, "gfx909"),
    (0x32, "gfx90c"),
    (0x33, "gfx1010"),
    (0x34, "gfx1011"),
    (0x35, "gfx1012"),
    (0x36, "gfx1030"),
    (0x37, "gfx1031"),
    (0x38, "gfx1032"),
    (0x39, "gfx1033"),
    (0x3a, "gfx602"),
    (0x3b, "gfx705"),
    (0x3c, "gfx805"),
    (0x3d, "gfx1035"),
    (0x3e, "gfx1034"),
    (0x3f, "gfx90a"),
    (0x40, "gfx940"),
    (0x41, "gfx1100"),
    (0x42, "gfx1013"),
    (0x43, "gfx1150"),
    (0x44, "gfx1103"),
    (0x45, "gfx1036"),
    (0x46, "gfx1101"),
    (0x47, "gfx1102"),
    (0x48, "gfx1200"),
    (0x49, "gfx1250"),
    (0x4a, "gfx1151"),
    (0x4b, "gfx941"),
    (0x4c, "gfx942"),
    (0x4e, "gfx1201"),
    (0x4f, "gfx950"),
    (0x50, "gfx1310"),
    (0x51, "gfx9-generic"),
    (0x52, "gfx10-1-generic"),
    (0x53, "gfx10-3-generic"),
    (0x54, "gfx11-generic"),
    (0x55, "gfx1152"),
    (0x57, "gfx1154"),
    (0x58, "gfx1153"),
    (0x59, "gfx12-generic"),
    (0x5a, "gfx1251"),
    (0x5b, "gfx12-5-generic"),
    (0x5c, "gfx1172"),
    (0x5d, "gfx1170"),
    (0x5e, "gfx1171"),
    (0x5f, "gfx9-4-generic"),
    (0x62, "gfx11-7-generic"),
    (0x63, "gfx13-generic"),
];

/// The processor name for an `EF_AMDGPU_MACH` value, if it is an AMDGCN one.
pub fn processor_for_mach(mach: u8) -> Option<&'static str> {
    MACH_TABLE
        .iter()
        .find(|(value, _)| *value == mach)
        .map(|(_, name)| *name)
}

/// What the ELF header of an AMDGPU code object says about its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeObjectTarget {
    /// Processor plus the `xnack`/`sramecc` features the object pins down;
    /// "any" and "unsupported" both leave the feature out.
    pub target: TargetId,
    /// `EI_ABIVERSION` (1..=4).
    pub abi_version: u8,
    /// Code object version, `abi_version + 2` (3..=6).
    pub code_object_version: u8,
    /// `EF_AMDGPU_GENERIC_VERSION` (v6 only), when non-zero.
    pub generic_version: Option<u8>,
    /// The raw `e_flags`.
    pub e_flags: u32,
}

/// Decodes the target of an AMDGPU code object (code object v3 to v6) from
/// its ELF header. Only the 64-byte ELF header is read.
pub fn code_object_target(elf: &[u8]) -> Result<CodeObjectTarget, TargetError> {
    let magic_len = elf.len().min(ELF_MAGIC.len());
    if elf[..magic_len] != ELF_MAGIC[..magic_len] {
        return Err(TargetError::NotElf);
    }
    let Some(header) = elf.get(..ELF64_HEADER_LEN) else {
        return Err(TargetError::Truncated {
            len: elf.len(),
            needed: ELF64_HEADER_LEN,
        });
    };
    let check = |field, offset, found: u32, wanted: u32, expected| {
        if found == wanted {
            Ok(())
        } else {
            Err(TargetError::HeaderField {
                field,
                offset,
                found,
                expected,
            })
        }
    };
    check(
        "EI_CLASS",
        EI_CLASS,
        header[EI_CLASS].into(),
        2,
        "2 (ELFCLASS64)",
    )?;
    check(
        "EI_DATA",
        EI_DATA,
        header[EI_DATA].into(),
        1,
        "1 (ELFDATA2LSB)",
    )?;
    check(
        "EI_OSABI",
        EI_OSABI,
        header[EI_OSABI].into(),
        ELFOSABI_AMDGPU_HSA.into(),
        "64 (ELFOSABI_AMDGPU_HSA)",
    )?;
    let machine = u16::from_le_bytes([header[E_MACHINE], header[E_MACHINE + 1]]);
    check(
        "e_machine",
        E_MACHINE,
        machine.into(),
        EM_AMDGPU.into(),
        "224 (EM_AMDGPU)",
    )?;
    let abi_version = header[EI_ABIVERSION];
    if !(ELFABIVERSION_AMDGPU_HSA_V3..=ELFABIVERSION_AMDGPU_HSA_V6).contains(&abi_version) {
        return Err(TargetError::HeaderField {
            field: "EI_ABIVERSION",
            offset: EI_ABIVERSION,
            found: abi_version.into(),
            expected: "1..=4 (code object v3..v6)",
        });
    }
    let e_flags = u32::from_le_bytes([
        header[E_FLAGS],
        header[E_FLAGS + 1],
        header[E_FLAGS + 2],
        header[E_FLAGS + 3],
    ]);

    let mach = (e_flags & EF_AMDGPU_MACH) as u8;
    let processor = processor_for_mach(mach).ok_or(TargetError::UnknownMach { mach })?;
    let (xnack, sramecc) = if abi_version == ELFABIVERSION_AMDGPU_HSA_V3 {
        // v3 has one bit per feature: set means on, clear means off *or*
        // unsupported, which cannot be told apart, so clear stays unset.
        let on = |bit: u32| (e_flags & bit != 0).then_some(FeatureState::On);
        (
            on(EF_AMDGPU_FEATURE_XNACK_V3),
            on(EF_AMDGPU_FEATURE_SRAMECC_V3),
        )
    } else {
        let select = |mask: u32, off: u32, on: u32| match e_flags & mask {
            v if v == on => Some(FeatureState::On),
            v if v == off => Some(FeatureState::Off),
            _ => None,
        };
        (
            select(
                EF_AMDGPU_FEATURE_XNACK_V4,
                EF_AMDGPU_FEATURE_XNACK_OFF_V4,
                EF_AMDGPU_FEATURE_XNACK_ON_V4,
            ),
            select(
                EF_AMDGPU_FEATURE_SRAMECC_V4,
                EF_AMDGPU_FEATURE_SRAMECC_OFF_V4,
                EF_AMDGPU_FEATURE_SRAMECC_ON_V4,
            ),
        )
    };
    let features = [("sramecc", sramecc), ("xnack", xnack)]
        .into_iter()
        .filter_map(|(name, state)| {
            state.map(|state| Feature {
                name: name.to_owned(),
                state,
            })
        })
        .collect();
    let generic_version = if abi_version >= ELFABIVERSION_AMDGPU_HSA_V6 {
        Some((e_flags >> EF_AMDGPU_GENERIC_VERSION_OFFSET) as u8).filter(|&v| v != 0)
    } else {
        None
    };

    Ok(CodeObjectTarget {
        target: TargetId::from_parts(processor, features),
        abi_version,
        code_object_version: abi_version + 2,
        generic_version,
        e_flags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mach_table_has_unique_values_and_parseable_names() {
        for (i, (value, name)) in MACH_TABLE.iter().enumerate() {
            assert!(
                MACH_TABLE[i + 1..]
                    .iter()
                    .all(|(v, n)| v != value && n != name),
                "{value:#x} {name} repeated"
            );
            let target = TargetId::parse(name).unwrap();
            assert_eq!(target.processor(), *name);
            assert_eq!(target.is_generic(), name.ends_with("-generic"));
        }
    }

    #[test]
    fn generic_machs_match_llvm_values() {
        assert_eq!(processor_for_mach(0x51), Some("gfx9-generic"));
        assert_eq!(processor_for_mach(0x52), Some("gfx10-1-generic"));
        assert_eq!(processor_for_mach(0x53), Some("gfx10-3-generic"));
        assert_eq!(processor_for_mach(0x54), Some("gfx11-generic"));
        assert_eq!(processor_for_mach(0x59), Some("gfx12-generic"));
        assert_eq!(processor_for_mach(0x5b), Some("gfx12-5-generic"));
        assert_eq!(processor_for_mach(0x5f), Some("gfx9-4-generic"));
        assert_eq!(processor_for_mach(0x55), Some("gfx1152"));
        assert_eq!(processor_for_mach(0x00), None);
        assert_eq!(processor_for_mach(0x01), None, "R600 is not AMDGCN");
    }

    #[test]
    fn every_truncation_of_real_code_objects_is_rejected_without_panic() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/modern/");
        for name in ["mk_gfx1030.co", "mk_gfx90a_xnackp.co"] {
            let bytes = std::fs::read(format!("{dir}{name}")).unwrap();
            let full = code_object_target(&bytes).unwrap();
            for len in 0..bytes.len() {
                let result = code_object_target(&bytes[..len]);
                if len < ELF64_HEADER_LEN {
                    assert_eq!(
                        result,
                        Err(TargetError::Truncated {
                            len,
                            needed: ELF64_HEADER_LEN
                        }),
                        "{name} cut at {len}"
                    );
                } else {
                    assert_eq!(result.as_ref(), Ok(&full), "{name} cut at {len}");
                }
            }
        }
    }
}
