//! A CCOB that decodes to more than the 512 MB memory standard, made of real code objects:
//! those of the 15 targets of `fixtures/modern/libmodern_wide_v3.so` (clang-22), each
//! repeated, with a running counter between copies, to 44 MB under its own bundle entry
//! (692 MB in all; the CCOB itself is under 1 MB). Commands that take device code must handle
//! it without holding the decoded bundle (issue 23); the test that asserts their peak and the
//! bench that prints it at level 19 build it here.
//!
//! [`write_sparse`] writes one decoding to more than 1 GiB (issue 22: real CCOBs do), cheaply:
//! the same code objects once each, 80 MiB apart (bundle entries lie at explicit offsets;
//! the gaps are zeros), so it compresses to a few hundred KB and decodes at memory speed.
//! [`host_binary`] puts a CCOB into a fat binary, for the commands that take those, and
//! [`write_library`] many CCOBs of the same kind as [`write`]'s, of chosen sizes, into one:
//! a library of many bundles, as ROCm's (issue 38), for the memory bench.

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
    let objects = code_objects(kpack, dir);
    let (sink, entries) = repeated(&objects, ENTRY_LEN, 0);
    sink.finish(dir.join("large.ccob"), entries)
}

/// A CCOB (in a [`Sink`], not yet finished) holding `objects`, each under its own bundle
/// entry repeated to at least `entry_len` bytes: copies of its code object, each followed by
/// its 8-byte copy number, counted from `first_copy` (distinct counts make distinct bundles
/// of the same code objects); with, per entry, its target and the SHA-256 of its bytes.
fn repeated(
    objects: &[(String, Vec<u8>)],
    entry_len: usize,
    first_copy: u64,
) -> (Sink, Vec<(String, String)>) {
    let copies = |code_object: &[u8]| entry_len.div_ceil(code_object.len() + 8);
    let sizes: Vec<(&str, u64)> = objects
        .iter()
        .map(|(id, co)| (id.as_str(), (copies(co) * (co.len() + 8)) as u64))
        .collect();
    let (header, offsets) = kpack_bundle::uncompressed_layout(&sizes, 4096);
    let decoded_len = offsets.last().unwrap() + sizes.last().unwrap().1;

    let mut sink = Sink::new(1, true);
    sink.put(&header);
    let mut entries = Vec::new();
    for ((id, code_object), offset) in objects.iter().zip(&offsets) {
        sink.zeros_to(*offset);
        let mut digest = Sha256::new();
        for copy in first_copy..first_copy + copies(code_object) as u64 {
            for part in [&code_object[..], &copy.to_le_bytes()] {
                digest.update(part);
                sink.put(part);
            }
        }
        entries.push((arch_of(id), crate::tree::hex(&digest.finalize())));
    }
    assert_eq!(sink.written, decoded_len);
    (sink, entries)
}

/// Targets of each bundle of [`write_library`], as in the real library it stands for.
pub const LIBRARY_TARGETS: usize = 14;

/// A fat binary of many CCOB bundles ([`write_library`]).
#[cfg(feature = "transform")]
pub struct Library {
    /// The fat binary.
    pub path: PathBuf,
    /// Per bundle, in section order: bytes of the decoded bundle.
    pub decoded_lens: Vec<u64>,
}

/// Writes into `dir` a fat binary (`library.so`, by [`host_binary`]) whose `.hip_fatbin`
/// holds one CCOB per entry of `bundle_lens`, in that order, each of [`LIBRARY_TARGETS`]
/// entries of the code objects of [`write`] repeated to a share of its length: a ROCm
/// library of many bundles, some larger than a bundle decoded whole may be (issue 38: a
/// rocSOLVER of 235 bundles, the largest 251 MB decoded, 14 targets), cheap to generate
/// and to code at level 19 (the copies match each other). Each bundle counts its copies
/// from its own offset, so that no two bundles share a code object.
#[cfg(feature = "transform")]
pub fn write_library(kpack: &Path, dir: &Path, bundle_lens: &[u64]) -> Library {
    let objects = code_objects(kpack, dir);
    let objects = &objects[..LIBRARY_TARGETS];
    let mut section = Vec::new();
    let mut decoded_lens = Vec::new();
    for (index, &len) in bundle_lens.iter().enumerate() {
        let entry_len = (len / LIBRARY_TARGETS as u64) as usize;
        let (sink, _) = repeated(objects, entry_len, (index as u64) << 32);
        decoded_lens.push(sink.written);
        // The linker aligns each bundle to 4096 bytes; the gap is zeros.
        section.resize(section.len().next_multiple_of(4096), 0);
        section.extend_from_slice(&sink.ccob());
    }
    let path = dir.join("library.so");
    host_binary(&section, &path);
    Library { path, decoded_lens }
}

