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
    let mut d = Decoder { bytes, pos: 0 };
    let v = d.value(0)?;
    Ok((v, d.pos))
}

/// Decodes one value that must span all of `bytes`.
pub fn decode_exact(bytes: &[u8]) -> Result<Value, DecodeError> {
    let (v, used) = decode(bytes)?;
    if used != bytes.len() {
        return Err(DecodeError {
            offset: used,
            kind: DecodeErrorKind::TrailingBytes {
                count: bytes.len() - used,
            },
        });
    }
    Ok(v)
}

struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
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

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        let start = self.pos;
        let marker = self.take(1, "a value marker")?[0];
        let v = match marker {
            0x00..=0x7f => Value::UInt(marker.into()),
            0x80..=0x8f => self.map(u64::from(marker & 0x0f), depth, start)?,
            0x90..=0x9f => self.array(u64::from(marker & 0x0f), depth, start)?,
            0xa0..=0xbf => self.str(u64::from(marker & 0x1f), start)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 => {
                let n = self.be(1, "bin8 length")?;
                Value::Bin(self.take(n, "bin8 data")?.to_vec())
            }
            0xc5 => {
                let n = self.be(2, "bin16 length")?;
                Value::Bin(self.take(n, "bin16 data")?.to_vec())
            }
            0xc6 => {
                let n = self.be(4, "bin32 length")?;
                Value::Bin(self.take(n, "bin32 data")?.to_vec())
            }
            0xca => Value::F32(f32::from_bits(self.be(4, "float32")? as u32)),
            0xcb => Value::F64(f64::from_bits(self.be(8, "float64")?)),
            0xcc => Value::UInt(self.be(1, "uint8")?),
            0xcd => Value::UInt(self.be(2, "uint16")?),
            0xce => Value::UInt(self.be(4, "uint32")?),
            0xcf => Value::UInt(self.be(8, "uint64")?),
            0xd0 => int(i64::from(self.be(1, "int8")? as u8 as i8)),
            0xd1 => int(i64::from(self.be(2, "int16")? as u16 as i16)),
            0xd2 => int(i64::from(self.be(4, "int32")? as u32 as i32)),
            0xd3 => int(self.be(8, "int64")? as i64),
            0xd9 => {
                let n = self.be(1, "str8 length")?;
                self.str(n, start)?
            }
            0xda => {
                let n = self.be(2, "str16 length")?;
                self.str(n, start)?
            }
            0xdb => {
                let n = self.be(4, "str32 length")?;
                self.str(n, start)?
            }
            0xdc => {
                let n = self.be(2, "array16 length")?;
                self.array(n, depth, start)?
            }
            0xdd => {
                let n = self.be(4, "array32 length")?;
                self.array(n, depth, start)?
            }
            0xde => {
                let n = self.be(2, "map16 length")?;
                self.map(n, depth, start)?
            }
            0xdf => {
                let n = self.be(4, "map32 length")?;
                self.map(n, depth, start)?
            }
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
            0xe0..=0xff => Value::Int(i64::from(marker as i8)),
        };
        Ok(v)
    }

    fn str(&mut self, n: u64, start: usize) -> Result<Value, DecodeError> {
        let b = self.take(n, "str data")?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(Value::Str(s.to_owned())),
            Err(_) => Err(DecodeError {
                offset: start,
                kind: DecodeErrorKind::InvalidUtf8,
            }),
        }
    }

    fn enter(&self, depth: usize, start: usize) -> Result<usize, DecodeError> {
        if depth >= MAX_DEPTH {
            return Err(DecodeError {
                offset: start,
                kind: DecodeErrorKind::TooDeep,
            });
        }
        Ok(depth + 1)
    }

    fn array(&mut self, n: u64, depth: usize, start: usize) -> Result<Value, DecodeError> {
        let depth = self.enter(depth, start)?;
        let n = self.check_count(n, 1, "array elements")?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(depth)?);
        }
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: u64, depth: usize, start: usize) -> Result<Value, DecodeError> {
        let depth = self.enter(depth, start)?;
        let n = self.check_count(n, 2, "map entries")?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.value(depth)?;
            let v = self.value(depth)?;
            items.push((k, v));
        }
        Ok(Value::Map(items))
    }
}

