//! Bounds-checked access to untrusted bytes, for `object`'s plain-data records.
//!
//! `object::pod` casts a byte slice to a record but reports a short slice only as `()`;
//! every read here first cuts the range with overflow-checked arithmetic, so an error
//! names what was read and its absolute file offset. With `object`'s `unaligned`
//! feature the records have alignment 1, so the cast after the cut cannot fail.
//! The ELF and PE readers (`kpack-elf`, `kpack-pe`) read their records through these
//! functions: each crate's error type converts an [`OutOfBounds`] into its own variant.

use object::pod::{Pod, from_bytes, slice_from_bytes};

/// A range the file refers to extends beyond its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what}: bytes {offset:#x}..+{len:#x} lie beyond the end of the file ({file_len:#x} bytes)"
)]
pub struct OutOfBounds {
    /// What was being read (a table, a section, a record).
    pub what: String,
    /// The range's file offset.
    pub offset: u64,
    /// The range's length.
    pub len: u64,
    /// The length of the file.
    pub file_len: u64,
}

/// `data[offset .. offset + len]`, or an error naming `what` and the requested range.
pub fn slice<'a>(
    data: &'a [u8],
    offset: u64,
    len: u64,
    what: &str,
) -> Result<&'a [u8], OutOfBounds> {
    let out_of_bounds = || OutOfBounds {
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

/// The size of record type `T` in the file.
pub const fn record_size<T>() -> u64 {
    size_of::<T>() as u64
}

/// The record `T` at `offset`.
pub fn record<'a, T: Pod>(data: &'a [u8], offset: u64, what: &str) -> Result<&'a T, OutOfBounds> {
    let bytes = slice(data, offset, record_size::<T>(), what)?;
    from_bytes(bytes)
        .map(|(r, _)| r)
        .map_err(|()| misfit(data, offset, bytes, what))
}

/// `count` consecutive records `T` starting at `offset` (`count * size` must not
/// overflow: callers bound `count` first).
pub fn records<'a, T: Pod>(
    data: &'a [u8],
    offset: u64,
    count: u64,
    what: &str,
) -> Result<&'a [T], OutOfBounds> {
    let len = count.saturating_mul(record_size::<T>());
    let bytes = slice(data, offset, len, what)?;
    slice_from_bytes(bytes, bytes.len() / size_of::<T>())
        .map(|(r, _)| r)
        .map_err(|()| misfit(data, offset, bytes, what))
}

/// `object::pod` refused a range already cut to size: unreachable with alignment-1
/// records, reported as the range it was rather than a panic.
fn misfit(data: &[u8], offset: u64, bytes: &[u8], what: &str) -> OutOfBounds {
    OutOfBounds {
        what: what.to_string(),
        offset,
        len: bytes.len() as u64,
        file_len: data.len() as u64,
    }
}

/// Every whole record `T` in `bytes` (a trailing partial record is ignored).
pub fn whole_records<T: Pod>(bytes: &[u8]) -> &[T] {
    let count = bytes.len() / size_of::<T>();
    slice_from_bytes(bytes, count).map_or(&[], |(r, _)| r)
}

/// The NUL-terminated string starting at `offset` inside a string table.
pub fn c_str(table: &[u8], offset: u64) -> Option<&[u8]> {
    let rest = table.get(usize::try_from(offset).ok()?..)?;
    let nul = rest.iter().position(|&b| b == 0)?;
    rest.get(..nul)
}
