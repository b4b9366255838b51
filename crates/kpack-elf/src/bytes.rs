//! Bounds-checked little-endian access to untrusted bytes.
//!
//! Every multi-byte read goes through [`slice`] (which checks the range against the
//! buffer with overflow-checked arithmetic) and then decodes a fixed-size array, so
//! no read can index out of range.

use crate::ElfError;

/// `data[offset .. offset + len]`, or an error naming `what` and the requested range.
pub(crate) fn slice<'a>(
    data: &'a [u8],
    offset: u64,
    len: u64,
    what: &str,
) -> Result<&'a [u8], ElfError> {
    let out_of_bounds = || ElfError::OutOfBounds {
        what: what.to_string(),
        offset,
        len,
        file_len: data.len() as u64,
    };
    let end = offset.checked_add(len).ok_or_else(out_of_bounds)?;
    if end > data.len() as u64 {
        return Err(out_of_bounds());
    }
    // Both bounds are <= data.len(), so they fit in usize.
    data.get(offset as usize..end as usize)
        .ok_or_else(out_of_bounds)
}

/// A fixed-size record decoded field by field; reads past its end yield zero
/// instead of panicking, and records are always cut to their full size first.
#[derive(Clone, Copy)]
pub(crate) struct Record<'a>(pub(crate) &'a [u8]);

impl Record<'_> {
    fn array<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        if let Some(src) = at.checked_add(N).and_then(|end| self.0.get(at..end)) {
            out.copy_from_slice(src);
        }
        out
    }
    pub(crate) fn u8(&self, at: usize) -> u8 {
        self.0.get(at).copied().unwrap_or(0)
    }
    pub(crate) fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.array(at))
    }
    pub(crate) fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.array(at))
    }
    pub(crate) fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.array(at))
    }
}

/// The NUL-terminated string starting at `offset` inside a string table.
pub(crate) fn c_str(table: &[u8], offset: u64) -> Option<&[u8]> {
    let rest = table.get(usize::try_from(offset).ok()?..)?;
    let nul = rest.iter().position(|&b| b == 0)?;
    rest.get(..nul)
}
