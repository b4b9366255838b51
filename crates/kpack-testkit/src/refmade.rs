//! What the reference rocm-kpack (commit e348328) made from our fixtures, in
//! `fixtures/refmade/` (its README says how, and which files are valid): host libraries it
//! rewrote, with the archives it wrote beside them.

use std::path::PathBuf;

use crate::fixture;

/// Each library the reference rewrote, by file name, with the fixture it was made from
/// (`fixtures/refmade/binaries/SOURCES.txt`), sorted.
pub const REFMADE_LIBRARIES: [(&str, &str); 10] = [
    ("libalign2m.so", "bin/libalign2m.so"),
    (
        "libdemo.so.1",
        "shards/shard-a/demo_lib_gfx90X/demo/stage/lib/libdemo.so.1",
    ),
    ("libmodern_two_v3.so", "modern/libmodern_two_v3.so"),
    ("libmodern_v3.so", "modern/libmodern_v3.so"),
    ("libmodern_wide_v3.so", "modern/libmodern_wide_v3.so"),
    ("libone.so", "bin/libone.so"),
    ("librdc.so", "bin/librdc.so"),
    ("librelr.so", "bin/librelr.so"),
    ("libspirv_v3.so", "spirv/libspirv_v3.so"),
    ("libtwo.so", "bin/libtwo.so"),
];

/// The one library whose wrapper the loader misdirects: RELR, the in-place value 0 (the
/// reference wrote the marker's address only as a RELA addend), so the pointer lands on the
/// ELF header.
pub const REFMADE_MISDIRECTED: &str = "librelr.so";

/// The directory of the reference's output for library `name`: `lib/<name>` and
/// `.kpack/<group>_<target>.kpack` (zstd archives).
pub fn refmade_tree(name: &str) -> PathBuf {
    fixture(&format!("refmade/binaries/zstd/{name}"))
}

/// The library `name` as the reference rewrote it.
pub fn refmade_library(name: &str) -> PathBuf {
    refmade_tree(name).join("lib").join(name)
}
