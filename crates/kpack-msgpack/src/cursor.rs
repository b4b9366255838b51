//! [`Cursor`]: typed reads of a document's schema fields from a slice.

use rmp::Marker;
use rmp::decode::bytes::BytesReadError;
use rmp::decode::{Bytes, ValueReadError};

use crate::{
    DecodeError, DecodeErrorKind, FieldError, Path, Shape, Source, shape, skip_value, type_name,
    wrong,
};

/// Reads a document from a slice: typed reads for schema fields, [`Cursor::skip`] for the rest.
/// Offsets in its errors are offsets into the whole slice, whatever position it started at.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Source for Cursor<'_> {
    type Error = DecodeError;

    fn pos(&self) -> usize {
        self.pos
    }

    fn room(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize, str: bool) -> Result<&[u8], DecodeError> {
        let at = self.pos;
        self.pos += n;
        let s = &self.bytes[at..self.pos];
        if str && std::str::from_utf8(s).is_err() {
            return Err(DecodeError {
                offset: at,
                kind: DecodeErrorKind::InvalidUtf8,
            });
        }
        Ok(s)
    }

    fn overrun(&self, offset: usize, expected: &'static str, needed: u64) -> DecodeError {
        DecodeError {
            offset,
            kind: DecodeErrorKind::UnexpectedEof {
                expected,
                needed,
                available: self.bytes.len() - offset,
            },
        }
    }

    fn rejected(&self, offset: usize, marker: u8) -> DecodeError {
        let kind = match marker {
            0xc1 => DecodeErrorKind::InvalidMarker(marker),
            _ => DecodeErrorKind::UnsupportedExt(marker),
        };
        DecodeError { offset, kind }
    }
}

/// The failures a schema read meets: the wire form's own, and the schema's.
pub trait WalkError: From<DecodeError> + From<FieldError> {}
impl<T: From<DecodeError> + From<FieldError>> WalkError for T {}

/// A failed read, before it becomes the caller's error type. The cold paths return it rather
/// than a generic `E: WalkError`, so that they are compiled once, not once per error type of
/// the readers that call them (librocm_kpack's size); only the conversion is per type.
enum Miss {
    Wire(DecodeError),
    Field(FieldError),
}

impl Miss {
    #[inline]
    fn into_walk_error<E: WalkError>(self) -> E {
        match self {
            Miss::Wire(e) => e.into(),
            Miss::Field(e) => e.into(),
        }
    }
}

impl<'a> Cursor<'a> {
    /// Reads `bytes` from `pos` on; `bytes` still bounds every value.
    pub fn new(bytes: &'a [u8], pos: usize) -> Self {
        Cursor {
            bytes,
            pos: pos.min(bytes.len()),
        }
    }

    /// Skips one value (see [`skip_value`]).
    pub fn skip(&mut self) -> Result<(), DecodeError> {
        skip_value(self)
    }

