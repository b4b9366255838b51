use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::coder::{Coded, Coder, GROUP_BUDGET};
use crate::digest::{self, content_digest};
use crate::msgpack::Encoder;
use crate::toc::FRAME_SIZES_KEY;
use crate::{
    Archive, ArchiveError, CompressionScheme, DATA_START, HEADER_LEN, MAGIC, MAX_ORIGINAL_SIZE,
    first_repeat, normalise_key,
};

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
    compressor: KernelCompressor,
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

/// The state of a `unified` writer.
struct Unified<'a> {
    coder: Coder,
    /// Per written ordinal, the ordinal of its reference frame.
    refs: Vec<Option<u32>>,
    /// The binary key whose kernels are being gathered; they are coded together (one
    /// [`Coder::code_group`]) when another key comes, the group outgrows [`GROUP_BUDGET`] or
    /// the archive is written. Until then their entries hold provisional ordinals, from the
    /// count of written frames on, in arrival order.
    group_binary: String,
    group: Vec<(String, Cow<'a, [u8]>, ContentKey)>,
}

/// Where the stored blobs are, per ordinal.
enum Blobs<'a> {
    /// Kept in memory until [`ArchiveWriter::write_to`].
    Memory(Vec<Cow<'a, [u8]>>),
    /// Already written to `out`, laid out as in the final file: per ordinal, the absolute
    /// offset and length of the stored bytes (after the zstd size prefix).
    Streamed {
        out: BufWriter<File>,
        spans: Vec<(u64, u64)>,
        end: u64,
    },
}

/// A kernel in the form an archive stores it (compressed or not), prepared off the writer's
/// thread by a [`KernelCompressor`] and added with [`ArchiveWriter::add_prepared`] or
/// [`ArchiveFileWriter::add_prepared`].
#[derive(Clone)]
pub struct PreparedKernel<'a> {
    stored: Cow<'a, [u8]>,
    original_size: u64,
    /// The code object's digest ([`crate::digest`]), whatever form `stored` is in.
    digest: u64,
    compression: Compression,
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

impl PreparedKernel<'_> {
    /// Length of the stored bytes.
    pub fn stored_len(&self) -> usize {
        self.stored.len()
    }

    /// The same kernel owning its stored bytes (copied only if borrowed: a `none` kernel).
    pub fn into_owned(self) -> PreparedKernel<'static> {
        PreparedKernel {
            stored: Cow::Owned(self.stored.into_owned()),
            original_size: self.original_size,
            digest: self.digest,
            compression: self.compression,
        }
    }
}

impl<'a> PreparedKernel<'a> {
    /// The entry `(binary, arch)` of `archive` as a writer of `compression` stores it, taken
    /// as the archive stores it, without decoding, when that is already the form
    /// `compression` stores: a `none` kernel for `none`, a zstd frame for `zstd` at the
    /// default level (frames record no level: they are kept as the archive's writer made
    /// them, at the default unless asked otherwise; another level asked for codes them
    /// again). `None` otherwise (and always for `unified`, whose frames depend on the other
    /// frames of their archive, and for archives without digests, whose copies could not be
    /// proven): the kernel must be decoded and prepared again.
    /// The entry is read and checked against its digest first ([`Archive::get`]), so a copy
    /// carries only what the source's writer was given.
    pub fn stored_in(
        archive: &'a Archive,
        binary: &str,
        arch: &str,
        compression: Compression,
    ) -> Result<Option<PreparedKernel<'a>>, ArchiveError> {
        let copies = match compression {
            Compression::None => archive.compression_scheme() == CompressionScheme::None,
            Compression::Zstd { level } => {
                level == DEFAULT_ZSTD_LEVEL
                    && archive.compression_scheme() == CompressionScheme::ZstdPerKernel
            }
            Compression::Unified { .. } => false,
        };
        let Some((info, digest)) = archive
            .info(binary, arch)
            .and_then(|info| Some((info, info.digest?)))
            .filter(|_| copies)
        else {
            return Ok(None);
        };
        archive.get(binary, arch)?;
        Ok(Some(PreparedKernel {
            stored: Cow::Borrowed(archive.stored_bytes(binary, arch)?),
            original_size: info.original_size,
            digest,
            compression,
        }))
    }
}

