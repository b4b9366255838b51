//! What [`crate::Archive::open`] learns from the header and the TOC.
//!
//! The TOC is read straight from its wire form in one pass, without building a msgpack tree:
//! binary names into one string, arch names interned, entries in one vector. Every byte of the
//! TOC is checked; values no field reads (unknown keys, the other scheme's fields) are checked
//! as msgpack and skipped. The first problem in wire order is reported, with the absolute byte
//! offset for a wire-form error and the field's path otherwise; paths are spelled only then.
//! What depends on fields that may come later (an entry's ordinal and size against the stored
//! blobs, a missing field, a repeated binary name) is checked after the pass.

use std::collections::HashMap;
use std::ops::Range;

use crate::digest::{self, ENTRY_KEY, TOC_KEY};
use crate::msgpack::{Cursor, DecodeError, FieldError, KeySet, Path, Source, once, required};
use crate::unified::MAX_CHAIN;
use crate::{
    ArchiveError, CompressionScheme, DATA_START, FORMAT_VERSION, FORMAT_VERSION_UNIFIED,
    HEADER_LEN, MAGIC, MAX_ORIGINAL_SIZE,
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
    /// Whether the TOC carries its digest, and so every entry its own ([`crate::digest`]).
    pub(crate) digests: bool,
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
    /// The decoded code object's XXH3-64 ([`crate::digest`]), in archives that carry digests.
    pub(crate) digest: Option<u64>,
}

/// Where the kernels are.
#[cfg_attr(test, derive(Debug, PartialEq))]
pub(crate) enum Stored {
    /// `none`: each blob's range of the file, by ordinal.
    Blobs(Vec<Range<usize>>),
    /// `zstd-per-kernel`: the region and its frame count, and the frames' ranges when the TOC
    /// gives their sizes (`zstd_frame_sizes`, [`FRAME_SIZES_KEY`]); otherwise the frames are
    /// located on first use by walking their size prefixes ([`frame_ranges`]).
    Zstd {
        region: Range<usize>,
        count: usize,
        located: Option<Vec<Range<usize>>>,
    },
    /// `unified`: each frame's range of the file and the ordinal of its reference frame.
    Unified(FrameTable),
}

/// Per ordinal, a blob's or frame's range of the file and (`unified`) its reference's ordinal.
pub(crate) type FrameTable = Vec<(Range<usize>, Option<u32>)>;