    /// Fails unless the cursor has consumed all of its input.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.room() {
            0 => Ok(()),
            count => Err(DecodeError {
                offset: self.pos,
                kind: DecodeErrorKind::TrailingBytes { count },
            }),
        }
    }

    /// The type name of the value at the cursor.
    pub fn found(&self) -> &'static str {
        match self.bytes.get(self.pos..) {
            Some([marker, payload @ ..]) => type_name(*marker, payload),
            _ => "end of input",
        }
    }

    fn is(&self, what: fn(Marker) -> bool) -> bool {
        self.bytes
            .get(self.pos)
            .is_some_and(|&b| what(Marker::from_u8(b)))
    }

    /// Whether the value at the cursor is a map.
    pub fn at_map(&self) -> bool {
        self.is(|m| matches!(m, Marker::FixMap(_) | Marker::Map16 | Marker::Map32))
    }

    /// Whether the value at the cursor is a str.
    pub fn at_str(&self) -> bool {
        self.is(|m| {
            matches!(
                m,
                Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32
            )
        })
    }

    /// The `rmp` read of what `path` wants (`expected`) failed at the cursor: a wire-form error
    /// if the value there is cut short or rejected, else a type error naming the path.
    #[cold]
    #[inline(never)]
    fn mismatch(&self, path: &Path<'_>, expected: &'static str) -> Miss {
        let found = self.found();
        let rejected = matches!(self.bytes.get(self.pos), Some(&m) if shape(m) == Shape::Rejected);
        if rejected || found == expected || found == "int" || found == "end of input" {
            if let Err(e) = self.clone().skip() {
                return Miss::Wire(e);
            }
        }
        Miss::Field(wrong(path, expected, found))
    }

    /// Runs an `rmp` read on the bytes at the cursor and moves past what it read.
    #[inline]
    fn rmp<T, Err>(&mut self, read: impl FnOnce(&mut Bytes<'a>) -> Result<T, Err>) -> Option<T> {
        let mut rest = Bytes::new(&self.bytes[self.pos..]);
        let value = read(&mut rest).ok()?;
        self.pos = self.bytes.len() - rest.remaining_slice().len();
        Some(value)
    }

    /// A container's count, `per` values each, checked against what is left.
    #[inline]
    fn count<E: WalkError>(
        &mut self,
        path: &Path<'_>,
        expected: &'static str,
        read: fn(&mut Bytes<'a>) -> Result<u32, ValueReadError<BytesReadError>>,
        per: usize,
    ) -> Result<usize, E> {
        // As in [`Cursor::str_bytes`]: the one-byte forms (fixmap 0x80-0x8f, fixarray
        // 0x90-0x9f), read here.
        let fix = match (self.bytes.get(self.pos), per) {
            (Some(&b @ 0x80..=0x8f), 2) | (Some(&b @ 0x90..=0x9f), 1) => usize::from(b & 0x0f),
            _ => usize::MAX,
        };
        if fix != usize::MAX && fix * per < self.room() {
            self.pos += 1;
            return Ok(fix);
        }
        self.count_slow(path, expected, read, per)
            .map_err(Miss::into_walk_error)
    }

    /// [`Cursor::count`] of the longer forms, and its errors.
    #[cold]
    #[inline(never)]
    fn count_slow(
        &mut self,
        path: &Path<'_>,
        expected: &'static str,
        read: fn(&mut Bytes<'a>) -> Result<u32, ValueReadError<BytesReadError>>,
        per: usize,
    ) -> Result<usize, Miss> {
        let start = self.pos;
        match self.rmp(read) {
            Some(n) if (n as usize).saturating_mul(per) <= self.room() => Ok(n as usize),
            _ => {
                self.pos = start;
                Err(self.mismatch(path, expected))
            }
        }
    }

    /// Moves past `bytes` if the input continues with exactly them, and says whether it did:
    /// for a reader's fast path over the one encoding its writer gives a map (the header and
    /// a key as literal bytes), which falls back to the field-by-field walk on anything else.
    /// (An array, so that the comparison is of a length known where it is inlined: slices of
    /// any length cost a `memcmp` call each, 10% of a cold archive load.)
    #[inline]
    pub fn eat<const N: usize>(&mut self, bytes: &[u8; N]) -> bool {
        let end = self.pos + N;
        let found = self.bytes.get(self.pos..end) == Some(bytes.as_slice());
        if found {
            self.pos = end;
        }
        found
    }

    /// A map's entry count; its keys and values follow.
    #[inline]
    pub fn map<E: WalkError>(&mut self, path: &Path<'_>) -> Result<usize, E> {
        self.count(path, "map", rmp::decode::read_map_len, 2)
    }

    /// An array's element count; its elements follow.
    #[inline]
    pub fn array<E: WalkError>(&mut self, path: &Path<'_>) -> Result<usize, E> {
        self.count(path, "array", rmp::decode::read_array_len, 1)
    }

    /// A str's bytes, borrowed, not yet checked to be UTF-8: for comparing with known strs
    /// (see [`Cursor::utf8`]).
    #[inline]
    pub fn str_bytes<E: WalkError>(&mut self, path: &Path<'_>) -> Result<&'a [u8], E> {
        let start = self.pos;
        // The form of nearly every str in a TOC (fixstr, 0xa0-0xbf), read here without
        // `rmp`'s reader plumbing (which doubles the cost of an open).
        if let Some(&b @ 0xa0..=0xbf) = self.bytes.get(start) {
            let end = start + 1 + usize::from(b & 0x1f);
            if let Some(s) = self.bytes.get(start + 1..end) {
                self.pos = end;
                return Ok(s);
            }
        }
        self.str_bytes_slow(path).map_err(Miss::into_walk_error)
    }

    /// [`Cursor::str_bytes`] of the longer forms, and its errors.
    #[cold]
    #[inline(never)]
    fn str_bytes_slow(&mut self, path: &Path<'_>) -> Result<&'a [u8], Miss> {
        self.length_prefixed(path, "str", rmp::decode::read_str_len)
    }

    /// The bytes of a value whose marker `read_len` reads with its length (a str or a bin),
    /// borrowed; on a mismatch the cursor stays where it was.
    fn length_prefixed<Err>(
        &mut self,
        path: &Path<'_>,
        expected: &'static str,
        read_len: impl FnOnce(&mut Bytes<'a>) -> Result<u32, Err>,
    ) -> Result<&'a [u8], Miss> {
        let start = self.pos;
        if let Some(n) = self.rmp(read_len) {
            if let Some(b) = self.bytes.get(self.pos..self.pos + n as usize) {
                self.pos += b.len();
                return Ok(b);
            }
        }
        self.pos = start;
        Err(self.mismatch(path, expected))
    }

    /// `s`, bytes of the input that [`Cursor::str_bytes`] returned, as a str.
    #[inline]
    pub fn utf8(&self, s: &'a [u8]) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(s).map_err(|_| DecodeError {
            offset: s.as_ptr() as usize - self.bytes.as_ptr() as usize,
            kind: DecodeErrorKind::InvalidUtf8,
        })
    }

    /// A str, borrowed.
    #[inline]
    pub fn str<E: WalkError>(&mut self, path: &Path<'_>) -> Result<&'a str, E> {
        let s = self.str_bytes::<E>(path)?;
        Ok(self.utf8(s)?)
    }

    /// A non-negative integer, in any of its wire forms.
    #[inline]
    pub fn uint<E: WalkError>(&mut self, path: &Path<'_>) -> Result<u64, E> {
        // As in [`Cursor::str_bytes`]: the unsigned forms (positive fixint, uint 8-64), read
        // here; the signed forms of a non-negative value, and errors, in `uint_slow`.
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let (n, width) = match *rest {
            [b @ 0..=0x7f, ..] => (u64::from(b), 0),
            [0xcc, b, ..] => (u64::from(b), 1),
            [0xcd, a, b, ..] => (u64::from(u16::from_be_bytes([a, b])), 2),
            [0xce, a, b, c, d, ..] => (u64::from(u32::from_be_bytes([a, b, c, d])), 4),
            [0xcf, a, b, c, d, e, f, g, h, ..] => (u64::from_be_bytes([a, b, c, d, e, f, g, h]), 8),
            _ => return self.uint_slow(path).map_err(Miss::into_walk_error),
        };
        self.pos += 1 + width;
        Ok(n)
    }

    /// [`Cursor::uint`] of the signed forms, and its errors.
    #[cold]
    #[inline(never)]
    fn uint_slow(&mut self, path: &Path<'_>) -> Result<u64, Miss> {
        let start = self.pos;
        match self.rmp(rmp::decode::read_int::<u64, _>) {
            Some(n) => Ok(n),
            None => {
                self.pos = start;
                Err(self.mismatch(path, "unsigned int"))
            }
        }
    }

    /// A bin's bytes, borrowed.
    pub fn bin<E: WalkError>(&mut self, path: &Path<'_>) -> Result<&'a [u8], E> {
        self.length_prefixed(path, "bin", rmp::decode::read_bin_len)
            .map_err(Miss::into_walk_error)
    }

    /// Reads the map at the cursor, at `map` in a document whose maps may hold keys of other
    /// types than str (skipped with their values): calls `field` for each str key, with the
    /// cursor at its value, which `field` must read or skip.
    pub fn lenient_map<E: WalkError>(
        &mut self,
        map: &Path<'_>,
        mut field: impl FnMut(&mut Self, &'a str) -> Result<(), E>,
    ) -> Result<(), E> {
        for _ in 0..self.map::<E>(map)? {
            if self.at_str() {
                let key = self.str_key::<E>(map)?;
                field(self, key)?;
            } else {
                self.skip()?;
                self.skip()?;
            }
        }
        Ok(())
    }

    /// A key of the map at `map`, which must be a str.
    #[inline]
    pub fn str_key<E: WalkError>(&mut self, map: &Path<'_>) -> Result<&'a str, E> {
        self.str(&Path::KeysOf(map))
    }

    /// A key of the map at `map`, which must be a str; its bytes, as [`Cursor::str_bytes`].
    #[inline]
    pub fn key_bytes<E: WalkError>(&mut self, map: &Path<'_>) -> Result<&'a [u8], E> {
        self.str_bytes(&Path::KeysOf(map))
    }
}
