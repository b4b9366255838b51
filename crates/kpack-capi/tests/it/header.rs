//! The checked-in header is what cbindgen generates from the sources.

use std::path::Path;

#[test]
#[cfg_attr(
    windows,
    ignore = "needs cargo (cbindgen runs `cargo metadata`), a Linux program here; the Linux run checks it"
)]
fn checked_in_header_matches_the_sources() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen")
        .write(&mut generated);
    let header = dir.join("include/rocm_kpack/kpack.h");
    if std::env::var_os("KPACK_BLESS").is_some() {
        std::fs::create_dir_all(header.parent().unwrap()).unwrap();
        std::fs::write(&header, &generated).unwrap();
    }
    let checked_in = std::fs::read(&header).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is stale: regenerate with `KPACK_BLESS=1 cargo test -p kpack-capi --test header`",
        header.display()
    );
}

#[test]
fn the_windows_export_list_names_exactly_the_functions_of_the_header() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(dir.join("include/rocm_kpack/kpack.h")).unwrap();
    // `KPACK_API <type> <name>(`, the declaration on one line or several; the macro's own
    // definitions are no `kpack_` name.
    let mut declared: Vec<&str> = header
        .split("KPACK_API")
        .skip(1)
        .filter_map(|d| d.split_once('(').map(|(before, _)| before))
        .map(|before| before.trim_end().rsplit([' ', '*', '\n']).next().unwrap())
        .filter(|name| name.starts_with("kpack_"))
        .collect();
    declared.sort_unstable();
    let def = std::fs::read_to_string(dir.join("rocm_kpack.def")).unwrap();
    let exports = def.split_once("EXPORTS").expect("an EXPORTS section").1;
    let mut listed: Vec<&str> = exports.split_whitespace().collect();
    listed.sort_unstable();
    assert_eq!(declared.len(), 14, "{declared:?}");
    assert_eq!(listed, declared);
}
