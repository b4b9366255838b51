//! The wheel reader on the fat sample wheel (`fixtures/wheels/`), as it is and with one member
//! changed behind RECORD's back, and the entry-name checks on the names of hostile zips.

use std::io::{Cursor, Read, Write};
use std::path::Path;

use kpack_testkit::fixture;
use kpack_wheelfile::reader::{check_entry_name, read_zip};
use kpack_wheelfile::{Limits, Listed, WheelFileError};
use sha2::{Digest, Sha256};

const DEMO: &str = "wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl";

/// Every member of the zip `bytes`: name and content, in archive order.
fn members(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut entry = zip.by_index(i).unwrap();
            let mut content = Vec::new();
            entry.read_to_end(&mut content).unwrap();
            (entry.name().to_owned(), content)
        })
        .collect()
}

#[test]
fn every_file_of_the_sample_wheel_is_read_and_vouched_for_by_record() {
    let wheel = fixture(DEMO);
    let bytes = std::fs::read(&wheel).unwrap();
    let files = read_zip(&wheel, Cursor::new(&bytes), &Limits::default(), None).unwrap();
    let expected = members(&bytes);
    assert_eq!(files.len(), expected.len());
    for (file, (name, content)) in files.iter().zip(&expected) {
        assert_eq!(&file.path, name);
        assert_eq!(file.size, content.len() as u64, "{name}");
        assert_eq!(
            file.sha256,
            <[u8; 32]>::from(Sha256::digest(content)),
            "{name}"
        );
        let listed = if name.ends_with("/RECORD") {
            Listed::Unsigned
        } else {
            Listed::Hashed
        };
        assert_eq!(file.listed, listed, "{name}");
    }
}

#[test]
fn a_member_changed_behind_records_back_is_refused_naming_it() {
    let wheel = fixture(DEMO);
    let changed = "kpack_demo/version.py";
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, mut content) in members(&std::fs::read(&wheel).unwrap()) {
        if name == changed {
            // Same length, so only the digest can tell.
            content[0] ^= 1;
        }
        out.start_file(name, zip::write::SimpleFileOptions::default())
            .unwrap();
        out.write_all(&content).unwrap();
    }
    let tampered = out.finish().unwrap().into_inner();
    let err = read_zip(&wheel, Cursor::new(tampered), &Limits::default(), None).unwrap_err();
    match &err {
        WheelFileError::Entry { entry, .. } => assert_eq!(entry, changed, "{err}"),
        other => panic!("not an entry error: {other}"),
    }
}

#[test]
fn names_that_would_escape_the_install_directory_are_refused() {
    let wheel = Path::new("hostile.whl");
    for name in [
        "../evil.py",
        "pkg/../../evil.py",
        "/etc/passwd",
        "C:/evil.py",
        "pkg\\evil.py",
        "pkg//evil.py",
        "",
    ] {
        assert!(
            check_entry_name(wheel, name).is_err(),
            "{name} was accepted"
        );
    }
    assert_eq!(check_entry_name(wheel, "pkg/lib/").unwrap(), "pkg/lib");
    assert_eq!(
        check_entry_name(wheel, "pkg/lib/libone.so").unwrap(),
        "pkg/lib/libone.so"
    );
}
