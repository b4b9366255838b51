//! The TOC's entries (`toc[binary][arch]`), read on a fast path when encoded as the writers
//! encode them, field by field otherwise.

use std::ops::Range;

use super::Entry;
use super::reader::Failed;
use crate::digest::ENTRY_KEY;
use crate::msgpack::{Cursor, FieldError, KeySet, Path, once, required};

/// The entries read so far.
#[derive(Default)]
pub(super) struct Entries<'a> {
    /// Every binary's, binary after binary.
    pub(super) list: Vec<Entry>,
    pub(super) metadata: Vec<(String, String)>,
    /// The first entry whose ordinal does not fit in a `u32` (its index and ordinal): out of
    /// range whatever is stored, reported once the count is known.
    pub(super) wide_ordinal: Option<(usize, u64)>,
    /// Scratch: keys no field reads in the entry being read.
    others: KeySet<'a>,
}

/// Fewest TOC bytes an entry takes (an empty arch key, then a map holding `type: "hsaco"`, and
/// `ordinal` and `original_size` in one byte each): bounds what is reserved for entries before
/// they are read.
pub(super) const MIN_ENTRY_BYTES: usize = 37;

impl<'a> Entries<'a> {
    /// One entry's map: `type`, `ordinal`, `original_size` and optional `metadata`. The
    /// ordinal and size are checked against the stored kernels once those are known.
    pub(super) fn read(
        &mut self,
        c: &mut Cursor<'a>,
        path: &Path<'_>,
        arch: u32,
    ) -> Result<Entry, Failed> {
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
                            path: field.text(),
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
pub(super) fn writers_map<const W: usize, const S: usize, const K: usize, const L: usize>(
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
pub(super) const ENTRY_KEY_STR: &[u8; 5] = b"\xa4xxh3";
