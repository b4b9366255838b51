//! MessagePack for kpack's documents (an archive's TOC, HIPK marker metadata, `.kpm`
//! manifests), on the `rmp` crate. It depends on no other kpack crate: the archive crate and
//! the host binaries' marker (`kpack-hostbin`) both read and write through it.
//!
//! `rmp` reads and writes the wire forms. What reading untrusted bytes with it needs, and `rmp`
//! leaves to its caller, is here:
//! * errors that carry the absolute byte offset and what was expected ([`DecodeError`]), and
//!   schema errors that name the field's path ([`FieldError`]);
//! * every length and count checked against the bytes left before anything is taken, so nothing
//!   is allocated from a claimed length (a str32 claiming 4 GiB is an error, not an allocation);
//! * [`skip_value`], a walk over one value without recursion, whatever it nests, for the values
//!   no field reads; over a slice, or over a [`Source`] read one request at a time (the
//!   runtime's metadata pointer, which must not be read past the value's end);
//! * `0xc1` and the extension types, never part of a kpack document, rejected.
//!
//! Strs are borrowed from the input. Encoding is `rmp`'s, which picks the smallest form for every
//! integer, length and count, as Python `msgpack.packb(obj, use_bin_type=True)` does (spec §1.6):
//! maps written in the reference's key order reproduce its bytes. [`Encoder`] adds the check that
//! a length fits the format's 32 bits (`rmp` takes a `u32` and leaves that to the caller).
//!
//! Depends on no other kpack crate (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

use std::fmt;

use rmp::Marker;
use rmp::decode::bytes::BytesReadError;
use rmp::decode::{Bytes, ValueReadError};

/// What the decoder found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The input ended inside a value, or a length or count claims more than is left.
    UnexpectedEof {
        /// What was being read.
        expected: &'static str,
        /// Bytes it needs at least (a container's values take one byte each at least).
        needed: u64,
        /// Bytes left.
        available: usize,
    },
    /// `0xc1`, the one byte MessagePack never uses.
    InvalidMarker(u8),
    /// An extension type (`0xc7..=0xc9`, `0xd4..=0xd8`).
    UnsupportedExt(u8),
    /// A str whose bytes are not UTF-8.
    InvalidUtf8,
    /// Bytes left after a value that should have ended the input.
    TrailingBytes {
        /// How many.
        count: usize,
    },
}

