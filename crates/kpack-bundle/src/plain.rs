//! The uncompressed `__CLANG_OFFLOAD_BUNDLE__` format: parsing and writing.

use crate::{BUNDLE_MAGIC, BundleError};

/// Size of the fixed part of the header: magic + entry count.
const FIXED_HEADER_LEN: u64 = 32;
/// Size of one entry header without its triple: offset, size, triple length.
const ENTRY_HEADER_LEN: u64 = 24;

/// One entry of an uncompressed bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Bundle-entry id, e.g. `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`.
    pub triple: &'a str,
    /// Offset of `data` from the start of the bundle (the decompressed one for a CCOB).
    pub offset: u64,
    /// The entry's bytes (a code object for device entries; usually empty for the host).
    pub data: &'a [u8],
}

impl Entry<'_> {
    /// Whether this is the host entry (its triple starts with `host`); clang writes it
    /// first and empty.
    pub fn is_host(&self) -> bool {
        self.triple.starts_with("host")
    }
}

/// One entry as a bundle's header gives it, without its data: what is known of a bundle
/// read as a stream ([`crate::EntryStream`]) before its entries are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryHeader {
    /// Bundle-entry id.
    pub triple: String,
    /// Offset of its data from the start of the (uncompressed) bundle.
    pub offset: u64,
    /// Size of its data.
    pub size: u64,
}

/// A parsed uncompressed bundle, borrowed from the input bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle<'a> {
    bytes: &'a [u8],
    header_len: u64,
    entries: Vec<Entry<'a>>,
}

/// The header of an uncompressed bundle: its length and, per entry in header order, the
/// triple, offset and size, each entry checked to lie after the header and within the
/// bundle's `available` bytes. Parsed from the first bytes of the bundle, so that a CCOB
/// can be read entry by entry from its stream ([`crate::stream`]).
pub(crate) struct Header<'a> {
    pub(crate) len: u64,
    pub(crate) entries: Vec<(&'a str, u64, u64)>,
}

impl<'a> Header<'a> {
    /// The entries, owned.
    pub(crate) fn entry_headers(&self) -> Vec<EntryHeader> {
        self.entries
            .iter()
            .map(|&(triple, offset, size)| EntryHeader {
                triple: triple.to_owned(),
                offset,
                size,
            })
            .collect()
    }

