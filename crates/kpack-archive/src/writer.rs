//! The writers of `.kpack` archives: [`ArchiveWriter`] (in memory, or streaming its blobs
//! through [`ArchiveFileWriter`]), kernels prepared off its thread ([`KernelCompressor`]).
//!
//! Modules: `prepared` (kernels as an archive stores them), `blobs` (where the stored bytes
//! are), `unified` (what scheme `unified` adds: grouping and coding), `toc` (the TOC and
//! header written), `file` (the archive streamed to its file).

mod blobs;
mod file;
mod in_pieces;
mod prepared;
mod toc;
mod unified;

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::{ArchiveError, CompressionScheme, DATA_START, first_repeat, normalise_key};
use blobs::Blobs;
use unified::Unified;

pub use file::ArchiveFileWriter;
pub use in_pieces::KernelInPieces;
pub use prepared::{KernelCompressor, PreparedKernel};

/// zstd level used by the reference (`ZstdCompressor(level=3)`, pack_tree's default).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// zstd level of scheme `unified` unless told otherwise: its archives are written once and
/// read often, and levels above 19 gain little on code objects for much more time.
pub const DEFAULT_UNIFIED_LEVEL: i32 = 19;

/// How an [`ArchiveWriter`] stores kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Scheme `none`: kernels stored raw.
    None,
    /// Scheme `zstd-per-kernel`: one frame per kernel, content size and checksum recorded.
    Zstd {
        /// The zstd level (1 to 22).
        level: i32,
    },
    /// Scheme `unified` (format version 2, [`crate::unified`]): zstd frames, each standalone
    /// or coded against another kernel's content.
    Unified {
        /// The zstd level (1 to 22).
        level: i32,
    },
}

impl Compression {
    /// zstd at [`DEFAULT_ZSTD_LEVEL`].
    pub const fn zstd() -> Self {
        Compression::Zstd {
            level: DEFAULT_ZSTD_LEVEL,
        }
    }

    /// The TOC scheme this compression writes.
    pub fn scheme(&self) -> CompressionScheme {
        match self {
            Compression::None => CompressionScheme::None,
            Compression::Zstd { .. } => CompressionScheme::ZstdPerKernel,
            Compression::Unified { .. } => CompressionScheme::Unified,
        }
    }

    /// Scheme `unified` at [`DEFAULT_UNIFIED_LEVEL`].
    pub const fn unified() -> Self {
        Compression::Unified {
            level: DEFAULT_UNIFIED_LEVEL,
        }
    }

    /// Whether the blob region holds one `u32` frame count and a size prefix per frame.
    fn prefixed(&self) -> bool {
        matches!(self, Compression::Zstd { .. })
    }
}

/// Builds a `.kpack` archive; output depends only on the `add` calls and their order.
///
/// Kernels are stored as they arrive: with [`Compression::Zstd`] each one is compressed in
/// `add` and only the frame is kept; with [`Compression::None`] the writer keeps the bytes,
/// borrowing them when given a slice (`&'a [u8]`) and taking ownership of a `Vec<u8>`.
/// With [`Compression::Unified`] the kernels of one binary key are gathered and coded together
/// when another key comes or the archive is written ([`crate::unified`]), so adding a
/// binary's targets one after another gives the smallest archive.
/// Entries whose stored bytes are identical share one blob (one ordinal). To keep only the
/// TOC in memory, stream the blobs to the file with [`ArchiveFileWriter`].
pub struct ArchiveWriter<'a> {
    group_name: String,
    gfx_arch_family: String,
    compression: Compression,
    explicit_arches: Option<Vec<String>>,
    /// Distinct entry arches in first-insertion order.
    entry_arches: Vec<String>,
    binaries: Vec<PendingBinary>,
    binary_index: HashMap<String, usize>,
    /// Per ordinal: the raw kernel (`none`) or its zstd frame.
    blobs: Blobs<'a>,
    /// (hash, length) of stored bytes (of the kernel for `unified`) → ordinals with that key;
    /// equality is confirmed bytewise.
    dedupe: HashMap<ContentKey, Vec<u32>>,
    /// `unified`: the coder, each written frame's reference, and the group being gathered.
    unified: Option<Unified<'a>>,
}

/// One code object given to [`ArchiveWriter::add_group`]: stored for `arch` under each of
/// `keys`, borrowed for the call only.
#[derive(Clone, Copy, Debug)]
pub struct GroupMember<'d> {
    /// The binary keys it is stored under (one entry each).
    pub keys: &'d [String],
    /// Its target.
    pub arch: &'d str,
    /// The code object.
    pub data: &'d [u8],
}

struct PendingBinary {
    name: String,
    arches: Vec<(String, PendingEntry)>,
}

