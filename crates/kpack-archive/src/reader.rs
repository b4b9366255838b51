use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::msgpack::{self, FieldError, Value, schema};
use crate::{
    ArchiveError, CompressionScheme, DATA_START, FORMAT_VERSION, HEADER_LEN, MAGIC,
    MAX_ORIGINAL_SIZE, first_repeat, normalise_key, split_binary_key,
};

/// Byte storage an [`Archive`] reads from: a memory map, a `Vec<u8>`, or anything byte-like.
type Backing = Box<dyn AsRef<[u8]> + Send + Sync>;

/// An open `.kpack` archive.
///
/// Opening parses the 16-byte header and the TOC and, for zstd archives, walks the frame size
/// prefixes to index the frames; no kernel bytes are read or decoded until [`Archive::get`].
/// The archive is immutable after open, so it is `Send + Sync` and `get` needs no lock.
pub struct Archive {
    data: Backing,
    path: Option<PathBuf>,
    index: Index,
}

/// What `open` learns from the header and TOC.
struct Index {
    group_name: String,
    gfx_arch_family: String,
    gfx_arches: Vec<String>,
    scheme: CompressionScheme,
    binaries: Vec<Binary>,
    by_name: HashMap<String, usize>,
    /// Indices into `binaries`, byte-wise sorted by name.
    sorted: Vec<usize>,
    /// Per ordinal: the raw kernel (`none`) or the zstd frame, as a range of the file.
    stored: Vec<Range<usize>>,
}

struct Binary {
    name: String,
    arches: Vec<(String, Entry)>,
}

struct Entry {
    ordinal: u32,
    original_size: u64,
    metadata: Vec<(String, String)>,
}

/// One TOC entry as the reader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryInfo<'a> {
    /// Index of the stored blob or frame; entries holding identical bytes may share one.
    pub ordinal: u32,
    /// The kernel's length in bytes.
    pub original_size: u64,
    /// Bytes the kernel takes in the file (the frame length for zstd, without its prefix).
    pub stored_size: u64,
    /// The entry's `metadata` map in file order; empty when absent.
    pub metadata: &'a [(String, String)],
}

impl Archive {
    /// Memory-maps and indexes the archive at `path`. Errors name the file.
    pub fn open(path: impl AsRef<Path>) -> Result<Archive, ArchiveError> {
        let path = path.as_ref();
        Self::open_inner(path).map_err(|e| e.in_file(Some(path)))
    }

