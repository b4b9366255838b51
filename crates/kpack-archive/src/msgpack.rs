//! A small MessagePack implementation, just what kpack's formats need.
//!
//! The encoder reproduces Python `msgpack.packb(obj, use_bin_type=True)` byte for byte (spec
//! §1.6): every integer, string, binary, array and map takes the smallest form that holds it,
//! non-negative integers use the unsigned forms, and maps keep their insertion order (a map is
//! a `Vec` of pairs, not a hash map).
//!
//! The decoder reads untrusted bytes. It never allocates from a claimed length that the
//! remaining input could not back: a str or bin must fit in what is left, and an array or map
//! element takes at least one byte. Nesting deeper than [`MAX_DEPTH`] is rejected. Errors carry
//! the byte offset and what was expected. Extension types are not part of any kpack format and
//! are rejected.

use std::fmt;

/// Deepest container nesting the decoder accepts. kpack's deepest document (the TOC) nests 4.
pub const MAX_DEPTH: usize = 64;

/// One MessagePack value.
///
/// The decoder yields [`Value::UInt`] for every non-negative integer and [`Value::Int`] only for
/// negative ones, whatever wire form was used, so a field check needs one case per sign.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Nil,
    Bool(bool),
    Int(i64),
    UInt(u64),
    F32(f32),
    F64(f64),
    Str(String),
    Bin(Vec<u8>),
    Array(Vec<Value>),
    /// Entries in wire order; duplicate keys are kept as they are.
    Map(Vec<(Value, Value)>),
}

impl Value {
    /// The type name used in error messages ("unsigned int", "str", ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "bool",
            Value::Int(_) => "negative int",
            Value::UInt(_) => "unsigned int",
            Value::F32(_) | Value::F64(_) => "float",
            Value::Str(_) => "str",
            Value::Bin(_) => "bin",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::UInt(n) => Some(*n),
            Value::Int(n) => u64::try_from(*n).ok(),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(Value, Value)]> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The value of the first entry whose key is the string `key`, if this is a map.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::UInt(n)
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Self {
        Value::UInt(n.into())
    }
}

/// What the decoder found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The input ended inside a value.
    UnexpectedEof {
        expected: &'static str,
        needed: u64,
        available: usize,
    },
    /// `0xc1`, the one byte MessagePack never uses.
    InvalidMarker(u8),
    /// An extension type (`0xc7..=0xc9`, `0xd4..=0xd8`).
    UnsupportedExt(u8),
    /// A str whose bytes are not UTF-8.
    InvalidUtf8,
    /// Containers nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Bytes left after a value that should have ended the input.
    TrailingBytes { count: usize },
}

/// A decode failure at byte `offset` of the decoded input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: usize,
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
            DecodeErrorKind::TooDeep => {
                write!(f, "expected at most {MAX_DEPTH} levels of nesting")
            }
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
    pub what: &'static str,
    pub len: usize,
}

/// Decodes one value from the start of `bytes`; returns it and the number of bytes it took.
/// Bytes after the value are left alone.
pub fn decode(bytes: &[u8]) -> Result<(Value, usize), DecodeError> {
    let mut d = Decoder::new(bytes);
    let v = d.value(0)?;
    Ok((v, d.pos))
}

/// Decodes one value that must span all of `bytes`.
pub fn decode_exact(bytes: &[u8]) -> Result<Value, DecodeError> {
    let (v, used) = decode(bytes)?;
    if used != bytes.len() {
        return Err(trailing(used, bytes.len()));
    }
    Ok(v)
}

fn trailing(used: usize, len: usize) -> DecodeError {
    DecodeError {
        offset: used,
        kind: DecodeErrorKind::TrailingBytes { count: len - used },
    }
}

/// The start of one value: a scalar in full (strs and bins borrowed), or a container's claimed
/// element count, not yet checked against the input. A str's bytes are UTF-8 checked only by
/// [`Decoder::next`] (and [`decode`]), so a document is checked once and then walked again
/// without paying for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Head<'a> {
    Nil,
    Bool(bool),
    Int(i64),
    UInt(u64),
    F32(f32),
    F64(f64),
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Array(u64),
    Map(u64),
}

impl Head<'_> {
    /// As [`Value::type_name`].
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Head::Nil => "nil",
            Head::Bool(_) => "bool",
            Head::Int(_) => "negative int",
            Head::UInt(_) => "unsigned int",
            Head::F32(_) | Head::F64(_) => "float",
            Head::Str(_) => "str",
            Head::Bin(_) => "bin",
            Head::Array(_) => "array",
            Head::Map(_) => "map",
        }
    }
}