impl Stored {
    pub(crate) fn count(&self) -> usize {
        match self {
            Stored::Blobs(b) => b.len(),
            Stored::Zstd { count, .. } => *count,
            Stored::Unified(frames) => frames.len(),
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

    /// Every entry carries a digest if the TOC does, and none does if it does not: either way
    /// round, a digest was lost to damage (a renamed key), and what it covered is unproven.
    fn check_digests(&self, toc_at: usize) -> Result<(), ArchiveError> {
        for b in &self.binaries {
            for e in self.entries_of(b) {
                if e.digest.is_some() == self.digests {
                    continue;
                }
                let problem = if self.digests {
                    format!("the TOC carries {TOC_KEY}, but this entry has no {ENTRY_KEY}")
                } else {
                    format!("this entry carries {ENTRY_KEY}, but the TOC has no {TOC_KEY}")
                };
                return Err(ArchiveError::Damaged {
                    what: format!(
                        "TOC entry {:?} / {:?}",
                        self.binary_name(b),
                        self.arch_name(e)
                    ),
                    offset: toc_at as u64,
                    problem,
                });
            }
        }
        Ok(())
    }

    /// Reads the header and the TOC of the archive `bytes`, checking the TOC digest first
    /// when the file ends with one, so that a damaged header or TOC is reported as such
    /// rather than as whatever its damage happens to look like.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Index, ArchiveError> {
        let trailer = digest::stored_toc_digest(bytes);
        let (version, toc_at) = match (toc_start(bytes), trailer) {
            (Ok((_, toc_at)), Some(_)) if toc_at + digest::TOC_TRAILER_LEN > bytes.len() => {
                return Err(damaged_header(format!(
                    "toc_offset {toc_at} points into the TOC digest ending the file"
                )));
            }
            (Ok(start), _) => start,
            // Only kpack's writer ends a file with a TOC digest, and it writes a valid header:
            // this one was damaged since.
            (Err(e), Some(_)) => return Err(damaged_header(e.to_string())),
            (Err(e), None) => return Err(e),
        };
        if let Some((at, stored)) = trailer {
            let actual = digest::toc_digest(bytes, &bytes[toc_at..at]);
            if actual != stored {
                return Err(ArchiveError::Damaged {
                    what: "TOC".to_owned(),
                    offset: toc_at as u64,
                    problem: format!(
                        "its XXH3-64 is {actual:#018x}, the digest stored at byte {at} is \
                         {stored:#018x}"
                    ),
                });
            }
        }
        let index = read_toc(bytes, toc_at, version).map_err(|e| match trailer {
            None if digest::damaged_trailer(bytes) => ArchiveError::Damaged {
                what: "TOC".to_owned(),
                offset: toc_at as u64,
                problem: format!("the TOC digest ending the file has a damaged byte: {e}"),
            },
            _ => e,
        })?;
        if index.digests != trailer.is_some() {
            // The key is there but not as the trailer (or the reverse): not what a writer
            // makes, and the digest cannot be trusted to cover the TOC.
            return Err(ArchiveError::Damaged {
                what: "TOC".to_owned(),
                offset: toc_at as u64,
                problem: format!("{TOC_KEY} must be the TOC's last field, a bin 8 ending the file"),
            });
        }
        index.check_digests(toc_at)?;
        Ok(index)
    }
}

/// The TOC of `bytes` at `toc_at`, one msgpack map running to the end of the file.
fn read_toc(bytes: &[u8], toc_at: usize, version: u32) -> Result<Index, ArchiveError> {
    // The cursor reads the whole file from the TOC on, so its error offsets are file offsets.
    let mut c = Cursor::new(bytes, toc_at);
    if !c.at_map() {
        let found = c.found();
        c.skip()?;
        c.finish()?;
        return Err(ArchiveError::TocNotMap {
            toc_offset: toc_at as u64,
            found,
        });
    }
    let index = TocReader::new(bytes, toc_at, version)
        .read(&mut c)
        .map_err(|Failed(e)| *e)?;
    c.finish()?;
    Ok(index)
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

/// The header of an archive that ends with a TOC digest is wrong: `problem`.
fn damaged_header(problem: String) -> ArchiveError {
    ArchiveError::Damaged {
        what: "header".to_owned(),
        offset: 0,
        problem,
    }
}

/// Checks the 16-byte header; returns its version (1 or 2) and where the TOC starts.
fn toc_start(bytes: &[u8]) -> Result<(u32, usize), ArchiveError> {
    let len = bytes.len() as u64;
    if len < HEADER_LEN as u64 {
        return Err(ArchiveError::TooShort { len });
    }
    let found: [u8; 4] = bytes[0..4].try_into().expect("4-byte slice");
    if found != MAGIC {
        return Err(ArchiveError::BadMagic { found });
    }
    let version = u32::from_le_bytes(bytes[4..8].try_into().expect("4-byte slice"));
    if version != FORMAT_VERSION && version != FORMAT_VERSION_UNIFIED {
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
    Ok((version, toc_offset as usize))
}

/// An [`ArchiveError`] the TOC reader met, boxed: the reader's results stay two words wide,
/// which keeps an open fast.
struct Failed(Box<ArchiveError>);

impl<T: Into<ArchiveError>> From<T> for Failed {
    #[cold]
    fn from(e: T) -> Self {
        Failed(Box::new(e.into()))
    }
}

/// The top-level map's fields, as read.
#[derive(Default)]
struct Top<'a> {
    format_version: Option<u64>,
    group_name: Option<&'a str>,
    gfx_arch_family: Option<&'a str>,
    gfx_arches: Option<Vec<String>>,
    scheme: Option<&'a str>,
    toc: Option<()>,
    /// Read only for the scheme that uses them: what they hold, or what is wrong with them.
    blobs: Option<Result<Vec<Range<usize>>, Failed>>,
    zstd_offset: Option<Result<u64, Failed>>,
    zstd_size: Option<Result<u64, Failed>>,
    zstd_frame_sizes: Option<Result<&'a [u8], Failed>>,
    frames: Option<Result<FrameTable, Failed>>,
    toc_digest: Option<()>,
}

/// Reads the TOC into an [`Index`].
struct TocReader<'a> {
    bytes: &'a [u8],
    /// The data region: `[64, toc_offset)`.
    data: Range<u64>,
    /// The header's version, which `format_version` must repeat.
    version: u32,
    names: String,
    arch_names: Vec<String>,
    binaries: Vec<Binary>,
    arches: Arches<'a>,
    /// Per arch id, 1 + the last binary that listed it: repeats within a binary.
    listed_in: Vec<usize>,
    entries: Entries<'a>,
}

/// The entries read so far.
#[derive(Default)]
struct Entries<'a> {
    /// Every binary's, binary after binary.
    list: Vec<Entry>,
    metadata: Vec<(String, String)>,
    /// The first entry whose ordinal does not fit in a `u32` (its index and ordinal): out of
    /// range whatever is stored, reported once the count is known.
    wide_ordinal: Option<(usize, u64)>,
    /// Scratch: keys no field reads in the entry being read.
    others: KeySet<'a>,
}