    fn open_inner(path: &Path) -> Result<Archive, ArchiveError> {
        let io = |context| move |source| ArchiveError::Io { context, source };
        let mut file = File::open(path).map_err(io("opening archive"))?;
        let len = file.metadata().map_err(io("reading archive size"))?.len();
        // Tiny files are read rather than mapped: an empty file cannot be mapped portably, and
        // the header parser still gives these their precise error.
        let data: Backing = if len < DATA_START {
            let mut v = Vec::new();
            file.read_to_end(&mut v).map_err(io("reading archive"))?;
            Box::new(v)
        } else {
            #[allow(unsafe_code)]
            // SAFETY: the mapping is read-only and lives as long as the `Archive`. It is UB only
            // if another process truncates or rewrites the file while mapped. Archives are
            // immutable build outputs, and our writer replaces them by rename (a new inode), so
            // open mappings never observe its writes; same contract as the C runtime's FILE*.
            let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io("mapping archive"))?;
            Box::new(map)
        };
        let index = Index::parse((*data).as_ref())?;
        Ok(Archive {
            data,
            path: Some(path.to_owned()),
            index,
        })
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
        let index = Index::parse(backing.as_ref())?;
        Ok(Archive {
            data: Box::new(backing),
            path: None,
            index,
        })
    }

    /// The file this archive was opened from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn group_name(&self) -> &str {
        &self.index.group_name
    }

    pub fn gfx_arch_family(&self) -> &str {
        &self.index.gfx_arch_family
    }

    /// The archive's declared architectures, in TOC order (what the runtime matches on).
    pub fn gfx_arches(&self) -> &[String] {
        &self.index.gfx_arches
    }

    pub fn compression_scheme(&self) -> CompressionScheme {
        self.index.scheme
    }

    /// Number of stored blobs or frames (less than the entry count when bytes were shared).
    pub fn blob_count(&self) -> usize {
        self.index.stored.len()
    }

    /// Binary keys in TOC order.
    pub fn binaries(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.index.binaries.iter().map(|b| b.name.as_str())
    }

    /// Binary keys in byte-wise sorted order, the order `kpack_get_binary` enumerates.
    pub fn binaries_sorted(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.index
            .sorted
            .iter()
            .map(|&i| self.index.binaries[i].name.as_str())
    }

    /// Every entry as `(binary, arch, info)`, binaries in TOC order, arches in TOC order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, EntryInfo<'_>)> + '_ {
        self.index.binaries.iter().flat_map(move |b| {
            b.arches
                .iter()
                .map(move |(arch, e)| (b.name.as_str(), arch.as_str(), self.info_of(e)))
        })
    }

    /// The entry for `(binary, arch)`. Like the Python reader, `\` in `binary` matches `/`.
    pub fn info(&self, binary: &str, arch: &str) -> Option<EntryInfo<'_>> {
        self.lookup(binary, arch).map(|(_, e)| self.info_of(e))
    }

    pub fn contains(&self, binary: &str, arch: &str) -> bool {
        self.lookup(binary, arch).is_some()
    }

    /// The kernel for `(binary, arch)`: borrowed from the file for `none`, decoded for zstd.
    ///
    /// A zstd frame must decode to exactly `original_size` bytes, and a frame whose header
    /// records a different content size fails before anything is allocated.
    pub fn get(&self, binary: &str, arch: &str) -> Result<Cow<'_, [u8]>, ArchiveError> {
        let Some((name, entry)) = self.lookup(binary, arch) else {
            let e = ArchiveError::KernelNotFound {
                binary: binary.to_owned(),
                arch: arch.to_owned(),
            };
            return Err(e.in_file(self.path()));
        };
        // Ordinals were checked against `stored`, and every range against the file, at open.
        let stored = &(*self.data).as_ref()[self.index.stored[entry.ordinal as usize].clone()];
        match self.index.scheme {
            CompressionScheme::None => Ok(Cow::Borrowed(stored)),
            CompressionScheme::ZstdPerKernel => decode_frame(stored, entry.original_size)
                .map(Cow::Owned)
                .map_err(|reason| {
                    ArchiveError::DecompressionFailed {
                        binary: name.to_owned(),
                        arch: arch.to_owned(),
                        reason,
                    }
                    .in_file(self.path())
                }),
        }
    }

    /// Checks what open tolerates but the runtime cannot use: every binary key must end in
    /// `#<index>` (the runtime looks up `kernel_name#co_index`), every entry's arch must be
    /// listed in `gfx_arches` (the runtime picks archives by `gfx_arches`), and `gfx_arches` must
    /// not repeat an arch. Returns the first problem found.
    pub fn validate(&self) -> Result<(), ArchiveError> {
        let arches = &self.index.gfx_arches;
        if let Some(i) = first_repeat(arches, |a| a) {
            let e = FieldError::Invalid {
                path: format!("gfx_arches[{i}]"),
                problem: format!("{:?} is listed twice", arches[i]),
            };
            return Err(ArchiveError::TocField(e).in_file(self.path()));
        }
        for b in &self.index.binaries {
            for (arch, _) in &b.arches {
                let problem = if split_binary_key(&b.name).is_none() {
                    "binary key lacks the #<index> suffix the runtime looks up"
                } else if !arches.contains(arch) {
                    "arch not listed in gfx_arches, which the runtime selects archives by"
                } else {
                    continue;
                };
                let e = ArchiveError::Unreachable {
                    binary: b.name.clone(),
                    arch: arch.clone(),
                    problem: problem.to_owned(),
                };
                return Err(e.in_file(self.path()));
            }
        }
        Ok(())
    }

    fn lookup(&self, binary: &str, arch: &str) -> Option<(&str, &Entry)> {
        let b = &self.index.binaries[*self.index.by_name.get(normalise_key(binary).as_ref())?];
        let (_, e) = b.arches.iter().find(|(a, _)| a == arch)?;
        Some((&b.name, e))
    }

    fn info_of<'s>(&'s self, e: &'s Entry) -> EntryInfo<'s> {
        EntryInfo {
            ordinal: e.ordinal,
            original_size: e.original_size,
            stored_size: self.index.stored[e.ordinal as usize].len() as u64,
            metadata: &e.metadata,
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
            .field("blobs", &self.index.stored.len())
            .finish_non_exhaustive()
    }
}

