//! HIPK marker metadata: Python's exact bytes, and the runtime's tolerant decoding.

use kpack_archive::ErrorKind;
use kpack_archive::marker::MarkerMetadata;
use rmpv::Value;

mod common;
use common::encode;

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn encoding_matches_python_packb_bytes() {
    let m = MarkerMetadata {
        kernel_name: "math-libs/rocRAND/stage/lib/librocrand.so.1.1".to_owned(),
        search_paths: vec![".kpack/blas_lib_@GFXARCH@.kpack".to_owned()],
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
    assert_eq!(bytes, expected);
    let mut padded = bytes.clone();
    padded.extend([0u8; 7]);
    assert_eq!(MarkerMetadata::decode(&padded).unwrap(), (m, bytes.len()));
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
        assert_eq!(e.kind(), ErrorKind::InvalidMetadata);
        assert!(e.to_string().contains(message), "{e} lacks {message:?}");
    }
}