/// Compresses kernels as an archive of a given [`Compression`] stores them; keeps one zstd
/// context, so use one per thread. For `unified` it only checks the size: the coding depends
/// on the kernels stored before, so the writer does it as kernels are added.
pub struct KernelCompressor {
    compression: Compression,
    context: Option<zstd::bulk::Compressor<'static>>,
    /// Where `context` codes a kernel before its frame is copied out.
    scratch: Vec<u8>,
}

impl KernelCompressor {
    /// A compressor for archives of `compression` (its zstd context is made on first use).
    pub fn new(compression: Compression) -> Self {
        KernelCompressor {
            compression,
            context: None,
            scratch: Vec::new(),
        }
    }

    /// The kernel `data` as an archive stores it: its zstd frame, or the bytes themselves.
    pub fn prepare<'a>(
        &mut self,
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<PreparedKernel<'a>, ArchiveError> {
        let data = data.into();
        let original_size = data.len() as u64;
        if original_size > MAX_ORIGINAL_SIZE {
            return Err(ArchiveError::InvalidArgument(format!(
                "kernel of {original_size} bytes exceeds the {MAX_ORIGINAL_SIZE}-byte limit"
            )));
        }
        let digest = content_digest(&data);
        let stored = match self.compression {
            Compression::None | Compression::Unified { .. } => data,
            Compression::Zstd { level } => Cow::Owned(self.compress(&data, level)?),
        };
        Ok(PreparedKernel {
            stored,
            original_size,
            digest,
            compression: self.compression,
        })
    }

    fn compress(&mut self, data: &[u8], level: i32) -> Result<Vec<u8>, ArchiveError> {
        let io = |source| ArchiveError::Io {
            context: "zstd compression",
            source,
        };
        let compressor = match &mut self.context {
            Some(c) => c,
            None => {
                let mut c = zstd::bulk::Compressor::new(level).map_err(io)?;
                // Every zstd decoder checks this, the reference readers' included.
                c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
                    .map_err(io)?;
                self.context.insert(c)
            }
        };
        // The bulk API writes the content size into the frame header, which the reference's
        // Python reader needs. It codes into `scratch`, sized for the worst case once, and the
        // frame is copied out at its size: a new worst-case buffer for every kernel cost a
        // page fault and a zeroed page per 4 KiB of kernel, more than the copy. A kernel too
        // large for the scratch gets a buffer of its own, whose pages beyond the frame are
        // never touched: kept as scratch, each writer of a transform would hold a buffer the
        // size of its largest kernel (RCCL's are 200 MB, one writer per target).
        if data.len() > SCRATCH_MAX {
            let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
            compressor
                .compress_to_buffer(data, &mut frame)
                .map_err(io)?;
            frame.shrink_to_fit();
            return checked_frame(frame);
        }
        self.scratch.clear();
        self.scratch
            .reserve(zstd::zstd_safe::compress_bound(data.len()));
        compressor
            .compress_to_buffer(data, &mut self.scratch)
            .map_err(io)?;
        checked_frame(self.scratch.clone())
    }
}

/// The most bytes of kernel [`KernelCompressor`] codes into its reused scratch buffer.
const SCRATCH_MAX: usize = 16 << 20;