/// Fewest TOC bytes an entry takes (an empty arch key, then a map holding `type: "hsaco"`, and
/// `ordinal` and `original_size` in one byte each): bounds what is reserved for entries before
/// they are read.
const MIN_ENTRY_BYTES: usize = 37;

impl<'a> TocReader<'a> {
    fn new(bytes: &'a [u8], toc_at: usize, version: u32) -> Self {
        TocReader {
            bytes,
            data: DATA_START..toc_at as u64,
            version,
            names: String::new(),
            arch_names: Vec::new(),
            binaries: Vec::new(),
            arches: Arches::default(),
            listed_in: Vec::new(),
            entries: Entries::default(),
        }
    }

    /// Reads the top-level map at `c`, then checks what needed all of it.
    fn read(mut self, c: &mut Cursor<'a>) -> Result<Index, Failed> {
        let root = &Path::Root;
        let mut top = Top::default();
        let mut others = KeySet::default();
        for _ in 0..c.map::<Failed>(root)? {
            let key = c.str_key::<Failed>(root)?;
            let path = &Path::Field(root, key);
            match key {
                "format_version" => {
                    let version = c.uint::<Failed>(path)?;
                    if version != u64::from(self.version) {
                        let what = "TOC format_version";
                        return Err(ArchiveError::UnsupportedVersion { what, version }.into());
                    }
                    once(&mut top.format_version, version, root, key)?;
                }
                "group_name" => once(&mut top.group_name, c.str::<Failed>(path)?, root, key)?,
                "gfx_arch_family" => {
                    once(&mut top.gfx_arch_family, c.str::<Failed>(path)?, root, key)?
                }
                "gfx_arches" => {
                    let mut arches = Vec::new();
                    for i in 0..c.array::<Failed>(path)? {
                        arches.push(c.str::<Failed>(&Path::Index(path, i))?.to_owned());
                    }
                    once(&mut top.gfx_arches, arches, root, key)?;
                }
                "compression_scheme" => once(&mut top.scheme, c.str::<Failed>(path)?, root, key)?,
                "toc" => {
                    once(&mut top.toc, (), root, key)?;
                    self.toc(c, path)?;
                }
                "blobs" => {
                    let blobs = deferred(c, |c| {
                        let table = blob_table(c, path, &self.data, false)?;
                        Ok(table.into_iter().map(|(range, _)| range).collect())
                    })?;
                    once(&mut top.blobs, blobs, root, key)?;
                }
                "frames" => {
                    let frames = deferred(c, |c| blob_table(c, path, &self.data, true))?;
                    once(&mut top.frames, frames, root, key)?;
                }
                "zstd_offset" => {
                    let offset = deferred(c, |c| c.uint::<Failed>(path))?;
                    once(&mut top.zstd_offset, offset, root, key)?;
                }
                "zstd_size" => {
                    let size = deferred(c, |c| c.uint::<Failed>(path))?;
                    once(&mut top.zstd_size, size, root, key)?;
                }
                FRAME_SIZES_KEY => {
                    let sizes = deferred(c, |c| c.bin::<Failed>(path))?;
                    once(&mut top.zstd_frame_sizes, sizes, root, key)?;
                }
                TOC_KEY => {
                    // Its value was checked against the TOC before parsing; here only that it
                    // is the trailer the check read (see `Index::parse`).
                    let value = c.bin::<Failed>(path)?;
                    if value.len() != 8 || c.room() != 0 {
                        return Err(ArchiveError::Damaged {
                            what: "TOC".to_owned(),
                            offset: self.data.end,
                            problem: format!(
                                "{TOC_KEY} must be the TOC's last field, a bin 8 ending the file"
                            ),
                        }
                        .into());
                    }
                    once(&mut top.toc_digest, (), root, key)?;
                }
                _ => others.skip_unknown::<Failed>(c, root, key)?,
            }
        }
        required(top.format_version, root, "format_version")?;
        let group_name = required(top.group_name, root, "group_name")?.to_owned();
        let gfx_arch_family = required(top.gfx_arch_family, root, "gfx_arch_family")?.to_owned();
        let gfx_arches = required(top.gfx_arches, root, "gfx_arches")?;
        // A missing scheme means `none` to both reference readers.
        let scheme = match top.scheme {
            None => CompressionScheme::None,
            Some(name) => CompressionScheme::from_name(name)
                .ok_or_else(|| ArchiveError::UnknownCompressionScheme(name.to_owned()))?,
        };
        if scheme.format_version() != self.version {
            return Err(ArchiveError::SchemeVersionMismatch {
                scheme: scheme.name(),
                version: self.version,
            }
            .into());
        }
        let stored = match scheme {
            CompressionScheme::None => Stored::Blobs(required(top.blobs, root, "blobs")??),
            CompressionScheme::Unified => {
                let frames = required(top.frames, root, "frames")??;
                check_references(&frames)?;
                Stored::Unified(frames)
            }
            CompressionScheme::ZstdPerKernel => {
                let offset = required(top.zstd_offset, root, "zstd_offset")??;
                let size = required(top.zstd_size, root, "zstd_size")??;
                let sizes = top.zstd_frame_sizes.transpose()?;
                let digests = top.toc_digest.is_some();
                zstd_region(offset, size, sizes, self.bytes, &self.data, digests)?
            }
        };
        required(top.toc, root, "toc")?;
        self.check_entries(&stored)
            .map_err(|Failed(e)| match (&stored, *e) {
                // The frame count is a data byte, the ordinals are in the TOC: with digests, the
                // TOC was proven intact.
                (Stored::Zstd { region, .. }, e @ ArchiveError::OrdinalOutOfRange { .. })
                    if top.toc_digest.is_some() =>
                {
                    let e = layout_error("zstd region", format!("its frame count is wrong: {e}"));
                    Failed(Box::new(region_error(e, region.start, true)))
                }
                (_, e) => Failed(Box::new(e)),
            })?;
        let sorted =
            sort_binaries(&self.names, &self.binaries).map_err(|i| FieldError::DuplicateKey {
                path: "toc".to_owned(),
                key: self.names[self.binaries[i as usize].name.clone()].to_owned(),
            })?;
        Ok(Index {
            group_name,
            gfx_arch_family,
            gfx_arches,
            scheme,
            names: self.names,
            arch_names: self.arch_names,
            binaries: self.binaries,
            sorted,
            entries: self.entries.list,
            metadata: self.entries.metadata,
            stored,
            digests: top.toc_digest.is_some(),
        })
    }