/// Distance between the entries of [`write_sparse`]'s bundle.
pub const SPARSE_SPACING: u64 = 80 << 20;

/// Writes into `dir` a CCOB decoding to more than 1 GiB: the code objects of
/// [`write`] once each, [`SPARSE_SPACING`] apart, zeros between them.
pub fn write_sparse(kpack: &Path, dir: &Path) -> LargeCcob {
    let objects = code_objects(kpack, dir);
    let ids: Vec<(&str, u64)> = objects.iter().map(|(id, _)| (id.as_str(), 0)).collect();
    let header_len = kpack_bundle::uncompressed_layout(&ids, 1).0.len() as u64;
    let first = header_len.next_multiple_of(4096);
    let offsets: Vec<u64> = (0..objects.len() as u64)
        .map(|i| first + i * SPARSE_SPACING)
        .collect();
    let decoded_len = offsets.last().unwrap() + objects.last().unwrap().1.len() as u64;
    assert!(decoded_len > 1 << 30, "{decoded_len}");
    // The header of entries at these offsets: `uncompressed_layout` places them packed, so
    // its offset fields are written here.
    let mut header = Vec::new();
    header.extend_from_slice(kpack_bundle::BUNDLE_MAGIC);
    header.extend_from_slice(&(objects.len() as u64).to_le_bytes());
    for ((id, co), offset) in objects.iter().zip(&offsets) {
        for field in [*offset, co.len() as u64, id.len() as u64] {
            header.extend_from_slice(&field.to_le_bytes());
        }
        header.extend_from_slice(id.as_bytes());
    }
    assert_eq!(header.len() as u64, header_len);
    // No long-distance matching: zstd's window stays small, so decoding costs no memory.
    let mut sink = Sink::new(1, false);
    sink.put(&header);
    let mut entries = Vec::new();
    for ((id, code_object), offset) in objects.iter().zip(&offsets) {
        sink.zeros_to(*offset);
        sink.put(code_object);
        entries.push((arch_of(id), crate::sha256_hex(code_object)));
    }
    assert_eq!(sink.written, decoded_len);
    sink.finish(dir.join("sparse.ccob"), entries)
}

/// Writes into `dir` a CCOB of `count` entries of `entry_len` bytes each, as RCCL 7.2.4's
/// (one bundle of 120-200 MB code objects, 1.2 GB in all): the first `count` code objects of
/// [`write`], each padded with zeros to `entry_len` (an ELF reader ignores what follows its
/// section headers). A streamed entry is then larger than a part, and a reader holding two
/// entries at once, or a copy of one, is over the memory standard.
pub fn write_padded(kpack: &Path, dir: &Path, count: usize, entry_len: u64) -> LargeCcob {
    let objects = code_objects(kpack, dir);
    let objects = &objects[..count];
    let ids: Vec<(&str, u64)> = objects
        .iter()
        .map(|(id, _)| (id.as_str(), entry_len))
        .collect();
    let (header, offsets) = kpack_bundle::uncompressed_layout(&ids, 4096);
    let mut sink = Sink::new(1, false);
    sink.put(&header);
    let mut entries = Vec::new();
    for ((id, code_object), offset) in objects.iter().zip(&offsets) {
        sink.zeros_to(*offset);
        let mut digest = Sha256::new();
        sink.put(code_object);
        digest.update(code_object);
        let padding = vec![0; (entry_len as usize - code_object.len()).min(1 << 20)];
        let mut left = entry_len - code_object.len() as u64;
        while left > 0 {
            let n = left.min(padding.len() as u64) as usize;
            sink.put(&padding[..n]);
            digest.update(&padding[..n]);
            left -= n as u64;
        }
        entries.push((arch_of(id), crate::tree::hex(&digest.finalize())));
    }
    sink.finish(dir.join("padded.ccob"), entries)
}