fn decode_frame(frame: &[u8], original_size: u64) -> Result<Vec<u8>, String> {
    // original_size was capped at open, so this only fails on 32-bit hosts.
    let size = usize::try_from(original_size)
        .map_err(|_| format!("original_size {original_size} does not fit in memory"))?;
    let out = match zstd::zstd_safe::get_frame_content_size(frame) {
        Err(_) => return Err("invalid zstd frame header".to_owned()),
        Ok(Some(n)) if n != original_size => {
            return Err(format!(
                "frame content size {n} differs from original_size {original_size}"
            ));
        }
        Ok(Some(_)) => zstd::bulk::decompress(frame, size).map_err(|e| e.to_string())?,
        // Without a recorded size, let the output grow with what the frame really yields
        // rather than trusting original_size for the allocation.
        Ok(None) => {
            let mut out = Vec::new();
            zstd::stream::read::Decoder::with_buffer(frame)
                .map_err(|e| e.to_string())?
                .single_frame()
                .take(original_size.saturating_add(1))
                .read_to_end(&mut out)
                .map_err(|e| e.to_string())?;
            out
        }
    };
    if out.len() != size {
        return Err(format!(
            "frame decoded to {} bytes, original_size is {original_size}",
            out.len()
        ));
    }
    Ok(out)
}

fn layout_error(what: impl Into<String>, detail: impl Into<String>) -> ArchiveError {
    ArchiveError::BadLayout {
        what: what.into(),
        detail: detail.into(),
    }
}

/// `base["key"]`, the path notation for the TOC's data-valued keys (binaries and arches).
fn keyed(base: &str, key: &str) -> String {
    format!("{base}[{key:?}]")
}

