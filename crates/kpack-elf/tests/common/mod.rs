//! Shared by the integration tests: access to the committed fixtures.

use std::path::PathBuf;

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The bytes of `fixtures/<rel>`.
pub fn fixture(rel: &str) -> Vec<u8> {
    let path = fixtures_dir().join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every ELF file in fixtures/bin and fixtures/modern (checked by a test).
pub const ELF_FIXTURES: &[&str] = &[
    "bin/exe_nopie",
    "bin/exe_pie",
    "bin/k1.o",
    "bin/k2.o",
    "bin/libalign2m.so",
    "bin/libhostonly.so",
    "bin/libone.so",
    "bin/libone_gfx906.so",
    "bin/libone_stripped.so",
    "bin/librdc.so",
    "bin/librelr.so",
    "bin/libtwo.so",
    "bin/rdc_a.o",
    "bin/rdc_b.o",
    "modern/exe_modern_v3",
    "modern/libmodern_nocompress.so",
    "modern/libmodern_two_v3.so",
    "modern/libmodern_v2.so",
    "modern/libmodern_v3.so",
    "modern/libmodern_wide_v3.so",
    "modern/mk2_v3.o",
    "modern/mk_gfx1030.co",
    "modern/mk_gfx90a_xnackp.co",
    "modern/mk_v3.o",
];