/// A pull decoder: reads values in wire order without building a tree. Offsets in its errors
/// are offsets into the whole `bytes`, whatever position it started at.
#[derive(Debug, Clone)]
pub(crate) struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Decoder::at(bytes, 0)
    }

    /// Reads `bytes` from `pos` on; `bytes` still bounds every value.
    pub(crate) fn at(bytes: &'a [u8], pos: usize) -> Self {
        Decoder {
            bytes,
            pos: pos.min(bytes.len()),
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Fails unless the decoder has consumed all of its input.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        if self.pos == self.bytes.len() {
            Ok(())
        } else {
            Err(trailing(self.pos, self.bytes.len()))
        }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: u64, expected: &'static str) -> Result<&'a [u8], DecodeError> {
        let available = self.remaining();
        match usize::try_from(n) {
            Ok(n) if n <= available => {
                let s = &self.bytes[self.pos..self.pos + n];
                self.pos += n;
                Ok(s)
            }
            _ => Err(DecodeError {
                offset: self.pos,
                kind: DecodeErrorKind::UnexpectedEof {
                    expected,
                    needed: n,
                    available,
                },
            }),
        }
    }

    fn be(&mut self, n: usize, expected: &'static str) -> Result<u64, DecodeError> {
        let b = self.take(n as u64, expected)?;
        Ok(b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    }

    /// Checks that `count` elements of at least `min_bytes` each can fit before allocating.
    fn check_count(
        &self,
        count: u64,
        min_bytes: u64,
        expected: &'static str,
    ) -> Result<usize, DecodeError> {
        let available = self.remaining();
        let needed = count.saturating_mul(min_bytes);
        if needed > available as u64 {
            return Err(DecodeError {
                offset: self.pos,
                kind: DecodeErrorKind::UnexpectedEof {
                    expected,
                    needed,
                    available,
                },
            });
        }
        // `needed <= available`, so the count fits in usize.
        Ok(count as usize)
    }

    /// Enters the container whose head started at `start` and held `head`'s count: checks the
    /// nesting limit, then that the count can fit. Returns the count and the elements' depth.
    pub(crate) fn open(
        &self,
        head: Head<'_>,
        depth: usize,
        start: usize,
    ) -> Result<(usize, usize), DecodeError> {
        let (n, min_bytes, expected) = match head {
            Head::Array(n) => (n, 1, "array elements"),
            Head::Map(n) => (n, 2, "map entries"),
            _ => (0, 1, "array elements"),
        };
        if depth >= MAX_DEPTH {
            return Err(DecodeError {
                offset: start,
                kind: DecodeErrorKind::TooDeep,
            });
        }
        Ok((self.check_count(n, min_bytes, expected)?, depth + 1))
    }

    /// Reads the head of the next value; a container's elements follow.
    pub(crate) fn head(&mut self) -> Result<Head<'a>, DecodeError> {
        let start = self.pos;
        let marker = self.take(1, "a value marker")?[0];
        let h = match marker {
            0x00..=0x7f => Head::UInt(marker.into()),
            0x80..=0x8f => Head::Map(u64::from(marker & 0x0f)),
            0x90..=0x9f => Head::Array(u64::from(marker & 0x0f)),
            0xa0..=0xbf => Head::Str(self.take(u64::from(marker & 0x1f), "str data")?),
            0xc0 => Head::Nil,
            0xc2 => Head::Bool(false),
            0xc3 => Head::Bool(true),
            0xc4 => {
                let n = self.be(1, "bin8 length")?;
                Head::Bin(self.take(n, "bin8 data")?)
            }
            0xc5 => {
                let n = self.be(2, "bin16 length")?;
                Head::Bin(self.take(n, "bin16 data")?)
            }
            0xc6 => {
                let n = self.be(4, "bin32 length")?;
                Head::Bin(self.take(n, "bin32 data")?)
            }
            0xca => Head::F32(f32::from_bits(self.be(4, "float32")? as u32)),
            0xcb => Head::F64(f64::from_bits(self.be(8, "float64")?)),
            0xcc => Head::UInt(self.be(1, "uint8")?),
            0xcd => Head::UInt(self.be(2, "uint16")?),
            0xce => Head::UInt(self.be(4, "uint32")?),
            0xcf => Head::UInt(self.be(8, "uint64")?),
            0xd0 => int(i64::from(self.be(1, "int8")? as u8 as i8)),
            0xd1 => int(i64::from(self.be(2, "int16")? as u16 as i16)),
            0xd2 => int(i64::from(self.be(4, "int32")? as u32 as i32)),
            0xd3 => int(self.be(8, "int64")? as i64),
            0xd9 => {
                let n = self.be(1, "str8 length")?;
                Head::Str(self.take(n, "str data")?)
            }
            0xda => {
                let n = self.be(2, "str16 length")?;
                Head::Str(self.take(n, "str data")?)
            }
            0xdb => {
                let n = self.be(4, "str32 length")?;
                Head::Str(self.take(n, "str data")?)
            }
            0xdc => Head::Array(self.be(2, "array16 length")?),
            0xdd => Head::Array(self.be(4, "array32 length")?),
            0xde => Head::Map(self.be(2, "map16 length")?),
            0xdf => Head::Map(self.be(4, "map32 length")?),
            0xc7..=0xc9 | 0xd4..=0xd8 => {
                return Err(DecodeError {
                    offset: start,
                    kind: DecodeErrorKind::UnsupportedExt(marker),
                });
            }
            0xc1 => {
                return Err(DecodeError {
                    offset: start,
                    kind: DecodeErrorKind::InvalidMarker(marker),
                });
            }
            0xe0..=0xff => Head::Int(i64::from(marker as i8)),
        };
        Ok(h)
    }

    /// Reads one whole value at nesting `depth` and returns its head: the value is checked
    /// as [`decode`] would check it, and a container's elements skipped, without allocating.
    pub(crate) fn next(&mut self, depth: usize) -> Result<Head<'a>, DecodeError> {
        let start = self.pos;
        let head = self.head()?;
        match head {
            Head::Str(s) => check_utf8(s, start)?,
            Head::Array(_) | Head::Map(_) => match skip_valid(self.bytes, start, depth) {
                Some(end) => self.pos = end,
                None => {
                    self.pos = start;
                    return self.next_checked(depth);
                }
            },
            _ => {}
        }
        Ok(head)
    }

    /// [`Decoder::next`] for a value [`skip_valid`] rejected: finds the error it reports.
    #[cold]
    fn next_checked(&mut self, depth: usize) -> Result<Head<'a>, DecodeError> {
        let start = self.pos;
        let head = self.head()?;
        match head {
            Head::Str(s) => utf8(s, start).map(drop)?,
            Head::Array(_) | Head::Map(_) => {
                let (n, inner) = self.open(head, depth, start)?;
                let items = if let Head::Map(_) = head { 2 * n } else { n };
                for _ in 0..items {
                    self.next_checked(inner)?;
                }
            }
            _ => {}
        }
        Ok(head)
    }

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        let start = self.pos;
        let head = self.head()?;
        Ok(match head {
            Head::Nil => Value::Nil,
            Head::Bool(b) => Value::Bool(b),
            Head::Int(n) => Value::Int(n),
            Head::UInt(n) => Value::UInt(n),
            Head::F32(x) => Value::F32(x),
            Head::F64(x) => Value::F64(x),
            Head::Str(s) => Value::Str(utf8(s, start)?.to_owned()),
            Head::Bin(b) => Value::Bin(b.to_vec()),
            Head::Array(_) => {
                let (n, inner) = self.open(head, depth, start)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(inner)?);
                }
                Value::Array(items)
            }
            Head::Map(_) => {
                let (n, inner) = self.open(head, depth, start)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = self.value(inner)?;
                    let v = self.value(inner)?;
                    items.push((k, v));
                }
                Value::Map(items)
            }
        })
    }
}

