//! Legacy `.kpm` manifests: required keys and types.

use kpack_archive::ErrorKind;
use kpack_archive::kpm::KpmManifest;
use rmpv::Value;

mod common;
use common::encode;

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
    assert_eq!(e.kind(), ErrorKind::InvalidMetadata);
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
