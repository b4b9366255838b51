//! LLVM OffloadBinary: headers, entry tables, string maps and images of concatenated
//! binaries. Every image the reader returns lies inside the input, and its metadata was
//! read from inside its own binary.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(images) = kpack_offload::parse(data, 0) {
        for image in images {
            assert!(image.offset + image.data.len() as u64 <= data.len() as u64);
            assert!(image.binary_offset <= image.offset);
            assert_eq!(
                &data[image.offset as usize..][..image.data.len()],
                image.data
            );
        }
    }
});