    /// `toc`: binary name → arch → entry.
    fn toc(&mut self, c: &mut Cursor<'a>, path: &Path<'_>) -> Result<(), Failed> {
        let n = c.map::<Failed>(path)?;
        self.binaries.reserve_exact(n);
        self.names.reserve((n * 32).min(c.room()));
        for b in 1..=n {
            let name = c.str_key::<Failed>(path)?;
            let range = self.names.len()..self.names.len() + name.len();
            self.names.push_str(name);
            let first = self.entries.list.len();
            let bpath = &Path::Key(path, name);
            let arches = c.map::<Failed>(bpath)?;
            if b == 1 {
                let guess = n.saturating_mul(arches);
                let most = c.room() / MIN_ENTRY_BYTES;
                self.entries.list.reserve(guess.min(most));
            }
            for k in 0..arches {
                let key = c.key_bytes::<Failed>(bpath)?;
                let arch = match self.arches.find(key, k) {
                    Some(id) => id as usize,
                    None => {
                        let name = c.utf8(key)?;
                        let id = self.arches.add(key, name, &mut self.arch_names);
                        self.listed_in.push(0);
                        id as usize
                    }
                };
                let key = &self.arch_names[arch];
                if std::mem::replace(&mut self.listed_in[arch], b) == b {
                    return Err(FieldError::DuplicateKey {
                        path: bpath.to_string(),
                        key: key.to_owned(),
                    }
                    .into());
                }
                let entry = self.entries.read(c, &Path::Key(bpath, key), arch as u32)?;
                self.entries.list.push(entry);
            }
            self.binaries.push(Binary {
                name: range,
                entries: first..self.entries.list.len(),
            });
        }
        Ok(())
    }

    /// Checks every entry's ordinal and original size against what is stored, in TOC order.
    fn check_entries(&self, stored: &Stored) -> Result<(), Failed> {
        let count = stored.count();
        for b in &self.binaries {
            for (i, e) in self.entries.list[b.entries.clone()].iter().enumerate() {
                let at = b.entries.start + i;
                let ordinal = match self.entries.wide_ordinal {
                    Some((wide, ordinal)) if wide == at => ordinal,
                    _ => e.ordinal.into(),
                };
                let problem = match ordinal_index(ordinal, count) {
                    None => Some(None),
                    Some(o) => size_problem(e.original_size, o, stored).map(Some),
                };
                let Some(problem) = problem else {
                    continue;
                };
                let toc = Path::Field(&Path::Root, "toc");
                let bpath = Path::Key(&toc, &self.names[b.name.clone()]);
                let epath = Path::Key(&bpath, &self.arch_names[e.arch as usize]);
                let e = match problem {
                    None => ArchiveError::OrdinalOutOfRange {
                        path: Path::Field(&epath, "ordinal").to_string(),
                        ordinal,
                        count,
                    },
                    Some(problem) => ArchiveError::BadOriginalSize {
                        path: Path::Field(&epath, "original_size").to_string(),
                        original_size: e.original_size,
                        problem,
                    },
                };
                return Err(e.into());
            }
        }
        Ok(())
    }
}