/// `frame`, if the format's u32 frame size can hold it.
fn checked_frame(frame: Vec<u8>) -> Result<Vec<u8>, ArchiveError> {
    if u32::try_from(frame.len()).is_err() {
        return Err(ArchiveError::InvalidArgument(format!(
            "zstd frame of {} bytes exceeds the format's u32 frame size",
            frame.len()
        )));
    }
    Ok(frame)
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
            compressor: KernelCompressor::new(compression),
            explicit_arches: None,
            entry_arches: Vec::new(),
            binaries: Vec::new(),
            binary_index: HashMap::new(),
            blobs: Blobs::Memory(Vec::new()),
            dedupe: HashMap::new(),
            unified: match compression {
                Compression::Unified { level } => Some(Unified {
                    coder: Coder::new(level),
                    refs: Vec::new(),
                    group_binary: String::new(),
                    group: Vec::new(),
                }),
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
        let kernel = self.compressor.prepare(data)?;
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
        self.add_prepared_at(binary_key, arch, kernel, metadata)
            .map(|_| ())
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
                let Some((first, others)) = m.keys.split_first() else {
                    continue;
                };
                self.check_new_entry(first, m.arch, &[])?;
                // Compressed from the borrowed bytes; only a kernel stored as it is is copied.
                let kernel = self.compressor.prepare(m.data)?.into_owned();
                let content = (kernel.digest, kernel.original_size);
                let ordinal = self.add_prepared_at(first, m.arch, kernel, &[])?;
                for key in others {
                    let slot = self.check_new_entry(key, m.arch, &[])?;
                    self.push_entry(slot, normalise_key(key), m.arch, ordinal, content, &[]);
                }
            }
            return Ok(());
        }
        self.code_group()?;
        let mut added: Vec<(Cow<'_, str>, &str)> = Vec::new();
        for m in members {
            for key in m.keys {
                self.check_new_entry(key, m.arch, &[])?;
                let key = normalise_key(key);
                if added.iter().any(|(k, a)| *k == key && *a == m.arch) {
                    return Err(ArchiveError::DuplicateEntry {
                        binary: key.into_owned(),
                        arch: m.arch.to_owned(),
                    });
                }
                added.push((key, m.arch));
            }
        }
        // Each member's ordinal: a written frame or an earlier member with the same bytes,
        // else the next distinct member to code (`Err(index)` into `distinct`).
        let mut distinct: Vec<(&str, &[u8], ContentKey)> = Vec::new();
        let mut placed: Vec<(Result<u32, usize>, ContentKey)> = Vec::with_capacity(members.len());
        for m in members {
            let kernel = self.compressor.prepare(m.data)?;
            let key = (kernel.digest, kernel.original_size);
            let place = match self.written_with(key, m.data)? {
                Some(o) => Ok(o),
                None => match distinct
                    .iter()
                    .position(|(_, d, k)| *k == key && *d == m.data)
                {
                    Some(d) => Err(d),
                    None => {
                        distinct.push((m.arch, m.data, key));
                        Err(distinct.len() - 1)
                    }
                },
            };
            placed.push((place, key));
        }
        let mut ordinals = Vec::with_capacity(distinct.len());
        let mut part_start = 0;
        let mut part_bytes = 0;
        for (i, (_, data, _)) in distinct.iter().enumerate() {
            if part_bytes + data.len() > GROUP_BUDGET && i > part_start {
                ordinals.extend(self.store_coded(&distinct[part_start..i])?);
                (part_start, part_bytes) = (i, 0);
            }
            part_bytes += data.len();
        }
        ordinals.extend(self.store_coded(&distinct[part_start..])?);
        for (m, (place, key)) in members.iter().zip(placed) {
            let ordinal = place.unwrap_or_else(|d| ordinals[d]);
            for binary_key in m.keys {
                let slot = self.check_new_entry(binary_key, m.arch, &[])?;
                let binary_key = normalise_key(binary_key);
                self.push_entry(slot, binary_key, m.arch, ordinal, key, &[]);
            }
        }
        Ok(())
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

    /// `unified`: the ordinal of the kernel `data`: an existing frame or gathered kernel with
    /// the same bytes, or a provisional one in the group being gathered.
    fn intern_unified(
        &mut self,
        binary: &str,
        arch: &str,
        data: Cow<'a, [u8]>,
        key: ContentKey,
    ) -> Result<u32, ArchiveError> {
        if self
            .unified
            .as_ref()
            .is_some_and(|u| u.group_binary != binary)
        {
            self.code_group()?;
        }
        if let Some(o) = self.written_with(key, &data)? {
            return Ok(o);
        }
        let Some(u) = &self.unified else {
            unreachable!("intern_unified serves unified writers");
        };
        if let Some(m) = u.group.iter().position(|(_, d, k)| *k == key && *d == data) {
            return Ok((self.blobs.count() + m) as u32);
        }
        let gathered: usize = u.group.iter().map(|(_, d, _)| d.len()).sum();
        if gathered + data.len() > GROUP_BUDGET {
            self.code_group()?;
        }
        let ordinal = self.next_ordinal()?;
        let Some(u) = &mut self.unified else {
            unreachable!("intern_unified serves unified writers");
        };
        if u.group.is_empty() {
            binary.clone_into(&mut u.group_binary);
        }
        u.group.push((arch.to_owned(), data, key));
        Ok(ordinal)
    }

    /// `unified`: the written frame holding `data` (whose content key is `key`), if any.
    fn written_with(&mut self, key: ContentKey, data: &[u8]) -> Result<Option<u32>, ArchiveError> {
        let (Some(candidates), Some(u)) = (self.dedupe.get(&key), &self.unified) else {
            return Ok(None);
        };
        for &o in candidates {
            if decode_unified(&mut self.blobs, &u.refs, o)? == data {
                return Ok(Some(o));
            }
        }
        Ok(None)
    }

    /// `unified`: codes the gathered group ([`ArchiveWriter::store_coded`]) and gives its
    /// entries their final ordinals.
    fn code_group(&mut self) -> Result<(), ArchiveError> {
        let Some(u) = &mut self.unified else {
            return Ok(());
        };
        if u.group.is_empty() {
            return Ok(());
        }
        let group = std::mem::take(&mut u.group);
        let group_binary = std::mem::take(&mut u.group_binary);
        let first = self.blobs.count() as u32;
        let members: Vec<(&str, &[u8], ContentKey)> = group
            .iter()
            .map(|(a, d, k)| (a.as_str(), &d[..], *k))
            .collect();
        let final_ordinal = self.store_coded(&members)?;
        if let Some(&b) = self.binary_index.get(&group_binary) {
            for (_, entry) in &mut self.binaries[b].arches {
                if entry.ordinal >= first {
                    entry.ordinal = final_ordinal[(entry.ordinal - first) as usize];
                }
            }
        }
        Ok(())
    }

    /// `unified`: codes `members` (`(arch, kernel, content key)`, distinct, none written
    /// yet) as one group ([`Coder::code_group`]) and writes their frames; returns each
    /// member's ordinal.
    fn store_coded(
        &mut self,
        members: &[(&str, &[u8], ContentKey)],
    ) -> Result<Vec<u32>, ArchiveError> {
        let Some(u) = &mut self.unified else {
            unreachable!("store_coded serves unified writers");
        };
        if members.is_empty() {
            return Ok(Vec::new());
        }
        if self.blobs.count() + members.len() >= u32::MAX as usize {
            return Err(ArchiveError::InvalidArgument(
                "too many distinct kernels".into(),
            ));
        }
        let first = self.blobs.count() as u32;
        let kernels: Vec<(&str, &[u8])> = members.iter().map(|&(a, d, _)| (a, d)).collect();
        let blobs = &mut self.blobs;
        let refs = &u.refs;
        let coded = u
            .coder
            .code_group(first, &kernels, |o| decode_unified(blobs, refs, o))?;
        let mut ordinals = vec![0u32; members.len()];
        for (
            pos,
            Coded {
                member,
                frame,
                reference,
            },
        ) in coded.into_iter().enumerate()
        {
            let ordinal = first + pos as u32;
            ordinals[member] = ordinal;
            u.refs.push(reference);
            self.blobs.push(Cow::Owned(frame), self.compression)?;
            self.dedupe
                .entry(members[member].2)
                .or_default()
                .push(ordinal);
        }
        Ok(ordinals)
    }

    /// [`ArchiveWriter::gfx_arches`], checked to list every entry's arch.
    fn checked_gfx_arches(&self) -> Result<&[String], ArchiveError> {
        let arches = self.gfx_arches();
        match self.entry_arches.iter().find(|a| !arches.contains(a)) {
            Some(a) => Err(ArchiveError::InvalidArgument(format!(
                "entries use arch {a:?}, which the gfx_arches set by set_gfx_arches omits"
            ))),
            None => Ok(arches),
        }
    }

    /// Length of the blob region.
    fn region_len(&self) -> u64 {
        let payload: u64 = (0..self.blobs.count()).map(|o| self.blobs.len(o)).sum();
        if self.compression.prefixed() {
            4 + 4 * self.blobs.count() as u64 + payload
        } else {
            payload
        }
    }

    /// The TOC's msgpack, keys in the reference writer's order, then the digests' keys
    /// ([`crate::digest`]): each entry's last, the TOC's last of all.
    fn toc(&self, region_len: u64) -> Result<Vec<u8>, ArchiveError> {
        let gfx_arches = self.checked_gfx_arches()?;
        let mut e = Encoder::default();
        let layout_keys = match self.compression {
            Compression::None => 1,           // blobs
            Compression::Zstd { .. } => 3,    // zstd_offset, zstd_size, zstd_frame_sizes
            Compression::Unified { .. } => 1, // frames
        };
        e.map(7 + layout_keys)?;
        e.str("format_version")?;
        e.uint(self.compression.scheme().format_version().into());
        e.str("group_name")?;
        e.str(&self.group_name)?;
        e.str("gfx_arch_family")?;
        e.str(&self.gfx_arch_family)?;
        e.str("gfx_arches")?;
        e.array(gfx_arches.len())?;
        for arch in gfx_arches {
            e.str(arch)?;
        }
        e.str("toc")?;
        e.map(self.binaries.len())?;
        for b in &self.binaries {
            e.str(&b.name)?;
            e.map(b.arches.len())?;
            for (arch, entry) in &b.arches {
                e.str(arch)?;
                e.map(if entry.metadata.is_empty() { 4 } else { 5 })?;
                e.str("type")?;
                e.str("hsaco")?;
                e.str("ordinal")?;
                e.uint(entry.ordinal.into());
                e.str("original_size")?;
                e.uint(entry.original_size);
                if !entry.metadata.is_empty() {
                    e.str("metadata")?;
                    e.map(entry.metadata.len())?;
                    for (k, v) in &entry.metadata {
                        e.str(k)?;
                        e.str(v)?;
                    }
                }
                e.str(digest::ENTRY_KEY)?;
                e.uint(entry.digest);
            }
        }
        e.str("compression_scheme")?;
        e.str(self.compression.scheme().name())?;
        match self.compression {
            Compression::None => {
                e.str("blobs")?;
                e.array(self.blobs.count())?;
                let mut offset = DATA_START;
                for o in 0..self.blobs.count() {
                    let size = self.blobs.len(o);
                    e.map(2)?;
                    e.str("offset")?;
                    e.uint(offset);
                    e.str("size")?;
                    e.uint(size);
                    offset += size;
                }
            }
            Compression::Zstd { .. } => {
                e.str("zstd_offset")?;
                e.uint(DATA_START);
                e.str("zstd_size")?;
                e.uint(region_len);
                let sizes: Vec<u8> = (0..self.blobs.count())
                    .flat_map(|o| (self.blobs.len(o) as u32).to_le_bytes())
                    .collect();
                e.str(FRAME_SIZES_KEY)?;
                e.bin(&sizes)?;
            }
            Compression::Unified { .. } => {
                let refs = self.unified.as_ref().map_or(&[][..], |u| &u.refs[..]);
                e.str("frames")?;
                e.array(self.blobs.count())?;
                let mut offset = DATA_START;
                for (o, reference) in refs.iter().enumerate() {
                    let size = self.blobs.len(o);
                    e.map(if reference.is_some() { 3 } else { 2 })?;
                    e.str("offset")?;
                    e.uint(offset);
                    e.str("size")?;
                    e.uint(size);
                    if let Some(r) = reference {
                        e.str("ref")?;
                        e.uint((*r).into());
                    }
                    offset += size;
                }
            }
        }
        let mut toc = e.into_bytes();
        digest::seal_toc(&self.header(DATA_START + region_len), &mut toc);
        Ok(toc)
    }

    /// The header with `toc_offset`, padded to [`DATA_START`].
    fn header(&self, toc_offset: u64) -> [u8; DATA_START as usize] {
        let mut header = [0u8; DATA_START as usize];
        let version = self.compression.scheme().format_version();
        header[0..4].copy_from_slice(&MAGIC);
        header[4..8].copy_from_slice(&version.to_le_bytes());
        header[8..HEADER_LEN].copy_from_slice(&toc_offset.to_le_bytes());
        header
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

/// `unified`: the kernel stored as `ordinal`, decoded (with its chain of references `refs`,
/// at most [`crate::unified::MAX_CHAIN`] frames).
fn decode_unified(
    blobs: &mut Blobs<'_>,
    refs: &[Option<u32>],
    ordinal: u32,
) -> Result<Vec<u8>, ArchiveError> {
    let base = match refs[ordinal as usize] {
        Some(r) => decode_unified(blobs, refs, r)?,
        None => Vec::new(),
    };
    let frame = blobs.read(ordinal)?;
    crate::reader::decode_frame(&frame, &base).map_err(|reason| ArchiveError::Io {
        context: "reading back a stored frame",
        source: std::io::Error::other(reason),
    })
}

/// The dedupe key of a kernel: its digest ([`content_digest`]) and size, which the writer
/// has anyway (hashing it again for the map cost 1 % of a split), confirmed bytewise on a
/// match.
type ContentKey = (u64, u64);

fn io_error(context: &'static str) -> impl Fn(std::io::Error) -> ArchiveError {
    move |source| ArchiveError::Io { context, source }
}

impl Blobs<'_> {
    fn count(&self) -> usize {
        match self {
            Blobs::Memory(blobs) => blobs.len(),
            Blobs::Streamed { spans, .. } => spans.len(),
        }
    }

    /// Length of the stored bytes of `ordinal`.
    fn len(&self, ordinal: usize) -> u64 {
        match self {
            Blobs::Memory(blobs) => blobs[ordinal].len() as u64,
            Blobs::Streamed { spans, .. } => spans[ordinal].1,
        }
    }

    /// Whether blob `ordinal` holds exactly `bytes` (a streamed blob is read back).
    fn holds(&mut self, ordinal: u32, bytes: &[u8]) -> Result<bool, ArchiveError> {
        if self.len(ordinal as usize) != bytes.len() as u64 {
            return Ok(false);
        }
        Ok(self.read(ordinal)? == bytes)
    }

    /// The stored bytes of `ordinal` (a streamed blob is read back).
    fn read(&mut self, ordinal: u32) -> Result<Cow<'_, [u8]>, ArchiveError> {
        match self {
            Blobs::Memory(blobs) => Ok(Cow::Borrowed(&blobs[ordinal as usize])),
            Blobs::Streamed { out, spans, .. } => {
                let (offset, len) = spans[ordinal as usize];
                let io = io_error("reading back a streamed blob");
                out.flush().map_err(&io)?;
                let mut stored = vec![0u8; len as usize];
                kpack_fs::read_exact_at(out.get_ref(), &mut stored, offset).map_err(&io)?;
                Ok(Cow::Owned(stored))
            }
        }
    }
}

