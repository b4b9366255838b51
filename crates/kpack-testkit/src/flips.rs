//! Bit flips spread deterministically over a `.kpack` archive, for the tests that prove a
//! damaged archive hands out its original code objects or an error, never other bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kpack_archive::{Archive, Compression, CompressionScheme, DATA_START, HEADER_LEN};

/// One bit flipped in a file: the byte at `at` xored with `mask` (one bit set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Flip {
    pub at: usize,
    pub mask: u8,
}

impl Flip {
    /// `bytes` with this flip applied.
    pub fn apply(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        out[self.at] ^= self.mask;
        out
    }
}

/// One entry of an archive: its binary key, its arch, and the range of the file its blob or
/// frame takes.
#[derive(Clone, Debug)]
pub struct StoredEntry {
    pub binary: String,
    pub arch: String,
    pub stored: Range<usize>,
}

/// Every entry of the intact archive `bytes`, in TOC order, with where its bytes are stored.
pub fn stored_entries(bytes: &[u8]) -> Vec<StoredEntry> {
    let held: Arc<[u8]> = bytes.into();
    let base = held.as_ptr() as usize;
    let archive = Archive::from_backing(held.clone()).expect("an intact archive");
    archive
        .entries()
        .map(|(binary, arch, _)| {
            let stored = archive.stored_bytes(binary, arch).unwrap();
            let start = stored.as_ptr() as usize - base;
            StoredEntry {
                binary: binary.to_owned(),
                arch: arch.to_owned(),
                stored: start..start + stored.len(),
            }
        })
        .collect()
}

/// The flips the damage tests apply to the intact archive `bytes`, sorted by offset:
/// * every bit of the 16-byte header (magic, version, `toc_offset`);
/// * one bit of every padding byte up to the data region (64);
/// * one bit of every TOC byte (msgpack lengths and types, offsets, sizes, digests);
/// * about `data_flips` bits spread evenly over the data region;
/// * the first and last byte of every blob or frame, and for `zstd-per-kernel` the low byte
///   of each frame's 4-byte size prefix.
///
/// Consecutive bytes take consecutive bit positions, and the evenly spread ones rotate
/// through them, so every bit position of every part is flipped somewhere.
pub fn archive_flips(bytes: &[u8], data_flips: usize) -> Vec<Flip> {
    let toc_at = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    let data = DATA_START as usize..toc_at;
    let by_position = |at: usize| Flip {
        at,
        mask: 1 << (at % 8),
    };
    let mut flips = BTreeSet::new();
    for at in 0..HEADER_LEN {
        for bit in 0..8 {
            flips.insert(Flip { at, mask: 1 << bit });
        }
    }
    flips.extend(
        (HEADER_LEN..data.start)
            .chain(toc_at..bytes.len())
            .map(by_position),
    );
    let stride = (data.len() / data_flips.max(1)).max(1);
    flips.extend(
        data.clone()
            .step_by(stride)
            .enumerate()
            .map(|(k, at)| Flip {
                at,
                mask: 1 << (k % 8),
            }),
    );
    let scheme = Archive::from_bytes(bytes.to_vec())
        .expect("an intact archive")
        .compression_scheme();
    for e in stored_entries(bytes) {
        flips.insert(by_position(e.stored.start));
        flips.insert(by_position(e.stored.end - 1));
        if scheme == CompressionScheme::ZstdPerKernel {
            flips.insert(by_position(e.stored.start - 4));
        }
    }
    flips.into_iter().collect()
}

/// The three encodings the damage tests cover: v1 `none`, v1 `zstd-per-kernel`, v2 `unified`.
pub const ENCODINGS: [(&str, Compression); 3] = [
    ("none", Compression::None),
    ("zstd", Compression::zstd()),
    ("unified", Compression::unified()),
];

/// The damage tests' fixture: 15 targets of one kernel, each its own code object.
pub const DAMAGE_FIXTURE: &str = "modern/libmodern_wide_v3.so";

/// The kernel name [`packed_fixture`] packs under: entries are `<name>#<wrapper>`.
pub fn damage_kernel_name() -> String {
    let name = Path::new(DAMAGE_FIXTURE).file_name().unwrap();
    name.to_str().unwrap().to_owned()
}

/// [`DAMAGE_FIXTURE`]'s code objects by (binary key, arch) as [`packed_fixture`] keys them,
/// unbundled from the fat binary rather than read back from an archive.
pub fn damage_originals() -> BTreeMap<(String, String), Vec<u8>> {
    let name = damage_kernel_name();
    crate::originals(&crate::fixture(DAMAGE_FIXTURE))
        .into_iter()
        .map(|((w, target), data)| ((format!("{name}#{w}"), target), data))
        .collect()
}

/// [`DAMAGE_FIXTURE`] packed into `dir/<label>.kpack` with kpack's writer, its entries keyed
/// `<damage_kernel_name()>#<wrapper>`.
pub fn packed_fixture(dir: &Path, label: &str, compression: Compression) -> PathBuf {
    use kpack_pipeline::pack::{PackInput, pack};
    let out = dir.join(format!("{label}.kpack"));
    let inputs = [PackInput {
        path: crate::fixture(DAMAGE_FIXTURE),
        kernel_name: damage_kernel_name(),
    }];
    pack(&inputs, &out, label, None, compression).unwrap();
    out
}
