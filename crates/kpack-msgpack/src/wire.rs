//! The wire forms: what a marker byte starts, and one whole value read past without
//! recursion ([`skip_value`]), from a slice or any [`Source`].

use rmp::Marker;

use crate::{Cursor, DecodeError};

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
