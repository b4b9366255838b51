//! `.kpack` archives: header, TOC, blob and zstd-frame indexing, entry reads.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(archive) = kpack_archive::Archive::from_bytes(data.to_vec()) else {
        return;
    };
    let _ = archive.validate();
    let keys: Vec<(String, String)> = archive
        .entries()
        .map(|(b, a, _)| (b.to_owned(), a.to_owned()))
        .collect();
    for (binary, arch) in keys {
        if let (Ok(bytes), Some(info)) = (archive.get(&binary, &arch), archive.info(&binary, &arch)) {
            assert_eq!(bytes.len() as u64, info.original_size);
        }
    }
});
