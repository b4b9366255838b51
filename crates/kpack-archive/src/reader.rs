use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::digest::{ENTRY_KEY, content_digest};
use crate::msgpack::FieldError;
use crate::references::ReferenceCache;
use crate::toc::{Entry, Index, Stored, frame_ranges, region_error};
use crate::{
    ArchiveError, CompressionScheme, DATA_START, first_repeat, normalise_key, split_binary_key,
};

mod decode;
pub use decode::PIECES_ABOVE;
pub(crate) use decode::decode_frame;
use decode::{check_len, content_of, decode_in_pieces, decode_into, decode_to_vec};

/// Byte storage an [`Archive`] reads from: a memory map, a `Vec<u8>`, or anything byte-like.
type Backing = Box<dyn AsRef<[u8]> + Send + Sync>;

/// An open `.kpack` archive.
///
/// Opening parses the 16-byte header and the TOC, and for zstd archives reads the frame count;
/// no kernel bytes are read until [`Archive::get`]. The zstd frames are located from the TOC's
/// frame sizes, which kpack writes, or (an archive of another writer) by walking their size
/// prefixes on the first call that needs them. The archive is `Send + Sync`; `get` takes a
/// lock only to look up or keep a decoded `unified` reference frame ([`crate::references`]).
pub struct Archive {
    data: Data,
    path: Option<PathBuf>,
    index: Index,
    /// zstd: the frames, located once on first use.
    frames: OnceLock<FrameIndex>,
    /// `unified`: the decoded frames others are coded against, while in use.
    references: ReferenceCache,
    /// `unified`: per ordinal, whether another frame is coded against it; made on first use.
    referenced: OnceLock<Vec<bool>>,
}

/// Each zstd frame's range of the file, by ordinal; or why the region is malformed, as the
/// fields of the [`ArchiveError::BadLayout`] every use reports.
type FrameIndex = Result<Vec<Range<usize>>, (String, String)>;

/// What an [`Archive`] reads from: its file mapped, or bytes held some other way.
enum Data {
    Mapped(memmap2::Mmap),
    Held(Backing),
}

/// Opens an archive for reading. On Windows with `FILE_SHARE_READ | FILE_SHARE_DELETE` and
/// not `FILE_SHARE_WRITE` (std's default shares all three): other readers may open it, and a
/// package manager may rename it aside while it is mapped and put a new file at its path, as
/// Windows installers update a file in use (the map keeps the old bytes; Windows itself
/// refuses to delete or replace a file while a view of it is mapped), but no process may
/// write into it.
fn open_shared(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        use windows_sys::Win32::Storage::FileSystem::{FILE_SHARE_DELETE, FILE_SHARE_READ};
        options.share_mode(FILE_SHARE_READ | FILE_SHARE_DELETE);
    }
    options.open(path)
}

/// One TOC entry as the reader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryInfo<'a> {
    /// Index of the stored blob or frame; entries holding identical bytes may share one.
    pub ordinal: u32,
    /// The kernel's length in bytes.
    pub original_size: u64,
    /// Bytes the kernel takes in the file (the frame length for zstd, without its prefix).
    /// Locating zstd frames is deferred to first use; if the zstd region turns out malformed
    /// this is 0, and [`Archive::get`] and [`Archive::validate`] report the error.
    pub stored_size: u64,
    /// The entry's `metadata` map in file order; empty when absent.
    pub metadata: &'a [(String, String)],
    /// The XXH3-64 of the code object ([`crate::digest`]) that every read checks; `None` in
    /// archives written before digests existed.
    pub digest: Option<u64>,
}

impl Archive {
    /// Memory-maps and indexes the archive at `path`. Errors name the file.
    pub fn open(path: impl AsRef<Path>) -> Result<Archive, ArchiveError> {
        let path = path.as_ref();
        Self::open_inner(path).map_err(|e| e.in_file(Some(path)))
    }

