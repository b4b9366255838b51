//! What [`crate::Archive::open`] learns from the header and the TOC.
//!
//! The TOC is read straight from its wire form in one pass, without building a msgpack tree:
//! binary names into one string, arch names interned, entries in one vector. Every byte of the
//! TOC is checked; values no field reads (unknown keys, the other scheme's fields) are checked
//! as msgpack and skipped. The first problem in wire order is reported, with the absolute byte
//! offset for a wire-form error and the field's path otherwise; paths are spelled only then.
//! What depends on fields that may come later (an entry's ordinal and size against the stored
//! blobs, a missing field, a repeated binary name) is checked after the pass.

//!
//! Modules: `reader` (the top-level map), `entries` (`toc[binary][arch]`), `stored` (the
//! blobs, frames or zstd region the entries point into).

mod entries;
mod reader;
mod stored;

use std::ops::Range;

use crate::digest::{self, ENTRY_KEY, TOC_KEY};
use crate::msgpack::{Cursor, DecodeError};
use crate::{
    ArchiveError, CompressionScheme, DATA_START, FORMAT_VERSION, FORMAT_VERSION_UNIFIED,
    HEADER_LEN, MAGIC,
};
use reader::{Failed, TocReader};
#[cfg(feature = "write")]
pub(crate) use stored::FRAME_SIZES_KEY;
pub(crate) use stored::{frame_ranges, region_error};

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
                        "TOC entry binary {}, arch {}",
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

#[cfg(test)]
mod tests {
    use super::entries::ENTRY_KEY_STR;
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
