//! The single pass that reads a TOC into an [`Index`] when nothing is wrong with it.
//!
//! It accepts exactly what the detailed reader accepts, and builds the same index, but learns
//! only *whether* something is wrong: every read returns an `Option` in registers, with no
//! error value, path or offset to carry. A field is checked where it is read, in wire order,
//! and only the values no field consumes (unknown keys, the other scheme's fields) are walked
//! by the wire-form validator alone. On `None` the caller re-reads the TOC with the detailed
//! reader, which finds the error and reports it in the order it always has.

use std::ops::Range;

use super::{
    Arches, Binary, Entry, Index, Stored, checked_range, size_problem, sort_binaries, zstd_region,
};
use crate::msgpack::schema::Distinct;
use crate::msgpack::skip_valid;
use crate::{CompressionScheme, DATA_START, FORMAT_VERSION};

/// Nesting depths of the values the reader meets (the root map is at 0).
const TOP_VALUES: usize = 1;
const BLOB_FIELDS: usize = 3;
const ENTRY_FIELDS: usize = 4;

/// Fewest TOC bytes an entry takes (an empty arch key, then a map holding `type: "hsaco"`, and
/// `ordinal` and `original_size` in one byte each): bounds what is reserved for entries before
/// they are read.
const MIN_ENTRY_BYTES: usize = 37;

/// Reads the TOC starting at `toc_at`, which runs to the end of `bytes`.
pub(super) fn read(bytes: &[u8], toc_at: usize) -> Option<Index> {
    let data = DATA_START..toc_at as u64;
    let mut c = Cursor { bytes, pos: toc_at };
    let mut r = Reader::default();
    let mut format_version = None;
    let mut group_name = None;
    let mut gfx_arch_family = None;
    let mut gfx_arches = None;
    let mut scheme = None;
    let mut toc = false;
    // Read only for the scheme that uses them: present, and whether they have the right form.
    let mut blobs = None;
    let mut zstd_offset = None;
    let mut zstd_size = None;
    for _ in 0..c.map()? {
        match c.str_bytes()? {
            b"format_version" => once(&mut format_version, c.uint())?,
            b"group_name" => once(&mut group_name, c.string())?,
            b"gfx_arch_family" => once(&mut gfx_arch_family, c.string())?,
            b"gfx_arches" => once(&mut gfx_arches, c.strings())?,
            b"compression_scheme" => once(&mut scheme, c.str())?,
            b"toc" if !toc => {
                r.toc(&mut c)?;
                toc = true;
            }
            b"blobs" => once(&mut blobs, c.maybe(|c| c.blobs(&data)))?,
            b"zstd_offset" => once(&mut zstd_offset, c.maybe(Cursor::uint))?,
            b"zstd_size" => once(&mut zstd_size, c.maybe(Cursor::uint))?,
            b"toc" => return None,
            key => unknown(&mut c, &mut r.top_others, key, TOP_VALUES)?,
        }
    }
    if c.pos != bytes.len() || !toc || format_version? != u64::from(FORMAT_VERSION) {
        return None;
    }
    // A missing scheme means `none` to both reference readers.
    let scheme = match scheme {
        None => CompressionScheme::None,
        Some(name) => CompressionScheme::from_name(name)?,
    };
    let stored = match scheme {
        CompressionScheme::None => Stored::Blobs(blobs??),
        CompressionScheme::ZstdPerKernel => {
            zstd_region(zstd_offset??, zstd_size??, bytes, &data).ok()?
        }
    };
    let count = stored.count();
    let entries_fit = r.entries.iter().all(|e| {
        (e.ordinal as usize) < count && size_problem(e.original_size, e.ordinal, &stored).is_none()
    });
    if !entries_fit {
        return None;
    }
    let sorted = sort_binaries(&r.names, &r.binaries).ok()?;
    Some(Index {
        group_name: group_name?,
        gfx_arch_family: gfx_arch_family?,
        gfx_arches: gfx_arches?,
        scheme,
        names: r.names,
        arch_names: r.arch_names,
        binaries: r.binaries,
        sorted,
        entries: r.entries,
        metadata: r.metadata,
        stored,
    })
}

