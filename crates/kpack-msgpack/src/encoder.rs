//! [`Encoder`]: `rmp`'s writing, each length checked to fit the format's 32 bits.

use crate::EncodeError;

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
