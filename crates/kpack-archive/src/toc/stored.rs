//! Where the kernels are: `none`'s blobs, `unified`'s frames, `zstd-per-kernel`'s region and
//! its frames, each checked to lie in the data region.

use std::ops::Range;

use super::entries::writers_map;
use super::reader::Failed;
use super::{FrameTable, Stored, layout_error};
use crate::ArchiveError;
use crate::msgpack::{Cursor, FieldError, KeySet, Path, Source, once, required};
use crate::unified::MAX_CHAIN;

/// `[offset, offset + size)` as a `usize` range, if it lies inside `data`.
fn checked_range(offset: u64, size: u64, data: &Range<u64>) -> Option<Range<usize>> {
    let end = offset.checked_add(size)?;
    (offset >= data.start && end <= data.end).then_some(offset as usize..end as usize)
}

/// `none`'s `blobs` or `unified`'s `frames` (`with_refs`, each with an optional `ref`): the
/// array of `{offset, size}` maps, each blob inside the data region.
pub(super) fn blob_table(
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
                    path: Path::Field(bpath, "ref").text(),
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
pub(super) fn check_references(frames: &[(Range<usize>, Option<u32>)]) -> Result<(), ArchiveError> {
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
pub(super) fn zstd_region(
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
