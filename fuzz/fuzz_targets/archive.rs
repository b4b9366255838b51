//! `.kpack` archives: header, TOC, blob and zstd-frame indexing, entry reads (whole and in
//! pieces).
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
        let got = archive.get(&binary, &arch);
        if let (Ok(bytes), Some(info)) = (&got, archive.info(&binary, &arch)) {
            assert_eq!(bytes.len() as u64, info.original_size);
        }
        // Read in pieces (decoded as a stream above `PIECES_ABOVE`): when both read, the
        // same bytes.
        let mut pieces = Vec::new();
        let read = archive.get_in_pieces(&binary, &arch, &mut |p| pieces.extend_from_slice(p));
        if let (Ok(bytes), Ok(len)) = (&got, read) {
            assert!(len == bytes.len() as u64 && pieces == **bytes);
        }
    }
});
