//! The TOC's top-level map read in one pass into an [`Index`].

use std::collections::HashMap;
use std::ops::Range;

use super::entries::{Entries, MIN_ENTRY_BYTES};
use super::stored::{FRAME_SIZES_KEY, blob_table, check_references, region_error, zstd_region};
use super::{Binary, FrameTable, Index, Stored, layout_error, sort_binaries};
use crate::digest::TOC_KEY;
use crate::msgpack::{Cursor, DecodeError, FieldError, KeySet, Path, Source, once, required};
use crate::{ArchiveError, CompressionScheme, DATA_START, MAX_ORIGINAL_SIZE};

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

/// An [`ArchiveError`] the TOC reader met, boxed: the reader's results stay two words wide,
/// which keeps an open fast.
pub(super) struct Failed(pub(super) Box<ArchiveError>);

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
pub(super) struct TocReader<'a> {
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

impl<'a> TocReader<'a> {
    pub(super) fn new(bytes: &'a [u8], toc_at: usize, version: u32) -> Self {
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
    pub(super) fn read(mut self, c: &mut Cursor<'a>) -> Result<Index, Failed> {
        let top = self.read_top(c)?;
        self.finish(top)
    }

    /// The top-level map's fields; `toc` is read into the reader as it comes.
    fn read_top(&mut self, c: &mut Cursor<'a>) -> Result<Top<'a>, Failed> {
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
        Ok(top)
    }

    /// The index of the fields read: the required ones present, the stored kernels located,
    /// every entry checked against them, the binaries sorted.
    fn finish(self, top: Top<'a>) -> Result<Index, Failed> {
        let root = &Path::Root;
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
                        path: bpath.text(),
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
                        path: Path::Field(&epath, "ordinal").text(),
                        ordinal,
                        count,
                    },
                    Some(problem) => ArchiveError::BadOriginalSize {
                        path: Path::Field(&epath, "original_size").text(),
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