    fn open_inner(path: &Path) -> Result<Archive, ArchiveError> {
        let io = |context| move |source| ArchiveError::Io { context, source };
        let mut file = open_shared(path).map_err(io("opening archive"))?;
        let len = file.metadata().map_err(io("reading archive size"))?.len();
        // Tiny files are read rather than mapped: an empty file cannot be mapped portably, and
        // the header parser still gives these their precise error.
        if len < DATA_START {
            let mut v = Vec::new();
            file.read_to_end(&mut v).map_err(io("reading archive"))?;
            let mut archive = Self::from_boxed(Box::new(v))?;
            archive.path = Some(path.to_owned());
            return Ok(archive);
        }
        #[allow(unsafe_code)]
        // SAFETY: the mapping is read-only and lives as long as the `Archive`. It is UB only
        // if another process truncates or rewrites the file while mapped. Archives are
        // immutable build outputs, and our writer replaces them by rename (a new inode), so
        // open mappings never observe its writes; same contract as the C runtime's FILE*.
        // On Windows the file is open without FILE_SHARE_WRITE ([`open_shared`]): no other
        // process can open it for writing while it is mapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io("mapping archive"))?;
        let index = Index::parse(&map)?;
        let archive = Archive {
            data: Data::Mapped(map),
            path: Some(path.to_owned()),
            index,
            frames: OnceLock::new(),
            references: ReferenceCache::default(),
            referenced: OnceLock::new(),
        };
        // Indexing read the TOC, and `unified` archives' frame headers, all over the file.
        archive.forget_pages();
        Ok(archive)
    }