impl<'a> Entries<'a> {
    /// One entry's map: `type`, `ordinal`, `original_size` and optional `metadata`. The
    /// ordinal and size are checked against the stored kernels once those are known.
    fn read(&mut self, c: &mut Cursor<'a>, path: &Path<'_>, arch: u32) -> Result<Entry, Failed> {
        let at = c.clone();
        if let Some((ordinal, original_size, digest)) = canonical_entry(c) {
            return Ok(self.entry(arch, ordinal, original_size, 0..0, digest));
        }
        *c = at;
        let (mut hsaco, mut ordinal, mut original_size, mut metadata) = (None, None, None, None);
        let mut digest = None;
        self.others.clear();
        for _ in 0..c.map::<Failed>(path)? {
            match c.key_bytes::<Failed>(path)? {
                b"type" => {
                    let field = &Path::Field(path, "type");
                    let ty = c.str_bytes::<Failed>(field)?;
                    if ty != b"hsaco" {
                        let ty = String::from_utf8_lossy(ty);
                        return Err(FieldError::Invalid {
                            path: field.to_string(),
                            problem: format!("expected \"hsaco\", found {ty:?}"),
                        }
                        .into());
                    }
                    once(&mut hsaco, (), path, "type")?;
                }
                b"ordinal" => {
                    let n = c.uint::<Failed>(&Path::Field(path, "ordinal"))?;
                    once(&mut ordinal, n, path, "ordinal")?;
                }
                b"original_size" => {
                    let n = c.uint::<Failed>(&Path::Field(path, "original_size"))?;
                    once(&mut original_size, n, path, "original_size")?;
                }
                b"metadata" => {
                    let m = self.metadata(c, &Path::Field(path, "metadata"))?;
                    once(&mut metadata, m, path, "metadata")?;
                }
                key if key == ENTRY_KEY.as_bytes() => {
                    let n = c.uint::<Failed>(&Path::Field(path, ENTRY_KEY))?;
                    once(&mut digest, n, path, ENTRY_KEY)?;
                }
                key => {
                    let key = c.utf8(key)?;
                    self.others.skip_unknown::<Failed>(c, path, key)?;
                }
            }
        }
        required(hsaco, path, "type")?;
        let ordinal = required(ordinal, path, "ordinal")?;
        let original_size = required(original_size, path, "original_size")?;
        let metadata = metadata.unwrap_or(0..0);
        Ok(self.entry(arch, ordinal, original_size, metadata, digest))
    }

    /// The entry of the fields read, its ordinal narrowed (a wide one is noted).
    fn entry(
        &mut self,
        arch: u32,
        ordinal: u64,
        original_size: u64,
        metadata: Range<usize>,
        digest: Option<u64>,
    ) -> Entry {
        let narrow = u32::try_from(ordinal).unwrap_or_else(|_| {
            self.wide_ordinal.get_or_insert((self.list.len(), ordinal));
            u32::MAX
        });
        Entry {
            arch,
            ordinal: narrow,
            original_size,
            metadata,
            digest,
        }
    }

    /// An entry's `metadata` map (str → str), appended to `metadata`.
    fn metadata(&mut self, c: &mut Cursor<'a>, path: &Path<'_>) -> Result<Range<usize>, Failed> {
        let first = self.metadata.len();
        let mut keys = KeySet::default();
        for _ in 0..c.map::<Failed>(path)? {
            let key = c.str_key::<Failed>(path)?;
            let value = c.str::<Failed>(&Path::Key(path, key))?;
            keys.note(path, key)?;
            self.metadata.push((key.to_owned(), value.to_owned()));
        }
        Ok(first..self.metadata.len())
    }
}

