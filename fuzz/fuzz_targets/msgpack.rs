//! msgpack and the two documents built on it: HIPK marker metadata and `.kpm` manifests.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // What kpack's value walk accepts, rmpv reads as one value of the same length, and
    // rmpv's re-encoding (smallest forms) is accepted whole.
    if let Ok(len) = kpack_archive::msgpack::value_len(data) {
        assert!(len <= data.len());
        let mut rest = &data[..len];
        let value = match rmpv::decode::read_value(&mut rest) {
            // rmpv recurses, so it stops at 1024 levels; the walk does not.
            Err(rmpv::decode::Error::DepthLimitExceeded) => return,
            other => other.expect("rmpv reads what the walk accepted"),
        };
        assert!(rest.is_empty(), "rmpv and the walk agree on the value's end");
        let mut again = Vec::new();
        rmpv::encode::write_value(&mut again, &value).expect("a Vec grows");
        assert_eq!(kpack_archive::msgpack::value_len(&again), Ok(again.len()));
    }
    if let Ok((_, used)) = kpack_hostbin::marker::MarkerMetadata::decode(data) {
        assert_eq!(kpack_archive::msgpack::value_len(data), Ok(used));
    }
    let _ = kpack_archive::kpm::KpmManifest::decode(data);
});
