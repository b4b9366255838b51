//! MessagePack for kpack's documents (an archive's TOC, HIPK marker metadata, `.kpm`
//! manifests), on the `rmp` crate. It depends on no other kpack crate: the archive crate and
//! the host binaries' marker (`kpack-hostbin`) both read and write through it.
//!
//! `rmp` reads and writes the wire forms. What reading untrusted bytes with it needs, and `rmp`
//! leaves to its caller, is here:
//! * errors that carry the absolute byte offset and what was expected ([`DecodeError`]), and
//!   schema errors that name the field's path ([`FieldError`]);
//! * every length and count checked against the bytes left before anything is taken, so nothing
//!   is allocated from a claimed length (a str32 claiming 4 GiB is an error, not an allocation);
//! * [`skip_value`], a walk over one value without recursion, whatever it nests, for the values
//!   no field reads; over a slice, or over a [`Source`] read one request at a time (the
//!   runtime's metadata pointer, which must not be read past the value's end);
//! * `0xc1` and the extension types, never part of a kpack document, rejected.
//!
//! Strs are borrowed from the input. Encoding is `rmp`'s, which picks the smallest form for every
//! integer, length and count, as Python `msgpack.packb(obj, use_bin_type=True)` does (spec §1.6):
//! maps written in the reference's key order reproduce its bytes. [`Encoder`] adds the check that
//! a length fits the format's 32 bits (`rmp` takes a `u32` and leaves that to the caller).
//!
//! Depends on no other kpack crate (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

mod cursor;
mod encoder;
mod error;
mod schema;
mod wire;

pub use cursor::{Cursor, WalkError};
pub use encoder::Encoder;
pub use error::{DecodeError, DecodeErrorKind, EncodeError, FieldError, MetadataError};
pub use schema::{KeySet, Path, once, required, wrong};
pub use wire::{Shape, Source, shape, skip_value, type_name, value_len};

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(write: impl FnOnce(&mut Encoder) -> Result<(), EncodeError>) -> Vec<u8> {
        let mut e = Encoder::default();
        write(&mut e).unwrap();
        e.into_bytes()
    }

    #[test]
    fn integers_and_lengths_take_the_smallest_python_form() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0xcc, 0x80]),
            (255, &[0xcc, 0xff]),
            (256, &[0xcd, 0x01, 0x00]),
            (65535, &[0xcd, 0xff, 0xff]),
            (65536, &[0xce, 0x00, 0x01, 0x00, 0x00]),
            (4_294_967_296, &[0xcf, 0, 0, 0, 1, 0, 0, 0, 0]),
        ];
        for (n, bytes) in cases {
            assert_eq!(
                encoded(|e| {
                    e.uint(*n);
                    Ok(())
                }),
                *bytes,
                "{n}"
            );
            assert_eq!(
                Cursor::new(bytes, 0).uint::<MetadataError>(&Path::Root),
                Ok(*n)
            );
        }
        let s = |n: usize| encoded(|e| e.str(&"x".repeat(n)));
        assert_eq!(s(31)[0], 0xbf);
        assert_eq!(s(32)[..2], [0xd9, 32]);
        assert_eq!(s(255)[..2], [0xd9, 255]);
        assert_eq!(s(256)[..3], [0xda, 1, 0]);
        assert_eq!(s(65536)[..5], [0xdb, 0, 1, 0, 0]);
        assert_eq!(encoded(|e| e.array(15)), [0x9f]);
        assert_eq!(encoded(|e| e.array(16)), [0xdc, 0, 16]);
        assert_eq!(encoded(|e| e.map(65536)), [0xdf, 0, 1, 0, 0]);
    }

    #[test]
    fn non_negative_signed_wire_forms_read_as_unsigned() {
        let read = |b: &[u8]| Cursor::new(b, 0).uint::<MetadataError>(&Path::Root);
        assert_eq!(read(&[0xd0, 0x05]), Ok(5));
        assert_eq!(read(&[0xd3, 0, 0, 0, 0, 0, 0, 1, 0]), Ok(256));
        assert_eq!(
            read(&[0xd0, 0xff]).unwrap_err().to_string(),
            "root: expected unsigned int, found negative int"
        );
    }

    #[test]
    fn a_str32_claiming_4_gib_fails_without_allocating() {
        let e = value_len(&[0xdb, 0xff, 0xff, 0xff, 0xff, b'a']).unwrap_err();
        assert_eq!(
            e,
            DecodeError {
                offset: 5,
                kind: DecodeErrorKind::UnexpectedEof {
                    expected: "str data",
                    needed: 0xffff_ffff,
                    available: 1
                }
            }
        );
        let e = Cursor::new(&[0xdb, 0xff, 0xff, 0xff, 0xff, b'a'], 0)
            .str::<MetadataError>(&Path::Root)
            .unwrap_err();
        assert!(e.to_string().starts_with("msgpack: at byte 5: "), "{e}");
    }

    #[test]
    fn huge_container_counts_fail_before_reading_their_values() {
        for bytes in [
            &[0xdd, 0xff, 0xff, 0xff, 0xff, 0x00][..],
            &[0xdf, 0x80, 0, 0, 0, 0x00, 0x00],
            &[0xc6, 0xff, 0xff, 0xff, 0xff],
        ] {
            let e = value_len(bytes).unwrap_err();
            assert_eq!(e.offset, 5, "{e}");
            assert!(matches!(e.kind, DecodeErrorKind::UnexpectedEof { .. }));
        }
    }

    #[test]
    fn deep_nesting_is_skipped_without_recursion() {
        let mut deep = vec![0x91; 1_000_000];
        deep.push(0xc0);
        assert_eq!(value_len(&deep), Ok(deep.len()));
    }

    #[test]
    fn invalid_markers_ext_types_and_bad_utf8_are_errors() {
        let kind = |b: &[u8]| value_len(b).unwrap_err().kind;
        assert_eq!(kind(&[0xc1]), DecodeErrorKind::InvalidMarker(0xc1));
        assert_eq!(kind(&[0xd4, 1, 2]), DecodeErrorKind::UnsupportedExt(0xd4));
        assert_eq!(
            value_len(&[0x91, 0xa2, 0xff, 0xfe]).unwrap_err(),
            DecodeError {
                offset: 2,
                kind: DecodeErrorKind::InvalidUtf8
            }
        );
    }

    #[test]
    fn every_truncation_of_a_document_is_an_error() {
        let mut e = Encoder::default();
        e.map(2).unwrap();
        e.str("k").unwrap();
        e.array(2).unwrap();
        e.uint(300);
        e.str(&"x".repeat(40)).unwrap();
        e.str("b").unwrap();
        e.uint(u64::MAX);
        let bytes = e.into_bytes();
        assert_eq!(value_len(&bytes), Ok(bytes.len()));
        for n in 0..bytes.len() {
            assert!(value_len(&bytes[..n]).is_err(), "prefix of {n} bytes");
        }
    }

    #[test]
    fn wrong_types_name_the_path_and_the_found_type() {
        let root = Path::Root;
        let field = Path::Field(&root, "toc");
        let e: MetadataError = Cursor::new(&[0x90], 0).map(&field).unwrap_err();
        assert_eq!(e.to_string(), "toc: expected map, found array");
        let e: MetadataError = Cursor::new(&[0xc3], 0).str(&root).unwrap_err();
        assert_eq!(e.to_string(), "root: expected str, found bool");
    }
}
