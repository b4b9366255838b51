//! Uncompressed bundles and `.hip_fatbin` walking: header bounds, entry tables, padding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(bundle) = kpack_bundle::Bundle::parse(data) {
        for entry in bundle.entries() {
            assert!(entry.data.len() as u64 <= bundle.len());
        }
    }
    let _ = kpack_bundle::bundle_extent(data);
    if let Ok(bundles) = kpack_bundle::walk_fatbin(data) {
        for b in bundles {
            assert!(b.offset + b.len <= data.len() as u64);
        }
    }
});
