//! A CCOB that decodes to more than the 512 MB memory standard, made of real code objects:
//! those of the 15 targets of `fixtures/modern/libmodern_wide_v3.so` (clang-22), each
//! repeated, with a running counter between copies, to 44 MB under its own bundle entry
//! (692 MB in all; the CCOB itself is under 1 MB). Commands that take device code must handle
//! it without holding the decoded bundle (issue 23); the test that asserts their peak and the
//! bench that prints it at level 19 build it here.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use md5::{Digest, Md5};
use sha2::Sha256;

/// Bytes of each entry (at least).
pub const ENTRY_LEN: usize = 44 << 20;

/// The CCOB written by [`write`] and what it holds.
pub struct LargeCcob {
    /// The raw CCOB file.
    pub path: PathBuf,
    /// Per entry, in bundle order: its target and the SHA-256 (hex) of its bytes.
    pub entries: Vec<(String, String)>,
    /// Bytes of the decoded bundle.
    pub decoded_len: u64,
}

/// Writes the CCOB into `dir`, using `kpack` (the binary under test) to take the code
/// objects out of the fixture. The bundle is generated and compressed as a stream, never
/// held: a process's peak RSS passes to the children it spawns (Linux counts the parent's
/// high-water mark in a `vfork`ed child's `ru_maxrss`), so a test that held 692 MB could
/// not measure a child's peak.
pub fn write(kpack: &Path, dir: &Path) -> LargeCcob {
    let unbundled = dir.join("large-ccob-objects");
    let status = Command::new(kpack)
        .arg("unbundle")
        .arg(crate::fixture("modern/libmodern_wide_v3.so"))
        .arg("-o")
        .arg(&unbundled)
        .output()
        .expect("kpack runs");
    assert!(status.status.success(), "kpack unbundle failed: {status:?}");
    let mut objects: Vec<(String, Vec<u8>)> = std::fs::read_dir(&unbundled)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            // `<input>.<bundle>.<entry id>.co`
            let id = name.split('.').rev().nth(1).unwrap().to_owned();
            (id, std::fs::read(&path).unwrap())
        })
        .collect();
    objects.sort();
    assert_eq!(objects.len(), 15, "the fixture's targets");
    // Each entry: copies of its code object, each followed by its 8-byte index.
    let copies = |code_object: &[u8]| ENTRY_LEN.div_ceil(code_object.len() + 8);
    let sizes: Vec<(&str, u64)> = objects
        .iter()
        .map(|(id, co)| (id.as_str(), (copies(co) * (co.len() + 8)) as u64))
        .collect();
    let (header, offsets) = kpack_bundle::uncompressed_layout(&sizes, 4096);
    let decoded_len = offsets.last().unwrap() + sizes.last().unwrap().1;

    let mut sink = Sink {
        md5: Md5::new(),
        encoder: zstd::stream::Encoder::new(Vec::new(), 1).unwrap(),
        written: 0,
    };
    sink.encoder.long_distance_matching(true).unwrap();
    sink.put(&header);
    let mut entries = Vec::new();
    for ((id, code_object), offset) in objects.iter().zip(&offsets) {
        sink.put(&vec![0; (offset - sink.written) as usize]);
        let mut digest = Sha256::new();
        for copy in 0..copies(code_object) as u64 {
            for part in [&code_object[..], &copy.to_le_bytes()] {
                digest.update(part);
                sink.put(part);
            }
        }
        let arch = id.rsplit("--").next().unwrap().to_owned();
        entries.push((arch, crate::hex(&digest.finalize())));
    }
    assert_eq!(sink.written, decoded_len);
    let compressed = sink.encoder.finish().unwrap();
    let digest = sink.md5.finalize();
    let hash = u64::from_le_bytes(digest[..8].try_into().unwrap());
    let mut ccob = kpack_bundle::ccob_header(
        3,
        kpack_bundle::CompressionMethod::Zstd,
        decoded_len,
        compressed.len() as u64,
        hash,
    )
    .unwrap();
    ccob.extend_from_slice(&compressed);
    let path = dir.join("large.ccob");
    std::fs::write(&path, ccob).unwrap();
    LargeCcob {
        path,
        entries,
        decoded_len,
    }
}

/// Where the generated bundle goes: hashed (the CCOB hash) and compressed as it comes.
struct Sink {
    md5: Md5,
    encoder: zstd::stream::Encoder<'static, Vec<u8>>,
    written: u64,
}

impl Sink {
    fn put(&mut self, bytes: &[u8]) {
        self.md5.update(bytes);
        self.encoder.write_all(bytes).unwrap();
        self.written += bytes.len() as u64;
    }
}
