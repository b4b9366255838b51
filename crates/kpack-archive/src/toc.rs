//! What [`crate::Archive::open`] learns from the header and the TOC.
//!
//! The TOC is read in two passes over its wire form, without building a msgpack tree: the
//! first reads the top-level map, checking every byte of the TOC as a full decode would (so
//! msgpack errors come first, as they always did) and noting where each value starts; the
//! second checks the fields in a fixed order and reads `toc` straight into [`Index`]: binary
//! names into one string, arch names interned, entries in one vector. Paths for error
//! messages are spelled only when an error is reported.

use std::ops::Range;

use crate::msgpack::schema::{Distinct, Fields, Node, Path, wrong};
use crate::msgpack::{DecodeError, Decoder, FieldError, Head, checked_str};
use crate::{
    ArchiveError, CompressionScheme, DATA_START, FORMAT_VERSION, HEADER_LEN, MAGIC,
    MAX_ORIGINAL_SIZE,
};

pub(crate) struct Index {
    pub(crate) group_name: String,
    pub(crate) gfx_arch_family: String,
    pub(crate) gfx_arches: Vec<String>,
    pub(crate) scheme: CompressionScheme,
    /// Binary names back to back; [`Binary::name`] ranges into it.
    names: String,
    /// Distinct entry arches in first-seen order; [`Entry::arch`] indexes it.
    arch_names: Vec<String>,
    /// In TOC order.
    pub(crate) binaries: Vec<Binary>,
    /// Indices into `binaries`, byte-wise sorted by name.
    pub(crate) sorted: Vec<u32>,
    /// Every binary's entries, binary after binary, arches in TOC order.
    entries: Vec<Entry>,
    /// Every entry's metadata pairs; [`Entry::metadata`] ranges into it.
    metadata: Vec<(String, String)>,
    pub(crate) stored: Stored,
}

pub(crate) struct Binary {
    name: Range<usize>,
    entries: Range<usize>,
}

#[derive(Clone)]
pub(crate) struct Entry {
    arch: u32,
    pub(crate) ordinal: u32,
    pub(crate) original_size: u64,
    metadata: Range<usize>,
}

/// Where the kernels are.
pub(crate) enum Stored {
    /// `none`: each blob's range of the file, by ordinal.
    Blobs(Vec<Range<usize>>),
    /// `zstd-per-kernel`: the region and its frame count; the frames themselves are located on
    /// first use ([`frame_ranges`]).
    Zstd { region: Range<usize>, count: usize },
}

impl Stored {
    pub(crate) fn count(&self) -> usize {
        match self {
            Stored::Blobs(b) => b.len(),
            Stored::Zstd { count, .. } => *count,
        }
    }
}

impl Index {
    pub(crate) fn binary_name(&self, b: &Binary) -> &str {
        &self.names[b.name.clone()]
    }

    pub(crate) fn entries_of(&self, b: &Binary) -> &[Entry] {
        &self.entries[b.entries.clone()]
    }

    pub(crate) fn arch_name(&self, e: &Entry) -> &str {
        &self.arch_names[e.arch as usize]
    }

    pub(crate) fn metadata_of(&self, e: &Entry) -> &[(String, String)] {
        &self.metadata[e.metadata.clone()]
    }

    /// The binary named `name` (already normalised), by binary search of `sorted`.
    pub(crate) fn binary(&self, name: &str) -> Option<&Binary> {
        let i = self
            .sorted
            .binary_search_by(|&i| {
                self.binary_name(&self.binaries[i as usize])
                    .as_bytes()
                    .cmp(name.as_bytes())
            })
            .ok()?;
        Some(&self.binaries[self.sorted[i] as usize])
    }