/// A decode failure at byte `offset` of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Absolute offset: into the file for a TOC, into the document otherwise.
    pub offset: usize,
    /// What is wrong there.
    pub kind: DecodeErrorKind,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "msgpack: at byte {}: ", self.offset)?;
        match &self.kind {
            DecodeErrorKind::UnexpectedEof {
                expected,
                needed,
                available,
            } => write!(
                f,
                "expected {expected}: needs at least {needed} bytes, only {available} left"
            ),
            DecodeErrorKind::InvalidMarker(b) => write!(f, "expected a value, found byte {b:#04x}"),
            DecodeErrorKind::UnsupportedExt(b) => {
                write!(f, "expected a value, found extension type marker {b:#04x}")
            }
            DecodeErrorKind::InvalidUtf8 => write!(f, "expected UTF-8 str"),
            DecodeErrorKind::TrailingBytes { count } => {
                write!(f, "expected end of input, found {count} more bytes")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// The encoder's only failure: a length no MessagePack form can carry (over `u32::MAX`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("msgpack: {what} of length {len} exceeds the format's 32-bit length limit")]
pub struct EncodeError {
    /// `"str"`, `"array"` or `"map"`.
    pub what: &'static str,
    /// The length asked for.
    pub len: usize,
}

/// A typed-field failure while reading a document against its schema.
///
/// `path` is written like Python subscripts, e.g. `toc["lib/x.so#0"]["gfx900"].ordinal`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldError {
    /// A required field is absent.
    #[error("{path}: missing")]
    Missing {
        /// The field.
        path: String,
    },
    /// A value of another type than the schema's.
    #[error("{path}: expected {expected}, found {found}")]
    WrongType {
        /// The value (`root` for the document itself).
        path: String,
        /// The schema's type.
        expected: &'static str,
        /// The wire form's type.
        found: &'static str,
    },
    /// A map holds `key` twice.
    #[error("{path}: duplicate key {key:?}")]
    DuplicateKey {
        /// The map.
        path: String,
        /// The repeated key.
        key: String,
    },
    /// A value of the right type that the schema does not allow.
    #[error("{path}: {problem}")]
    Invalid {
        /// The value.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// What follows a marker byte on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A scalar whose payload is this many bytes (0 for nil, bools and fixints).
    Fixed(usize),
    /// A str (`str`) or bin: its length, in the marker (`width` 0, `len`) or in the `width`
    /// big-endian bytes that follow, then that many bytes.
    Data {
        /// Bytes of the length field; 0 if the marker holds the length.
        width: usize,
        /// The length, when the marker holds it.
        len: u32,
        /// A str (UTF-8), not a bin.
        str: bool,
    },
    /// An array (`per` 1) or map (`per` 2): its count, as for [`Shape::Data`], then
    /// `count × per` values.
    Items {
        /// Bytes of the count field; 0 if the marker holds the count.
        width: usize,
        /// The count, when the marker holds it.
        len: u32,
        /// Values per counted item.
        per: u64,
    },
    /// `0xc1` (never used) or an extension type (never in kpack's documents).
    Rejected,
}

/// The [`Shape`] of the value a marker byte starts.
pub fn shape(marker: u8) -> Shape {
    use Marker as M;
    let data = |width, str| Shape::Data { width, len: 0, str };
    let items = |width, per| Shape::Items { width, len: 0, per };
    match Marker::from_u8(marker) {
        M::FixPos(_) | M::FixNeg(_) | M::Null | M::True | M::False => Shape::Fixed(0),
        M::U8 | M::I8 => Shape::Fixed(1),
        M::U16 | M::I16 => Shape::Fixed(2),
        M::U32 | M::I32 | M::F32 => Shape::Fixed(4),
        M::U64 | M::I64 | M::F64 => Shape::Fixed(8),
        M::FixStr(n) => Shape::Data {
            width: 0,
            len: n.into(),
            str: true,
        },
        M::Str8 => data(1, true),
        M::Str16 => data(2, true),
        M::Str32 => data(4, true),
        M::Bin8 => data(1, false),
        M::Bin16 => data(2, false),
        M::Bin32 => data(4, false),
        M::FixArray(n) => Shape::Items {
            width: 0,
            len: n.into(),
            per: 1,
        },
        M::FixMap(n) => Shape::Items {
            width: 0,
            len: n.into(),
            per: 2,
        },
        M::Array16 => items(2, 1),
        M::Array32 => items(4, 1),
        M::Map16 => items(2, 2),
        M::Map32 => items(4, 2),
        M::Reserved
        | M::Ext8
        | M::Ext16
        | M::Ext32
        | M::FixExt1
        | M::FixExt2
        | M::FixExt4
        | M::FixExt8
        | M::FixExt16 => Shape::Rejected,
    }
}

/// The type name used in error messages for the value whose marker is `marker`; `payload` is
/// what follows it, which decides the sign of a signed-form integer (non-negative integers
/// read as unsigned, whatever their wire form).
pub fn type_name(marker: u8, payload: &[u8]) -> &'static str {
    use Marker as M;
    match Marker::from_u8(marker) {
        M::FixPos(_) | M::U8 | M::U16 | M::U32 | M::U64 => "unsigned int",
        M::FixNeg(_) => "negative int",
        M::I8 | M::I16 | M::I32 | M::I64 => match payload.first() {
            Some(b) if b & 0x80 != 0 => "negative int",
            Some(_) => "unsigned int",
            None => "int",
        },
        M::F32 | M::F64 => "float",
        M::Null => "nil",
        M::True | M::False => "bool",
        M::FixStr(_) | M::Str8 | M::Str16 | M::Str32 => "str",
        M::Bin8 | M::Bin16 | M::Bin32 => "bin",
        M::FixArray(_) | M::Array16 | M::Array32 => "array",
        M::FixMap(_) | M::Map16 | M::Map32 => "map",
        M::Reserved => "reserved byte 0xc1",
        _ => "extension type",
    }
}

/// Bytes that [`skip_value`] reads, in order.
pub trait Source {
    /// How the source fails.
    type Error;
    /// Offset of the next byte.
    fn pos(&self) -> usize;
    /// How many more bytes may be read.
    fn room(&self) -> usize;
    /// The next `n <= room()` bytes; `str`: they are a str's.
    fn take(&mut self, n: usize, str: bool) -> Result<&[u8], Self::Error>;
    /// At `offset`, `expected` needs `needed` bytes, more than [`Source::room`].
    fn overrun(&self, offset: usize, expected: &'static str, needed: u64) -> Self::Error;
    /// `marker` at `offset` is [`Shape::Rejected`].
    fn rejected(&self, offset: usize, marker: u8) -> Self::Error;
}

/// Reads `n` bytes for `expected`, or fails with [`Source::overrun`] before reading any.
fn take_checked<'s, S: Source>(
    src: &'s mut S,
    n: u64,
    expected: &'static str,
    str: bool,
) -> Result<&'s [u8], S::Error> {
    match usize::try_from(n) {
        Ok(n) if n <= src.room() => src.take(n, str),
        _ => Err(src.overrun(src.pos(), expected, n)),
    }
}

