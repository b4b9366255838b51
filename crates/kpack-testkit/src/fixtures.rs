//! The repository's fixtures: where they are, and the ELF, debug, platform and PE fixtures by
//! role.

use std::path::{Path, PathBuf};

use crate::{AARCH64, Foreign, PPC64LE};

/// The repository's `fixtures/` directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// A fixture by its path under `fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    fixtures().join(rel)
}

/// The bytes of a fixture.
pub fn read_fixture(rel: &str) -> Vec<u8> {
    let path = fixture(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// What an ELF fixture is, and so which tests it feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A linked executable or shared library carrying device code: what `transform` rewrites
    /// and what the HIP runtime loads.
    LinkedFat,
    /// A relocatable object with a `.hip_fatbin` (compiled with `-c`).
    FatObject,
    /// An `-fgpu-rdc` relocatable object: bitcode sections, no bundle yet.
    RdcObject,
    /// A linked binary without device code.
    HostOnly,
    /// An AMDGPU code object (a device ELF file).
    CodeObject,
}

/// Every ELF file in `fixtures/bin` and `fixtures/modern`, sorted, with its role (a test of
/// kpack-elf checks the list is complete and the roles match what inspection finds).
pub const ELF_FIXTURE_ROLES: &[(&str, Role)] = &[
    ("bin/exe_nopie", Role::LinkedFat),
    ("bin/exe_pie", Role::LinkedFat),
    ("bin/k1.o", Role::FatObject),
    ("bin/k2.o", Role::FatObject),
    ("bin/libalign2m.so", Role::LinkedFat),
    ("bin/libhostonly.so", Role::HostOnly),
    ("bin/libone.so", Role::LinkedFat),
    ("bin/libone_gfx906.so", Role::LinkedFat),
    ("bin/libone_stripped.so", Role::LinkedFat),
    ("bin/librdc.so", Role::LinkedFat),
    ("bin/librelr.so", Role::LinkedFat),
    ("bin/libtwo.so", Role::LinkedFat),
    ("bin/rdc_a.o", Role::RdcObject),
    ("bin/rdc_b.o", Role::RdcObject),
    ("modern/exe_modern_v3", Role::LinkedFat),
    ("modern/libmodern_nocompress.so", Role::LinkedFat),
    ("modern/libmodern_two_v3.so", Role::LinkedFat),
    ("modern/libmodern_v2.so", Role::LinkedFat),
    ("modern/libmodern_v3.so", Role::LinkedFat),
    ("modern/libmodern_wide_v3.so", Role::LinkedFat),
    ("modern/mk2_v3.o", Role::FatObject),
    ("modern/mk_gfx1030.co", Role::CodeObject),
    ("modern/mk_gfx90a_xnackp.co", Role::CodeObject),
    ("modern/mk_v3.o", Role::FatObject),
];

/// The separated debug files in `fixtures/debug` (`build_debug.sh`: `objcopy
/// --only-keep-debug` of fat fixtures; uncompressed bundles, CCOB v3, executables, a stripped
/// library's with program headers past its end), sorted.
pub const DEBUG_FIXTURES: [&str; 7] = [
    "debug/demo.debug",
    "debug/exe_pie.debug",
    "debug/libdemo.so.1.debug",
    "debug/libmodern_v3.so.debug",
    "debug/libone.so.debug",
    "debug/libone_stripped.so.debug",
    "debug/libtwo.so.debug",
];

/// The aarch64 and ppc64le fat shared libraries in `fixtures/platforms`
/// (`build_platforms.sh`), with their machine.
pub const PLATFORM_FIXTURES: &[(&str, &Foreign)] = &[
    ("platforms/libbig_aarch64_lld.so", &AARCH64),
    ("platforms/libbig_ppc64le_lld.so", &PPC64LE),
    ("platforms/libmodern_aarch64_bfd.so", &AARCH64),
    ("platforms/libmodern_aarch64_lld.so", &AARCH64),
    ("platforms/libmodern_aarch64_lld_4k.so", &AARCH64),
    ("platforms/libmodern_ppc64le_bfd.so", &PPC64LE),
    ("platforms/libmodern_ppc64le_lld.so", &PPC64LE),
    ("platforms/libmodern_ppc64le_lld_4k.so", &PPC64LE),
    ("platforms/librdc_aarch64_lld.so", &AARCH64),
    ("platforms/librdc_ppc64le_lld.so", &PPC64LE),
];

/// A Windows PE32+ fat image in `fixtures/platforms` (`build_platforms.sh OUT pe`).
#[derive(Debug, Clone, Copy)]
pub struct PeFixture {
    /// Path under `fixtures/`.
    pub path: &'static str,
    /// A DLL (loaded by `platforms/loader.exe`), else an EXE run directly.
    pub dll: bool,
    /// Its wrappers (one per HIP translation unit).
    pub wrappers: usize,
    /// Whether it has base relocations (every fixture but the `/fixed` EXE).
    pub relocatable: bool,
    /// The long section names `.hip_fatbin` / `.hipFatBinSegment` (mingw GNU ld), else
    /// lld-link's `.hip_fat` / `.hipFatB`.
    pub long_names: bool,
    /// Whether the loader finds its preferred base taken and rebases it.
    pub rebased: bool,
}

/// Every PE fixture.
pub const PE_FIXTURES: &[PeFixture] = &[
    PeFixture {
        path: "platforms/hipapp.dll",
        dll: true,
        wrappers: 1,
        relocatable: true,
        long_names: false,
        rebased: false,
    },
    PeFixture {
        path: "platforms/hipapp2.dll",
        dll: true,
        wrappers: 2,
        relocatable: true,
        long_names: false,
        rebased: true,
    },
    PeFixture {
        path: "platforms/hipapp_mingw.dll",
        dll: true,
        wrappers: 1,
        relocatable: true,
        long_names: true,
        rebased: false,
    },
    PeFixture {
        path: "platforms/hipexe.exe",
        dll: false,
        wrappers: 1,
        relocatable: true,
        long_names: false,
        rebased: false,
    },
    PeFixture {
        path: "platforms/hipexe_fixed.exe",
        dll: false,
        wrappers: 1,
        relocatable: false,
        long_names: false,
        rebased: false,
    },
];

/// Every ELF fixture, sorted.
pub const ELF_FIXTURES: &[&str] = &paths::<{ count(None) }>(None);

/// The linked fat binaries ([`Role::LinkedFat`]), sorted.
pub const LINKED_FAT: &[&str] = &paths::<{ count(Some(Role::LinkedFat)) }>(Some(Role::LinkedFat));

const fn has_role(i: usize, role: Option<Role>) -> bool {
    match role {
        None => true,
        Some(r) => ELF_FIXTURE_ROLES[i].1 as u8 == r as u8,
    }
}

const fn count(role: Option<Role>) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < ELF_FIXTURE_ROLES.len() {
        if has_role(i, role) {
            n += 1;
        }
        i += 1;
    }
    n
}

const fn paths<const N: usize>(role: Option<Role>) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < ELF_FIXTURE_ROLES.len() {
        if has_role(i, role) {
            out[n] = ELF_FIXTURE_ROLES[i].0;
            n += 1;
        }
        i += 1;
    }
    out
}