    pub(crate) fn parse(bytes: &[u8]) -> Result<Index, ArchiveError> {
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
        // toc_offset < len, so it fits in usize. The decoder reads the whole file from there,
        // so its error offsets are file offsets.
        let mut d = Decoder::at(bytes, toc_offset as usize);

        // Pass 1.
        let root = d.clone().head()?;
        if !matches!(root, Head::Map(_)) {
            d.next(0)?;
            d.finish()?;
            return Err(ArchiveError::TocNotMap {
                toc_offset,
                found: root.type_name(),
            });
        }
        let mut top = Fields::new();
        let keys = top.read(&mut d, &Path::Root, 0, false)?;
        d.finish()?;
        keys?;

        // Pass 2.
        let root = &Path::Root;
        let format_version = top.uint::<ArchiveError>(root, "format_version")?;
        if format_version != u64::from(FORMAT_VERSION) {
            let what = "TOC format_version";
            return Err(ArchiveError::UnsupportedVersion {
                what,
                version: format_version,
            });
        }
        let group_name = top.str::<ArchiveError>(root, "group_name")?.into_owned();
        let gfx_arch_family = top
            .str::<ArchiveError>(root, "gfx_arch_family")?
            .into_owned();
        let arches_path = Path::Field(root, "gfx_arches");
        let (n, mut arches, depth) = top
            .req(root, "gfx_arches")?
            .array::<ArchiveError>(&arches_path)?;
        let mut gfx_arches = Vec::with_capacity(n);
        for i in 0..n {
            match arches.next(depth)? {
                Head::Str(s) => gfx_arches.push(checked_str(s).into_owned()),
                other => {
                    let path = Path::Index(&arches_path, i);
                    return Err(wrong(&path, "str", &other).into());
                }
            }
        }

        // A missing scheme means `none` to both reference readers.
        let scheme = match top.get("compression_scheme") {
            None => CompressionScheme::None,
            Some(v) => {
                let s = v.str::<ArchiveError>(&Path::Field(root, "compression_scheme"))?;
                CompressionScheme::from_name(&s)
                    .ok_or_else(|| ArchiveError::UnknownCompressionScheme(s.into_owned()))?
            }
        };
        let data = DATA_START..toc_offset;
        let stored = match scheme {
            CompressionScheme::None => Stored::Blobs(blob_ranges(&top, &data)?),
            CompressionScheme::ZstdPerKernel => zstd_region(&top, bytes, &data)?,
        };

        let mut index = Index {
            group_name,
            gfx_arch_family,
            gfx_arches,
            scheme,
            names: String::new(),
            arch_names: Vec::new(),
            binaries: Vec::new(),
            sorted: Vec::new(),
            entries: Vec::new(),
            metadata: Vec::new(),
            stored,
        };
        let toc = top.req(root, "toc")?;
        TocReader::new(bytes, &mut index).read(toc)?;
        Ok(index)
    }
}

/// Reads `toc` into an [`Index`]. Problems are reported in the order a reader that first
/// checked every key of `toc`, then every key of each binary's map before its entries, would
/// meet them: a bad binary key outranks any problem inside a binary, a bad arch key any
/// problem inside that binary's entries.
struct TocReader<'a, 'i> {
    bytes: &'a [u8],
    index: &'i mut Index,
    arch_ids: Vec<&'a [u8]>,
    arch_lookup: std::collections::HashMap<&'a [u8], u32>,
    fields: Fields<'a>,
}

impl<'a, 'i> TocReader<'a, 'i> {
    fn new(bytes: &'a [u8], index: &'i mut Index) -> Self {
        TocReader {
            bytes,
            index,
            arch_ids: Vec::new(),
            arch_lookup: std::collections::HashMap::new(),
            fields: Fields::new(),
        }
    }

