//! What [`crate::Archive::open`] learns from the header and the TOC.
//!
//! The TOC is read straight from its wire form, without building a msgpack tree, in one pass
//! ([`fast`]) that checks every byte of it and everything below but only learns *whether*
//! something is wrong. When something is, the TOC is read again by the detailed reader here,
//! which finds and reports the error: in two passes, the first reading the top-level map and
//! checking every byte of the TOC as a full decode would (so msgpack errors come first), the
//! second checking the fields in a fixed order. Both read `toc` the same way: binary names into
//! one string, arch names interned, entries in one vector. Paths for error messages are
//! spelled only when an error is reported.

use std::collections::HashMap;
use std::ops::Range;

mod fast;

use crate::msgpack::schema::{Distinct, Fields, Node, Path, wrong};
use crate::msgpack::{DecodeError, Decoder, FieldError, Head, checked_str};
use crate::{
    ArchiveError, CompressionScheme, DATA_START, FORMAT_VERSION, HEADER_LEN, MAGIC,
    MAX_ORIGINAL_SIZE,
};

#[cfg_attr(test, derive(Debug, PartialEq))]
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

#[cfg_attr(test, derive(Debug, PartialEq))]
pub(crate) struct Binary {
    name: Range<usize>,
    entries: Range<usize>,
}

#[derive(Clone)]
#[cfg_attr(test, derive(Debug, PartialEq))]
pub(crate) struct Entry {
    arch: u32,
    pub(crate) ordinal: u32,
    pub(crate) original_size: u64,
    metadata: Range<usize>,
}

/// Where the kernels are.
#[cfg_attr(test, derive(Debug, PartialEq))]
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
        let toc_at = toc_start(bytes)?;
        match fast::read(bytes, toc_at) {
            Some(index) => Ok(index),
            None => Self::parse_checked(bytes, toc_at),
        }
    }

    /// Reads the TOC at `toc_at` with the detailed reader: the error [`fast::read`] met.
    #[cold]
    fn parse_checked(bytes: &[u8], toc_at: usize) -> Result<Index, ArchiveError> {
        let toc_offset = toc_at as u64;
        // The decoder reads the whole file from the TOC on, so its error offsets are file
        // offsets.
        let mut d = Decoder::at(bytes, toc_at);

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
            CompressionScheme::ZstdPerKernel => {
                let offset = top.uint::<ArchiveError>(root, "zstd_offset")?;
                let size = top.uint::<ArchiveError>(root, "zstd_size")?;
                zstd_region(offset, size, bytes, &data)?
            }
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

/// Interns arch keys: ids in first-seen order, each id's name in [`Index::arch_names`].
#[derive(Default)]
struct Arches<'a> {
    ids: Vec<&'a [u8]>,
    /// Empty while there are few arches (7 in a librocsparse archive), which are scanned.
    lookup: HashMap<&'a [u8], u32>,
}

impl<'a> Arches<'a> {
    const SCANNED: usize = 16;

    /// The id of `arch`, trying `hint` first: binaries tend to list their arches in the same
    /// order.
    fn find(&self, arch: &[u8], hint: usize) -> Option<u32> {
        if self.ids.get(hint) == Some(&arch) {
            return Some(hint as u32);
        }
        if self.lookup.is_empty() {
            let i = self.ids.iter().position(|&a| a == arch)?;
            Some(i as u32)
        } else {
            self.lookup.get(arch).copied()
        }
    }

    /// Adds `arch`, which [`Arches::find`] did not find, named `name`.
    fn add(&mut self, arch: &'a [u8], name: &str, names: &mut Vec<String>) -> u32 {
        let id = self.ids.len() as u32;
        self.ids.push(arch);
        names.push(name.to_owned());
        if !self.lookup.is_empty() {
            self.lookup.insert(arch, id);
        } else if self.ids.len() > Self::SCANNED {
            self.lookup = (0..).zip(&self.ids).map(|(i, &a)| (a, i)).collect();
        }
        id
    }
}

/// Checks the 16-byte header; returns where the TOC starts.
fn toc_start(bytes: &[u8]) -> Result<usize, ArchiveError> {
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
    Ok(toc_offset as usize)
}