/// The str whose bytes `s` start at `start`.
fn utf8(s: &[u8], start: usize) -> Result<&str, DecodeError> {
    std::str::from_utf8(s).map_err(|_| DecodeError {
        offset: start,
        kind: DecodeErrorKind::InvalidUtf8,
    })
}

/// Where the value at `pos` (nesting `depth`) ends, if [`Decoder::next_checked`] would accept
/// it. The fast path for well-formed documents: no error details (on `None` the checked walk
/// finds them) and nothing returned through memory. Accepts no more than the checked walk.
pub(crate) fn skip_valid(bytes: &[u8], pos: usize, depth: usize) -> Option<usize> {
    let marker = *bytes.get(pos)?;
    let mut pos = pos + 1;
    let mut len_at = |width: usize| -> Option<usize> {
        let b = bytes.get(pos..pos + width)?;
        pos += width;
        usize::try_from(b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x))).ok()
    };
    // Scalars: (bytes after the head, whether they are a str); containers: their item count.
    let (skip, is_str) = match marker {
        0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => return Some(pos),
        0xa0..=0xbf => (usize::from(marker & 0x1f), true),
        0xcc | 0xd0 => (1, false),
        0xcd | 0xd1 => (2, false),
        0xce | 0xd2 | 0xca => (4, false),
        0xcf | 0xd3 | 0xcb => (8, false),
        0xd9 => (len_at(1)?, true),
        0xda => (len_at(2)?, true),
        0xdb => (len_at(4)?, true),
        0xc4 => (len_at(1)?, false),
        0xc5 => (len_at(2)?, false),
        0xc6 => (len_at(4)?, false),
        0x80..=0x9f | 0xdc..=0xdf => {
            let items = match marker {
                0x80..=0x8f => 2 * usize::from(marker & 0x0f),
                0x90..=0x9f => usize::from(marker & 0x0f),
                0xdc => len_at(2)?,
                0xdd => len_at(4)?,
                0xde => 2 * len_at(2)?,
                _ => 2usize.checked_mul(len_at(4)?)?,
            };
            if depth >= MAX_DEPTH {
                return None;
            }
            for _ in 0..items {
                pos = skip_valid(bytes, pos, depth + 1)?;
            }
            return Some(pos);
        }
        _ => return None,
    };
    let end = pos.checked_add(skip)?;
    let s = bytes.get(pos..end)?;
    if is_str && !s.is_ascii() && std::str::from_utf8(s).is_err() {
        return None;
    }
    Some(end)
}

