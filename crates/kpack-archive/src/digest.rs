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
//! A `.kpm` index ([`crate::kpm`]) ends the same way: its root map's last key, `xxh3`, is a
//! `bin 8` of the XXH3-64 of every byte before those 8 ([`seal`]), so a flipped arch name or
//! file name cannot send `kpack which` or the runtime to another archive.
//!
//! A HIPK marker ((`kpack_hostbin::marker`)) carries one too, under `xxh3`, its map's first key: the
//! XXH3-64 of the map but for the digest's own 8 bytes. First, because a
//! marker is followed by section padding, not by the end of a file, so only parsing finds
//! where it ends; a damaged length that shortens the map then changes what is hashed, where
//! a digest at the end would be left outside the map, unread. Readers that follow the
//! reference ignore the extra key, and a flipped byte of `kernel_name` cannot make the
//! runtime load another binary's code objects.
//!
//! A reader checks the TOC digest at open and an entry's digest on every read. An archive
//! with neither was written before digests existed and reads as before; one with entry
//! digests and no TOC digest, or the reverse, is damaged. XXH3-64 because it runs at memory
//! speed (a code object's check costs less than copying it) and a 64-bit digest misses a
//! random corruption with odds of 2^-64; these digests guard against damage, not forgery.

use std::hash::Hasher;

use twox_hash::XxHash3_64;

use crate::HEADER_LEN;

/// The TOC key of an entry's digest.
pub(crate) const ENTRY_KEY: &str = "xxh3";

/// The TOC key of the TOC's digest, which must be the TOC map's last key.
pub(crate) const TOC_KEY: &str = "toc_xxh3";

/// The root key of a `.kpm` index's digest ([`crate::kpm`]), its map's last key.
pub(crate) const KPM_KEY: &str = "xxh3";

/// Bytes of the TOC digest's key and value at the end of the file: fixstr key, `bin 8`.
pub const TOC_TRAILER_LEN: usize = trailer_len(TOC_KEY);

/// The digest archives store of a code object (the `xxh3` entry field).
pub fn content_digest(code_object: &[u8]) -> u64 {
    XxHash3_64::oneshot(code_object)
}

/// [`content_digest`] of a code object given in pieces: `write` each in order, then `finish`.
pub fn content_digester() -> XxHash3_64 {
    XxHash3_64::new()
}

/// The TOC digest of an archive whose header is `header` (at least its 16 bytes) and whose
/// TOC, without the digest's last 8 bytes, is `toc`.
pub fn toc_digest(header: &[u8], toc: &[u8]) -> u64 {
    let mut hasher = XxHash3_64::new();
    hasher.write(&header[..HEADER_LEN]);
    hasher.write(toc);
    hasher.finish()
}

/// Ends `toc`, the map's other keys written, with the TOC digest's key and value, for the
/// archive whose header is `header`.
#[cfg(feature = "write")]
pub(crate) fn seal_toc(header: &[u8], toc: &mut Vec<u8>) {
    toc.extend_from_slice(&trailer(TOC_KEY, 0)[..TOC_TRAILER_LEN - 8]);
    let digest = toc_digest(header, toc);
    toc.extend_from_slice(&digest.to_be_bytes());
}

/// Ends `doc`, a map whose other keys are written, with the key `key` and, as a `bin 8`
/// big-endian, the XXH3-64 of every byte of `doc` before the digest's own 8: the trailer of
/// documents that stand alone in a file (`.kpm` indexes).
pub(crate) fn seal(key: &str, doc: &mut Vec<u8>) {
    let head = trailer(key, 0);
    doc.extend_from_slice(&head[..head.len() - 8]);
    let digest = content_digest(doc);
    doc.extend_from_slice(&digest.to_be_bytes());
}

/// Bytes of a digest trailer under `key`: fixstr key, `bin 8` header, digest.
const fn trailer_len(key: &str) -> usize {
    1 + key.len() + 2 + 8
}

/// The trailer a map ends with, after its other keys: `key` and a `bin 8` of `digest`.
fn trailer(key: &str, digest: u64) -> Vec<u8> {
    let mut out = vec![0xa0 | key.len() as u8];
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&[0xc4, 8]);
    out.extend_from_slice(&digest.to_be_bytes());
    out
}

