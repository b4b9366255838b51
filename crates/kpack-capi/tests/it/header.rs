//! The checked-in header is what cbindgen generates from the sources.

use std::path::Path;

#[test]
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