/// Reads `toc` into an [`Index`]. Problems are reported in the order a reader that first
/// checked every key of `toc`, then every key of each binary's map before its entries, would
/// meet them: a bad binary key outranks any problem inside a binary, a bad arch key any
/// problem inside that binary's entries.
struct TocReader<'a, 'i> {
    bytes: &'a [u8],
    index: &'i mut Index,
    arches: Arches<'a>,
    fields: Fields<'a>,
}

impl<'a, 'i> TocReader<'a, 'i> {
    fn new(bytes: &'a [u8], index: &'i mut Index) -> Self {
        TocReader {
            bytes,
            index,
            arches: Arches::default(),
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
        match sort_binaries(&ix.names, &ix.binaries) {
            Ok(sorted) => {
                ix.sorted = sorted;
                Ok(())
            }
            Err(i) => Err(FieldError::DuplicateKey {
                path: path.to_string(),
                key: ix.names[ix.binaries[i as usize].name.clone()].to_owned(),
            }
            .into()),
        }
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
        for k in 0..n {
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
            let id = match self.arches.find(arch, k) {
                Some(id) => id,
                None => {
                    let name = checked_str(arch);
                    self.arches.add(arch, &name, &mut self.index.arch_names)
                }
            };
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
        let ordinal = ordinal_index(ordinal, count).ok_or_else(out_of_range)?;
        let original_size = fields.uint::<ArchiveError>(path, "original_size")?;
        if let Some(problem) = size_problem(original_size, ordinal, stored) {
            return Err(ArchiveError::BadOriginalSize {
                path: Path::Field(path, "original_size").to_string(),
                original_size,
                problem,
            });
        }
        Ok(Entry {
            arch: 0,
            ordinal,
            original_size,
            metadata: 0..0,
        })
    }
}

/// Indices into `binaries`, byte-wise sorted by name; or the index of the first binary (in TOC
/// order) whose name repeats an earlier one's.
fn sort_binaries(names: &str, binaries: &[Binary]) -> Result<Vec<u32>, u32> {
    let name = |i: u32| names[binaries[i as usize].name.clone()].as_bytes();
    let mut sorted: Vec<u32> = (0..binaries.len() as u32).collect();
    // Stable: equal names stay in TOC order, so each run's second is its first repeat.
    sorted.sort_by(|&a, &b| name(a).cmp(name(b)));
    let repeat = sorted
        .windows(2)
        .filter(|w| name(w[0]) == name(w[1]))
        .map(|w| w[1])
        .min();
    repeat.map_or(Ok(sorted), Err)
}

/// An entry's `ordinal` as an index into the `count` stored blobs or frames, if in range.
fn ordinal_index(ordinal: u64, count: usize) -> Option<u32> {
    // `count` fits in u32 (a zstd count is a u32; a u32 ordinal indexes any blob list a TOC
    // under 4 GiB can hold), so an in-range ordinal does too.
    u32::try_from(ordinal)
        .ok()
        .filter(|&o| (o as usize) < count)
}

/// What is wrong with an entry's `original_size`, if anything; `ordinal` is in range.
fn size_problem(original_size: u64, ordinal: u32, stored: &Stored) -> Option<String> {
    if original_size > MAX_ORIGINAL_SIZE {
        return Some(format!("exceeds the {MAX_ORIGINAL_SIZE}-byte limit"));
    }
    match stored {
        Stored::Blobs(blobs) => {
            let blob = blobs[ordinal as usize].len();
            (original_size != blob as u64).then(|| format!("differs from the blob size {blob}"))
        }
        Stored::Zstd { .. } => None,
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

/// `zstd-per-kernel`: the region of `size` bytes at `offset`, which must hold its `u32` frame
/// count and room for that many size prefixes. Only the count is read: the frames are located
/// on first use.
fn zstd_region(
    offset: u64,
    size: u64,
    bytes: &[u8],
    data: &Range<u64>,
) -> Result<Stored, ArchiveError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgpack::{self, Value};
    use crate::{ArchiveWriter, Compression};

    fn vector(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/vectors")
            .join(name);
        std::fs::read(path).unwrap()
    }

    /// The fast reader accepts exactly what the detailed one accepts, with the same index.
    fn assert_readers_agree(bytes: &[u8], what: &str) {
        let Ok(toc_at) = toc_start(bytes) else {
            return;
        };
        let fast = fast::read(bytes, toc_at);
        match (fast, Index::parse_checked(bytes, toc_at)) {
            (Some(f), Ok(d)) => assert_eq!(f, d, "{what}"),
            (None, Err(_)) => {}
            (f, d) => panic!("{what}: fast {:?}, detailed {:?}", f.is_some(), d.err()),
        }
    }

    /// Archives with every optional part: metadata, unknown keys at each level, a missing
    /// scheme, the other scheme's fields.
    fn samples() -> Vec<Vec<u8>> {
        let mut out = vec![vector("test_noop.kpack"), vector("test_zstd.kpack")];
        for compression in [Compression::None, Compression::zstd()] {
            let mut w = ArchiveWriter::new("g", "gfx9", compression);
            let meta = [("k".to_owned(), "v".to_owned()), ("é".into(), "w".into())];
            w.add("a#0", "gfx900", vec![1u8; 5], &meta).unwrap();
            w.add("a#0", "gfx906", vec![2u8; 6], &[]).unwrap();
            w.add("b#0", "gfx906", vec![1u8; 5], &meta[1..]).unwrap();
            let mut bytes = Vec::new();
            w.write_to(&mut bytes).unwrap();
            out.push(edit(&bytes, |top| {
                let extra = |v: Value| (Value::from("x"), v);
                top.insert(2, extra(Value::Array(vec![Value::Nil, Value::F64(1.0)])));
                for (k, v) in top.iter_mut() {
                    match (k.as_str(), v) {
                        (Some("toc"), Value::Map(bins)) => {
                            let Value::Map(arches) = &mut bins[0].1 else {
                                panic!()
                            };
                            let Value::Map(entry) = &mut arches[1].1 else {
                                panic!()
                            };
                            entry.insert(1, extra(Value::Bin(vec![0; 3])));
                        }
                        (Some("blobs"), Value::Array(blobs)) => {
                            let Value::Map(blob) = &mut blobs[0] else {
                                panic!()
                            };
                            blob.push(extra(Value::Int(-3)));
                        }
                        _ => {}
                    }
                }
                let other = match compression.scheme() {
                    CompressionScheme::None => ("zstd_size", Value::from("?")),
                    CompressionScheme::ZstdPerKernel => ("blobs", Value::Nil),
                };
                top.push((other.0.into(), other.1));
            }));
            out.push(bytes);
        }
        out
    }

    fn edit(archive: &[u8], f: impl FnOnce(&mut Vec<(Value, Value)>)) -> Vec<u8> {
        let at = toc_start(archive).unwrap();
        let Value::Map(mut top) = msgpack::decode_exact(&archive[at..]).unwrap() else {
            panic!()
        };
        f(&mut top);
        let mut out = archive[..at].to_vec();
        msgpack::encode_into(&Value::Map(top), &mut out).unwrap();
        out
    }

    #[test]
    fn the_fast_reader_agrees_with_the_detailed_one_on_every_small_corruption() {
        for (n, sample) in samples().into_iter().enumerate() {
            let toc_at = toc_start(&sample).unwrap();
            assert!(fast::read(&sample, toc_at).is_some(), "sample {n}");
            for i in toc_at..sample.len() {
                let byte = sample[i];
                let values = [
                    0x00, 0x01, 0x7f, 0x80, 0x81, 0x90, 0x91, 0xa0, 0xa1, 0xc0, 0xc1,
                ]
                .into_iter()
                .chain([0xc4, 0xca, 0xcc, 0xd0, 0xd9, 0xdc, 0xde, 0xe0, 0xff])
                .chain([
                    byte ^ 1,
                    byte ^ 0x20,
                    byte.wrapping_add(1),
                    byte.wrapping_sub(1),
                ]);
                for value in values {
                    let mut b = sample.clone();
                    b[i] = value;
                    assert_readers_agree(&b, &format!("sample {n}, byte {i} = {value:#x}"));
                }
                let mut b = sample.clone();
                b.remove(i);
                assert_readers_agree(&b, &format!("sample {n}, byte {i} removed"));
                b.insert(i, byte);
                b.insert(i, byte);
                assert_readers_agree(&b, &format!("sample {n}, byte {i} doubled"));
                assert_readers_agree(&sample[..i], &format!("sample {n}, cut at {i}"));
            }
        }
    }
}
