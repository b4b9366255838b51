//! The digests' promise (docs/archive-v2.md §7): an archive kpack wrote, however damaged,
//! hands out each entry's original code object or an error, never other bytes. Three
//! archives of real code objects (`none`, `zstd-per-kernel`, `unified`) are written once;
//! the input picks one and damages it: its first byte chooses the archive, then each 4 bytes
//! are an offset (24 bits, little-endian, modulo the length) and a byte xored in there.
//! Every entry of the original is then read with `get`, `get_in_pieces` and `get_into`.
#![no_main]

use std::sync::OnceLock;

use kpack_archive::{Archive, ArchiveWriter, Compression};
use libfuzzer_sys::fuzz_target;

/// An archive as written, and the code object of each of its (binary, arch) entries.
struct Intact {
    bytes: Vec<u8>,
    entries: Vec<(String, String, &'static [u8])>,
}

/// Code objects from fixtures/modern, with their targets: similar enough for `unified` to
/// code some against others. The first is also stored under a second binary key, so that two
/// entries share one blob or frame.
const OBJECTS: [(&str, &[u8]); 3] = [
    ("gfx1030", include_bytes!("../../fixtures/modern/mk_gfx1030.co")),
    ("gfx90a:xnack+", include_bytes!("../../fixtures/modern/mk_gfx90a_xnackp.co")),
    ("gfx1201", include_bytes!("../../fixtures/modern/mk_gfx1201_plain.hsaco")),
];

fn intact() -> &'static [Intact; 3] {
    static ARCHIVES: OnceLock<[Intact; 3]> = OnceLock::new();
    ARCHIVES.get_or_init(|| {
        [Compression::None, Compression::zstd(), Compression::unified()].map(|compression| {
            let mut entries: Vec<(String, String, &'static [u8])> = OBJECTS
                .iter()
                .map(|&(arch, data)| ("libfuzz.so#0".to_owned(), arch.to_owned(), data))
                .collect();
            let (arch, data) = OBJECTS[0];
            entries.push(("libfuzz.so#1".to_owned(), arch.to_owned(), data));
            let mut writer = ArchiveWriter::new("fuzz", "fuzz", compression);
            for (binary, arch, data) in &entries {
                writer.add(binary, arch, *data, &[]).unwrap();
            }
            let mut bytes = Vec::new();
            writer.write_to(&mut bytes).unwrap();
            Intact { bytes, entries }
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, edits)) = data.split_first() else {
        return;
    };
    let archive = &intact()[usize::from(pick) % 3];
    let mut bytes = archive.bytes.clone();
    let len = bytes.len();
    for edit in edits.chunks_exact(4) {
        let at = u32::from_le_bytes([edit[0], edit[1], edit[2], 0]) as usize % len;
        bytes[at] ^= edit[3];
    }
    let Ok(damaged) = Archive::from_bytes(bytes) else {
        return;
    };
    for (binary, arch, original) in &archive.entries {
        if let Ok(got) = damaged.get(binary, arch) {
            assert!(*got == **original, "{binary} {arch}: get returned other bytes");
        }
        let mut pieces = Vec::new();
        if damaged
            .get_in_pieces(binary, arch, &mut |p| pieces.extend_from_slice(p))
            .is_ok()
        {
            assert!(pieces == **original, "{binary} {arch}: get_in_pieces returned other bytes");
        }
        let mut out = vec![0u8; original.len()];
        if let Ok(n) = damaged.get_into(binary, arch, &mut out) {
            assert!(out[..n] == **original, "{binary} {arch}: get_into returned other bytes");
        }
    }
});