    fn read(mut self, toc: Node<'a>) -> Result<(), ArchiveError> {
        let path = Path::Field(&Path::Root, "toc");
        let (mut d, depth) = toc.into_parts();
        let start = d.pos();
        let head = d.head()?;
        if !matches!(head, Head::Map(_)) {
            return Err(wrong(&path, "map", &head).into());
        }
        let (n, inner) = d.open(head, depth, start)?;
        self.index.binaries.reserve_exact(n);
        self.index.names.reserve(n * 32);
        let mut inside: Option<ArchiveError> = None;
        for _ in 0..n {
            let name = match d.next(inner)? {
                Head::Str(name) => name,
                other => {
                    self.check_distinct_names(&path)?;
                    return Err(FieldError::WrongType {
                        path: Path::KeysOf(&path).to_string(),
                        expected: "str",
                        found: other.type_name(),
                    }
                    .into());
                }
            };
            let name = checked_str(name);
            let names = &mut self.index.names;
            let name_range = names.len()..names.len() + name.len();
            names.push_str(&name);
            let first = self.index.entries.len();
            let value = d.pos();
            if inside.is_none() {
                if let Err(e) = self.read_binary(&mut d, inner, &Path::Key(&path, &name)) {
                    inside = Some(e);
                    d = Decoder::at(self.bytes, value);
                    d.next(inner)?;
                }
            } else {
                d.next(inner)?;
            }
            self.index.binaries.push(Binary {
                name: name_range,
                entries: first..self.index.entries.len(),
            });
        }
        self.check_distinct_names(&path)?;
        inside.map_or(Ok(()), Err)
    }

    /// Sorts the binaries read so far into `sorted` and fails on the first repeated name.
    fn check_distinct_names(&mut self, path: &Path<'_>) -> Result<(), ArchiveError> {
        let ix = &mut *self.index;
        let name = |i: u32| &ix.names[ix.binaries[i as usize].name.clone()];
        let mut sorted: Vec<u32> = (0..ix.binaries.len() as u32).collect();
        // Stable: equal names stay in TOC order, so each run's second is its first repeat.
        sorted.sort_by(|&a, &b| name(a).as_bytes().cmp(name(b).as_bytes()));
        let repeat = sorted
            .windows(2)
            .filter(|w| name(w[0]) == name(w[1]))
            .map(|w| w[1])
            .min();
        if let Some(i) = repeat {
            return Err(FieldError::DuplicateKey {
                path: path.to_string(),
                key: name(i).to_owned(),
            }
            .into());
        }
        ix.sorted = sorted;
        Ok(())
    }

    /// Reads the binary's map at `d`, moving `d` past it unless it fails.
    fn read_binary(
        &mut self,
        d: &mut Decoder<'a>,
        depth: usize,
        path: &Path<'_>,
    ) -> Result<(), ArchiveError> {
        let start = d.pos();
        let head = d.head()?;
        if !matches!(head, Head::Map(_)) {
            return Err(wrong(path, "map", &head).into());
        }
        let (n, inner) = d.open(head, depth, start)?;
        let mut seen = Distinct::new();
        let mut inside: Option<ArchiveError> = None;
        for _ in 0..n {
            let arch = match d.next(inner)? {
                Head::Str(arch) => arch,
                other => {
                    return Err(FieldError::WrongType {
                        path: Path::KeysOf(path).to_string(),
                        expected: "str",
                        found: other.type_name(),
                    }
                    .into());
                }
            };
            let id = self.intern(arch);
            if !seen.insert(id) {
                return Err(FieldError::DuplicateKey {
                    path: path.to_string(),
                    key: checked_str(arch).into_owned(),
                }
                .into());
            }
            let value = d.pos();
            if inside.is_some() {
                d.next(inner)?;
                continue;
            }
            let epath = Path::Key(path, &self.index.arch_names[id as usize]);
            match Self::read_entry(&mut self.fields, d, inner, &epath, &self.index.stored) {
                Ok(mut e) => {
                    e.arch = id;
                    if let Some(mv) = self.fields.get("metadata") {
                        let epath = Path::Key(path, &self.index.arch_names[id as usize]);
                        match read_metadata(mv, &epath, &mut self.index.metadata) {
                            Ok(m) => e.metadata = m,
                            Err(err) => {
                                inside = Some(err);
                                continue;
                            }
                        }
                    }
                    self.index.entries.push(e);
                }
                Err(e) => {
                    inside = Some(e);
                    *d = Decoder::at(self.bytes, value);
                    d.next(inner)?;
                }
            }
        }
        inside.map_or(Ok(()), Err)
    }

