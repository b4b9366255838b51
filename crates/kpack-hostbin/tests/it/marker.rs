//! HIPK marker metadata: Python's exact bytes, and the runtime's tolerant decoding (its errors
//! as the runtime classes them, kpack-archive's `ErrorKind`).

use kpack_archive::ErrorKind;
use kpack_hostbin::marker::MarkerMetadata;
use rmpv::Value;

/// `value` as msgpack bytes.
fn encode(value: &Value) -> Result<Vec<u8>, rmpv::encode::Error> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, value)?;
    Ok(out)
}

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn encoding_is_python_packb_bytes_after_a_leading_digest_key() {
    let m = MarkerMetadata {
        kernel_name: "math-libs/rocRAND/stage/lib/librocrand.so.1.1".to_owned(),
        search_paths: vec![".kpack/blas_lib_@GFXARCH@.kpack".to_owned()],
        host_entry_id: None,
    };
    // msgpack.packb({"kpack_search_paths": [...], "kernel_name": ...}, use_bin_type=True):
    // fixmap(2), fixstr(18) key, fixarray(1), fixstr(31) path, fixstr(11) key, str8(45) name.
    let expected = concat(&[
        &[0x82, 0xb2],
        b"kpack_search_paths",
        &[0x91, 0xbf],
        b".kpack/blas_lib_@GFXARCH@.kpack",
        &[0xab],
        b"kernel_name",
        &[0xd9, 45],
        b"math-libs/rocRAND/stage/lib/librocrand.so.1.1",
    ]);
    let bytes = m.encode().unwrap();
    // The same map with a first key: fixmap(3), `xxh3` and a bin 8 of the XXH3-64 of the map
    // but for those 8 bytes.
    let mut sealed = vec![0x83, 0xa4];
    sealed.extend(b"xxh3");
    sealed.extend([0xc4, 8]);
    sealed.extend(&expected[1..]);
    let digest = kpack_archive::digest::content_digest(&sealed);
    sealed.splice(8..8, digest.to_be_bytes());
    assert_eq!(bytes, sealed);
    let mut padded = bytes.clone();
    padded.extend([0u8; 7]);
    assert_eq!(
        MarkerMetadata::decode(&padded).unwrap(),
        (m.clone(), bytes.len())
    );
    // Python's bytes, without the digest (the reference, or kpack before digests), read
    // unchecked.
    assert_eq!(
        MarkerMetadata::decode(&expected).unwrap(),
        (m, expected.len())
    );
}

/// A recorded host entry id is the map's last key, `host_entry_id`, inside the digest: the
/// marker is the one without it but for that key, and decodes back to it. A value of another
/// type is skipped like any key the runtime does not know.
#[test]
fn a_recorded_host_entry_id_is_the_last_key_and_decodes_back() {
    let without = MarkerMetadata {
        kernel_name: "lib/libtwo.so".to_owned(),
        search_paths: vec!["../.kpack/libtwo_@GFXARCH@.kpack".to_owned()],
        host_entry_id: None,
    };
    let with = MarkerMetadata {
        host_entry_id: Some("host-x86_64-unknown-linux".to_owned()),
        ..without.clone()
    };
    let (plain, recorded) = (without.encode().unwrap(), with.encode().unwrap());
    let mut tail = vec![0xad];
    tail.extend(b"host_entry_id");
    tail.push(0xb9);
    tail.extend(b"host-x86_64-unknown-linux");
    assert_eq!(recorded[0], plain[0] + 1, "one more key");
    assert_eq!(recorded[16..recorded.len() - tail.len()], plain[16..]);
    assert!(recorded.ends_with(&tail));
    assert_eq!(
        MarkerMetadata::decode(&recorded).unwrap(),
        (with, recorded.len())
    );
    // Written by another hand with an integer there (no digest): read, the value skipped.
    let other = Value::Map(vec![
        (
            Value::from("kpack_search_paths"),
            Value::Array(vec![Value::from("../.kpack/libtwo_@GFXARCH@.kpack")]),
        ),
        (Value::from("kernel_name"), Value::from("lib/libtwo.so")),
        (Value::from("host_entry_id"), Value::from(7)),
    ]);
    let bytes = encode(&other).unwrap();
    assert_eq!(
        MarkerMetadata::decode(&bytes).unwrap(),
        (without, bytes.len())
    );
}