/// A length or count: the marker's own, or the `width` big-endian bytes that follow.
fn length<S: Source>(
    src: &mut S,
    width: usize,
    len: u32,
    expected: &'static str,
) -> Result<u64, S::Error> {
    if width == 0 {
        return Ok(len.into());
    }
    let b = take_checked(src, width as u64, expected, false)?;
    Ok(b.iter().fold(0, |n, &b| (n << 8) | u64::from(b)))
}

/// Reads one whole value, checking its wire form (and, where the source checks them, that
/// strs are UTF-8), without recursion and without reading past its end: a length is checked
/// against [`Source::room`] before its bytes are read, and a container's count before its values
/// (each takes one byte at least).
pub fn skip_value<S: Source>(src: &mut S) -> Result<(), S::Error> {
    // Values still to read.
    let mut pending: u64 = 1;
    while pending > 0 {
        pending -= 1;
        let at = src.pos();
        let marker = take_checked(src, 1, "a value", false)?[0];
        match shape(marker) {
            Shape::Fixed(n) => {
                take_checked(src, n as u64, type_name(marker, &[]), false)?;
            }
            Shape::Data { width, len, str } => {
                let what = type_name(marker, &[]);
                let n = length(src, width, len, what)?;
                take_checked(src, n, if str { "str data" } else { "bin data" }, str)?;
            }
            Shape::Items { width, len, per } => {
                let n = length(src, width, len, type_name(marker, &[]))?;
                pending += n * per;
                if pending > src.room() as u64 {
                    let what = if per == 2 {
                        "map entries"
                    } else {
                        "array elements"
                    };
                    return Err(src.overrun(src.pos(), what, pending));
                }
            }
            Shape::Rejected => return Err(src.rejected(at, marker)),
        }
    }
    Ok(())
}