/// An entry map as our writer (with the digest) or the reference writer (without) encodes it
/// when it has no metadata: `type: "hsaco"`, `ordinal`, `original_size` and then the digest,
/// in that order. `None` for any other encoding, which [`Entries::read`] then reads field by
/// field (the cursor is restored by the caller).
#[inline]
fn canonical_entry(c: &mut Cursor<'_>) -> Option<(u64, u64, Option<u64>)> {
    writers_map(
        c,
        Some(b"\x84\xa4type\xa5hsaco\xa7ordinal"),
        b"\x83\xa4type\xa5hsaco\xa7ordinal",
        b"\xadoriginal_size",
        ENTRY_KEY_STR,
    )
}

/// The uints of a map in the one encoding our writers give it: `whole` (its header and all
/// before the first value) or `short` (the same map without its last key), a uint, `second`
/// (a fixstr) and its uint, then, in a whole map, `last` and its uint. `None` for any other
/// encoding: the caller then restores the cursor and reads the map field by field.
#[inline]
fn writers_map<const W: usize, const S: usize, const K: usize, const L: usize>(
    c: &mut Cursor<'_>,
    whole: Option<&[u8; W]>,
    short: &[u8; S],
    second: &[u8; K],
    last: &[u8; L],
) -> Option<(u64, u64, Option<u64>)> {
    let is_whole = whole.is_some_and(|header| c.eat(header));
    if !is_whole && !c.eat(short) {
        return None;
    }
    let first = c.uint::<Failed>(&Path::Root).ok()?;
    if !c.eat(second) {
        return None;
    }
    let second = c.uint::<Failed>(&Path::Root).ok()?;
    if !is_whole {
        return Some((first, second, None));
    }
    if !c.eat(last) {
        return None;
    }
    Some((first, second, Some(c.uint::<Failed>(&Path::Root).ok()?)))
}

/// [`ENTRY_KEY`] as a msgpack fixstr.
const ENTRY_KEY_STR: &[u8; 5] = b"\xa4xxh3";

/// Reads a value with `read`, or skips it if `read` finds it wrong, keeping what is wrong: for
/// a field only one scheme uses. Fails only if the value is not well-formed msgpack.
fn deferred<'a, T>(
    c: &mut Cursor<'a>,
    read: impl FnOnce(&mut Cursor<'a>) -> Result<T, Failed>,
) -> Result<Result<T, Failed>, DecodeError> {
    let at = c.clone();
    match read(c) {
        Ok(v) => Ok(Ok(v)),
        Err(e) => {
            *c = at;
            c.skip()?;
            Ok(Err(e))
        }
    }
}

/// Indices into `binaries`, byte-wise sorted by name; or the index of the first binary (in TOC
/// order) whose name repeats an earlier one's.
fn sort_binaries(names: &str, binaries: &[Binary]) -> Result<Vec<u32>, u32> {
    let name = |i: u32| names[binaries[i as usize].name.clone()].as_bytes();
    // A library's keys share a long prefix (`lib/librocsparse.so.0.1#`): the sort compares
    // the 8 bytes after the prefix all names share, as one integer, and whole names only where
    // those are equal, which saves most of the cost of sorting at open.
    let first = binaries
        .first()
        .map_or(&[][..], |b| names[b.name.clone()].as_bytes());
    let shared = binaries.iter().fold(first.len(), |n, b| {
        let other = names[b.name.clone()].as_bytes();
        first[..n]
            .iter()
            .zip(other)
            .take_while(|(a, b)| a == b)
            .count()
    });
    let keys: Vec<u64> = binaries
        .iter()
        .map(|b| {
            let mut key = [0u8; 8];
            let rest = &names.as_bytes()[b.name.start + shared..b.name.end];
            let n = rest.len().min(8);
            key[..n].copy_from_slice(&rest[..n]);
            u64::from_be_bytes(key)
        })
        .collect();
    let mut sorted: Vec<u32> = (0..binaries.len() as u32).collect();
    // Stable: equal names stay in TOC order, so each run's second is its first repeat.
    sorted.sort_by(|&a, &b| {
        keys[a as usize]
            .cmp(&keys[b as usize])
            .then_with(|| name(a).cmp(name(b)))
    });
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
        Stored::Zstd { .. } | Stored::Unified(_) => None,
    }
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