/// The code objects of `fixtures/modern/libmodern_wide_v3.so` (15 targets), taken out by
/// `kpack` (the binary under test) into `dir`: (bundle entry id, bytes), sorted.
fn code_objects(kpack: &Path, dir: &Path) -> Vec<(String, Vec<u8>)> {
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
    objects
}

/// The target of a bundle entry id (`hipv4-amdgcn-amd-amdhsa--gfx90a` → `gfx90a`).
fn arch_of(id: &str) -> String {
    id.rsplit("--").next().unwrap().to_owned()
}

/// Writes `path`, a copy of the fixture `fixtures/bin/libone.so` (one bundle) whose
/// `.hip_fatbin` holds `ccob` instead (by the host rewrite prune uses, moving the section
/// into a new segment), so that every wrapper leads to it.
#[cfg(feature = "transform")]
pub fn host_binary(ccob: &[u8], path: &Path) {
    use kpack_elf::rewrite::FatbinEdit;
    let input = std::fs::read(crate::fixture("bin/libone.so")).unwrap();
    let fat = kpack_elf::inspect(&input).unwrap();
    let edit = FatbinEdit::Move {
        contents_len: ccob.len() as u64,
        bundle_offsets: vec![0; fat.wrappers.len()],
    };
    let rewrite = kpack_elf::rewrite::plan_edit(&input, &edit).unwrap();
    let mut contents = Whole(ccob);
    let mut out = Vec::new();
    rewrite
        .write_with_contents(&input, &mut contents, &mut out)
        .unwrap();
    std::fs::write(path, out).unwrap();
}

/// New `.hip_fatbin` contents given whole.
#[cfg(feature = "transform")]
struct Whole<'a>(&'a [u8]);

#[cfg(feature = "transform")]
impl kpack_elf::splice::Contents for Whole<'_> {
    fn write_next(
        &mut self,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let (now, rest) = self.0.split_at(len as usize);
        self.0 = rest;
        sink(now)
    }
}

/// Where the generated bundle goes: hashed (the CCOB hash) and compressed as it comes.
struct Sink {
    md5: Md5,
    encoder: zstd::stream::Encoder<'static, Vec<u8>>,
    written: u64,
}

impl Sink {
    fn new(level: i32, long_distance_matching: bool) -> Sink {
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), level).unwrap();
        encoder
            .long_distance_matching(long_distance_matching)
            .unwrap();
        Sink {
            md5: Md5::new(),
            encoder,
            written: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        self.md5.update(bytes);
        self.encoder.write_all(bytes).unwrap();
        self.written += bytes.len() as u64;
    }

    /// Zeros up to `offset`.
    fn zeros_to(&mut self, offset: u64) {
        let zeros = vec![0; 1 << 20];
        while self.written < offset {
            let n = (offset - self.written).min(zeros.len() as u64) as usize;
            self.put(&zeros[..n]);
        }
    }

    /// Writes the CCOB (v3, zstd) to `path`; `entries` are what it holds.
    fn finish(self, path: PathBuf, entries: Vec<(String, String)>) -> LargeCcob {
        let decoded_len = self.written;
        std::fs::write(&path, self.ccob()).unwrap();
        LargeCcob {
            path,
            entries,
            decoded_len,
        }
    }

    /// The CCOB (v3, zstd) of what was put.
    fn ccob(self) -> Vec<u8> {
        let compressed = self.encoder.finish().unwrap();
        let digest = self.md5.finalize();
        let hash = u64::from_le_bytes(digest[..8].try_into().unwrap());
        let mut ccob = kpack_bundle::ccob_header(
            3,
            kpack_bundle::CompressionMethod::Zstd,
            self.written,
            compressed.len() as u64,
            hash,
        )
        .unwrap();
        ccob.extend_from_slice(&compressed);
        ccob
    }
}