/// The length of the one value at the start of `bytes`, checked as [`skip_value`] checks it.
pub fn value_len(bytes: &[u8]) -> Result<usize, DecodeError> {
    let mut c = Cursor::new(bytes, 0);
    c.skip()?;
    Ok(c.pos())
}

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
    fn mismatch<E: WalkError>(&self, path: &Path<'_>, expected: &'static str) -> E {
        let found = self.found();
        let rejected = matches!(self.bytes.get(self.pos), Some(&m) if shape(m) == Shape::Rejected);
        if rejected || found == expected || found == "int" || found == "end of input" {
            if let Err(e) = self.clone().skip() {
                return e.into();
            }
        }
        wrong(path, expected, found).into()
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
    }

    /// [`Cursor::count`] of the longer forms, and its errors.
    #[cold]
    #[inline(never)]
    fn count_slow<E: WalkError>(
        &mut self,
        path: &Path<'_>,
        expected: &'static str,
        read: fn(&mut Bytes<'a>) -> Result<u32, ValueReadError<BytesReadError>>,
        per: usize,
    ) -> Result<usize, E> {
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
        self.str_bytes_slow(path)
    }

    /// [`Cursor::str_bytes`] of the longer forms, and its errors.
    #[cold]
    #[inline(never)]
    fn str_bytes_slow<E: WalkError>(&mut self, path: &Path<'_>) -> Result<&'a [u8], E> {
        let start = self.pos;
        if let Some(n) = self.rmp(rmp::decode::read_str_len) {
            if let Some(s) = self.bytes.get(self.pos..self.pos + n as usize) {
                self.pos += s.len();
                return Ok(s);
            }
        }
        self.pos = start;
        Err(self.mismatch(path, "str"))
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
            _ => return self.uint_slow(path),
        };
        self.pos += 1 + width;
        Ok(n)
    }

    /// [`Cursor::uint`] of the signed forms, and its errors.
    #[cold]
    #[inline(never)]
    fn uint_slow<E: WalkError>(&mut self, path: &Path<'_>) -> Result<u64, E> {
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
        let start = self.pos;
        if let Some(n) = self.rmp(rmp::decode::read_bin_len) {
            if let Some(b) = self.bytes.get(self.pos..self.pos + n as usize) {
                self.pos += b.len();
                return Ok(b);
            }
        }
        self.pos = start;
        Err(self.mismatch(path, "bin"))
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

/// Where a value sits in a document, rendered only for error messages.
#[derive(Debug, Clone, Copy)]
pub enum Path<'p> {
    /// The document's root value.
    Root,
    /// `base.key` for identifier-like keys, `base["key"]` otherwise; no dot at the root.
    Field(&'p Path<'p>, &'p str),
    /// `base["key"]`: the notation for data-valued keys (binaries, arches).
    Key(&'p Path<'p>, &'p str),
    /// `base[index]`: an array element.
    Index(&'p Path<'p>, usize),
    /// The keys of the map at `base`: `base key`, or `root key`.
    KeysOf(&'p Path<'p>),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Path::Root => Ok(()),
            Path::Field(base, key) => {
                let plain =
                    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                match (base, plain) {
                    (Path::Root, true) => f.write_str(key),
                    (_, true) => write!(f, "{base}.{key}"),
                    _ => write!(f, "{base}[{key:?}]"),
                }
            }
            Path::Key(base, key) => write!(f, "{base}[{key:?}]"),
            Path::Index(base, i) => write!(f, "{base}[{i}]"),
            Path::KeysOf(Path::Root) => f.write_str("root key"),
            Path::KeysOf(base) => write!(f, "{base} key"),
        }
    }
}

/// `path` holds a `found` where the schema wants `expected`; the root is named `root`.
pub fn wrong(path: &Path<'_>, expected: &'static str, found: &'static str) -> FieldError {
    let path = match path {
        Path::Root => "root".to_owned(),
        p => p.to_string(),
    };
    FieldError::WrongType {
        path,
        expected,
        found,
    }
}

/// Fills `slot` with `value`; `key` of the map at `map` is a duplicate if it is full already.
#[inline]
pub fn once<T>(
    slot: &mut Option<T>,
    value: T,
    map: &Path<'_>,
    key: &str,
) -> Result<(), FieldError> {
    if slot.is_some() {
        return Err(duplicate_key(map, key));
    }
    *slot = Some(value);
    Ok(())
}

#[cold]
#[inline(never)]
fn duplicate_key(map: &Path<'_>, key: &str) -> FieldError {
    FieldError::DuplicateKey {
        path: map.to_string(),
        key: key.to_owned(),
    }
}

/// The value of a field that must be present.
pub fn required<T>(slot: Option<T>, map: &Path<'_>, key: &str) -> Result<T, FieldError> {
    slot.ok_or_else(|| FieldError::Missing {
        path: Path::Field(map, key).to_string(),
    })
}

/// The keys met in one map (those no field reads, where the fields are tracked apart), to find
/// repeats: a linear scan while few, a hash set beyond.
#[derive(Default)]
pub struct KeySet<'a> {
    few: Vec<&'a str>,
    many: std::collections::HashSet<&'a str>,
}

impl<'a> KeySet<'a> {
    const LINEAR: usize = 16;

    /// Forgets every key noted, for the next map.
    #[inline]
    pub fn clear(&mut self) {
        self.few.clear();
        if !self.many.is_empty() {
            self.many.clear();
        }
    }

    /// Notes `key` of the map at `map`; it must not repeat.
    pub fn note(&mut self, map: &Path<'_>, key: &'a str) -> Result<(), FieldError> {
        if self.insert(key) {
            return Ok(());
        }
        Err(duplicate_key(map, key))
    }