impl<'a> Blobs<'a> {
    fn push(
        &mut self,
        stored: Cow<'a, [u8]>,
        compression: Compression,
    ) -> Result<(), ArchiveError> {
        match self {
            Blobs::Memory(blobs) => blobs.push(stored),
            Blobs::Streamed { out, spans, end } => {
                let io = io_error("writing archive");
                if compression.prefixed() {
                    // Frame lengths were checked against u32 in `compress`.
                    out.write_all(&(stored.len() as u32).to_le_bytes())
                        .map_err(&io)?;
                    *end += 4;
                }
                out.write_all(&stored).map_err(&io)?;
                spans.push((*end, stored.len() as u64));
                *end += stored.len() as u64;
            }
        }
        Ok(())
    }
}

/// An archive written straight to its file as kernels are added: only the TOC stays in
/// memory, so packing gigabytes of code objects costs the memory of one kernel.
///
/// The blobs go to a temporary file beside the final path, in the layout
/// [`ArchiveWriter::write_to`] produces (the bytes are identical for the same `add` calls);
/// [`ArchiveFileWriter::finish`] appends the TOC, fills in the header's `toc_offset` and the
/// zstd frame count, syncs, and renames the file into place. Dropped unfinished (an error, a
/// panic), it removes its temporary file: nothing ever appears at the final path half
/// written.
pub struct ArchiveFileWriter<'a> {
    writer: ArchiveWriter<'a>,
    path: PathBuf,
    /// The temporary file ([`kpack_fs::temp_file_beside`]), removed when dropped unpublished.
    tmp: Option<tempfile::TempPath>,
}

