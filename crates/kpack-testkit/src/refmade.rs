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

/// Copies the reference's output for `name` (library and archives) into `dir`, returning
/// the library's path there: restore writes beside it.
pub fn copy_refmade_tree(name: &str, dir: &std::path::Path) -> PathBuf {
    let from = refmade_tree(name);
    for sub in ["lib", ".kpack"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for e in std::fs::read_dir(from.join(sub)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(sub).join(e.file_name())).unwrap();
        }
    }
    dir.join("lib").join(name)
}
