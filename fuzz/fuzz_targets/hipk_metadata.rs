//! HIPK metadata read through a byte source the way the C API reads it through a pointer:
//! never past the value's end (nor past 64 KiB), and in agreement with the slice decoder.
#![no_main]

use std::cell::Cell;

use kpack_hostbin::marker::MarkerMetadata;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let furthest = Cell::new(0usize);
    let result = kpack_runtime::read_metadata(|i| {
        assert!(i < kpack_runtime::MAX_METADATA_LEN);
        assert_eq!(i, furthest.get(), "bytes are requested in order, each once");
        furthest.set(i + 1);
        data.get(i).copied()
    });
    if let Ok((meta, used)) = result {
        assert_eq!(used, furthest.get(), "nothing read beyond the value");
        let (again, used_again) = MarkerMetadata::decode(data).expect("the slice decoder agrees");
        assert_eq!((meta, used), (again, used_again));
    }
});