    /// Notes `key`, a key no field reads, and skips its value.
    pub fn skip_unknown<E: WalkError>(
        &mut self,
        c: &mut Cursor<'a>,
        map: &Path<'_>,
        key: &'a str,
    ) -> Result<(), E> {
        self.note(map, key)?;
        Ok(c.skip()?)
    }

    /// False if `key` was seen before.
    fn insert(&mut self, key: &'a str) -> bool {
        if self.many.is_empty() {
            if self.few.contains(&key) {
                return false;
            }
            if self.few.len() < Self::LINEAR {
                self.few.push(key);
                return true;
            }
            self.many.extend(self.few.drain(..));
        }
        self.many.insert(key)
    }
}

/// Writes a document, each map's entries in the order given.
#[derive(Debug, Default)]
pub struct Encoder {
    out: Vec<u8>,
}

/// `len` as a MessagePack length, if it fits in 32 bits.
fn len32(what: &'static str, len: usize) -> Result<u32, EncodeError> {
    u32::try_from(len).map_err(|_| EncodeError { what, len })
}

impl Encoder {
    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.out
    }

    /// A map header for `len` entries; the entries follow.
    pub fn map(&mut self, len: usize) -> Result<(), EncodeError> {
        let len = len32("map", len)?;
        rmp::encode::write_map_len(&mut self.out, len).expect("a Vec grows");
        Ok(())
    }

    /// An array header for `len` elements; the elements follow.
    pub fn array(&mut self, len: usize) -> Result<(), EncodeError> {
        let len = len32("array", len)?;
        rmp::encode::write_array_len(&mut self.out, len).expect("a Vec grows");
        Ok(())
    }

    /// A str.
    pub fn str(&mut self, s: &str) -> Result<(), EncodeError> {
        let len = len32("str", s.len())?;
        rmp::encode::write_str_len(&mut self.out, len).expect("a Vec grows");
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    /// A bin.
    pub fn bin(&mut self, b: &[u8]) -> Result<(), EncodeError> {
        let len = len32("bin", b.len())?;
        rmp::encode::write_bin_len(&mut self.out, len).expect("a Vec grows");
        self.out.extend_from_slice(b);
        Ok(())
    }

    /// An unsigned integer, in its smallest form.
    pub fn uint(&mut self, n: u64) {
        rmp::encode::write_uint(&mut self.out, n).expect("a Vec grows");
    }
}

/// A document (a HIPK marker, a `.kpm` manifest) that does not decode, does not fit its
/// schema, or does not match the digest it carries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// The bytes are not msgpack.
    #[error(transparent)]
    Msgpack(#[from] DecodeError),
    /// The msgpack does not fit the schema.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// The bytes do not match the digest the document stores.
    #[error("at byte {offset}: {problem}; the file is damaged")]
    Damaged {
        /// Where the stored digest (or the misplaced digest key) is.
        offset: u64,
        /// What did not match.
        problem: String,
    },
}