    fn intern(&mut self, arch: &'a [u8]) -> u32 {
        // Few distinct arches (7 in a librocsparse archive): a scan, unless there are many.
        if self.arch_lookup.is_empty() {
            if let Some(i) = self.arch_ids.iter().position(|&a| a == arch) {
                return i as u32;
            }
            if self.arch_ids.len() >= 16 {
                self.arch_lookup = (0..)
                    .zip(self.arch_ids.iter())
                    .map(|(i, &a)| (a, i))
                    .collect();
            }
        }
        if let Some(&i) = self.arch_lookup.get(arch) {
            return i;
        }
        let id = self.arch_ids.len() as u32;
        self.arch_ids.push(arch);
        self.index.arch_names.push(checked_str(arch).into_owned());
        if !self.arch_lookup.is_empty() {
            self.arch_lookup.insert(arch, id);
        }
        id
    }

    /// Reads the entry's map at `d` into `fields`, moving `d` past it unless it fails;
    /// everything but the arch and the metadata.
    fn read_entry(
        fields: &mut Fields<'a>,
        d: &mut Decoder<'a>,
        depth: usize,
        path: &Path<'_>,
        stored: &Stored,
    ) -> Result<Entry, ArchiveError> {
        fields.read_as::<ArchiveError>(d, path, depth, false)?;
        let ty = fields.str::<ArchiveError>(path, "type")?;
        if ty != "hsaco" {
            return Err(FieldError::Invalid {
                path: Path::Field(path, "type").to_string(),
                problem: format!("expected \"hsaco\", found {ty:?}"),
            }
            .into());
        }
        let count = stored.count();
        let ordinal = fields.uint::<ArchiveError>(path, "ordinal")?;
        let out_of_range = || ArchiveError::OrdinalOutOfRange {
            path: Path::Field(path, "ordinal").to_string(),
            ordinal,
            count,
        };
        // `count` fits in u32 (a zstd count is a u32; a u32 ordinal indexes any blob list a
        // TOC under 4 GiB can hold), so an in-range ordinal does too.
        let ordinal = u32::try_from(ordinal)
            .ok()
            .filter(|&o| (o as usize) < count)
            .ok_or_else(out_of_range)?;
        let original_size = fields.uint::<ArchiveError>(path, "original_size")?;
        let size_error = |problem: String| ArchiveError::BadOriginalSize {
            path: Path::Field(path, "original_size").to_string(),
            original_size,
            problem,
        };
        if original_size > MAX_ORIGINAL_SIZE {
            return Err(size_error(format!(
                "exceeds the {MAX_ORIGINAL_SIZE}-byte limit"
            )));
        }
        if let Stored::Blobs(blobs) = stored {
            let blob = blobs[ordinal as usize].len();
            if original_size != blob as u64 {
                return Err(size_error(format!("differs from the blob size {blob}")));
            }
        }
        Ok(Entry {
            arch: 0,
            ordinal,
            original_size,
            metadata: 0..0,
        })
    }
}

/// Appends an entry's `metadata` map (str → str) to `out`; returns where it went.
fn read_metadata(
    map: Node<'_>,
    entry: &Path<'_>,
    out: &mut Vec<(String, String)>,
) -> Result<Range<usize>, ArchiveError> {
    let path = Path::Field(entry, "metadata");
    let mut pairs = Fields::new();
    map.map_into::<ArchiveError>(&mut pairs, &path, false)?;
    let first = out.len();
    for (k, v) in pairs.iter() {
        let v = v.str::<ArchiveError>(&Path::Key(&path, &k))?;
        out.push((k.into_owned(), v.into_owned()));
    }
    Ok(first..out.len())
}

impl From<DecodeError> for ArchiveError {
    fn from(source: DecodeError) -> Self {
        ArchiveError::TocParse { source }
    }
}

