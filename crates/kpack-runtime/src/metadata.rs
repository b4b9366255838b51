//! Reading the HIPK metadata a wrapper points at (spec §2.2).
//!
//! The wrapper carries a bare pointer: nothing says how many bytes are behind it. The
//! reference unpacks a blind 64 KiB window, reading past the end of `.rocm_kpack_ref` (and
//! possibly off the end of the mapping) whenever the section is shorter (§9 B14). Here the
//! bytes are requested one at a time, in order, by kpack-archive's msgpack value walk
//! ([`msgpack::skip_value`]), which reads a value no further than its encoding says it runs: a
//! marker byte tells how many length or payload bytes follow, and a container how many values
//! it holds. So a well-formed map is read exactly, and reading stops at the first byte that
//! shows the input is not one (a reserved marker, an extension type, or a length that would
//! run past [`MAX_METADATA_LEN`]). The bytes read are then decoded and checked by
//! [`MarkerMetadata::decode`].

use kpack_archive::MetadataError;
use kpack_archive::msgpack::{self, Source};
use kpack_hostbin::marker::MarkerMetadata;

use crate::ErrorCode;

/// The most bytes ever read through a metadata pointer: the reference's window.
pub const MAX_METADATA_LEN: usize = 64 * 1024;

/// Why metadata could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataReadError {
    /// The encoding needs more than [`MAX_METADATA_LEN`] bytes: at `offset`, `expected` needs
    /// `needed` bytes at least.
    #[error(
        "HIPK metadata: at byte {offset}, {expected} need at least {needed} bytes, past the \
         {MAX_METADATA_LEN}-byte limit"
    )]
    TooLong {
        /// Where the bytes would start.
        offset: usize,
        /// What they are.
        expected: &'static str,
        /// How many.
        needed: u64,
    },
    /// The byte source ended inside the value (only byte slices end; pointers do not).
    #[error("HIPK metadata: input ends at byte {offset} inside the msgpack value")]
    Truncated {
        /// The offset the source had no byte for.
        offset: usize,
    },
    /// A byte that cannot start a value in kpack metadata: `0xc1` or an extension type.
    #[error("HIPK metadata: byte {byte:#04x} at {offset} is not a msgpack value kpack writes")]
    BadMarker {
        /// Byte offset of the problem.
        offset: usize,
        /// The byte found.
        byte: u8,
    },
    /// The value is msgpack but not HIPK metadata.
    #[error("HIPK metadata: {0}")]
    Schema(#[from] MetadataError),
}

impl MetadataReadError {
    /// Always [`ErrorCode::InvalidMetadata`].
    pub fn code(&self) -> ErrorCode {
        ErrorCode::InvalidMetadata
    }
}

/// Reads one msgpack value through `byte_at` (byte `i` of the input, `None` past its end),
/// requesting each index at most once, in increasing order, and none past the value's end;
/// then decodes it as HIPK metadata. Returns the metadata and the length of its encoding.
pub fn read_metadata(
    byte_at: impl FnMut(usize) -> Option<u8>,
) -> Result<(MarkerMetadata, usize), MetadataReadError> {
    let bytes = read_msgpack_value(byte_at, MAX_METADATA_LEN)?;
    let (metadata, used) = MarkerMetadata::decode(&bytes)?;
    Ok((metadata, used))
}

/// The bytes of one msgpack value, read no further than its encoding requires.
fn read_msgpack_value(
    byte_at: impl FnMut(usize) -> Option<u8>,
    limit: usize,
) -> Result<Vec<u8>, MetadataReadError> {
    let mut source = Pointer {
        byte_at,
        bytes: Vec::new(),
        limit,
    };
    msgpack::skip_value(&mut source)?;
    Ok(source.bytes)
}

/// The bytes behind a metadata pointer, requested in order and kept.
struct Pointer<F> {
    byte_at: F,
    bytes: Vec<u8>,
    limit: usize,
}

impl<F: FnMut(usize) -> Option<u8>> Source for Pointer<F> {
    type Error = MetadataReadError;

    fn pos(&self) -> usize {
        self.bytes.len()
    }

    fn room(&self) -> usize {
        self.limit - self.bytes.len()
    }

    /// Strs are checked when the bytes read are decoded.
    fn take(&mut self, n: usize, _str: bool) -> Result<&[u8], MetadataReadError> {
        let start = self.bytes.len();
        for offset in start..start + n {
            let byte = (self.byte_at)(offset).ok_or(MetadataReadError::Truncated { offset })?;
            self.bytes.push(byte);
        }
        Ok(&self.bytes[start..])
    }

    fn overrun(&self, offset: usize, expected: &'static str, needed: u64) -> MetadataReadError {
        MetadataReadError::TooLong {
            offset,
            expected,
            needed,
        }
    }

