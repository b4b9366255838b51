//! The HIP fat-binary wrapper (`__CudaFatBinaryWrapper`, 24 bytes: `magic`, `version`, the
//! binary pointer, `reserved1`) as both host formats hold it, and the checks of a kpacked
//! wrapper that do not depend on the format.

/// Size of one `__CudaFatBinaryWrapper`.
pub const WRAPPER_SIZE: u64 = 24;
/// Offset of the binary pointer inside a wrapper.
pub const WRAPPER_POINTER_OFFSET: u64 = 8;
/// Wrapper magic written by the compiler, "HIPF" (bytes `46 50 49 48`).
pub const HIPF_MAGIC: u32 = 0x4849_5046;
/// Wrapper magic written by kpack, "HIPK" (bytes `48 49 50 4B`).
pub const HIPK_MAGIC: u32 = 0x4B50_4948;

/// What state a host file is in (ELF or PE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FatBinaryKind {
    /// A `.hip_fatbin` with file contents (`SHT_PROGBITS`), not transformed by kpack.
    Fat,
    /// Transformed by kpack: a wrapper with HIPK magic, a `SHT_NOBITS` `.hip_fatbin`
    /// or a `.rocm_kpack_ref` section.
    Kpacked,
    /// A `-fgpu-rdc` relocatable object: no `.hip_fatbin` yet (the device link
    /// makes it), device bitcode in `__CLANG_OFFLOAD_BUNDLE__*` sections.
    Rdc,
    /// No `.hip_fatbin`: nothing to split.
    HostOnly,
    /// A separated debug file (`objcopy --only-keep-debug`, shipped as `.debug/NAME.debug`
    /// or `NAME.dbg`): the library's section headers with the device sections `SHT_NOBITS`
    /// (`is_separated_debug`). It holds no device code: a host file, copied as it is.
    DebugOnly,
}

/// The magic of a wrapper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrapperMagic {
    /// `HIPF`, written by the compiler.
    Hipf,
    /// `HIPK`, written by kpack.
    Hipk,
    /// Anything else, as stored.
    Other(u32),
}

impl std::fmt::Display for WrapperMagic {
    /// `HIPF`, `HIPK`, or the stored value in hex.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WrapperMagic::Hipf => f.write_str("HIPF"),
            WrapperMagic::Hipk => f.write_str("HIPK"),
            WrapperMagic::Other(m) => write!(f, "{m:#010x}"),
        }
    }
}

impl From<u32> for WrapperMagic {
    fn from(value: u32) -> Self {
        match value {
            HIPF_MAGIC => WrapperMagic::Hipf,
            HIPK_MAGIC => WrapperMagic::Hipk,
            other => WrapperMagic::Other(other),
        }
    }
}

/// The checks of one wrapper of a kpacked file that do not depend on the file format (ELF,
/// PE): `HIPK` magic, version 1, `reserved1` = its slot. `offset` is the wrapper's.
pub fn hipk_wrapper_issues(
    index: usize,
    offset: u64,
    magic: WrapperMagic,
    version: u32,
    reserved1: u64,
    add: &mut impl FnMut(Option<u64>, String),
) {
    let at = Some(offset);
    if magic != WrapperMagic::Hipk {
        add(at, format!("wrapper {index}: magic is not HIPK"));
    }
    if version != 1 {
        add(
            at,
            format!("wrapper {index}: version {version} (expected 1)"),
        );
    }
    if reserved1 != index as u64 {
        add(
            at,
            format!("wrapper {index}: reserved1 is {reserved1:#x}, expected its index"),
        );
    }
}