fn layout_error(what: impl Into<String>, detail: impl Into<String>) -> ArchiveError {
    ArchiveError::BadLayout {
        what: what.into(),
        detail: detail.into(),
    }
}

/// `[offset, offset + size)` as a `usize` range, if it lies inside `data`.
fn checked_range(offset: u64, size: u64, data: &Range<u64>) -> Option<Range<usize>> {
    let end = offset.checked_add(size)?;
    (offset >= data.start && end <= data.end).then_some(offset as usize..end as usize)
}

/// `none`: the `blobs` array, each blob inside the data region.
fn blob_ranges(top: &Fields<'_>, data: &Range<u64>) -> Result<Vec<Range<usize>>, ArchiveError> {
    let path = Path::Field(&Path::Root, "blobs");
    let (n, mut d, depth) = top
        .req(&Path::Root, "blobs")?
        .array::<ArchiveError>(&path)?;
    let mut blob = Fields::new();
    let mut ranges = Vec::with_capacity(n);
    for i in 0..n {
        let bpath = Path::Index(&path, i);
        blob.read_as::<ArchiveError>(&mut d, &bpath, depth, false)?;
        let offset = blob.uint::<ArchiveError>(&bpath, "offset")?;
        let size = blob.uint::<ArchiveError>(&bpath, "size")?;
        let range = checked_range(offset, size, data).ok_or_else(|| {
            layout_error(
                format!("TOC: {bpath}"),
                format!(
                    "bytes {offset}+{size} lie outside the data region [{}, {})",
                    data.start, data.end
                ),
            )
        })?;
        ranges.push(range);
    }
    Ok(ranges)
}

/// `zstd-per-kernel`: the region, which must hold its `u32` frame count and room for that many
/// size prefixes. Only the count is read: the frames are located on first use.
fn zstd_region(top: &Fields<'_>, bytes: &[u8], data: &Range<u64>) -> Result<Stored, ArchiveError> {
    let offset = top.uint::<ArchiveError>(&Path::Root, "zstd_offset")?;
    let size = top.uint::<ArchiveError>(&Path::Root, "zstd_size")?;
    let region = checked_range(offset, size, data).ok_or_else(|| {
        layout_error(
            "zstd region",
            format!(
                "bytes {offset}+{size} (zstd_offset+zstd_size) lie outside the data region [{}, {})",
                data.start, data.end
            ),
        )
    })?;
    let count_at = region.start;
    let count = read_u32(bytes, count_at, &region, "the frame count")? as usize;
    // Each frame needs at least its 4-byte size prefix.
    let after = region.end - (count_at + 4);
    if count > after / 4 {
        return Err(layout_error(
            "zstd region",
            format!(
                "frame count {count} at byte {count_at} cannot fit in the {after} bytes that follow"
            ),
        ));
    }
    Ok(Stored::Zstd { region, count })
}

fn read_u32(
    bytes: &[u8],
    at: usize,
    region: &Range<usize>,
    what: &str,
) -> Result<u32, ArchiveError> {
    match bytes.get(at..at + 4).filter(|_| at + 4 <= region.end) {
        Some(b) => Ok(u32::from_le_bytes(b.try_into().expect("4-byte slice"))),
        None => Err(layout_error(
            "zstd region",
            format!(
                "expected {what} (u32) at byte {at}, region ends at {}",
                region.end
            ),
        )),
    }
}

/// Walks the size prefixes of a zstd region whose count [`zstd_region`] checked, and returns
/// each frame's range. The region must be exactly its frames.
pub(crate) fn frame_ranges(
    bytes: &[u8],
    region: &Range<usize>,
    count: usize,
) -> Result<Vec<Range<usize>>, ArchiveError> {
    let mut pos = region.start + 4;
    let mut frames = Vec::with_capacity(count);
    for i in 0..count {
        let at = pos;
        let len = read_u32(bytes, at, region, "a frame size")? as usize;
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