/// Fills `slot` with `value` unless it is filled already (a repeated key) or `value` failed.
fn once<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value?);
    Some(())
}

fn utf8(s: &[u8]) -> Option<&str> {
    std::str::from_utf8(s).ok()
}

/// The wire form from `pos` on. Each read fails where [`crate::msgpack::Decoder`] would report
/// an error or find a different type.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.bytes.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }

    fn be(&mut self, n: usize) -> Option<u64> {
        let b = self.take(n)?;
        Some(b.iter().fold(0, |acc, &x| (acc << 8) | u64::from(x)))
    }

    fn len(&mut self, n: usize) -> Option<usize> {
        usize::try_from(self.be(n)?).ok()
    }

    /// A str's bytes, not yet checked to be UTF-8: the caller compares them with a known str
    /// or checks them.
    fn str_bytes(&mut self) -> Option<&'a [u8]> {
        let n = match self.byte()? {
            m @ 0xa0..=0xbf => usize::from(m & 0x1f),
            0xd9 => self.len(1)?,
            0xda => self.len(2)?,
            0xdb => self.len(4)?,
            _ => return None,
        };
        self.take(n)
    }

    fn str(&mut self) -> Option<&'a str> {
        utf8(self.str_bytes()?)
    }

    fn string(&mut self) -> Option<String> {
        self.str().map(str::to_owned)
    }

    /// An array of strs.
    fn strings(&mut self) -> Option<Vec<String>> {
        let n = self.array()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.string()?);
        }
        Some(v)
    }

    /// A non-negative integer, in any of its wire forms.
    fn uint(&mut self) -> Option<u64> {
        let width = match self.byte()? {
            m @ 0x00..=0x7f => return Some(m.into()),
            0xcc => return self.be(1),
            0xcd => return self.be(2),
            0xce => return self.be(4),
            0xcf => return self.be(8),
            0xd0 => 1,
            0xd1 => 2,
            0xd2 => 4,
            0xd3 => 8,
            _ => return None,
        };
        let n = self.be(width)?;
        // A signed form: non-negative if its sign bit is clear.
        (n >> (8 * width - 1) == 0).then_some(n)
    }

    /// A container's element count, which must fit in what is left at `min_bytes` each.
    fn count(&mut self, fix: u8, wide16: u8, min_bytes: usize) -> Option<usize> {
        let n = match self.byte()? {
            m if m & 0xf0 == fix => usize::from(m & 0x0f),
            m if m == wide16 => self.len(2)?,
            m if m == wide16 + 1 => self.len(4)?,
            _ => return None,
        };
        (n.checked_mul(min_bytes)? <= self.remaining()).then_some(n)
    }

    fn map(&mut self) -> Option<usize> {
        self.count(0x80, 0xde, 2)
    }

    fn array(&mut self) -> Option<usize> {
        self.count(0x90, 0xdc, 1)
    }

    /// Skips one value at nesting `depth`, checking its wire form.
    fn skip(&mut self, depth: usize) -> Option<()> {
        self.pos = skip_valid(self.bytes, self.pos, depth)?;
        Some(())
    }

    /// Reads a top-level value with `read` if it has that form, else skips it: for a field
    /// only one scheme uses. `None` only if the value is malformed.
    fn maybe<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        let at = self.pos;
        let value = read(self);
        if value.is_none() {
            self.pos = at;
            self.skip(TOP_VALUES)?;
        }
        Some(value)
    }

    /// `none`'s blob list: `{offset, size}` maps, each blob inside `data`.
    fn blobs(&mut self, data: &Range<u64>) -> Option<Vec<Range<usize>>> {
        let n = self.array()?;
        let mut ranges = Vec::with_capacity(n);
        let mut others = Distinct::new();
        for _ in 0..n {
            let (mut offset, mut size) = (None, None);
            others.clear();
            for _ in 0..self.map()? {
                match self.str_bytes()? {
                    b"offset" => once(&mut offset, self.uint())?,
                    b"size" => once(&mut size, self.uint())?,
                    key => unknown(self, &mut others, key, BLOB_FIELDS)?,
                }
            }
            ranges.push(checked_range(offset?, size?, data)?);
        }
        Some(ranges)
    }
}