struct PendingEntry {
    ordinal: u32,
    original_size: u64,
    digest: u64,
    metadata: Vec<(String, String)>,
}

impl<'a> ArchiveWriter<'a> {
    /// An empty writer; `group_name` and `gfx_arch_family` go into the TOC as they are.
    pub fn new(
        group_name: impl Into<String>,
        gfx_arch_family: impl Into<String>,
        compression: Compression,
    ) -> Self {
        ArchiveWriter {
            group_name: group_name.into(),
            gfx_arch_family: gfx_arch_family.into(),
            compression,
            explicit_arches: None,
            entry_arches: Vec::new(),
            binaries: Vec::new(),
            binary_index: HashMap::new(),
            blobs: Blobs::Memory(Vec::new()),
            dedupe: HashMap::new(),
            unified: match compression {
                Compression::Unified { level } => Some(Unified::new(level)),
                _ => None,
            },
        }
    }

    /// Sets `gfx_arches` explicitly instead of deriving it from the entries. It may list arches
    /// without entries; writing fails unless it lists every entry's arch.
    pub fn set_gfx_arches(&mut self, arches: Vec<String>) -> Result<(), ArchiveError> {
        if let Some(i) = first_repeat(&arches, |a| a) {
            return Err(ArchiveError::InvalidArgument(format!(
                "gfx_arches lists {:?} twice",
                arches[i]
            )));
        }
        self.explicit_arches = Some(arches);
        Ok(())
    }

    /// Replaces the `gfx_arch_family` given to [`ArchiveWriter::new`], e.g. once the entries
    /// show the archive holds a single arch.
    pub fn set_gfx_arch_family(&mut self, family: impl Into<String>) {
        self.gfx_arch_family = family.into();
    }

    /// The `gfx_arches` the archive will declare: as set by [`ArchiveWriter::set_gfx_arches`],
    /// else the entries' distinct arches in first-insertion order.
    pub fn gfx_arches(&self) -> &[String] {
        self.explicit_arches
            .as_deref()
            .unwrap_or(&self.entry_arches)
    }

    /// Adds the kernel `data` for `(binary_key, arch)`. `\` in the key becomes `/`.
    ///
    /// Use [`crate::binary_key`] to build keys the runtime can find. `metadata` is written as
    /// the entry's `metadata` map, in order, and omitted when empty.
    pub fn add(
        &mut self,
        binary_key: &str,
        arch: &str,
        data: impl Into<Cow<'a, [u8]>>,
        metadata: &[(String, String)],
    ) -> Result<(), ArchiveError> {
        self.check_new_entry(binary_key, arch, metadata)?;
        let kernel = KernelCompressor::on_this_thread(self.compression, |c| c.prepare(data))?;
        self.add_prepared(binary_key, arch, kernel, metadata)
    }

    /// Like [`ArchiveWriter::add`], with the kernel already prepared (e.g. compressed on a
    /// worker thread) by a [`KernelCompressor`] of this writer's [`Compression`].
    pub fn add_prepared(
        &mut self,
        binary_key: &str,
        arch: &str,
        kernel: PreparedKernel<'a>,
        metadata: &[(String, String)],
    ) -> Result<(), ArchiveError> {
        self.add_prepared_under(&[binary_key], arch, kernel, metadata)
    }

    /// [`ArchiveWriter::add_prepared`] of `kernel` under each of `keys` in order (the
    /// wrappers that lead to one bundle), the same entries, its bytes stored and compared with
    /// those stored before once, not once per key: RCCL's one bundle has 38 wrappers and
    /// 130 MB code objects, and each comparison of a streamed archive reads the stored bytes
    /// back (31 GB read for one library). Nothing when `keys` is empty.
    pub fn add_prepared_under<K: AsRef<str>>(
        &mut self,
        keys: &[K],
        arch: &str,
        kernel: PreparedKernel<'a>,
        metadata: &[(String, String)],
    ) -> Result<(), ArchiveError> {
        let Some((first, others)) = keys.split_first() else {
            return Ok(());
        };
        if self.unified.is_some() {
            // A `unified` kernel's ordinal is provisional until its group is coded: each key
            // is interned as it comes.
            for key in keys {
                self.add_prepared_at(key.as_ref(), arch, kernel.clone(), metadata)?;
            }
            return Ok(());
        }
        let content = (kernel.digest, kernel.original_size);
        let ordinal = self.add_prepared_at(first.as_ref(), arch, kernel, metadata)?;
        self.add_stored_under(others, arch, ordinal, content, metadata)
    }

