//! What reading and writing a document can fail with.

use std::fmt;

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
