//! The digests that let every reader prove an archive hands out what its writer was given.
//!
//! Both format versions carry, in TOC keys the reference readers ignore:
//! * per entry, `xxh3`: the XXH3-64 (seed 0) of the entry's decoded code object, as a msgpack
//!   unsigned int. It covers the code object itself, whatever the scheme stored, so a copy
//!   (`recompress`, `restore`, a group archive) can prove what it carries;
//! * last in the TOC map, `toc_xxh3`: the XXH3-64 of the 16 header bytes followed by the TOC
//!   up to this digest's own 8 bytes, as a msgpack `bin 8` holding the digest big-endian. It
//!   ends the file, so a reader finds it without parsing: the file's last
//!   [`TOC_TRAILER_LEN`] bytes are `a8 "toc_xxh3" c4 08 <digest>`.
//!
//! zstd frames (`zstd-per-kernel` and `unified`) also carry zstd's own content checksum, which
//! every zstd decoder verifies, the reference readers included.
//!
//! A reader checks the TOC digest at open and an entry's digest on every read. An archive
//! with neither was written before digests existed and reads as before; one with entry
//! digests and no TOC digest, or the reverse, is damaged. XXH3-64 because it runs at memory
//! speed (a code object's check costs less than copying it) and a 64-bit digest misses a
//! random corruption with odds of 2^-64; these digests guard against damage, not forgery.

use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use crate::HEADER_LEN;

/// The TOC key of an entry's digest.
pub(crate) const ENTRY_KEY: &str = "xxh3";

/// The TOC key of the TOC's digest, which must be the TOC map's last key.
pub(crate) const TOC_KEY: &str = "toc_xxh3";

/// Bytes of the TOC digest's key and value at the end of the file: fixstr key, `bin 8`.
pub const TOC_TRAILER_LEN: usize = 1 + TOC_KEY.len() + 2 + 8;

/// The digest archives store of a code object (the `xxh3` entry field).
pub fn content_digest(code_object: &[u8]) -> u64 {
    xxh3_64(code_object)
}

/// The TOC digest of an archive whose header is `header` (at least its 16 bytes) and whose
/// TOC, without the digest's last 8 bytes, is `toc`.
pub fn toc_digest(header: &[u8], toc: &[u8]) -> u64 {
    let mut hasher = Xxh3::new();
    hasher.update(&header[..HEADER_LEN]);
    hasher.update(toc);
    hasher.digest()
}

/// Ends `toc`, the map's other keys written, with the TOC digest's key and value, for the
/// archive whose header is `header`.
pub(crate) fn seal_toc(header: &[u8], toc: &mut Vec<u8>) {
    toc.extend_from_slice(&toc_trailer(0)[..TOC_TRAILER_LEN - 8]);
    let digest = toc_digest(header, toc);
    toc.extend_from_slice(&digest.to_be_bytes());
}

/// The trailer a TOC ends with, after the map's other keys: key and `bin 8`.
fn toc_trailer(digest: u64) -> [u8; TOC_TRAILER_LEN] {
    let mut out = [0u8; TOC_TRAILER_LEN];
    out[0] = 0xa0 | TOC_KEY.len() as u8;
    out[1..1 + TOC_KEY.len()].copy_from_slice(TOC_KEY.as_bytes());
    out[1 + TOC_KEY.len()] = 0xc4;
    out[2 + TOC_KEY.len()] = 8;
    out[TOC_TRAILER_LEN - 8..].copy_from_slice(&digest.to_be_bytes());
    out
}

/// Where the TOC digest of `file` (whose TOC starts at `toc_at`) sits, if the file ends with
/// a TOC digest trailer: the offset of its 8 digest bytes and the digest stored there.
pub(crate) fn stored_toc_digest(file: &[u8], toc_at: usize) -> Option<(usize, u64)> {
    let start = file.len().checked_sub(TOC_TRAILER_LEN)?;
    if start < toc_at {
        return None;
    }
    let trailer = &file[start..];
    let expected = toc_trailer(0);
    if trailer[..TOC_TRAILER_LEN - 8] != expected[..TOC_TRAILER_LEN - 8] {
        return None;
    }
    let at = file.len() - 8;
    let digest = u64::from_be_bytes(file[at..].try_into().expect("8-byte slice"));
    Some((at, digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trailer_is_the_key_and_a_bin8_of_the_digest_big_endian() {
        let t = toc_trailer(0x0102_0304_0506_0708);
        assert_eq!(t[0], 0xa8);
        assert_eq!(&t[1..9], b"toc_xxh3");
        assert_eq!(&t[9..11], &[0xc4, 0x08]);
        assert_eq!(&t[11..], &[1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn a_file_without_the_trailer_has_no_stored_toc_digest() {
        let mut file = vec![0u8; 64];
        file.extend_from_slice(&toc_trailer(7));
        assert_eq!(stored_toc_digest(&file, 64), Some((file.len() - 8, 7)));
        file[64] = 0xa7;
        assert_eq!(stored_toc_digest(&file, 64), None);
        // A trailer that starts before the TOC is not the TOC's.
        assert_eq!(stored_toc_digest(&file[..70], 64), None);
    }
}
