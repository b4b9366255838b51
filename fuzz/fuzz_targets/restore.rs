//! The way back on arbitrary bytes: a fat input is first rewritten (so the fixtures seed
//! kpacked files), then each wrapper's marker is read and the restore planned; nothing
//! panics, and any output the restore produces passes the structural verifier.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let marker = kpack_hostbin::marker::MarkerMetadata {
        kernel_name: "libfuzz.so".into(),
        search_paths: vec!["../.kpack/fuzz_@GFXARCH@.kpack".into()],
        host_entry_id: None,
    }
    .encode()
    .expect("the marker encodes");
    let kpacked = match kpack_elf::rewrite::plan(data, &marker) {
        Ok(rewrite) => rewrite.to_vec(data),
        Err(_) => data.to_vec(),
    };
    let Ok(fat) = kpack_elf::inspect(&kpacked) else {
        return;
    };
    let _ = kpack_pipeline::kpacked::wrapper_markers(&kpacked, &fat);
    // One small valid bundle per wrapper, each on its own 4096-byte boundary.
    let bundle = kpack_bundle::write_uncompressed(&[("host-x86_64-unknown-linux-gnu-", &[])], 1);
    let mut payload = Vec::new();
    let mut wrapper_bundles = Vec::new();
    for i in 0..fat.wrappers.len().min(64) {
        payload.resize(i * 4096, 0);
        wrapper_bundles.push(payload.len() as u64);
        payload.extend_from_slice(&bundle);
    }
    let plan = kpack_elf::restore::plan(
        &kpacked,
        &kpack_elf::restore::Payload {
            len: payload.len() as u64,
            wrapper_bundles,
        },
    );
    if let Ok(layout) = plan {
        let mut out = Vec::new();
        layout
            .rewrite
            .write_with_contents(&kpacked, &mut payload.as_slice(), &mut out)
            .expect("writing to a Vec cannot fail");
        if let Err(issues) = kpack_elf::verify(&out) {
            panic!("restore output fails verification: {issues:?}");
        }
    }
});