impl Index {
    fn parse(bytes: &[u8]) -> Result<Index, ArchiveError> {
        let len = bytes.len() as u64;
        if len < HEADER_LEN as u64 {
            return Err(ArchiveError::TooShort { len });
        }
        let found: [u8; 4] = bytes[0..4].try_into().expect("4-byte slice");
        if found != MAGIC {
            return Err(ArchiveError::BadMagic { found });
        }
        let version = u32::from_le_bytes(bytes[4..8].try_into().expect("4-byte slice"));
        if version != FORMAT_VERSION {
            let version = version.into();
            return Err(ArchiveError::UnsupportedVersion {
                what: "header version",
                version,
            });
        }
        let toc_offset = u64::from_le_bytes(bytes[8..16].try_into().expect("8-byte slice"));
        if toc_offset < DATA_START || toc_offset >= len {
            return Err(ArchiveError::TocOffsetOutOfRange {
                toc_offset,
                file_len: len,
            });
        }
        // toc_offset < len, so it fits in usize.
        let toc_start = toc_offset as usize;
        let root = msgpack::decode_exact(&bytes[toc_start..]).map_err(|mut source| {
            source.offset += toc_start;
            ArchiveError::TocParse { source }
        })?;
        if !matches!(root, Value::Map(_)) {
            return Err(ArchiveError::TocNotMap {
                toc_offset,
                found: root.type_name(),
            });
        }
        let top = schema::str_map("", &root)?;

        let format_version = schema::uint_field(&top, "", "format_version")?;
        if format_version != u64::from(FORMAT_VERSION) {
            let what = "TOC format_version";
            return Err(ArchiveError::UnsupportedVersion {
                what,
                version: format_version,
            });
        }
        let group_name = schema::str_field(&top, "", "group_name")?.to_owned();
        let gfx_arch_family = schema::str_field(&top, "", "gfx_arch_family")?.to_owned();
        let arches_v = schema::field(&top, "", "gfx_arches")?;
        let arches_a = arches_v
            .as_array()
            .ok_or_else(|| schema::wrong("gfx_arches", "array", arches_v))?;
        let gfx_arches = arches_a
            .iter()
            .enumerate()
            .map(|(i, a)| schema::as_str(&format!("gfx_arches[{i}]"), a).map(str::to_owned))
            .collect::<Result<Vec<_>, _>>()?;

        // A missing scheme means `none` to both reference readers.
        let scheme = match schema::opt_field(&top, "compression_scheme") {
            None => CompressionScheme::None,
            Some(v) => {
                let s = schema::as_str("compression_scheme", v)?;
                CompressionScheme::from_name(s)
                    .ok_or_else(|| ArchiveError::UnknownCompressionScheme(s.to_owned()))?
            }
        };
        let data = DATA_START..toc_offset;
        let stored = match scheme {
            CompressionScheme::None => blob_ranges(&top, &data)?,
            CompressionScheme::ZstdPerKernel => frame_ranges(&top, bytes, &data)?,
        };

        let toc = schema::str_map("toc", schema::field(&top, "", "toc")?)?;
        let mut binaries = Vec::with_capacity(toc.len());
        let mut by_name = HashMap::with_capacity(toc.len());
        for (name, arches_v) in toc {
            let bpath = keyed("toc", name);
            let arches_m = schema::str_map(&bpath, arches_v)?;
            let mut arches = Vec::with_capacity(arches_m.len());
            for (arch, entry_v) in arches_m {
                let epath = keyed(&bpath, arch);
                let entry = parse_entry(&epath, entry_v, scheme, &stored)?;
                arches.push((arch.to_owned(), entry));
            }
            by_name.insert(name.to_owned(), binaries.len());
            binaries.push(Binary {
                name: name.to_owned(),
                arches,
            });
        }
        let mut sorted: Vec<usize> = (0..binaries.len()).collect();
        sorted.sort_by(|&a, &b| binaries[a].name.as_bytes().cmp(binaries[b].name.as_bytes()));
        Ok(Index {
            group_name,
            gfx_arch_family,
            gfx_arches,
            scheme,
            binaries,
            by_name,
            sorted,
            stored,
        })
    }
}

fn parse_entry(
    path: &str,
    v: &Value,
    scheme: CompressionScheme,
    stored: &[Range<usize>],
) -> Result<Entry, ArchiveError> {
    let m = schema::str_map(path, v)?;
    let ty = schema::str_field(&m, path, "type")?;
    if ty != "hsaco" {
        let problem = format!("expected \"hsaco\", found {ty:?}");
        return Err(FieldError::Invalid {
            path: schema::child(path, "type"),
            problem,
        }
        .into());
    }
    let ordinal = schema::uint_field(&m, path, "ordinal")?;
    let range = usize::try_from(ordinal)
        .ok()
        .and_then(|o| stored.get(o))
        .ok_or_else(|| {
            let path = schema::child(path, "ordinal");
            ArchiveError::OrdinalOutOfRange {
                path,
                ordinal,
                count: stored.len(),
            }
        })?;
    let original_size = schema::uint_field(&m, path, "original_size")?;
    let size_error = |problem: String| ArchiveError::BadOriginalSize {
        path: schema::child(path, "original_size"),
        original_size,
        problem,
    };
    if original_size > MAX_ORIGINAL_SIZE {
        return Err(size_error(format!(
            "exceeds the {MAX_ORIGINAL_SIZE}-byte limit"
        )));
    }
    if scheme == CompressionScheme::None && original_size != range.len() as u64 {
        return Err(size_error(format!(
            "differs from the blob size {}",
            range.len()
        )));
    }
    let metadata = match schema::opt_field(&m, "metadata") {
        None => Vec::new(),
        Some(mv) => {
            let mpath = schema::child(path, "metadata");
            schema::str_map(&mpath, mv)?
                .into_iter()
                .map(|(k, v)| {
                    Ok((
                        k.to_owned(),
                        schema::as_str(&keyed(&mpath, k), v)?.to_owned(),
                    ))
                })
                .collect::<Result<Vec<_>, FieldError>>()?
        }
    };
    // `stored` has at most u32::MAX + 1 elements only on absurd inputs; the index was in range.
    let ordinal = u32::try_from(ordinal).map_err(|_| ArchiveError::OrdinalOutOfRange {
        path: schema::child(path, "ordinal"),
        ordinal,
        count: stored.len(),
    })?;
    Ok(Entry {
        ordinal,
        original_size,
        metadata,
    })
}