/// Where the TOC digest of `file` sits, if the file ends with a TOC digest trailer: the
/// offset of its 8 digest bytes and the digest stored there. Found without the header, so
/// that damage to the header is known as damage.
pub(crate) fn stored_toc_digest(file: &[u8]) -> Option<(usize, u64)> {
    stored_digest(TOC_KEY, file, 0)
}

/// Whether `file` ends with a TOC digest trailer one of whose fixed bytes (the key, the
/// `bin 8` header) is wrong: a trailer damaged in its framing, which leaves the TOC
/// unparsable rather than without digests. A TOC written before digests ends with another
/// field's value, not with ten of those eleven bytes.
pub(crate) fn damaged_trailer(file: &[u8]) -> bool {
    let Some(start) = file.len().checked_sub(TOC_TRAILER_LEN) else {
        return false;
    };
    let head = trailer(TOC_KEY, 0);
    let fixed = &head[..TOC_TRAILER_LEN - 8];
    let found = &file[start..start + fixed.len()];
    found.iter().zip(fixed).filter(|(a, b)| a != b).count() == 1
}

/// Where the digest under `key` of `file` sits, if the file ends with its trailer starting
/// at `from` or later: the offset of its 8 digest bytes and the digest stored there.
pub(crate) fn stored_digest(key: &str, file: &[u8], from: usize) -> Option<(usize, u64)> {
    let len = trailer_len(key);
    let start = file.len().checked_sub(len)?;
    if start < from {
        return None;
    }
    let head = trailer(key, 0);
    if file[start..file.len() - 8] != head[..len - 8] {
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
    fn the_digest_of_a_code_object_given_in_pieces_is_its_content_digest() {
        let bytes: Vec<u8> = (0..1_000_003u32).map(|i| (i * 131 % 253) as u8).collect();
        let mut digester = content_digester();
        for piece in bytes.chunks(65_536 - 7) {
            digester.write(piece);
        }
        assert_eq!(digester.finish(), content_digest(&bytes));
    }

    #[test]
    fn the_trailer_is_the_key_and_a_bin8_of_the_digest_big_endian() {
        let t = trailer(TOC_KEY, 0x0102_0304_0506_0708);
        assert_eq!(t[0], 0xa8);
        assert_eq!(&t[1..9], b"toc_xxh3");
        assert_eq!(&t[9..11], &[0xc4, 0x08]);
        assert_eq!(&t[11..], &[1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn a_file_without_the_trailer_has_no_stored_toc_digest() {
        let mut file = vec![0u8; 64];
        file.extend_from_slice(&trailer(TOC_KEY, 7));
        assert_eq!(stored_toc_digest(&file), Some((file.len() - 8, 7)));
        file[64] = 0xa7;
        assert_eq!(stored_toc_digest(&file), None);
        assert_eq!(stored_toc_digest(&file[..TOC_TRAILER_LEN - 1]), None);
    }

    #[test]
    fn a_trailer_with_one_fixed_byte_wrong_is_a_damaged_one() {
        let mut file = vec![0u8; 64];
        file.extend_from_slice(&trailer(TOC_KEY, 7));
        assert!(!damaged_trailer(&file), "intact");
        file[64] ^= 0x80;
        assert!(damaged_trailer(&file));
        file[66] ^= 0x01;
        assert!(!damaged_trailer(&file), "two bytes wrong: not a trailer");
        assert!(!damaged_trailer(&file[..TOC_TRAILER_LEN - 1]));
    }

    #[test]
    fn a_sealed_document_ends_with_the_digest_of_everything_before_it() {
        let mut doc = vec![0x80];
        seal(KPM_KEY, &mut doc);
        assert_eq!(&doc[..8], &[0x80, 0xa4, b'x', b'x', b'h', b'3', 0xc4, 0x08]);
        let (at, digest) = stored_digest(KPM_KEY, &doc, 0).unwrap();
        assert_eq!((at, digest), (8, content_digest(&doc[..8])));
        // Another key's trailer is not this one's.
        assert_eq!(stored_digest(TOC_KEY, &doc, 0), None);
    }
}