    /// Adds an entry for `arch` under each of `keys` to the stored blob `ordinal` of
    /// `content`.
    fn add_stored_under<K: AsRef<str>>(
        &mut self,
        keys: &[K],
        arch: &str,
        ordinal: u32,
        content: ContentKey,
        metadata: &[(String, String)],
    ) -> Result<(), ArchiveError> {
        for key in keys {
            let slot = self.check_new_entry(key.as_ref(), arch, metadata)?;
            self.push_entry(
                slot,
                normalise_key(key.as_ref()),
                arch,
                ordinal,
                content,
                metadata,
            );
        }
        Ok(())
    }

    /// [`ArchiveWriter::add_prepared`], giving the ordinal of the stored kernel.
    fn add_prepared_at(
        &mut self,
        binary_key: &str,
        arch: &str,
        kernel: PreparedKernel<'a>,
        metadata: &[(String, String)],
    ) -> Result<u32, ArchiveError> {
        let slot = self.check_new_entry(binary_key, arch, metadata)?;
        if kernel.compression != self.compression {
            return Err(ArchiveError::InvalidArgument(format!(
                "kernel prepared for {:?}, the archive uses {:?}",
                kernel.compression, self.compression
            )));
        }
        let key = normalise_key(binary_key);
        let (original_size, digest) = (kernel.original_size, kernel.digest);
        let ordinal = if self.unified.is_some() {
            self.intern_unified(&key, arch, kernel.stored, (digest, original_size))?
        } else {
            self.intern(kernel.stored, (digest, original_size))?
        };
        self.push_entry(slot, key, arch, ordinal, (digest, original_size), metadata);
        Ok(ordinal)
    }

