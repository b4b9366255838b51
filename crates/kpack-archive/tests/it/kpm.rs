//! Legacy `.kpm` manifests: required keys and types.

use kpack_archive::ErrorKind;
use kpack_archive::kpm::KpmManifest;
use rmpv::Value;

use crate::common;
use common::{decode, encode};

#[test]
fn missing_and_mistyped_manifest_fields_are_named() {
    let entry = |size: Value| {
        Value::Map(vec![
            ("file".into(), "x.kpack".into()),
            ("size".into(), size),
        ])
    };
    let doc = |files: Value| {
        encode(&Value::Map(vec![
            ("format_version".into(), Value::from(1)),
            ("component_name".into(), "c".into()),
            ("prefix".into(), "p".into()),
            ("kpack_files".into(), files),
        ]))
        .unwrap()
    };
    let e = KpmManifest::decode(&doc(Value::Map(vec![(
        "gfx1100".into(),
        entry(Value::from(1)),
    )])))
    .unwrap_err();
    assert_eq!(ErrorKind::from(&e), ErrorKind::InvalidMetadata);
    assert_eq!(
        e.to_string(),
        "kpack_files[\"gfx1100\"].kernel_count: missing"
    );
    let e = KpmManifest::decode(&doc(Value::Array(vec![]))).unwrap_err();
    assert_eq!(e.to_string(), "kpack_files: expected map, found array");
    let mut trailing = doc(Value::Map(vec![]));
    trailing.push(0);
    assert!(
        KpmManifest::decode(&trailing)
            .unwrap_err()
            .to_string()
            .contains("expected end of input")
    );
}

#[test]
fn the_package_of_each_entry_round_trips_and_is_optional() {
    use kpack_archive::kpm::KpmEntry;
    let entry = |target: &str, package: Option<&str>| {
        (
            target.to_owned(),
            KpmEntry {
                file: format!("m_{target}.kpack"),
                size: 100,
                kernel_count: 2,
                package: package.map(str::to_owned),
            },
        )
    };
    let index = KpmManifest {
        format_version: 1,
        component_name: "blas_lib".to_owned(),
        prefix: ".".to_owned(),
        kpack_files: vec![
            entry("gfx1030", Some("blas_lib_gfx103X")),
            entry("gfx900", None),
        ],
    };
    let bytes = index.encode().unwrap();
    assert_eq!(KpmManifest::decode(&bytes).unwrap(), index);
    // The legacy keys come first, in the legacy order; `package` only where known.
    let doc = decode(&bytes).unwrap();
    let files = doc
        .as_map()
        .unwrap()
        .iter()
        .find(|(k, _)| k.as_str() == Some("kpack_files"))
        .unwrap()
        .1
        .as_map()
        .unwrap();
    let keys = |v: &Value| -> Vec<String> {
        v.as_map()
            .unwrap()
            .iter()
            .map(|(k, _)| k.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        keys(&files[0].1),
        ["file", "size", "kernel_count", "package"]
    );
    assert_eq!(keys(&files[1].1), ["file", "size", "kernel_count"]);
    // A package that is not a string is named.
    let bad = encode(&Value::Map(vec![
        ("format_version".into(), Value::from(1)),
        ("component_name".into(), "c".into()),
        ("prefix".into(), ".".into()),
        (
            "kpack_files".into(),
            Value::Map(vec![(
                "gfx900".into(),
                Value::Map(vec![
                    ("file".into(), "x.kpack".into()),
                    ("size".into(), Value::from(1)),
                    ("kernel_count".into(), Value::from(1)),
                    ("package".into(), Value::from(7)),
                ]),
            )]),
        ),
    ]))
    .unwrap();
    let e = KpmManifest::decode(&bad).unwrap_err();
    assert_eq!(ErrorKind::from(&e), ErrorKind::InvalidMetadata);
    assert_eq!(
        e.to_string(),
        "kpack_files[\"gfx900\"].package: expected str, found unsigned int"
    );
}

fn two_target_index() -> KpmManifest {
    use kpack_archive::kpm::KpmEntry;
    let entry = |target: &str| {
        (
            target.to_owned(),
            KpmEntry {
                file: format!("lib_m_{target}.kpack"),
                size: 4096,
                kernel_count: 3,
                package: Some("m_gfx110X".to_owned()),
            },
        )
    };
    KpmManifest {
        format_version: 1,
        component_name: "m".to_owned(),
        prefix: ".".to_owned(),
        kpack_files: vec![entry("gfx1100"), entry("gfx1101")],
    }
}

#[test]
fn every_single_bit_flip_of_an_index_fails_to_decode_and_never_answers_otherwise() {
    let index = two_target_index();
    let bytes = index.encode().unwrap();
    let mut damaged = 0;
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.clone();
            flipped[at] ^= 1 << bit;
            match KpmManifest::decode(&flipped) {
                // A flip inside the digest key's name leaves an index without a digest whose
                // content is intact: the same answer, unproven.
                Ok(m) => assert_eq!(m, index, "byte {at} bit {bit}"),
                Err(e) => {
                    if ErrorKind::from(&e) == ErrorKind::IntegrityCheckFailed {
                        damaged += 1;
                    }
                }
            }
        }
    }
    // Every flip before the digest is caught by it (the trailer's own header aside).
    assert!(damaged >= 8 * (bytes.len() - 15), "{damaged}");
}

#[test]
fn a_damaged_index_names_the_offset_of_its_digest() {
    let bytes = two_target_index().encode().unwrap();
    let mut flipped = bytes.clone();
    // The first byte of "gfx1100": the arch `kpack which` would answer with.
    let at = bytes.windows(7).position(|w| w == b"gfx1100").unwrap();
    flipped[at + 6] ^= 1; // gfx1100 -> gfx1101
    let e = KpmManifest::decode(&flipped).unwrap_err();
    assert_eq!(ErrorKind::from(&e), ErrorKind::IntegrityCheckFailed);
    assert_eq!(e.offset(), Some(bytes.len() as u64 - 8));
    assert!(e.to_string().contains("the file is damaged"), "{e}");
}

#[test]
fn a_digest_key_that_does_not_end_the_index_is_damage() {
    // {"xxh3": bin8, ...legacy keys}: the digest is not the trailer.
    let doc = encode(&Value::Map(vec![
        ("xxh3".into(), Value::Binary(vec![0; 8])),
        ("format_version".into(), Value::from(1)),
        ("component_name".into(), "c".into()),
        ("prefix".into(), ".".into()),
        ("kpack_files".into(), Value::Map(vec![])),
    ]))
    .unwrap();
    let e = KpmManifest::decode(&doc).unwrap_err();
    assert_eq!(ErrorKind::from(&e), ErrorKind::IntegrityCheckFailed);
    assert_eq!(e.offset(), Some(6));
}