    /// Indexes an archive held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Archive, ArchiveError> {
        Self::from_backing(bytes)
    }

    /// Indexes an archive held by any byte container (a `Vec`, an `Arc<[u8]>`, a map, ...).
    pub fn from_backing<B>(backing: B) -> Result<Archive, ArchiveError>
    where
        B: AsRef<[u8]> + Send + Sync + 'static,
    {
        Self::from_boxed(Box::new(backing))
    }

    fn from_boxed(data: Backing) -> Result<Archive, ArchiveError> {
        let index = Index::parse((*data).as_ref())?;
        Ok(Archive {
            data: Data::Held(data),
            path: None,
            index,
            frames: OnceLock::new(),
            references: ReferenceCache::default(),
            referenced: OnceLock::new(),
        })
    }

    /// The file this archive was opened from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The TOC's `group_name`.
    pub fn group_name(&self) -> &str {
        &self.index.group_name
    }

    /// The TOC's `gfx_arch_family`.
    pub fn gfx_arch_family(&self) -> &str {
        &self.index.gfx_arch_family
    }

    /// The archive's declared architectures, in TOC order (what the runtime matches on).
    pub fn gfx_arches(&self) -> &[String] {
        &self.index.gfx_arches
    }

    /// Whether the archive carries digests ([`crate::digest`]): its TOC was checked at open,
    /// and every read checks the entry's code object. Archives written before digests
    /// existed carry none and read unchecked.
    pub fn has_digests(&self) -> bool {
        self.index.digests
    }

    /// How the blob region stores kernels.
    pub fn compression_scheme(&self) -> CompressionScheme {
        self.index.scheme
    }

    /// Number of stored blobs or frames (less than the entry count when bytes were shared).
    pub fn blob_count(&self) -> usize {
        self.index.stored.count()
    }

    /// Binary keys in TOC order.
    pub fn binaries(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.index
            .binaries
            .iter()
            .map(|b| self.index.binary_name(b))
    }

    /// Binary keys in byte-wise sorted order, the order `kpack_get_binary` enumerates.
    pub fn binaries_sorted(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.index
            .sorted
            .iter()
            .map(|&i| self.index.binary_name(&self.index.binaries[i as usize]))
    }

    /// Every entry as `(binary, arch, info)`, binaries in TOC order, arches in TOC order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, EntryInfo<'_>)> + '_ {
        let ix = &self.index;
        ix.binaries.iter().flat_map(move |b| {
            ix.entries_of(b)
                .iter()
                .map(move |e| (ix.binary_name(b), ix.arch_name(e), self.info_of(e)))
        })
    }

    /// The entry for `(binary, arch)`. Like the Python reader, `\` in `binary` matches `/`.
    pub fn info(&self, binary: &str, arch: &str) -> Option<EntryInfo<'_>> {
        self.lookup(binary, arch).map(|(_, e)| self.info_of(e))
    }

    /// Whether the archive has an entry for `binary` and `arch`.
    pub fn contains(&self, binary: &str, arch: &str) -> bool {
        self.lookup(binary, arch).is_some()
    }

    /// The bytes the archive stores for `(binary, arch)`, not decoded: the kernel (`none`),
    /// its zstd frame without the size prefix (`zstd-per-kernel`), or its frame (`unified`,
    /// which may need its reference to decode).
    pub fn stored_bytes(&self, binary: &str, arch: &str) -> Result<&[u8], ArchiveError> {
        let (_, entry) = self.find(binary, arch)?;
        self.stored(entry)
    }

    /// The kernel for `(binary, arch)`: borrowed from the file for `none`, decoded for zstd.
    ///
    /// A zstd frame must decode to exactly `original_size` bytes, and a frame whose header
    /// records a different content size fails before anything is allocated. The first call on
    /// a zstd archive locates the frames, and fails with [`ErrorKind::InvalidFormat`] naming
    /// the byte offset if the region's size prefixes do not add up (damage, in an archive
    /// with digests).
    ///
    /// [`ErrorKind::InvalidFormat`]: crate::ErrorKind::InvalidFormat
    ///
    /// A `unified` entry coded against another frame decodes that frame (and its own
    /// reference) first: at most 3 frames per call ([`crate::unified`]).
    ///
    /// In an archive with digests the code object is checked against its entry's digest
    /// before it is returned, and any failure to decode is damage:
    /// [`ErrorKind::IntegrityCheckFailed`](crate::ErrorKind::IntegrityCheckFailed).
    pub fn get(&self, binary: &str, arch: &str) -> Result<Cow<'_, [u8]>, ArchiveError> {
        let (name, entry) = self.find(binary, arch)?;
        let stored = self.stored(entry)?;
        let data = match self.index.scheme {
            CompressionScheme::None => Cow::Borrowed(stored),
            CompressionScheme::ZstdPerKernel | CompressionScheme::Unified => {
                let decoded = match self.held_content(entry) {
                    Some(held) => held.map(|c| c.to_vec()),
                    None => self
                        .reference(entry)
                        .and_then(|r| decode_to_vec(stored, content_of(&r), entry.original_size)),
                };
                Cow::Owned(decoded.map_err(|reason| self.decode_error(name, arch, stored, reason))?)
            }
        };
        self.check(name, arch, entry, stored, &data)?;
        Ok(data)
    }

    /// [`Archive::get`] with the code object handed to `piece` in order as it is decoded,
    /// never held whole when it is a `zstd-per-kernel` frame over [`PIECES_ABOVE`] bytes
    /// decoded (a verify of librocprim-tests' archives read 217 MB code objects two at a
    /// time); gives its size. The checks are [`Archive::get`]'s, zstd's checksum and the
    /// entry's digest, and the digest is known only at the end: nothing made from the pieces
    /// may be used unless this returns `Ok`.
    pub fn get_in_pieces(
        &self,
        binary: &str,
        arch: &str,
        piece: &mut dyn FnMut(&[u8]),
    ) -> Result<u64, ArchiveError> {
        let (name, entry) = self.find(binary, arch)?;
        if self.index.scheme != CompressionScheme::ZstdPerKernel
            || entry.original_size <= PIECES_ABOVE
        {
            let data = self.get(binary, arch)?;
            piece(&data);
            return Ok(data.len() as u64);
        }
        let stored = self.stored(entry)?;
        let mut digest = crate::digest::content_digester();
        decode_in_pieces(stored, entry.original_size, &mut |bytes| {
            std::hash::Hasher::write(&mut digest, bytes);
            piece(bytes);
        })
        .map_err(|reason| self.decode_error(name, arch, stored, reason))?;
        self.check_digest(
            name,
            arch,
            entry,
            stored,
            std::hash::Hasher::finish(&digest),
        )?;
        Ok(entry.original_size)
    }

    /// [`Archive::get`] into the start of `out`, which must hold at least the entry's
    /// `original_size` ([`Archive::info`]); returns that size. zstd frames decode straight
    /// into `out`, so a caller that owns the destination (the C API's `malloc` buffer) avoids
    /// an intermediate copy. A buffer too short is [`ArchiveError::InvalidArgument`].
    pub fn get_into(
        &self,
        binary: &str,
        arch: &str,
        out: &mut [u8],
    ) -> Result<usize, ArchiveError> {
        let (name, entry) = self.find(binary, arch)?;
        // original_size was capped at open; it fits unless the host is 32-bit, and then no
        // buffer can hold it.
        let size = usize::try_from(entry.original_size).unwrap_or(usize::MAX);
        let Some(out) = out.get_mut(..size) else {
            let e = ArchiveError::InvalidArgument(format!(
                "a {}-byte buffer cannot hold the {} bytes of binary {name}, arch {arch}",
                out.len(),
                entry.original_size
            ));
            return Err(e.in_file(self.path()));
        };
        let stored = self.stored(entry)?;
        match self.index.scheme {
            CompressionScheme::None => out.copy_from_slice(stored),
            CompressionScheme::ZstdPerKernel | CompressionScheme::Unified => {
                match self.held_content(entry) {
                    Some(held) => held.map(|c| out.copy_from_slice(&c)),
                    None => self.reference(entry).and_then(|r| {
                        decode_into(stored, content_of(&r), entry.original_size, out)
                    }),
                }
                .map_err(|reason| self.decode_error(name, arch, stored, reason))?
            }
        }
        self.check(name, arch, entry, stored, out)?;
        Ok(size)
    }

    /// The decoded content of the frame `entry`'s frame is coded against (`unified` delta
    /// frames), else nothing.
    fn reference(&self, entry: &Entry) -> Result<Option<Arc<Vec<u8>>>, String> {
        let Stored::Unified(frames) = &self.index.stored else {
            return Ok(None);
        };
        frames[entry.ordinal as usize]
            .1
            .map(|r| self.frame_content(frames, r))
            .transpose()
            .map_err(|reason| format!("reference {reason}"))
    }

    /// `unified`: when other frames are coded against `entry`'s frame, its decoded content
    /// as the reference cache holds it (decoded and held now if need be), exactly
    /// `original_size` bytes: the entries coded against it will want it next. `None` for any
    /// other entry, whose frame is decoded for the caller alone.
    fn held_content(&self, entry: &Entry) -> Option<Result<Arc<Vec<u8>>, String>> {
        let Stored::Unified(frames) = &self.index.stored else {
            return None;
        };
        let referenced = self.referenced.get_or_init(|| {
            let mut referenced = vec![false; frames.len()];
            for r in frames.iter().filter_map(|(_, r)| *r) {
                referenced[r as usize] = true;
            }
            referenced
        });
        if !referenced[entry.ordinal as usize] {
            return None;
        }
        Some(self.frame_content(frames, entry.ordinal).and_then(|c| {
            check_len(c.len() as u64, entry.original_size)?;
            Ok(c)
        }))
    }

    /// The decoded content of `unified` frame `ordinal`, from the reference cache or decoded
    /// (its references first: open checked that the chain is at most
    /// [`crate::unified::MAX_CHAIN`] frames long) and then held there.
    fn frame_content(
        &self,
        frames: &[(Range<usize>, Option<u32>)],
        ordinal: u32,
    ) -> Result<Arc<Vec<u8>>, String> {
        if let Some(content) = self.references.get(ordinal) {
            return Ok(content);
        }
        let (range, reference) = &frames[ordinal as usize];
        let base = reference
            .map(|r| self.frame_content(frames, r))
            .transpose()?;
        let content = decode_frame(&self.bytes()[range.clone()], content_of(&base))
            .map_err(|reason| format!("frame {ordinal}: {reason}"))?;
        let content = Arc::new(content);
        self.references.insert(ordinal, Arc::clone(&content));
        Ok(content)
    }

    /// Bytes of decoded `unified` reference frames the archive holds now, at most
    /// [`REFERENCE_CACHE_BUDGET`](crate::REFERENCE_CACHE_BUDGET).
    pub fn reference_cache_bytes(&self) -> usize {
        self.references.bytes()
    }

    /// Checks what open defers or tolerates: the zstd frames must lie exactly in their region
    /// (checked at first use otherwise), their size prefixes agreeing with the TOC's frame
    /// sizes (checked for a frame when it is read otherwise); every binary key must end in
    /// `#<index>` (the runtime looks up `kernel_name#co_index`), every entry's arch must be
    /// listed in `gfx_arches` (the runtime picks archives by `gfx_arches`), and `gfx_arches`
    /// must not repeat an arch. Returns the first problem found.
    pub fn validate(&self) -> Result<(), ArchiveError> {
        let frames = self.frames()?;
        if let Stored::Zstd {
            located: Some(_), ..
        } = &self.index.stored
        {
            for (ordinal, range) in frames.iter().enumerate() {
                self.check_size_prefix(ordinal as u32, range)?;
            }
        }
        let arches = &self.index.gfx_arches;
        if let Some(i) = first_repeat(arches, |a| a) {
            let e = FieldError::Invalid {
                path: format!("gfx_arches[{i}]"),
                problem: format!("{} is listed twice", arches[i]),
            };
            return Err(ArchiveError::TocField(e).in_file(self.path()));
        }
        for (name, arch, _) in self.entries() {
            let problem = if split_binary_key(name).is_none() {
                "binary key lacks the #<index> suffix the runtime looks up"
            } else if !arches.iter().any(|a| a == arch) {
                "arch not listed in gfx_arches, which the runtime selects archives by"
            } else {
                continue;
            };
            let e = ArchiveError::Unreachable {
                binary: name.to_owned(),
                arch: arch.to_owned(),
                problem: problem.to_owned(),
            };
            return Err(e.in_file(self.path()));
        }
        Ok(())
    }

    fn lookup(&self, binary: &str, arch: &str) -> Option<(&str, &Entry)> {
        let ix = &self.index;
        let b = ix.binary(normalise_key(binary).as_ref())?;
        let e = ix.entries_of(b).iter().find(|e| ix.arch_name(e) == arch)?;
        Some((ix.binary_name(b), e))
    }

    fn find(&self, binary: &str, arch: &str) -> Result<(&str, &Entry), ArchiveError> {
        self.lookup(binary, arch).ok_or_else(|| {
            let e = ArchiveError::KernelNotFound {
                binary: binary.to_owned(),
                arch: arch.to_owned(),
            };
            e.in_file(self.path())
        })
    }

    fn bytes(&self) -> &[u8] {
        match &self.data {
            Data::Mapped(map) => map,
            Data::Held(data) => (**data).as_ref(),
        }
    }

    /// Drops the pages of a mapped archive from this process's resident set. Walks over the
    /// whole file (the TOC, the frames' size prefixes) touch one spot per frame, but the
    /// kernel maps every page around each fault that is in the page cache: without this, an
    /// archive whose frames were located stays resident whole, though only the frames
    /// later decoded are needed (`kpack restore` opens every target's archive per wrapper).
    fn forget_pages(&self) {
        self.forget(0..self.bytes().len());
    }

    /// Drops the pages holding the stored bytes of `(binary, arch)` from this process's
    /// resident set, for a caller that reads every entry once (`recompress`): otherwise the
    /// whole file would stay resident (ru_maxrss counts mapped file pages).
    pub fn forget_stored(&self, binary: &str, arch: &str) -> Result<(), ArchiveError> {
        let stored = self.stored_bytes(binary, arch)?;
        let start = stored.as_ptr() as usize - self.bytes().as_ptr() as usize;
        self.forget(start..start + stored.len());
        Ok(())
    }

    /// Drops the pages of `range` of a mapped archive from this process's resident set
    /// ([`release_mapped_pages`]); nothing for bytes held in memory, whose pages `MADV_DONTNEED`
    /// would zero.
    fn forget(&self, range: Range<usize>) {
        if let Data::Mapped(map) = &self.data {
            #[allow(unsafe_code)]
            // SAFETY: an archive's map is of its file (`Archive::open`).
            unsafe {
                release_mapped_pages(map, range)
            };
        }
    }

    /// The zstd frames' ranges: from the TOC's frame sizes, or located on first use.
    fn frames(&self) -> Result<&[Range<usize>], ArchiveError> {
        let Stored::Zstd {
            region,
            count,
            located,
        } = &self.index.stored
        else {
            return Ok(&[]);
        };
        if let Some(located) = located {
            return Ok(located);
        }
        let frames = self.frames.get_or_init(|| {
            let frames = frame_ranges(self.bytes(), region, *count).map_err(|e| match e {
                ArchiveError::BadLayout { what, detail } => (what, detail),
                other => ("zstd region".to_owned(), other.to_string()),
            });
            self.forget_pages();
            frames
        });
        match frames {
            Ok(f) => Ok(f),
            Err((what, detail)) => {
                let e = ArchiveError::BadLayout {
                    what: what.clone(),
                    detail: detail.clone(),
                };
                Err(region_error(e, region.start, self.index.digests).in_file(self.path()))
            }
        }
    }

    /// The entry's blob or frame. Ordinals were checked against the blob or frame count, and
    /// blob ranges against the file, at open; frame ranges when located.
    fn stored(&self, entry: &Entry) -> Result<&[u8], ArchiveError> {
        let range = match &self.index.stored {
            Stored::Blobs(blobs) => blobs[entry.ordinal as usize].clone(),
            Stored::Zstd { located, .. } => {
                let range = self.frames()?[entry.ordinal as usize].clone();
                if located.is_some() {
                    self.check_size_prefix(entry.ordinal, &range)?;
                }
                range
            }
            Stored::Unified(frames) => frames[entry.ordinal as usize].0.clone(),
        };
        Ok(&self.bytes()[range])
    }

    /// Frame `ordinal`, at `range` as the TOC's frame sizes locate it, has a size prefix that
    /// agrees: the frames were not walked, so this is the one prefix a read relies on.
    fn check_size_prefix(&self, ordinal: u32, range: &Range<usize>) -> Result<(), ArchiveError> {
        let at = range.start - 4;
        let prefix = u32::from_le_bytes(self.bytes()[at..range.start].try_into().expect("4 bytes"));
        if prefix as usize == range.len() {
            return Ok(());
        }
        let e = ArchiveError::BadLayout {
            what: format!("zstd frame {ordinal}"),
            detail: format!(
                "size prefix {prefix} at byte {at}, where the TOC's zstd_frame_sizes gives {}",
                range.len()
            ),
        };
        Err(region_error(e, at, self.index.digests).in_file(self.path()))
    }

    /// A frame that does not decode: in an archive with digests, whose TOC was proven intact
    /// at open, that is damage to the frame (or to a frame it references).
    fn decode_error(
        &self,
        binary: &str,
        arch: &str,
        stored: &[u8],
        reason: String,
    ) -> ArchiveError {
        if self.index.digests {
            return self.damaged(
                binary,
                arch,
                stored,
                format!("it does not decode: {reason}"),
            );
        }
        ArchiveError::DecompressionFailed {
            binary: binary.to_owned(),
            arch: arch.to_owned(),
            reason,
        }
        .in_file(self.path())
    }

    /// Fails unless `data`, read for `entry` from `stored`, matches the entry's digest.
    fn check(
        &self,
        binary: &str,
        arch: &str,
        entry: &Entry,
        stored: &[u8],
        data: &[u8],
    ) -> Result<(), ArchiveError> {
        self.check_digest(binary, arch, entry, stored, content_digest(data))
    }

    /// Fails unless `actual`, the digest of what was read for `entry` from `stored`, is the
    /// entry's digest.
    fn check_digest(
        &self,
        binary: &str,
        arch: &str,
        entry: &Entry,
        stored: &[u8],
        actual: u64,
    ) -> Result<(), ArchiveError> {
        let Some(expected) = entry.digest else {
            return Ok(());
        };
        if actual == expected {
            return Ok(());
        }
        let problem = format!(
            "the code object read has XXH3-64 {actual:#018x}, the TOC's {ENTRY_KEY} is \
             {expected:#018x}"
        );
        Err(self.damaged(binary, arch, stored, problem))
    }

    fn damaged(&self, binary: &str, arch: &str, stored: &[u8], problem: String) -> ArchiveError {
        let offset = stored.as_ptr() as usize - self.bytes().as_ptr() as usize;
        ArchiveError::Damaged {
            what: format!("binary {binary}, arch {arch}"),
            offset: offset as u64,
            problem,
        }
        .in_file(self.path())
    }

    fn info_of<'s>(&'s self, e: &'s Entry) -> EntryInfo<'s> {
        let stored_size = match &self.index.stored {
            Stored::Blobs(blobs) => blobs[e.ordinal as usize].len(),
            Stored::Zstd { .. } => self.frames().map_or(0, |f| f[e.ordinal as usize].len()),
            Stored::Unified(frames) => frames[e.ordinal as usize].0.len(),
        };
        EntryInfo {
            ordinal: e.ordinal,
            original_size: e.original_size,
            stored_size: stored_size as u64,
            metadata: self.index.metadata_of(e),
            digest: e.digest,
        }
    }
}