impl<'a> ArchiveFileWriter<'a> {
    /// Starts the archive that [`ArchiveFileWriter::finish`] will publish at `path`.
    pub fn create(
        path: impl Into<PathBuf>,
        group_name: impl Into<String>,
        gfx_arch_family: impl Into<String>,
        compression: Compression,
    ) -> Result<Self, ArchiveError> {
        let path = path.into();
        let (file, tmp) = kpack_fs::temp_file_beside(&path)
            .map_err(io_error("creating temporary archive file"))
            .map_err(|e| e.in_file(Some(&path)))?
            .into_parts();
        let mut this = ArchiveFileWriter {
            writer: ArchiveWriter::new(group_name, gfx_arch_family, compression),
            path,
            tmp: Some(tmp),
        };
        let mut out = BufWriter::with_capacity(1 << 20, file);
        // Placeholders for `toc_offset` and the frame count, filled in by `finish`.
        let mut start = DATA_START;
        let placeholder = out.write_all(&this.writer.header(0)).and_then(|()| {
            if compression.prefixed() {
                start += 4;
                out.write_all(&0u32.to_le_bytes())
            } else {
                Ok(())
            }
        });
        placeholder
            .map_err(io_error("writing archive"))
            .map_err(|e| e.in_file(Some(&this.path)))?;
        this.writer.blobs = Blobs::Streamed {
            out,
            spans: Vec::new(),
            end: start,
        };
        Ok(this)
    }

