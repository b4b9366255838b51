//! Artifact tarballs: decompression (sniffed zstd/xz/plain), tar headers and the member
//! safety rules. Every member the reader accepts must be safe to write below a root.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = kpack_tar::decompress(data) else {
        return;
    };
    let _ = kpack_tar::read_members(
        reader,
        Path::new("fuzz.tar"),
        |m, content| -> Result<(), kpack_tar::TarError> {
            assert!(!m.path.is_empty() && !m.path.starts_with('/'));
            assert!(m.path.split('/').all(|c| !c.is_empty() && c != "." && c != ".."));
            if let kpack_tar::MemberKind::Symlink(t) = &m.kind {
                assert!(!t.starts_with('/'));
            }
            // Read in bounded chunks, as split does.
            let mut buf = [0u8; 4096];
            while content.read(&mut buf).map_err(|source| kpack_tar::TarError::Io {
                path: m.path.clone().into(),
                source,
            })? > 0
            {}
            Ok(())
        },
    );
});
