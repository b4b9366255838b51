//! msgpack and the two documents built on it: HIPK marker metadata and `.kpm` manifests.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((value, used)) = kpack_archive::msgpack::decode(data) {
        assert!(used <= data.len());
        // What decodes re-encodes, and decodes to the same value.
        if let Ok(bytes) = kpack_archive::msgpack::encode(&value) {
            let (again, _) = kpack_archive::msgpack::decode(&bytes).expect("re-encoded value decodes");
            assert_eq!(format!("{value:?}"), format!("{again:?}"));
        }
    }
    let _ = kpack_archive::marker::MarkerMetadata::decode(data);
    let _ = kpack_archive::kpm::KpmManifest::decode(data);
});