#[test]
fn every_single_bit_flip_of_a_marker_fails_to_decode_or_decodes_the_same() {
    let m = MarkerMetadata {
        kernel_name: "lib/librocsparse.so.1".to_owned(),
        search_paths: vec!["../.kpack/sparse_lib_@GFXARCH@.kpack".to_owned()],
        host_entry_id: None,
    };
    let bytes = m.encode().unwrap();
    let mut padded = bytes.clone();
    padded.extend([0u8; 16]);
    let (mut errors, mut same) = (0, 0);
    for bit in 0..bytes.len() * 8 {
        let mut flipped = padded.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        match MarkerMetadata::decode(&flipped) {
            Err(e) => {
                errors += 1;
                assert!(
                    matches!(
                        ErrorKind::from(&e),
                        ErrorKind::IntegrityCheckFailed | ErrorKind::InvalidMetadata
                    ),
                    "bit {bit}: {e}"
                );
            }
            Ok((decoded, _)) => {
                same += 1;
                assert_eq!(decoded, m, "bit {bit} decoded to other metadata");
            }
        }
    }
    // A flip of the digest key's name leaves an unknown key and the metadata intact; every
    // other flip is an error.
    assert!(
        errors > bytes.len() * 8 - 4 * 8,
        "{errors} errors, {same} same"
    );
}

#[test]
fn a_marker_whose_kernel_name_was_flipped_is_refused_as_damaged_at_its_digest() {
    let m = MarkerMetadata {
        kernel_name: "lib/libfoo1.so".to_owned(),
        search_paths: vec![".kpack/x_@GFXARCH@.kpack".to_owned()],
        host_entry_id: None,
    };
    let mut bytes = m.encode().unwrap();
    // "libfoo1" -> "libfoo3": one bit, another binary's name in the same package.
    let at = bytes.windows(7).position(|w| w == b"libfoo1").unwrap() + 6;
    bytes[at] ^= 0x02;
    let e = MarkerMetadata::decode(&bytes).unwrap_err();
    assert_eq!(ErrorKind::from(&e), ErrorKind::IntegrityCheckFailed, "{e}");
    assert_eq!(e.offset(), Some(8), "{e}");
}

#[test]
fn decoding_accepts_any_key_order_extra_keys_and_skips_non_str_paths() {
    let doc = Value::Map(vec![
        ("kernel_name".into(), "lib/libtest.so".into()),
        (Value::from(7), Value::Nil),
        ("extra".into(), Value::Boolean(true)),
        (
            "kpack_search_paths".into(),
            Value::Array(vec![
                Value::from(1),
                "a.kpack".into(),
                Value::Nil,
                "b.kpack".into(),
            ]),
        ),
    ]);
    let (m, used) = MarkerMetadata::decode(&encode(&doc).unwrap()).unwrap();
    assert_eq!(m.kernel_name, "lib/libtest.so");
    assert_eq!(m.search_paths, ["a.kpack", "b.kpack"]);
    assert_eq!(used, encode(&doc).unwrap().len());
}

#[test]
fn decoding_rejects_what_the_runtime_rejects() {
    let map = |entries: Vec<(&str, Value)>| {
        encode(&Value::Map(
            entries.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        ))
        .unwrap()
    };
    let paths = || Value::Array(vec!["p.kpack".into()]);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            encode(&Value::Array(vec![])).unwrap(),
            "root: expected map, found array",
        ),
        (
            map(vec![("kpack_search_paths", paths())]),
            "kernel_name: missing",
        ),
        (
            map(vec![
                ("kernel_name", Value::from(1)),
                ("kpack_search_paths", paths()),
            ]),
            "kernel_name: expected str, found unsigned int",
        ),
        (
            map(vec![("kernel_name", "k".into())]),
            "kpack_search_paths: missing",
        ),
        (
            map(vec![
                ("kernel_name", "k".into()),
                ("kpack_search_paths", "p".into()),
            ]),
            "kpack_search_paths: expected array, found str",
        ),
        (
            map(vec![
                ("kernel_name", "k".into()),
                ("kpack_search_paths", Value::Array(vec![Value::Nil])),
            ]),
            "at least one str",
        ),
        (vec![0x82, 0xab], "msgpack: at byte 1: expected map entries"),
        (vec![], "msgpack: at byte 0"),
    ];
    for (bytes, message) in cases {
        let e = MarkerMetadata::decode(&bytes).unwrap_err();
        assert_eq!(ErrorKind::from(&e), ErrorKind::InvalidMetadata);
        assert!(e.to_string().contains(message), "{e} lacks {message:?}");
    }
}
