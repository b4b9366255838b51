//! `.kpack` format version 2 (scheme `unified`): the `frames` table, references (backwards,
//! chains of at most 3 frames), and entry reads decoding a frame after its chain. The
//! header's version is forced to 2 so that every input exercises the v2 reader.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    if let Some(version) = bytes.get_mut(4..8) {
        version.copy_from_slice(&2u32.to_le_bytes());
    }
    let Ok(archive) = kpack_archive::Archive::from_bytes(bytes) else {
        return;
    };
    let _ = archive.validate();
    let keys: Vec<(String, String, u64)> = archive
        .entries()
        .map(|(b, a, info)| (b.to_owned(), a.to_owned(), info.original_size))
        .collect();
    for (binary, arch, original_size) in keys {
        if let Ok(bytes) = archive.get(&binary, &arch) {
            assert_eq!(bytes.len() as u64, original_size);
        }
        // The caller's buffer, as the C API allocates it, only where the input could hold it.
        if original_size <= (data.len() as u64) * 64 + (1 << 20) {
            let mut out = vec![0u8; original_size as usize];
            if let Ok(n) = archive.get_into(&binary, &arch, &mut out) {
                assert_eq!(n as u64, original_size);
            }
        }
    }
});