/// `none`'s `blobs` or `unified`'s `frames` (`with_refs`, each with an optional `ref`): the
/// array of `{offset, size}` maps, each blob inside the data region.
fn blob_table(
    c: &mut Cursor<'_>,
    path: &Path<'_>,
    data: &Range<u64>,
    with_refs: bool,
) -> Result<FrameTable, Failed> {
    let n = c.array::<Failed>(path)?;
    // Each element takes at least one byte: the count cannot reserve more than the input.
    let mut ranges = Vec::with_capacity(n.min(c.room()));
    let mut others = KeySet::default();
    for i in 0..n {
        let bpath = &Path::Index(path, i);
        let at = c.clone();
        let (offset, size, reference) = match canonical_blob(c, with_refs) {
            Some(fields) => fields,
            None => {
                *c = at;
                blob_fields(c, bpath, with_refs, &mut others)?
            }
        };
        let reference = match reference {
            Some(n) if n >= i as u64 => {
                return Err(FieldError::Invalid {
                    path: Path::Field(bpath, "ref").to_string(),
                    problem: format!("{n} is not an earlier frame's ordinal"),
                }
                .into());
            }
            // Below `i`, which is below the element count.
            reference => reference.map(|n| n as u32),
        };
        let range = checked_range(offset, size, data).ok_or_else(|| {
            layout_error(
                format!("TOC: {bpath}"),
                format!(
                    "bytes {offset}+{size} lie outside the data region [{}, {})",
                    data.start, data.end
                ),
            )
        })?;
        ranges.push((range, reference));
    }
    Ok(ranges)
}

/// A blob or frame map as our writer encodes it: `offset`, `size` and, for a frame coded
/// against another, `ref`, in that order. `None` for any other encoding, which
/// [`blob_fields`] then reads (the cursor is restored by the caller).
#[inline]
fn canonical_blob(c: &mut Cursor<'_>, with_refs: bool) -> Option<(u64, u64, Option<u64>)> {
    writers_map(
        c,
        with_refs.then_some(b"\x83\xa6offset"),
        b"\x82\xa6offset",
        b"\xa4size",
        b"\xa3ref",
    )
}

/// A blob or frame map in any encoding: its `offset`, `size` and `ref` (`with_refs`), unknown
/// keys skipped.
fn blob_fields<'a>(
    c: &mut Cursor<'a>,
    bpath: &Path<'_>,
    with_refs: bool,
    others: &mut KeySet<'a>,
) -> Result<(u64, u64, Option<u64>), Failed> {
    let (mut offset, mut size, mut reference) = (None, None, None);
    others.clear();
    for _ in 0..c.map::<Failed>(bpath)? {
        match c.key_bytes::<Failed>(bpath)? {
            b"offset" => {
                let n = c.uint::<Failed>(&Path::Field(bpath, "offset"))?;
                once(&mut offset, n, bpath, "offset")?;
            }
            b"size" => {
                let n = c.uint::<Failed>(&Path::Field(bpath, "size"))?;
                once(&mut size, n, bpath, "size")?;
            }
            b"ref" if with_refs => {
                let n = c.uint::<Failed>(&Path::Field(bpath, "ref"))?;
                once(&mut reference, n, bpath, "ref")?;
            }
            key => {
                let key = c.utf8(key)?;
                others.skip_unknown::<Failed>(c, bpath, key)?;
            }
        }
    }
    let offset = required(offset, bpath, "offset")?;
    let size = required(size, bpath, "size")?;
    Ok((offset, size, reference))
}

/// `unified`: no chain of references is longer than [`MAX_CHAIN`] frames (a reference may
/// itself be coded against a standalone frame, no further).
fn check_references(frames: &[(Range<usize>, Option<u32>)]) -> Result<(), ArchiveError> {
    for (i, (_, reference)) in frames.iter().enumerate() {
        // `ref` < own ordinal was checked, so frames before i have their chain lengths right.
        let mut length = 1;
        let mut next = *reference;
        while let Some(r) = next {
            length += 1;
            if length > MAX_CHAIN {
                return Err(layout_error(
                    format!("TOC: frames[{i}].ref"),
                    format!(
                        "frame {i} decodes through a chain of more than {MAX_CHAIN} frames \
                         (its reference {} is coded against a delta frame)",
                        reference.unwrap_or(r)
                    ),
                ));
            }
            next = frames[r as usize].1;
        }
    }
    Ok(())
}

/// `zstd-per-kernel`: the region of `size` bytes at `offset`, which must hold its `u32` frame
/// count and room for that many size prefixes. Only the count is read; the frames are located
/// from `frame_sizes` (the TOC's `zstd_frame_sizes`) when given, else on first use.
/// `digests`: the archive carries digests ([`region_error`]).
fn zstd_region(
    offset: u64,
    size: u64,
    frame_sizes: Option<&[u8]>,
    bytes: &[u8],
    data: &Range<u64>,
    digests: bool,
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
        let e = layout_error(
            "zstd region",
            format!(
                "frame count {count} at byte {count_at} cannot fit in the {after} bytes that follow"
            ),
        );
        return Err(region_error(e, count_at, digests));
    }
    let located = match frame_sizes {
        None => None,
        Some(sizes) if sizes.len() != 4 * count => {
            let e = layout_error(
                "zstd region",
                format!(
                    "frame count {count} at byte {count_at}, but the TOC's {FRAME_SIZES_KEY} \
                     holds {} bytes, not 4 per frame",
                    sizes.len()
                ),
            );
            return Err(region_error(e, count_at, digests));
        }
        Some(sizes) => {
            let size = |i: usize, _| {
                let at = 4 * i;
                Ok(u32::from_le_bytes(
                    sizes[at..at + 4].try_into().expect("4 bytes"),
                ))
            };
            Some(
                locate_frames(&region, count, size)
                    .map_err(|e| region_error(e, count_at, digests))?,
            )
        }
    };
    Ok(Stored::Zstd {
        region,
        count,
        located,
    })
}