/// Normalises sign: a non-negative integer is always [`Value::UInt`].
fn int(n: i64) -> Value {
    match u64::try_from(n) {
        Ok(u) => Value::UInt(u),
        Err(_) => Value::Int(n),
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

/// Schema helpers shared by the TOC, marker and manifest decoders.
pub(crate) mod schema {
    use super::{FieldError, Value};
    use std::collections::HashSet;

    /// `base.key` for identifier-like keys, `base["key"]` otherwise; no leading dot at the root.
    pub(crate) fn child(base: &str, key: &str) -> String {
        let plain = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        match (base.is_empty(), plain) {
            (true, true) => key.to_owned(),
            (false, true) => format!("{base}.{key}"),
            _ => format!("{base}[{key:?}]"),
        }
    }

    pub(crate) fn wrong(path: &str, expected: &'static str, v: &Value) -> FieldError {
        FieldError::WrongType {
            path: path.to_owned(),
            expected,
            found: v.type_name(),
        }
    }

    /// A map whose keys are all distinct strings, as `(key, value)` pairs in wire order.
    pub(crate) fn str_map<'v>(
        path: &str,
        v: &'v Value,
    ) -> Result<Vec<(&'v str, &'v Value)>, FieldError> {
        map_entries(path, v, false)
    }

    /// Like [`str_map`] but entries with non-str keys are skipped (extra keys are ignored).
    pub(crate) fn lenient_map<'v>(
        path: &str,
        v: &'v Value,
    ) -> Result<Vec<(&'v str, &'v Value)>, FieldError> {
        map_entries(path, v, true)
    }

    fn map_entries<'v>(
        path: &str,
        v: &'v Value,
        skip_non_str_keys: bool,
    ) -> Result<Vec<(&'v str, &'v Value)>, FieldError> {
        let m = v.as_map().ok_or_else(|| wrong(path, "map", v))?;
        let mut seen = HashSet::with_capacity(m.len());
        let mut out = Vec::with_capacity(m.len());
        for (k, val) in m {
            let k = match k.as_str() {
                Some(k) => k,
                None if skip_non_str_keys => continue,
                None => {
                    return Err(FieldError::WrongType {
                        path: format!("{} key", if path.is_empty() { "root" } else { path }),
                        expected: "str",
                        found: k.type_name(),
                    });
                }
            };
            if !seen.insert(k) {
                return Err(FieldError::DuplicateKey {
                    path: path.to_owned(),
                    key: k.to_owned(),
                });
            }
            out.push((k, val));
        }
        Ok(out)
    }

    pub(crate) fn field<'v>(
        map: &[(&str, &'v Value)],
        base: &str,
        key: &str,
    ) -> Result<&'v Value, FieldError> {
        map.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .ok_or_else(|| FieldError::Missing {
                path: child(base, key),
            })
    }

    pub(crate) fn opt_field<'v>(map: &[(&str, &'v Value)], key: &str) -> Option<&'v Value> {
        map.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    pub(crate) fn as_str<'v>(path: &str, v: &'v Value) -> Result<&'v str, FieldError> {
        v.as_str().ok_or_else(|| wrong(path, "str", v))
    }

    pub(crate) fn as_uint(path: &str, v: &Value) -> Result<u64, FieldError> {
        match v {
            Value::UInt(n) => Ok(*n),
            _ => Err(wrong(path, "unsigned int", v)),
        }
    }

    pub(crate) fn str_field<'v>(
        map: &[(&str, &'v Value)],
        base: &str,
        key: &str,
    ) -> Result<&'v str, FieldError> {
        as_str(&child(base, key), field(map, base, key)?)
    }

    pub(crate) fn uint_field(
        map: &[(&str, &Value)],
        base: &str,
        key: &str,
    ) -> Result<u64, FieldError> {
        as_uint(&child(base, key), field(map, base, key)?)
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
