//! LLVM OffloadBinary: headers, entry tables, string maps and images of concatenated
//! binaries. Every image the reader returns lies inside the input, and its metadata was
//! read from inside its own binary. What the writer writes of the images read (as `kpack
//! prune` writes the kept ones) reads back as the same images.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(images) = kpack_offload::parse(data, 0) {
        let mut written = Vec::new();
        for image in &images {
            assert!(image.offset + image.data.len() as u64 <= data.len() as u64);
            assert!(image.binary_offset <= image.offset);
            assert_eq!(
                &data[image.offset as usize..][..image.data.len()],
                image.data
            );
            kpack_offload::write_binary(image, &mut written);
        }
        let again = kpack_offload::parse(&written, 0).expect("the writer's output reads");
        assert_eq!(again.len(), images.len());
        for (a, b) in images.iter().zip(&again) {
            assert_eq!(
                (a.image_kind, a.offload_kind, a.flags, a.data),
                (b.image_kind, b.offload_kind, b.flags, b.data)
            );
            // A version-1 value ends at its first NUL, as LLVM reads it.
            let cut = |v: &str| v.split('\0').next().unwrap_or_default().to_owned();
            let strings = |i: &kpack_offload::Image<'_>| -> Vec<(String, String)> {
                i.strings.iter().map(|(k, v)| (k.to_string(), cut(v))).collect()
            };
            assert_eq!(strings(a), strings(b));
        }
    }
});