/// `[offset, offset + size)` as a `usize` range, if it lies inside `data`.
fn checked_range(offset: u64, size: u64, data: &Range<u64>) -> Option<Range<usize>> {
    let end = offset.checked_add(size)?;
    (offset >= data.start && end <= data.end).then_some(offset as usize..end as usize)
}

/// `none`: the `blobs` array, each blob inside the data region.
fn blob_ranges(
    top: &[(&str, &Value)],
    data: &Range<u64>,
) -> Result<Vec<Range<usize>>, ArchiveError> {
    let v = schema::field(top, "", "blobs")?;
    let blobs = v
        .as_array()
        .ok_or_else(|| schema::wrong("blobs", "array", v))?;
    blobs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let path = format!("blobs[{i}]");
            let m = schema::str_map(&path, b)?;
            let offset = schema::uint_field(&m, &path, "offset")?;
            let size = schema::uint_field(&m, &path, "size")?;
            checked_range(offset, size, data).ok_or_else(|| {
                layout_error(
                    format!("TOC: {path}"),
                    format!(
                        "bytes {offset}+{size} lie outside the data region [{}, {})",
                        data.start, data.end
                    ),
                )
            })
        })
        .collect()
}

/// `zstd-per-kernel`: walks the `u32` count and size prefixes of the zstd region (reading
/// only the prefixes) and returns each frame's range. The region must be exactly its frames.
fn frame_ranges(
    top: &[(&str, &Value)],
    bytes: &[u8],
    data: &Range<u64>,
) -> Result<Vec<Range<usize>>, ArchiveError> {
    let offset = schema::uint_field(top, "", "zstd_offset")?;
    let size = schema::uint_field(top, "", "zstd_size")?;
    let region = checked_range(offset, size, data).ok_or_else(|| {
        layout_error(
            "zstd region",
            format!(
                "bytes {offset}+{size} (zstd_offset+zstd_size) lie outside the data region [{}, {})",
                data.start, data.end
            ),
        )
    })?;
    let read_u32 = |at: usize, what: &str| -> Result<usize, ArchiveError> {
        match bytes.get(at..at + 4).filter(|_| at + 4 <= region.end) {
            Some(b) => Ok(u32::from_le_bytes(b.try_into().expect("4-byte slice")) as usize),
            None => Err(layout_error(
                "zstd region",
                format!(
                    "expected {what} (u32) at byte {at}, region ends at {}",
                    region.end
                ),
            )),
        }
    };
    let count_at = region.start;
    let count = read_u32(count_at, "the frame count")?;
    let mut pos = count_at + 4;
    // Each frame needs at least its 4-byte size prefix: bound the count before allocating.
    if count > (region.end - pos) / 4 {
        return Err(layout_error(
            "zstd region",
            format!(
                "frame count {count} at byte {count_at} cannot fit in the {} bytes that follow",
                region.end - pos
            ),
        ));
    }
    let mut frames = Vec::with_capacity(count);
    for i in 0..count {
        let at = pos;
        let len = read_u32(at, "a frame size")?;
        let start = at + 4;
        if len > region.end - start {
            return Err(layout_error(
                format!("zstd frame {i}"),
                format!(
                    "size {len} at byte {at} runs past the region end at {} ({} bytes left)",
                    region.end,
                    region.end - start
                ),
            ));
        }
        frames.push(start..start + len);
        pos = start + len;
    }
    if pos != region.end {
        return Err(layout_error(
            "zstd region",
            format!(
                "{} unused bytes after the last frame, at byte {pos}",
                region.end - pos
            ),
        ));
    }
    Ok(frames)
}
