//! The host rewrite on arbitrary bytes: never panics, and any output it produces passes the
//! structural verifier.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let marker = kpack_archive::marker::MarkerMetadata {
        kernel_name: "lib/libfuzz.so".into(),
        search_paths: vec!["../.kpack/fuzz_@GFXARCH@.kpack".into()],
    }
    .encode()
    .expect("the marker encodes");
    if let Ok(rewrite) = kpack_elf::rewrite::plan(data, &marker) {
        let out = rewrite.to_vec(data);
        if let Err(issues) = kpack_elf::verify(&out) {
            panic!("rewrite output fails verification: {issues:?}");
        }
    }
});
