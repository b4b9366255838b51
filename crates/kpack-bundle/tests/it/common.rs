//! Test-only helpers: fixture loading and a minimal ELF64 section lookup.
#![allow(dead_code)]

pub use kpack_testkit::read_fixture as fixture;

fn u16_at(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap()) as usize
}
fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}
fn u64_at(b: &[u8], at: usize) -> usize {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
}

/// Bytes of the section called `name` in an ELF64 little-endian file.
pub fn elf_section<'a>(elf: &'a [u8], name: &str) -> &'a [u8] {
    assert_eq!(&elf[..6], b"\x7fELF\x02\x01", "not ELF64 LE");
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(elf, 0x28),
        u16_at(elf, 0x3a),
        u16_at(elf, 0x3c),
        u16_at(elf, 0x3e),
    );
    let header = |i: usize| &elf[shoff + i * shentsize..][..shentsize];
    let strtab = u64_at(header(shstrndx), 0x18);
    (0..shnum)
        .map(header)
        .find(|h| {
            let start = strtab + u32_at(h, 0);
            let end = start + elf[start..].iter().position(|&c| c == 0).unwrap();
            &elf[start..end] == name.as_bytes()
        })
        .map(|h| &elf[u64_at(h, 0x18)..][..u64_at(h, 0x20)])
        .unwrap_or_else(|| panic!("no section {name}"))
}

/// The `.hip_fatbin` section of an ELF fixture.
pub fn hip_fatbin(rel: &str) -> Vec<u8> {
    elf_section(&fixture(rel), ".hip_fatbin").to_vec()
}

/// Deterministic incompressible bytes (xorshift), so zstd stores them raw.
pub fn noise(len: usize, mut state: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Device entries (triple, data) of a bundle, host entries dropped.
pub fn device_entries(bundle: &kpack_bundle::Bundle<'_>) -> Vec<(String, Vec<u8>)> {
    bundle
        .entries()
        .iter()
        .filter(|e| !e.is_host())
        .map(|e| (e.triple.to_string(), e.data.to_vec()))
        .collect()
}