    fn rejected(&self, offset: usize, byte: u8) -> MetadataReadError {
        MetadataReadError::BadMarker { offset, byte }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Reads `bytes` through a source that records every index requested.
    fn read_recording(
        bytes: &[u8],
    ) -> (
        Result<(MarkerMetadata, usize), MetadataReadError>,
        Vec<usize>,
    ) {
        let asked = RefCell::new(Vec::new());
        let result = read_metadata(|i| {
            asked.borrow_mut().push(i);
            bytes.get(i).copied()
        });
        (result, asked.into_inner())
    }

    fn marker(kernel: &str, paths: &[&str]) -> Vec<u8> {
        MarkerMetadata {
            kernel_name: kernel.to_owned(),
            search_paths: paths.iter().map(|p| p.to_string()).collect(),
            host_entry_id: None,
        }
        .encode()
        .unwrap()
    }

    #[test]
    fn metadata_is_read_exactly_to_its_end_and_no_further() {
        let mut bytes = marker("lib/libfoo.so", &[".kpack/blas_lib_@GFXARCH@.kpack"]);
        let len = bytes.len();
        // Whatever follows the map in the section (padding, the next section) is never read.
        bytes.extend_from_slice(&[0xc1; 100]);
        let (result, asked) = read_recording(&bytes);
        let (meta, used) = result.unwrap();
        assert_eq!(used, len);
        assert_eq!(meta.kernel_name, "lib/libfoo.so");
        assert_eq!(meta.search_paths, [".kpack/blas_lib_@GFXARCH@.kpack"]);
        assert_eq!(asked, (0..len).collect::<Vec<_>>());
    }

    #[test]
    fn metadata_keys_in_any_order_with_extra_keys_are_accepted() {
        // {"kernel_name": "k", "extra": [1, {"x": nil}], "kpack_search_paths": [7, "a.kpack"]}
        let mut b = vec![0x83, 0xab];
        b.extend_from_slice(b"kernel_name");
        b.extend_from_slice(&[0xa1, b'k', 0xa5]);
        b.extend_from_slice(b"extra");
        b.extend_from_slice(&[0x92, 0x01, 0x81, 0xa1, b'x', 0xc0, 0xb2]);
        b.extend_from_slice(b"kpack_search_paths");
        b.extend_from_slice(&[0x92, 0x07, 0xa7]);
        b.extend_from_slice(b"a.kpack");
        let (result, _) = read_recording(&b);
        let (meta, used) = result.unwrap();
        assert_eq!(used, b.len());
        assert_eq!(meta.search_paths, ["a.kpack"]);
    }

    #[test]
    fn metadata_with_wrong_types_or_no_paths_is_invalid_metadata() {
        for bad in [
            vec![0x90],                   // root is an array
            vec![0x81, 0xa1, b'k', 0x01], // no kernel_name
            marker("k", &[]),             // no search path
        ] {
            let (result, _) = read_recording(&bad);
            let err = result.unwrap_err();
            assert!(matches!(err, MetadataReadError::Schema(_)), "{err}");
            assert_eq!(err.code(), ErrorCode::InvalidMetadata);
        }
    }

    #[test]
    fn a_length_past_the_limit_is_rejected_before_reading_it() {
        // str32 claiming 1 MiB: rejected after the 5 header bytes.
        let (result, asked) = read_recording(&[0xdb, 0x00, 0x10, 0x00, 0x00]);
        assert_eq!(
            result.unwrap_err(),
            MetadataReadError::TooLong {
                offset: 5,
                expected: "str data",
                needed: 0x10_0000
            }
        );
        assert_eq!(asked, [0, 1, 2, 3, 4]);
        // A map32 claiming 2^32-1 pairs: more values than bytes left.
        let (result, asked) = read_recording(&[0xdf, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            result.unwrap_err(),
            MetadataReadError::TooLong {
                offset: 5,
                expected: "map entries",
                needed: 2 * 0xffff_ffff
            }
        );
        assert_eq!(asked.len(), 5);
    }

    #[test]
    fn reading_stops_at_a_reserved_or_extension_marker() {
        let (result, asked) = read_recording(&[0x81, 0xc1, 0x00, 0x00]);
        assert_eq!(
            result.unwrap_err(),
            MetadataReadError::BadMarker {
                offset: 1,
                byte: 0xc1
            }
        );
        assert_eq!(asked, [0, 1]);
        let (result, _) = read_recording(&[0xd4, 0x01, 0x02]);
        assert!(matches!(result, Err(MetadataReadError::BadMarker { .. })));
    }

    #[test]
    fn deep_nesting_within_the_limit_is_rejected_without_recursion() {
        let deep = vec![0x91; 60_000];
        let (result, _) = read_recording(&deep);
        // The scanner runs out of input; with a terminator the decoder rejects the depth.
        assert!(matches!(result, Err(MetadataReadError::Truncated { .. })));
        let mut terminated = deep;
        terminated.push(0xc0);
        let (result, _) = read_recording(&terminated);
        assert!(matches!(result, Err(MetadataReadError::Schema(_))));
    }

    #[test]
    fn metadata_of_exactly_the_limit_is_read_and_one_byte_more_is_not() {
        // Kernel names of 256..65535 bytes take a str16 header, so the overhead is constant.
        let overhead = marker(&"n".repeat(1000), &["p"]).len() - 1000;
        let exact = marker(&"n".repeat(MAX_METADATA_LEN - overhead), &["p"]);
        assert_eq!(exact.len(), MAX_METADATA_LEN);
        assert_eq!(read_recording(&exact).0.unwrap().1, MAX_METADATA_LEN);
        let over = marker(&"n".repeat(MAX_METADATA_LEN - overhead + 1), &["p"]);
        let (result, asked) = read_recording(&over);
        assert!(matches!(result, Err(MetadataReadError::TooLong { .. })));
        assert!(asked.iter().all(|&i| i < MAX_METADATA_LEN));
    }
}