impl MetadataError {
    /// The byte offset the error is about, when it names one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            MetadataError::Msgpack(e) => Some(e.offset as u64),
            MetadataError::Damaged { offset, .. } => Some(*offset),
            MetadataError::Field(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(write: impl FnOnce(&mut Encoder) -> Result<(), EncodeError>) -> Vec<u8> {
        let mut e = Encoder::default();
        write(&mut e).unwrap();
        e.into_bytes()
    }

    #[test]
    fn integers_and_lengths_take_the_smallest_python_form() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0xcc, 0x80]),
            (255, &[0xcc, 0xff]),
            (256, &[0xcd, 0x01, 0x00]),
            (65535, &[0xcd, 0xff, 0xff]),
            (65536, &[0xce, 0x00, 0x01, 0x00, 0x00]),
            (4_294_967_296, &[0xcf, 0, 0, 0, 1, 0, 0, 0, 0]),
        ];
        for (n, bytes) in cases {
            assert_eq!(
                encoded(|e| {
                    e.uint(*n);
                    Ok(())
                }),
                *bytes,
                "{n}"
            );
            assert_eq!(
                Cursor::new(bytes, 0).uint::<MetadataError>(&Path::Root),
                Ok(*n)
            );
        }
        let s = |n: usize| encoded(|e| e.str(&"x".repeat(n)));
        assert_eq!(s(31)[0], 0xbf);
        assert_eq!(s(32)[..2], [0xd9, 32]);
        assert_eq!(s(255)[..2], [0xd9, 255]);
        assert_eq!(s(256)[..3], [0xda, 1, 0]);
        assert_eq!(s(65536)[..5], [0xdb, 0, 1, 0, 0]);
        assert_eq!(encoded(|e| e.array(15)), [0x9f]);
        assert_eq!(encoded(|e| e.array(16)), [0xdc, 0, 16]);
        assert_eq!(encoded(|e| e.map(65536)), [0xdf, 0, 1, 0, 0]);
    }

    #[test]
    fn non_negative_signed_wire_forms_read_as_unsigned() {
        let read = |b: &[u8]| Cursor::new(b, 0).uint::<MetadataError>(&Path::Root);
        assert_eq!(read(&[0xd0, 0x05]), Ok(5));
        assert_eq!(read(&[0xd3, 0, 0, 0, 0, 0, 0, 1, 0]), Ok(256));
        assert_eq!(
            read(&[0xd0, 0xff]).unwrap_err().to_string(),
            "root: expected unsigned int, found negative int"
        );
    }

    #[test]
    fn a_str32_claiming_4_gib_fails_without_allocating() {
        let e = value_len(&[0xdb, 0xff, 0xff, 0xff, 0xff, b'a']).unwrap_err();
        assert_eq!(
            e,
            DecodeError {
                offset: 5,
                kind: DecodeErrorKind::UnexpectedEof {
                    expected: "str data",
                    needed: 0xffff_ffff,
                    available: 1
                }
            }
        );
        let e = Cursor::new(&[0xdb, 0xff, 0xff, 0xff, 0xff, b'a'], 0)
            .str::<MetadataError>(&Path::Root)
            .unwrap_err();
        assert!(e.to_string().starts_with("msgpack: at byte 5: "), "{e}");
    }

    #[test]
    fn huge_container_counts_fail_before_reading_their_values() {
        for bytes in [
            &[0xdd, 0xff, 0xff, 0xff, 0xff, 0x00][..],
            &[0xdf, 0x80, 0, 0, 0, 0x00, 0x00],
            &[0xc6, 0xff, 0xff, 0xff, 0xff],
        ] {
            let e = value_len(bytes).unwrap_err();
            assert_eq!(e.offset, 5, "{e}");
            assert!(matches!(e.kind, DecodeErrorKind::UnexpectedEof { .. }));
        }
    }

    #[test]
    fn deep_nesting_is_skipped_without_recursion() {
        let mut deep = vec![0x91; 1_000_000];
        deep.push(0xc0);
        assert_eq!(value_len(&deep), Ok(deep.len()));
    }

    #[test]
    fn invalid_markers_ext_types_and_bad_utf8_are_errors() {
        let kind = |b: &[u8]| value_len(b).unwrap_err().kind;
        assert_eq!(kind(&[0xc1]), DecodeErrorKind::InvalidMarker(0xc1));
        assert_eq!(kind(&[0xd4, 1, 2]), DecodeErrorKind::UnsupportedExt(0xd4));
        assert_eq!(
            value_len(&[0x91, 0xa2, 0xff, 0xfe]).unwrap_err(),
            DecodeError {
                offset: 2,
                kind: DecodeErrorKind::InvalidUtf8
            }
        );
    }

    #[test]
    fn every_truncation_of_a_document_is_an_error() {
        let mut e = Encoder::default();
        e.map(2).unwrap();
        e.str("k").unwrap();
        e.array(2).unwrap();
        e.uint(300);
        e.str(&"x".repeat(40)).unwrap();
        e.str("b").unwrap();
        e.uint(u64::MAX);
        let bytes = e.into_bytes();
        assert_eq!(value_len(&bytes), Ok(bytes.len()));
        for n in 0..bytes.len() {
            assert!(value_len(&bytes[..n]).is_err(), "prefix of {n} bytes");
        }
    }

    #[test]
    fn wrong_types_name_the_path_and_the_found_type() {
        let root = Path::Root;
        let field = Path::Field(&root, "toc");
        let e: MetadataError = Cursor::new(&[0x90], 0).map(&field).unwrap_err();
        assert_eq!(e.to_string(), "toc: expected map, found array");
        let e: MetadataError = Cursor::new(&[0xc3], 0).str(&root).unwrap_err();
        assert_eq!(e.to_string(), "root: expected str, found bool");
    }
}
