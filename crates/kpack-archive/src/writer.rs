use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::msgpack::Encoder;
use crate::{
    ArchiveError, CompressionScheme, DATA_START, FORMAT_VERSION, HEADER_LEN, MAGIC,
    MAX_ORIGINAL_SIZE, first_repeat, normalise_key,
};

/// zstd level used by the reference (`ZstdCompressor(level=3)`, pack_tree's default).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// How an [`ArchiveWriter`] stores kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Scheme `none`: kernels stored raw.
    None,
    /// Scheme `zstd-per-kernel`: one frame per kernel, content size recorded, no checksum.
    Zstd {
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
        }
    }
}

/// Builds a `.kpack` archive; output depends only on the `add` calls and their order.
///
/// Kernels are stored as they arrive: with [`Compression::Zstd`] each one is compressed in
/// `add` and only the frame is kept; with [`Compression::None`] the writer keeps the bytes,
/// borrowing them when given a slice (`&'a [u8]`) and taking ownership of a `Vec<u8>`.
/// Entries whose stored bytes are identical share one blob (one ordinal).
pub struct ArchiveWriter<'a> {
    group_name: String,
    gfx_arch_family: String,
    compression: Compression,
    compressor: Option<zstd::bulk::Compressor<'static>>,
    explicit_arches: Option<Vec<String>>,
    /// Distinct entry arches in first-insertion order.
    entry_arches: Vec<String>,
    binaries: Vec<PendingBinary>,
    binary_index: HashMap<String, usize>,
    /// Per ordinal: the raw kernel (`none`) or its zstd frame.
    blobs: Vec<Cow<'a, [u8]>>,
    /// (hash, length) of stored bytes → ordinals with that key; equality is confirmed bytewise.
    dedupe: HashMap<(u64, usize), Vec<u32>>,
}

struct PendingBinary {
    name: String,
    arches: Vec<(String, PendingEntry)>,
}

struct PendingEntry {
    ordinal: u32,
    original_size: u64,
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
            compressor: None,
            explicit_arches: None,
            entry_arches: Vec::new(),
            binaries: Vec::new(),
            binary_index: HashMap::new(),
            blobs: Vec::new(),
            dedupe: HashMap::new(),
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
        let data = data.into();
        let original_size = data.len() as u64;
        if original_size > MAX_ORIGINAL_SIZE {
            return Err(ArchiveError::InvalidArgument(format!(
                "kernel of {original_size} bytes exceeds the {MAX_ORIGINAL_SIZE}-byte limit"
            )));
        }
        let stored = match self.compression {
            Compression::None => data,
            Compression::Zstd { level } => Cow::Owned(self.compress(&data, level)?),
        };
        let ordinal = self.intern(stored)?;

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
            metadata: metadata.to_vec(),
        };
        self.binaries[b].arches.push((arch.to_owned(), entry));
        if !self.entry_arches.iter().any(|a| a == arch) {
            self.entry_arches.push(arch.to_owned());
        }
        Ok(())
    }

    /// Number of `(binary, arch)` entries added.
    pub fn entry_count(&self) -> usize {
        self.binaries.iter().map(|b| b.arches.len()).sum()
    }

    /// Number of distinct stored blobs (entries with identical bytes share one).
    pub fn blob_count(&self) -> usize {
        self.blobs.len()
    }

    fn compress(&mut self, data: &[u8], level: i32) -> Result<Vec<u8>, ArchiveError> {
        let io = |source| ArchiveError::Io {
            context: "zstd compression",
            source,
        };
        let compressor = match &mut self.compressor {
            Some(c) => c,
            None => self
                .compressor
                .insert(zstd::bulk::Compressor::new(level).map_err(io)?),
        };
        // The bulk API writes the content size into the frame header and no checksum, as
        // python-zstandard's ZstdCompressor(level).compress does.
        let frame = compressor.compress(data).map_err(io)?;
        if u32::try_from(frame.len()).is_err() {
            return Err(ArchiveError::InvalidArgument(format!(
                "zstd frame of {} bytes exceeds the format's u32 frame size",
                frame.len()
            )));
        }
        Ok(frame)
    }

    /// The ordinal of `stored`: an existing blob with the same bytes, or a new one.
    fn intern(&mut self, stored: Cow<'a, [u8]>) -> Result<u32, ArchiveError> {
        let mut h = DefaultHasher::new();
        stored.hash(&mut h);
        let key = (h.finish(), stored.len());
        let blobs = &self.blobs;
        if let Some(&o) = self
            .dedupe
            .get(&key)
            .and_then(|os| os.iter().find(|&&o| blobs[o as usize] == stored))
        {
            return Ok(o);
        }
        // Keeps both every ordinal and the frame count in u32.
        if self.blobs.len() >= u32::MAX as usize {
            return Err(ArchiveError::InvalidArgument(
                "too many distinct kernels".into(),
            ));
        }
        let ordinal = self.blobs.len() as u32;
        self.blobs.push(stored);
        self.dedupe.entry(key).or_default().push(ordinal);
        Ok(ordinal)
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
        let payload: u64 = self.blobs.iter().map(|b| b.len() as u64).sum();
        match self.compression {
            Compression::None => payload,
            Compression::Zstd { .. } => 4 + 4 * self.blobs.len() as u64 + payload,
        }
    }

    /// The TOC's msgpack, keys in the reference writer's order.
    fn toc(&self, region_len: u64) -> Result<Vec<u8>, ArchiveError> {
        let gfx_arches = self.checked_gfx_arches()?;
        let mut e = Encoder::default();
        let layout_keys = match self.compression {
            Compression::None => 1,        // blobs
            Compression::Zstd { .. } => 2, // zstd_offset, zstd_size
        };
        e.map(6 + layout_keys)?;
        e.str("format_version")?;
        e.uint(FORMAT_VERSION.into());
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
                e.map(if entry.metadata.is_empty() { 3 } else { 4 })?;
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
            }
        }
        e.str("compression_scheme")?;
        e.str(self.compression.scheme().name())?;
        match self.compression {
            Compression::None => {
                e.str("blobs")?;
                e.array(self.blobs.len())?;
                let mut offset = DATA_START;
                for b in &self.blobs {
                    let size = b.len() as u64;
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
            }
        }
        Ok(e.into_bytes())
    }

    /// Writes the archive to `w` in one forward pass; returns the number of bytes written.
    pub fn write_to<W: Write>(&self, mut w: W) -> Result<u64, ArchiveError> {
        let region_len = self.region_len();
        let toc_offset = DATA_START + region_len;
        // Everything that can fail for a reason other than I/O fails before the first byte.
        let toc = self.toc(region_len)?;
        // `intern` keeps the blob count below u32::MAX.
        let count = self.blobs.len() as u32;
        let io = |source| ArchiveError::Io {
            context: "writing archive",
            source,
        };

        let mut header = [0u8; DATA_START as usize];
        header[0..4].copy_from_slice(&MAGIC);
        header[4..8].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        header[8..HEADER_LEN].copy_from_slice(&toc_offset.to_le_bytes());
        w.write_all(&header).map_err(io)?;
        let zstd = matches!(self.compression, Compression::Zstd { .. });
        if zstd {
            w.write_all(&count.to_le_bytes()).map_err(io)?;
        }
        for blob in &self.blobs {
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
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<u64, ArchiveError> {
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