impl fmt::Debug for Archive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Archive")
            .field("path", &self.path)
            .field("group_name", &self.index.group_name)
            .field("gfx_arch_family", &self.index.gfx_arch_family)
            .field("gfx_arches", &self.index.gfx_arches)
            .field("compression_scheme", &self.index.scheme)
            .field("binaries", &self.index.binaries.len())
            .field("blobs", &self.index.stored.count())
            .finish_non_exhaustive()
    }
}

/// Drops the pages of `range` of the read-only file mapping `map` from this process's resident
/// set: reading a large file through a mapping would otherwise keep every page touched
/// resident until the mapping is dropped. The map is read-only, so this only forgets the
/// pages: a later read faults them in again from the file, with the same bytes. A refusal
/// only leaves the pages resident; a range outside `map` is ignored. On Unix,
/// `MADV_DONTNEED` (memmap2 widens the range to whole pages, neighbours included, which is
/// equally harmless); on Windows, `VirtualUnlock` of the range, which for pages that are not
/// locked (none are) removes them from the working set, as its documentation says. The
/// archive reader and kpack-pipeline's mapped inputs both use it.
///
/// # Safety
/// `map` maps a file (`memmap2::Mmap::map`): the pages of an anonymous mapping made read-only
/// would read as zeros afterwards on Unix.
#[allow(unsafe_code)]
pub unsafe fn release_mapped_pages(map: &memmap2::Mmap, range: Range<usize>) {
    if range.is_empty() || range.end > map.len() {
        return;
    }
    #[cfg(unix)]
    // SAFETY: DONTNEED on a read-only file mapping (the caller's promise) cannot change what
    // any reference into it reads (the pages are re-read from the unchanged file).
    let _ = unsafe {
        map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len())
    };
    #[cfg(windows)]
    // SAFETY: the range lies inside the live mapping (checked above); VirtualUnlock of
    // unlocked pages changes no byte of them, only whether they are resident.
    let _ = unsafe {
        windows_sys::Win32::System::Memory::VirtualUnlock(
            map.as_ptr().add(range.start).cast(),
            range.len(),
        )
    };
}