    /// Parses the header at `bytes[0]` of a bundle of `available` bytes (`bytes` holds at
    /// least the header; a [`BundleError::Truncated`] means it does not).
    pub(crate) fn parse(bytes: &'a [u8], available: u64) -> Result<Header<'a>, BundleError> {
        check_magic(bytes, BUNDLE_MAGIC)?;
        let fixed = read(bytes, 0, FIXED_HEADER_LEN, "bundle header")?;
        let count = le_u64(&fixed[24..32]);
        // Bounding the count by what the bytes can hold keeps the allocation below
        // proportional to the input, whatever the header claims.
        let max = available.saturating_sub(FIXED_HEADER_LEN) / ENTRY_HEADER_LEN;
        if count > max {
            return Err(BundleError::TooManyEntries {
                offset: 24,
                count,
                max,
            });
        }
        let mut pos = FIXED_HEADER_LEN;
        let mut ranges = Vec::with_capacity(count as usize);
        // Where the data of the entries read so far starts: the header must end before it.
        let mut first_data = u64::MAX;
        for entry in 0..count {
            // An entry past the first whose header is zero padding or runs into the data
            // is not an entry: the count is what is wrong, not that entry's fields.
            let implausible = |why| BundleError::ImplausibleEntryCount {
                offset: 24,
                count,
                entry,
                entry_offset: pos,
                why,
            };
            if entry > 0 && pos + ENTRY_HEADER_LEN > first_data {
                return Err(implausible(
                    "would overlap the data of the entries before it",
                ));
            }
            let fields = read(bytes, pos, ENTRY_HEADER_LEN, "entry header")?;
            if entry > 0 && fields.iter().all(|&b| b == 0) {
                return Err(implausible("is zero padding"));
            }
            let (offset, size, triple_len) = (
                le_u64(&fields[0..8]),
                le_u64(&fields[8..16]),
                le_u64(&fields[16..24]),
            );
            pos += ENTRY_HEADER_LEN;
            let triple_bytes = read(bytes, pos, triple_len, "entry triple")?;
            let triple = std::str::from_utf8(triple_bytes)
                .map_err(|_| BundleError::TripleNotUtf8 { entry, offset: pos })?;
            pos += triple_len;
            if offset >= pos {
                first_data = first_data.min(offset);
            }
            ranges.push((triple, offset, size));
        }
        let header_len = pos;
        for (entry, &(_, offset, size)) in ranges.iter().enumerate() {
            let entry = entry as u64;
            if offset < header_len {
                return Err(BundleError::EntryOverlapsHeader {
                    bundle_offset: 0,
                    entry,
                    offset,
                    header_len,
                });
            }
            offset
                .checked_add(size)
                .filter(|&end| end <= available)
                .ok_or(BundleError::EntryOutOfRange {
                    bundle_offset: 0,
                    entry,
                    offset,
                    size,
                    bundle_len: available,
                })?;
        }
        Ok(Header {
            len: header_len,
            entries: ranges,
        })
    }
}

impl<'a> Bundle<'a> {
    /// Parses the uncompressed bundle starting at `bytes[0]`.
    ///
    /// The bundle's extent comes from its header (see [`Bundle::len`]); bytes after it are
    /// ignored, so this can parse a bundle inside a larger region. Use
    /// [`Bundle::parse_exact`] for a standalone file. Every entry must lie within `bytes`
    /// and after the header, and every triple must be UTF-8.
    pub fn parse(bytes: &'a [u8]) -> Result<Bundle<'a>, BundleError> {
        let header = Header::parse(bytes, bytes.len() as u64)?;
        let mut extent = header.len;
        let entries = header
            .entries
            .into_iter()
            .map(|(triple, offset, size)| {
                let end = offset + size;
                extent = extent.max(end);
                Entry {
                    triple,
                    offset,
                    data: &bytes[offset as usize..end as usize],
                }
            })
            .collect();
        Ok(Bundle {
            bytes: &bytes[..extent as usize],
            header_len: header.len,
            entries,
        })
    }

    /// Like [`Bundle::parse`], but `bytes` must be exactly one bundle: anything after the
    /// extent is an error.
    pub fn parse_exact(bytes: &'a [u8]) -> Result<Bundle<'a>, BundleError> {
        let bundle = Self::parse(bytes)?;
        match bytes.len() as u64 - bundle.len() {
            0 => Ok(bundle),
            len => Err(BundleError::TrailingData {
                offset: bundle.len(),
                len,
                what: "the bundle",
            }),
        }
    }

    /// The entries in header order.
    pub fn entries(&self) -> &[Entry<'a>] {
        &self.entries
    }

    /// The entries in header order without their data.
    pub fn entry_headers(&self) -> Vec<EntryHeader> {
        self.entries
            .iter()
            .map(|e| EntryHeader {
                triple: e.triple.to_owned(),
                offset: e.offset,
                size: e.data.len() as u64,
            })
            .collect()
    }

    /// The extent of the bundle in bytes: the end of its header or of its furthest entry,
    /// whichever is larger.
    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Never true: a bundle has at least its 32-byte fixed header.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Length of the header (magic, count, entry headers and triples).
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// The bundle's bytes, exactly its extent.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// Writes an uncompressed bundle the way clang-offload-bundler does: the header, then each
/// entry at the next multiple of `align` after the previous one (zero-filled gaps, nothing
/// after the last entry). clang's default is 4096; 1 packs the entries (an `align` of 0 is
/// treated as 1). Entries are written in the given order, so the caller puts the host entry
/// first, as clang does.
pub fn write_uncompressed(entries: &[(&str, &[u8])], align: u64) -> Vec<u8> {
    let ids: Vec<&str> = entries.iter().map(|(id, _)| *id).collect();
    let mut builder = BundleBuilder::new(&ids, align);
    for (_, data) in entries {
        builder.push(data);
    }
    builder.finish()
}

/// [`write_uncompressed`] one entry at a time, so that no entry needs to outlive its
/// [`BundleBuilder::push`]: the bundle's buffer is all the memory it takes (`kpack restore`
/// copies each code object in from an archive as it is decoded).
pub struct BundleBuilder {
    out: Vec<u8>,
    align: u64,
    header_len: u64,
    /// Each entry's id, with its offset and size once pushed.
    entries: Vec<(String, u64, u64)>,
    /// How many entries are pushed.
    pushed: usize,
}

impl BundleBuilder {
    /// A bundle of entries with these ids, in this order, aligned to `align`.
    pub fn new(ids: &[&str], align: u64) -> BundleBuilder {
        let header_len = header_len(ids.iter().copied());
        BundleBuilder {
            out: vec![0; header_len as usize],
            align: align.max(1),
            header_len,
            entries: ids.iter().map(|id| ((*id).to_owned(), 0, 0)).collect(),
            pushed: 0,
        }
    }

    /// Appends the next entry's data.
    ///
    /// # Panics
    /// When every entry named in [`BundleBuilder::new`] is already pushed.
    pub fn push(&mut self, data: &[u8]) {
        let end = self.out.len() as u64;
        let offset = end.div_ceil(self.align) * self.align;
        self.out.resize(offset as usize, 0);
        self.out.extend_from_slice(data);
        let entry = &mut self.entries[self.pushed];
        (entry.1, entry.2) = (offset, data.len() as u64);
        self.pushed += 1;
    }

    /// The bundle (entries never pushed are empty, at offset 0).
    pub fn finish(mut self) -> Vec<u8> {
        let entries = self.entries.iter().map(|(id, o, s)| (id.as_str(), *o, *s));
        let header = encode_header(entries, self.header_len);
        self.out[..header.len()].copy_from_slice(&header);
        self.out
    }
}

/// The length of the header of an uncompressed bundle of entries with these ids.
fn header_len<'i>(ids: impl Iterator<Item = &'i str>) -> u64 {
    FIXED_HEADER_LEN
        + ids
            .map(|id| ENTRY_HEADER_LEN + id.len() as u64)
            .sum::<u64>()
}

/// The header of an uncompressed bundle of `(id, offset, size)` entries, `header_len` long.
fn encode_header<'i>(
    entries: impl ExactSizeIterator<Item = (&'i str, u64, u64)>,
    header_len: u64,
) -> Vec<u8> {
    let mut header = Vec::with_capacity(header_len as usize);
    header.extend_from_slice(BUNDLE_MAGIC);
    header.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (id, offset, size) in entries {
        header.extend_from_slice(&offset.to_le_bytes());
        header.extend_from_slice(&size.to_le_bytes());
        header.extend_from_slice(&(id.len() as u64).to_le_bytes());
        header.extend_from_slice(id.as_bytes());
    }
    header
}

/// The bundle [`write_uncompressed`] writes for entries of these ids and sizes, without
/// their data: its header, and each entry's offset (its data goes there, zero-filled gaps
/// before it, nothing after the last). For writers that copy the entries' bytes straight
/// from where they are (`kpack prune` streams them from the input file).
pub fn uncompressed_layout(entries: &[(&str, u64)], align: u64) -> (Vec<u8>, Vec<u64>) {
    let align = align.max(1);
    let header_len = header_len(entries.iter().map(|(id, _)| *id));
    let mut end = header_len;
    let offsets: Vec<u64> = entries
        .iter()
        .map(|(_, size)| {
            let offset = end.div_ceil(align) * align;
            end = offset + size;
            offset
        })
        .collect();
    let placed = entries
        .iter()
        .zip(&offsets)
        .map(|(&(id, size), &o)| (id, o, size));
    (encode_header(placed, header_len), offsets)
}

/// Whether `bytes` starts with `magic`: `BadMagic` if not, `Truncated` if `bytes` is a
/// strict prefix of it.
pub(crate) fn check_magic(bytes: &[u8], magic: &[u8]) -> Result<(), BundleError> {
    if bytes.starts_with(magic) {
        Ok(())
    } else if magic.starts_with(bytes) {
        Err(BundleError::Truncated {
            offset: 0,
            needed: magic.len() as u64,
            available: bytes.len() as u64,
            what: "bundle magic",
        })
    } else {
        Err(BundleError::BadMagic { offset: 0 })
    }
}

/// `len` bytes at `offset`, or a `Truncated` error naming `what`.
pub(crate) fn read<'b>(
    bytes: &'b [u8],
    offset: u64,
    len: u64,
    what: &'static str,
) -> Result<&'b [u8], BundleError> {
    let available = (bytes.len() as u64).saturating_sub(offset);
    if len > available {
        return Err(BundleError::Truncated {
            offset,
            needed: len,
            available,
            what,
        });
    }
    Ok(&bytes[offset as usize..(offset + len) as usize])
}

pub(crate) fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}