    /// [`ArchiveWriter::add`], the stored bytes going straight to the file.
    pub fn add(
        &mut self,
        binary_key: &str,
        arch: &str,
        data: impl Into<Cow<'a, [u8]>>,
        metadata: &[(String, String)],
    ) -> Result<(), ArchiveError> {
        let result = self.writer.add(binary_key, arch, data, metadata);
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// [`ArchiveWriter::add_prepared`], the stored bytes going straight to the file.
    pub fn add_prepared(
        &mut self,
        binary_key: &str,
        arch: &str,
        kernel: PreparedKernel<'a>,
        metadata: &[(String, String)],
    ) -> Result<(), ArchiveError> {
        let result = self.writer.add_prepared(binary_key, arch, kernel, metadata);
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// [`ArchiveWriter::add_group`], the frames going straight to the file.
    pub fn add_group(&mut self, members: &[GroupMember<'_>]) -> Result<(), ArchiveError> {
        let result = self.writer.add_group(members);
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// [`ArchiveWriter::end_group`], the frames going straight to the file.
    pub fn end_group(&mut self) -> Result<(), ArchiveError> {
        let result = self.writer.end_group();
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// Number of `(binary, arch)` entries added.
    pub fn entry_count(&self) -> usize {
        self.writer.entry_count()
    }

    /// [`ArchiveWriter::set_gfx_arches`].
    pub fn set_gfx_arches(&mut self, arches: Vec<String>) -> Result<(), ArchiveError> {
        let result = self.writer.set_gfx_arches(arches);
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    /// [`ArchiveWriter::gfx_arches`].
    pub fn gfx_arches(&self) -> &[String] {
        self.writer.gfx_arches()
    }

    /// [`ArchiveWriter::set_gfx_arch_family`].
    pub fn set_gfx_arch_family(&mut self, family: impl Into<String>) {
        self.writer.set_gfx_arch_family(family);
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the TOC, completes the header, syncs and renames the archive into place;
    /// returns its size.
    pub fn finish(mut self) -> Result<u64, ArchiveError> {
        let result = self.finish_inner();
        result.map_err(|e| e.in_file(Some(&self.path)))
    }

    fn finish_inner(&mut self) -> Result<u64, ArchiveError> {
        self.writer.code_group()?;
        let region_len = self.writer.region_len();
        let toc = self.writer.toc(region_len)?;
        let count = self.writer.blobs.count() as u32;
        let zstd = self.writer.compression.prefixed();
        let Blobs::Streamed { out, .. } = &mut self.writer.blobs else {
            unreachable!("an ArchiveFileWriter streams its blobs");
        };
        let io = io_error("writing archive");
        let toc_offset = DATA_START + region_len;
        out.write_all(&toc).map_err(&io)?;
        out.seek(SeekFrom::Start(8)).map_err(&io)?;
        out.write_all(&toc_offset.to_le_bytes()).map_err(&io)?;
        if zstd {
            out.seek(SeekFrom::Start(DATA_START)).map_err(&io)?;
            out.write_all(&count.to_le_bytes()).map_err(&io)?;
        }
        let Blobs::Streamed { out, .. } =
            std::mem::replace(&mut self.writer.blobs, Blobs::Memory(Vec::new()))
        else {
            unreachable!()
        };
        let file = out
            .into_inner()
            .map_err(|e| io_error("writing archive")(e.into_error()))?;
        file.sync_all().map_err(io_error("syncing archive"))?;
        drop(file);
        let tmp = self
            .tmp
            .take()
            .expect("an unfinished writer has its temporary file");
        kpack_fs::fault_point("atomic-written");
        tmp.persist(&self.path)
            .map_err(|e| io_error("renaming temporary archive into place")(e.error))?;
        Ok(toc_offset + toc.len() as u64)
    }
}