/// A key no field reads: it must be a distinct str, and its value well-formed.
fn unknown<'a>(
    c: &mut Cursor<'a>,
    others: &mut Distinct<&'a [u8]>,
    key: &'a [u8],
    depth: usize,
) -> Option<()> {
    utf8(key)?;
    if !others.insert(key) {
        return None;
    }
    c.skip(depth)
}

/// What `toc` adds to the [`Index`], and scratch space reused across maps.
#[derive(Default)]
struct Reader<'a> {
    names: String,
    arch_names: Vec<String>,
    binaries: Vec<Binary>,
    entries: Vec<Entry>,
    metadata: Vec<(String, String)>,
    arches: Arches<'a>,
    /// Per arch id, 1 + the last binary that listed it: repeats within a binary.
    listed_in: Vec<usize>,
    /// Keys no field reads: in the top-level map, in the current entry.
    top_others: Distinct<&'a [u8]>,
    others: Distinct<&'a [u8]>,
    metadata_keys: Distinct<&'a [u8]>,
}

impl<'a> Reader<'a> {
    /// `toc`: binary name → arch → entry.
    fn toc(&mut self, c: &mut Cursor<'a>) -> Option<()> {
        let n = c.map()?;
        self.binaries.reserve_exact(n);
        self.names.reserve((n * 32).min(c.remaining()));
        for b in 1..=n {
            let name = utf8(c.str_bytes()?)?;
            let range = self.names.len()..self.names.len() + name.len();
            self.names.push_str(name);
            let first = self.entries.len();
            let arches = c.map()?;
            if b == 1 {
                let guess = n.saturating_mul(arches);
                self.entries
                    .reserve(guess.min(c.remaining() / MIN_ENTRY_BYTES));
            }
            for k in 0..arches {
                let key = c.str_bytes()?;
                let arch = match self.arches.find(key, k) {
                    Some(id) => id as usize,
                    None => {
                        let id = self.arches.add(key, utf8(key)?, &mut self.arch_names);
                        self.listed_in.push(0);
                        id as usize
                    }
                };
                if std::mem::replace(&mut self.listed_in[arch], b) == b {
                    return None;
                }
                let entry = self.entry(c, arch as u32)?;
                self.entries.push(entry);
            }
            self.binaries.push(Binary {
                name: range,
                entries: first..self.entries.len(),
            });
        }
        Some(())
    }

    /// One entry's map: `type`, `ordinal`, `original_size` and optional `metadata`. The
    /// ordinal and size are checked against the stored kernels once those are known.
    fn entry(&mut self, c: &mut Cursor<'a>, arch: u32) -> Option<Entry> {
        let mut hsaco = None;
        let mut ordinal = None;
        let mut original_size = None;
        let mut metadata = None;
        let fields = c.map()?;
        self.others.clear();
        for _ in 0..fields {
            match c.str_bytes()? {
                b"type" => once(&mut hsaco, (c.str_bytes()? == b"hsaco").then_some(()))?,
                b"ordinal" => once(&mut ordinal, c.uint())?,
                b"original_size" => once(&mut original_size, c.uint())?,
                b"metadata" => {
                    let m = self.metadata(c);
                    once(&mut metadata, m)?
                }
                key => unknown(c, &mut self.others, key, ENTRY_FIELDS)?,
            }
        }
        hsaco?;
        Some(Entry {
            arch,
            ordinal: u32::try_from(ordinal?).ok()?,
            original_size: original_size?,
            metadata: metadata.unwrap_or(0..0),
        })
    }

    /// An entry's `metadata` map (str → str), appended to `metadata`.
    fn metadata(&mut self, c: &mut Cursor<'a>) -> Option<Range<usize>> {
        let first = self.metadata.len();
        self.metadata_keys.clear();
        for _ in 0..c.map()? {
            let key = c.str_bytes()?;
            if !self.metadata_keys.insert(key) {
                return None;
            }
            let key = utf8(key)?.to_owned();
            self.metadata.push((key, c.string()?));
        }
        Some(first..self.metadata.len())
    }
}