/// The TOC key giving, for `zstd-per-kernel`, every frame's size (without its prefix) as a
/// `bin` of `u32` LE, in ordinal order: a reader locates any frame without walking the size
/// prefixes of those before it (a walk faults in a page per frame: 1 ms of a first load from a
/// 777-frame archive). The reference readers ignore it; it must agree with the prefixes.
pub(crate) const FRAME_SIZES_KEY: &str = "zstd_frame_sizes";

/// `e`, a [`ArchiveError::BadLayout`] of the zstd region starting at `region_start`: its frame
/// count or size prefixes do not add up. They are data bytes, which the TOC digest does not
/// cover: in an archive with digests (`digests`), whose TOC locating them was proven intact,
/// they were damaged.
pub(crate) fn region_error(e: ArchiveError, region_start: usize, digests: bool) -> ArchiveError {
    match e {
        ArchiveError::BadLayout { what, detail } if digests => ArchiveError::Damaged {
            what,
            offset: region_start as u64,
            problem: detail,
        },
        e => e,
    }
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
    locate_frames(region, count, |_, at| {
        read_u32(bytes, at, region, "a frame size")
    })
}

/// Each frame's range of a zstd region of `count` frames whose frame `i`, its prefix at byte
/// `at`, is `size(i, at)` bytes long. The region must be exactly its frames.
fn locate_frames(
    region: &Range<usize>,
    count: usize,
    size: impl Fn(usize, usize) -> Result<u32, ArchiveError>,
) -> Result<Vec<Range<usize>>, ArchiveError> {
    let mut pos = region.start + 4;
    let mut frames = Vec::with_capacity(count);
    for i in 0..count {
        let at = pos;
        if 4 > region.end - at {
            return Err(layout_error(
                "zstd region",
                format!(
                    "expected a frame size (u32) at byte {at}, region ends at {}",
                    region.end
                ),
            ));
        }
        let len = size(i, at)? as usize;
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

    fn binaries(names: &[&str]) -> (String, Vec<Binary>) {
        let mut all = String::new();
        let mut list = Vec::new();
        for name in names {
            list.push(Binary {
                name: all.len()..all.len() + name.len(),
                entries: 0..0,
            });
            all.push_str(name);
        }
        (all, list)
    }

    #[test]
    fn binaries_sort_byte_wise_past_their_shared_prefix_and_its_first_eight_bytes() {
        let names = [
            "lib/librocsparse.so.0.1#10",
            "lib/librocsparse.so.0.1#2",
            "lib/librocsparse.so.0.1#1",
            "lib/librocsparse.so.0.1#1\0",
            "lib/librocsparse.so.0.1#12345678b",
            "lib/librocsparse.so.0.1#12345678a",
            "lib/librocsparse.so.0.1#12345678",
            "lib/librocsparse.so.0.1#",
        ];
        let (all, list) = binaries(&names);
        let sorted = sort_binaries(&all, &list).unwrap();
        let got: Vec<&str> = sorted.iter().map(|&i| names[i as usize]).collect();
        let mut expected = names.to_vec();
        expected.sort();
        assert_eq!(got, expected);
    }

    #[test]
    fn the_entry_fast_path_knows_the_digest_key_as_the_writer_encodes_it() {
        let mut e = crate::msgpack::Encoder::default();
        e.str(ENTRY_KEY).unwrap();
        assert_eq!(e.into_bytes(), ENTRY_KEY_STR);
    }

    #[test]
    fn the_first_repeated_binary_name_in_toc_order_is_reported() {
        let (all, list) = binaries(&["b#1", "a#0", "b#1", "a#0"]);
        assert_eq!(sort_binaries(&all, &list), Err(2));
        let (all, list) = binaries(&["only"]);
        assert_eq!(sort_binaries(&all, &list), Ok(vec![0]));
        let (all, list) = binaries(&[]);
        assert_eq!(sort_binaries(&all, &list), Ok(vec![]));
    }
}
