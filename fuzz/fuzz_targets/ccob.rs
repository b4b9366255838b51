//! Compressed (CCOB) bundles: header lies, decompression bounds, hash checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(decoded) = kpack_bundle::DecodedBundle::decode(data) {
        let _ = decoded.bundles();
    }
});
