//! The PE32+ reader, fat-binary inspection and host rewrite on arbitrary bytes: never panics,
//! and any output the rewrite produces passes the structural PE verifier.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(pe) = kpack_pe::PeFile::parse(data) {
        let _ = pe.base_relocations();
        let _ = pe.debug_data_pointers();
    }
    let _ = kpack_pe::inspect(data);
    let _ = kpack_pe::verify(data);
    let marker = kpack_hostbin::marker::MarkerMetadata {
        kernel_name: "bin/fuzz.dll".into(),
        search_paths: vec![".kpack/fuzz_@GFXARCH@.kpack".into()],
        host_entry_id: None,
    }
    .encode()
    .expect("the marker encodes");
    if let Ok(rewrite) = kpack_pe::rewrite::plan(data, &marker) {
        let out = rewrite.to_vec(data);
        if let Err(issues) = kpack_pe::verify(&out) {
            panic!("rewrite output fails verification: {issues:?}");
        }
    }
});