/// [`utf8`] without the error, for a str [`Decoder::next`] has checked: lossy only if it was not.
pub(crate) fn checked_str(s: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(s) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(s),
    }
}

/// [`utf8`] without the result. Names in kpack documents are ASCII, which is checked a word
/// at a time.
fn check_utf8(s: &[u8], start: usize) -> Result<(), DecodeError> {
    if s.is_ascii() {
        Ok(())
    } else {
        utf8(s, start).map(drop)
    }
}

/// Normalises sign: a non-negative integer is always [`Head::UInt`].
fn int(n: i64) -> Head<'static> {
    match u64::try_from(n) {
        Ok(u) => Head::UInt(u),
        Err(_) => Head::Int(n),
    }
}

/// Encodes `value` the way Python `msgpack.packb(value, use_bin_type=True)` does.
pub fn encode(value: &Value) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    encode_into(value, &mut out)?;
    Ok(out)
}

/// [`encode`], appending to `out`.
pub fn encode_into(value: &Value, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    match value {
        Value::Nil => out.push(0xc0),
        Value::Bool(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::UInt(n) => encode_uint(*n, out),
        Value::Int(n) => match u64::try_from(*n) {
            Ok(u) => encode_uint(u, out),
            Err(_) => encode_negative(*n, out),
        },
        Value::F32(x) => {
            out.push(0xca);
            out.extend_from_slice(&x.to_bits().to_be_bytes());
        }
        Value::F64(x) => {
            out.push(0xcb);
            out.extend_from_slice(&x.to_bits().to_be_bytes());
        }
        Value::Str(s) => {
            let n = len32("str", s.len())?;
            match n {
                0..=31 => out.push(0xa0 | n as u8),
                32..=0xff => out.extend_from_slice(&[0xd9, n as u8]),
                0x100..=0xffff => {
                    out.push(0xda);
                    out.extend_from_slice(&(n as u16).to_be_bytes());
                }
                _ => {
                    out.push(0xdb);
                    out.extend_from_slice(&n.to_be_bytes());
                }
            }
            out.extend_from_slice(s.as_bytes());
        }
        Value::Bin(b) => {
            let n = len32("bin", b.len())?;
            match n {
                0..=0xff => out.extend_from_slice(&[0xc4, n as u8]),
                0x100..=0xffff => {
                    out.push(0xc5);
                    out.extend_from_slice(&(n as u16).to_be_bytes());
                }
                _ => {
                    out.push(0xc6);
                    out.extend_from_slice(&n.to_be_bytes());
                }
            }
            out.extend_from_slice(b);
        }
        Value::Array(items) => {
            container_header(len32("array", items.len())?, 0x90, 0xdc, out);
            for v in items {
                encode_into(v, out)?;
            }
        }
        Value::Map(items) => {
            container_header(len32("map", items.len())?, 0x80, 0xde, out);
            for (k, v) in items {
                encode_into(k, out)?;
                encode_into(v, out)?;
            }
        }
    }
    Ok(())
}

fn len32(what: &'static str, len: usize) -> Result<u32, EncodeError> {
    u32::try_from(len).map_err(|_| EncodeError { what, len })
}

/// `fix` is the fixarray/fixmap base; `wide16` the 16-bit marker, whose successor is 32-bit.
fn container_header(n: u32, fix: u8, wide16: u8, out: &mut Vec<u8>) {
    match n {
        0..=15 => out.push(fix | n as u8),
        16..=0xffff => {
            out.push(wide16);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        _ => {
            out.push(wide16 + 1);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

fn encode_uint(n: u64, out: &mut Vec<u8>) {
    match n {
        0..=0x7f => out.push(n as u8),
        0x80..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(0xcf);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

fn encode_negative(n: i64, out: &mut Vec<u8>) {
    if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= i64::from(i8::MIN) {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= i64::from(i16::MIN) {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= i64::from(i32::MIN) {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}
/// A typed-field failure while interpreting a decoded document against a schema.
///
/// `path` is written like Python subscripts, e.g. `toc["lib/x.so#0"]["gfx900"].ordinal`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    #[error("{path}: missing")]
    Missing { path: String },
    #[error("{path}: expected {expected}, found {found}")]
    WrongType {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("{path}: duplicate key {key:?}")]
    DuplicateKey { path: String, key: String },
    #[error("{path}: {problem}")]
    Invalid { path: String, problem: String },
}

/// Schema helpers shared by the TOC, marker and manifest decoders. They read the wire form
/// with a [`Decoder`] (no tree is built, strs are borrowed) and spell a field's path only
/// when reporting a problem with it.
pub(crate) mod schema {
    use std::borrow::Cow;
    use std::collections::HashSet;
    use std::fmt;
    use std::hash::Hash;

    use super::{DecodeError, Decoder, FieldError, Head, checked_str};

    /// Where a value sits in a document, rendered only for error messages.
    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Path<'p> {
        Root,
        /// `base.key` for identifier-like keys, `base["key"]` otherwise; no dot at the root.
        Field(&'p Path<'p>, &'p str),
        /// `base["key"]`: the notation for data-valued keys (binaries, arches).
        Key(&'p Path<'p>, &'p str),
        Index(&'p Path<'p>, usize),
        /// The keys of the map at `base`: `base key`, or `root key`.
        KeysOf(&'p Path<'p>),
    }

    impl fmt::Display for Path<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match *self {
                Path::Root => Ok(()),
                Path::Field(base, key) => {
                    let plain = !key.is_empty()
                        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
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

    /// The failures a schema walk meets: the wire form's own, and the schema's.
    pub(crate) trait WalkError: From<DecodeError> + From<FieldError> {}
    impl<T: From<DecodeError> + From<FieldError>> WalkError for T {}

    /// `path` holds a `found` where the schema wants `expected`; the root is named `root`.
    pub(crate) fn wrong(path: &Path<'_>, expected: &'static str, found: &Head<'_>) -> FieldError {
        let path = match path {
            Path::Root => "root".to_owned(),
            p => p.to_string(),
        };
        FieldError::WrongType {
            path,
            expected,
            found: found.type_name(),
        }
    }

    /// Remembers values to find repeats: a linear scan while few, a hash set beyond.
    pub(crate) struct Distinct<T> {
        few: Vec<T>,
        many: HashSet<T>,
    }

    impl<T> Default for Distinct<T> {
        fn default() -> Self {
            Distinct {
                few: Vec::new(),
                many: HashSet::new(),
            }
        }
    }

    impl<T: Copy + Eq + Hash> Distinct<T> {
        const LINEAR: usize = 16;

        pub(crate) fn new() -> Self {
            Self::default()
        }

        pub(crate) fn clear(&mut self) {
            self.few.clear();
            self.many.clear();
        }

        /// False if `t` was seen before.
        pub(crate) fn insert(&mut self, t: T) -> bool {
            if self.many.is_empty() {
                if self.few.contains(&t) {
                    return false;
                }
                if self.few.len() < Self::LINEAR {
                    self.few.push(t);
                    return true;
                }
                self.many.extend(self.few.drain(..));
            }
            self.many.insert(t)
        }
    }

    /// A map's str keys with where each value starts, in wire order.
    pub(crate) struct Fields<'a> {
        bytes: &'a [u8],
        /// Key, where the value starts, and the value's head.
        fields: Vec<(&'a [u8], usize, Head<'a>)>,
        distinct: Distinct<&'a [u8]>,
        /// Nesting depth of the values.
        depth: usize,
    }

    impl<'a> Fields<'a> {
        pub(crate) fn new() -> Self {
            Fields {
                bytes: &[],
                fields: Vec::new(),
                distinct: Distinct::new(),
                depth: 0,
            }
        }

        /// Reads the map at `d` (nesting `depth`), whose keys must be distinct strs (with
        /// `lenient`, entries with other keys are skipped). Every value is checked and skipped,
        /// so the outer result is the first wire-form error anywhere in the map, as a full
        /// decode would report it; the inner one the first schema problem (not a map, bad key).
        pub(crate) fn read(
            &mut self,
            d: &mut Decoder<'a>,
            path: &Path<'_>,
            depth: usize,
            lenient: bool,
        ) -> Result<Result<(), FieldError>, DecodeError> {
            self.bytes = d.bytes();
            self.fields.clear();
            self.distinct.clear();
            let start = d.pos();
            let head = d.head()?;
            if !matches!(head, Head::Map(_)) {
                *d = Decoder::at(d.bytes(), start);
                d.next(depth)?;
                return Ok(Err(wrong(path, "map", &head)));
            }
            let (n, inner) = d.open(head, depth, start)?;
            self.depth = inner;
            let mut problem = None;
            for _ in 0..n {
                let key = d.next(inner)?;
                let value = d.pos();
                let head = d.next(inner)?;
                match key {
                    Head::Str(k) if self.distinct.insert(k) => self.fields.push((k, value, head)),
                    Head::Str(k) => {
                        problem.get_or_insert_with(|| FieldError::DuplicateKey {
                            path: path.to_string(),
                            key: checked_str(k).into_owned(),
                        });
                    }
                    _ if lenient => {}
                    other => {
                        problem.get_or_insert_with(|| FieldError::WrongType {
                            path: Path::KeysOf(path).to_string(),
                            expected: "str",
                            found: other.type_name(),
                        });
                    }
                }
            }
            Ok(problem.map_or(Ok(()), Err))
        }

        /// [`Fields::read`] with both failures as one error type.
        pub(crate) fn read_as<E: WalkError>(
            &mut self,
            d: &mut Decoder<'a>,
            path: &Path<'_>,
            depth: usize,
            lenient: bool,
        ) -> Result<(), E> {
            Ok(self.read(d, path, depth, lenient)??)
        }

        pub(crate) fn iter(&self) -> impl Iterator<Item = (Cow<'a, str>, Node<'a>)> + '_ {
            self.fields
                .iter()
                .map(|&(k, pos, head)| (checked_str(k), self.value_at(pos, head)))
        }

        fn value_at(&self, pos: usize, head: Head<'a>) -> Node<'a> {
            Node {
                d: Decoder::at(self.bytes, pos),
                depth: self.depth,
                head,
            }
        }

        pub(crate) fn get(&self, key: &str) -> Option<Node<'a>> {
            let &(_, pos, head) = self.fields.iter().find(|(k, ..)| *k == key.as_bytes())?;
            Some(self.value_at(pos, head))
        }

        /// The value under `key`, which must be present; `base` is this map's path.
        pub(crate) fn req(&self, base: &Path<'_>, key: &str) -> Result<Node<'a>, FieldError> {
            self.get(key).ok_or_else(|| FieldError::Missing {
                path: Path::Field(base, key).to_string(),
            })
        }

        pub(crate) fn str<E: WalkError>(
            &self,
            base: &Path<'_>,
            key: &str,
        ) -> Result<Cow<'a, str>, E> {
            self.req(base, key)?.str(&Path::Field(base, key))
        }

        pub(crate) fn uint<E: WalkError>(&self, base: &Path<'_>, key: &str) -> Result<u64, E> {
            self.req(base, key)?.uint(&Path::Field(base, key))
        }
    }

    /// One checked value of a map read by [`Fields::read`]: its head, and a decoder at its
    /// start to read a container's elements.
    #[derive(Debug, Clone)]
    pub(crate) struct Node<'a> {
        d: Decoder<'a>,
        depth: usize,
        head: Head<'a>,
    }

    impl<'a> Node<'a> {
        /// A decoder at the value, and the value's nesting depth.
        pub(crate) fn into_parts(self) -> (Decoder<'a>, usize) {
            (self.d, self.depth)
        }

        pub(crate) fn str<E: WalkError>(self, path: &Path<'_>) -> Result<Cow<'a, str>, E> {
            match self.head {
                Head::Str(s) => Ok(checked_str(s)),
                other => Err(wrong(path, "str", &other).into()),
            }
        }

        pub(crate) fn uint<E: WalkError>(self, path: &Path<'_>) -> Result<u64, E> {
            match self.head {
                Head::UInt(n) => Ok(n),
                other => Err(wrong(path, "unsigned int", &other).into()),
            }
        }

        /// The elements of an array, each read whole by the returned decoder's
        /// [`Decoder::next`] at the returned depth.
        pub(crate) fn array<E: WalkError>(
            mut self,
            path: &Path<'_>,
        ) -> Result<(usize, Decoder<'a>, usize), E> {
            let start = self.d.pos();
            match self.d.head()? {
                head @ Head::Array(_) => {
                    let (n, inner) = self.d.open(head, self.depth, start)?;
                    Ok((n, self.d, inner))
                }
                other => Err(wrong(path, "array", &other).into()),
            }
        }

        /// The value as a map, read into `fields` (see [`Fields::read`]).
        pub(crate) fn map_into<E: WalkError>(
            mut self,
            fields: &mut Fields<'a>,
            path: &Path<'_>,
            lenient: bool,
        ) -> Result<(), E> {
            fields.read_as(&mut self.d, path, self.depth, lenient)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: &Value) -> Vec<u8> {
        encode(v).unwrap()
    }

    #[test]
    fn integers_take_the_smallest_python_form() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0xcc, 0x80]),
            (255, &[0xcc, 0xff]),
            (256, &[0xcd, 0x01, 0x00]),
            (65535, &[0xcd, 0xff, 0xff]),
            (65536, &[0xce, 0x00, 0x01, 0x00, 0x00]),
            (4_294_967_296, &[0xcf, 0, 0, 0, 1, 0, 0, 0, 0]),
            (-1, &[0xff]),
            (-32, &[0xe0]),
            (-33, &[0xd0, 0xdf]),
            (-128, &[0xd0, 0x80]),
            (-129, &[0xd1, 0xff, 0x7f]),
            (-32769, &[0xd2, 0xff, 0xff, 0x7f, 0xff]),
            (i64::MIN, &[0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0]),
        ];
        for (n, bytes) in cases {
            assert_eq!(enc(&Value::Int(*n)), *bytes, "{n}");
            let back = decode_exact(bytes).unwrap();
            assert_eq!(
                back.as_u64()
                    .map(|u| u as i64)
                    .unwrap_or_else(|| match back {
                        Value::Int(i) => i,
                        _ => panic!("not an int"),
                    }),
                *n
            );
        }
        assert_eq!(
            enc(&Value::UInt(u64::MAX)),
            [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn non_negative_signed_wire_forms_decode_as_unsigned() {
        assert_eq!(decode_exact(&[0xd0, 0x05]).unwrap(), Value::UInt(5));
        assert_eq!(
            decode_exact(&[0xd3, 0, 0, 0, 0, 0, 0, 1, 0]).unwrap(),
            Value::UInt(256)
        );
    }

    #[test]
    fn string_and_container_length_boundaries_match_python() {
        let s = |n: usize| Value::Str("x".repeat(n));
        assert_eq!(enc(&s(31))[0], 0xbf);
        assert_eq!(enc(&s(32))[..2], [0xd9, 32]);
        assert_eq!(enc(&s(255))[..2], [0xd9, 255]);
        assert_eq!(enc(&s(256))[..3], [0xda, 1, 0]);
        assert_eq!(enc(&s(65536))[..5], [0xdb, 0, 1, 0, 0]);
        assert_eq!(enc(&Value::Bin(vec![7; 3])), [0xc4, 3, 7, 7, 7]);
        assert_eq!(enc(&Value::Bin(vec![0; 256]))[..3], [0xc5, 1, 0]);
        assert_eq!(enc(&Value::Bin(vec![0; 65536]))[..5], [0xc6, 0, 1, 0, 0]);
        let arr = |n: usize| Value::Array(vec![Value::Nil; n]);
        assert_eq!(enc(&arr(15))[0], 0x9f);
        assert_eq!(enc(&arr(16))[..3], [0xdc, 0, 16]);
        assert_eq!(enc(&arr(65536))[..5], [0xdd, 0, 1, 0, 0]);
        let map = |n: usize| {
            Value::Map(
                (0..n as u64)
                    .map(|i| (Value::UInt(i), Value::Nil))
                    .collect(),
            )
        };
        assert_eq!(enc(&map(15))[0], 0x8f);
        assert_eq!(enc(&map(16))[..3], [0xde, 0, 16]);
        assert_eq!(enc(&map(65536))[..5], [0xdf, 0, 1, 0, 0]);
        for v in [s(70000), arr(70000), map(70000), Value::Bin(vec![1; 70000])] {
            assert_eq!(decode_exact(&enc(&v)).unwrap(), v);
        }
    }

    #[test]
    fn floats_bools_and_nil_round_trip() {
        let v = Value::Array(vec![
            Value::F32(1.5),
            Value::F64(-2.25),
            Value::Bool(true),
            Value::Bool(false),
            Value::Nil,
        ]);
        let bytes = enc(&v);
        assert_eq!(bytes[1], 0xca);
        assert_eq!(bytes[6], 0xcb);
        assert_eq!(decode_exact(&bytes).unwrap(), v);
    }

    #[test]
    fn map_order_is_preserved() {
        let v = Value::Map(vec![
            ("b".into(), Value::UInt(1)),
            ("a".into(), Value::UInt(2)),
        ]);
        assert_eq!(enc(&v), [0x82, 0xa1, b'b', 1, 0xa1, b'a', 2]);
        assert_eq!(decode_exact(&enc(&v)).unwrap(), v);
    }

    #[test]
    fn decode_reports_consumed_bytes_and_ignores_what_follows() {
        let (v, used) = decode(&[0x92, 0x01, 0x02, 0xff, 0xff]).unwrap();
        assert_eq!(v, Value::Array(vec![Value::UInt(1), Value::UInt(2)]));
        assert_eq!(used, 3);
        let e = decode_exact(&[0x01, 0x02]).unwrap_err();
        assert_eq!(
            e,
            DecodeError {
                offset: 1,
                kind: DecodeErrorKind::TrailingBytes { count: 1 }
            }
        );
    }

    #[test]
    fn str32_claiming_4_gib_fails_without_allocating() {
        let e = decode(&[0xdb, 0xff, 0xff, 0xff, 0xff, b'a']).unwrap_err();
        assert_eq!(e.offset, 5);
        assert!(matches!(
            e.kind,
            DecodeErrorKind::UnexpectedEof {
                needed: 0xffff_ffff,
                available: 1,
                ..
            }
        ));
        assert!(e.to_string().contains("at byte 5"), "{e}");
    }

    #[test]
    fn huge_container_counts_fail_before_allocating() {
        let e = decode(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0x00]).unwrap_err();
        assert!(matches!(
            e.kind,
            DecodeErrorKind::UnexpectedEof {
                needed: 0xffff_ffff,
                ..
            }
        ));
        let e = decode(&[0xdf, 0x80, 0, 0, 0, 0x00, 0x00]).unwrap_err();
        assert!(matches!(
            e.kind,
            DecodeErrorKind::UnexpectedEof {
                needed: 0x1_0000_0000,
                ..
            }
        ));
        let e = decode(&[0xc6, 0xff, 0xff, 0xff, 0xff]).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::UnexpectedEof { .. }));
    }

    #[test]
    fn nesting_beyond_the_limit_is_rejected() {
        let mut ok = vec![0x91; MAX_DEPTH - 1];
        ok.push(0xc0);
        assert!(decode_exact(&ok).is_ok());
        let mut deep = vec![0x91; MAX_DEPTH];
        deep.push(0xc0);
        assert_eq!(decode(&deep).unwrap(), (nested(MAX_DEPTH), MAX_DEPTH + 1));
        let mut too_deep = vec![0x91; MAX_DEPTH + 1];
        too_deep.push(0xc0);
        let e = decode(&too_deep).unwrap_err();
        assert_eq!(
            e,
            DecodeError {
                offset: MAX_DEPTH,
                kind: DecodeErrorKind::TooDeep
            }
        );
    }

    fn nested(depth: usize) -> Value {
        (0..depth).fold(Value::Nil, |v, _| Value::Array(vec![v]))
    }

    #[test]
    fn invalid_markers_ext_types_and_bad_utf8_are_errors() {
        assert_eq!(
            decode(&[0xc1]).unwrap_err().kind,
            DecodeErrorKind::InvalidMarker(0xc1)
        );
        assert_eq!(
            decode(&[0xd4, 1, 2]).unwrap_err().kind,
            DecodeErrorKind::UnsupportedExt(0xd4)
        );
        let e = decode(&[0x91, 0xa2, 0xff, 0xfe]).unwrap_err();
        assert_eq!(
            e,
            DecodeError {
                offset: 1,
                kind: DecodeErrorKind::InvalidUtf8
            }
        );
    }

    #[test]
    fn every_truncation_of_a_document_is_an_error() {
        let v = Value::Map(vec![
            (
                "k".into(),
                Value::Array(vec![Value::UInt(300), Value::Str("x".repeat(40))]),
            ),
            ("b".into(), Value::Bin(vec![1, 2, 3])),
            ("f".into(), Value::F64(0.5)),
        ]);
        let bytes = enc(&v);
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "prefix of {n} bytes decoded");
        }
    }
}