    /// Adds the code objects of one group (a bundle's, say) at once: each under each of its
    /// keys, in order, as [`ArchiveWriter::add`] of each and then
    /// [`ArchiveWriter::end_group`] would. With `unified` the group is coded before this
    /// returns, its compressions in parallel ([`crate::unified`]), and the bytes written are
    /// the same as those calls' when the members share one key; nothing of the members is
    /// kept, so they may be borrowed from a buffer that lives only for the call (a decoded
    /// bundle) and need no copy. The other schemes store each member as
    /// [`ArchiveWriter::add`] does.
    pub fn add_group(&mut self, members: &[GroupMember<'_>]) -> Result<(), ArchiveError> {
        if self.unified.is_none() {
            // Compressed once per member, however many keys (wrappers) share it: RCCL's one
            // bundle has 38 wrappers and 130 MB code objects.
            for m in members {
                let Some(first) = m.keys.first() else {
                    continue;
                };
                self.check_new_entry(first, m.arch, &[])?;
                // Compressed from the borrowed bytes; only a kernel stored as it is is copied.
                let kernel =
                    KernelCompressor::on_this_thread(self.compression, |c| c.prepare(m.data))?
                        .into_owned();
                self.add_prepared_under(m.keys, m.arch, kernel, &[])?;
            }
            return Ok(());
        }
        self.add_group_unified(members)
    }

    /// Records the entry `(key, arch)` (new: see `check_new_entry`, whose `slot` it takes).
    fn push_entry(
        &mut self,
        slot: Option<usize>,
        key: Cow<'_, str>,
        arch: &str,
        ordinal: u32,
        (digest, original_size): ContentKey,
        metadata: &[(String, String)],
    ) {
        let b = match slot {
            Some(b) => b,
            None => {
                let name = key.into_owned();
                self.binary_index.insert(name.clone(), self.binaries.len());
                self.binaries.push(PendingBinary {
                    name,
                    arches: Vec::new(),
                });
                self.binaries.len() - 1
            }
        };
        let entry = PendingEntry {
            ordinal,
            original_size,
            digest,
            metadata: metadata.to_vec(),
        };
        self.binaries[b].arches.push((arch.to_owned(), entry));
        if !self.entry_arches.iter().any(|a| a == arch) {
            self.entry_arches.push(arch.to_owned());
        }
    }

    /// Refuses a `(binary_key, arch)` already added and repeated metadata keys; returns the
    /// binary's slot when the key is known.
    fn check_new_entry(
        &self,
        binary_key: &str,
        arch: &str,
        metadata: &[(String, String)],
    ) -> Result<Option<usize>, ArchiveError> {
        let key = normalise_key(binary_key);
        let slot = self.binary_index.get(key.as_ref()).copied();
        if slot.is_some_and(|b| self.binaries[b].arches.iter().any(|(a, _)| a == arch)) {
            return Err(ArchiveError::DuplicateEntry {
                binary: key.into_owned(),
                arch: arch.to_owned(),
            });
        }
        if let Some(i) = first_repeat(metadata, |(k, _)| k) {
            return Err(ArchiveError::InvalidArgument(format!(
                "metadata key {:?} given twice",
                metadata[i].0
            )));
        }
        Ok(slot)
    }

    /// `unified`: codes the kernels gathered for the current binary key now, as the next
    /// key or the end of the archive would, so that they are not held until then. The bytes
    /// written are the same when no more kernels of that key follow (a later one starts a
    /// group of its own). Nothing to do for the other schemes.
    pub fn end_group(&mut self) -> Result<(), ArchiveError> {
        self.code_group()
    }

    /// Number of `(binary, arch)` entries added.
    pub fn entry_count(&self) -> usize {
        self.binaries.iter().map(|b| b.arches.len()).sum()
    }

    /// Number of distinct stored blobs (entries with identical bytes share one).
    pub fn blob_count(&self) -> usize {
        self.blobs.count() + self.unified.as_ref().map_or(0, |u| u.group.len())
    }

    /// The ordinal of `stored`: an existing blob with the same bytes, or a new one.
    fn intern(&mut self, stored: Cow<'a, [u8]>, key: ContentKey) -> Result<u32, ArchiveError> {
        if let Some(candidates) = self.dedupe.get(&key) {
            for &o in candidates {
                if self.blobs.holds(o, &stored)? {
                    return Ok(o);
                }
            }
        }
        let ordinal = self.next_ordinal()?;
        self.blobs.push(stored, self.compression)?;
        self.dedupe.entry(key).or_default().push(ordinal);
        Ok(ordinal)
    }

    /// Keeps both every ordinal and the frame count in u32.
    fn next_ordinal(&self) -> Result<u32, ArchiveError> {
        let count = self.blob_count();
        if count >= u32::MAX as usize {
            return Err(ArchiveError::InvalidArgument(
                "too many distinct kernels".into(),
            ));
        }
        Ok(count as u32)
    }

    /// Writes the archive to `w` in one forward pass; returns the number of bytes written.
    pub fn write_to<W: Write>(&mut self, mut w: W) -> Result<u64, ArchiveError> {
        self.code_group()?;
        let Blobs::Memory(blobs) = &self.blobs else {
            return Err(ArchiveError::InvalidArgument(
                "the blobs of a streamed archive are already in its file".into(),
            ));
        };
        let region_len = self.region_len();
        let toc_offset = DATA_START + region_len;
        // Everything that can fail for a reason other than I/O fails before the first byte.
        let toc = self.toc(region_len)?;
        // `intern` keeps the blob count below u32::MAX.
        let count = blobs.len() as u32;
        let io = |source| ArchiveError::Io {
            context: "writing archive",
            source,
        };
        w.write_all(&self.header(toc_offset)).map_err(io)?;
        let zstd = self.compression.prefixed();
        if zstd {
            w.write_all(&count.to_le_bytes()).map_err(io)?;
        }
        for blob in blobs {
            if zstd {
                // Frame lengths were checked against u32 in `compress`.
                w.write_all(&(blob.len() as u32).to_le_bytes())
                    .map_err(io)?;
            }
            w.write_all(blob).map_err(io)?;
        }
        w.write_all(&toc).map_err(io)?;
        w.flush().map_err(io)?;
        Ok(toc_offset + toc.len() as u64)
    }

    /// Writes the archive to `path` atomically ([`kpack_fs::write_atomic`]): into a temporary
    /// file in the same directory, synced, then renamed over `path`. On failure `path` is
    /// untouched and the temporary file removed. Returns the archive's size.
    pub fn write_file(&mut self, path: impl AsRef<Path>) -> Result<u64, ArchiveError> {
        let path = path.as_ref();
        if path.file_name().is_none() {
            return Err(ArchiveError::InvalidArgument(
                "output path has no file name".to_owned(),
            ));
        }
        kpack_fs::write_atomic(
            path,
            |file| {
                let io = |context| move |source| ArchiveError::Io { context, source };
                let mut out = BufWriter::new(file);
                let len = self.write_to(&mut out)?;
                let file = out
                    .into_inner()
                    .map_err(|e| io("writing archive")(e.into_error()))?;
                file.sync_all().map_err(io("syncing archive"))?;
                Ok(len)
            },
            |at, source| ArchiveError::Io {
                context: if at == path {
                    "renaming temporary archive into place"
                } else {
                    "creating temporary archive file"
                },
                source,
            },
        )
        .map_err(|e| e.in_file(Some(path)))
    }
}

/// The dedupe key of a kernel: its digest ([`crate::digest::content_digest`]) and size, which the writer
/// has anyway (hashing it again for the map cost 1 % of a split), confirmed bytewise on a
/// match.
type ContentKey = (u64, u64);
