//! One `Archive` serves many threads without locking.

use crate::common;

use std::sync::Arc;

use common::vector_path;
use kpack_archive::Archive;

#[test]
fn archive_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Archive>();
}

#[test]
fn concurrent_gets_agree_with_sequential_ones() {
    for name in ["test_noop.kpack", "test_zstd.kpack"] {
        let a = Arc::new(Archive::open(vector_path(name)).unwrap());
        let keys: Vec<(String, String)> = a
            .entries()
            .map(|(b, arch, _)| (b.to_owned(), arch.to_owned()))
            .collect();
        let sequential: Vec<Vec<u8>> = keys
            .iter()
            .map(|(b, arch)| a.get(b, arch).unwrap().into_owned())
            .collect();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (a, keys) = (Arc::clone(&a), keys.clone());
                std::thread::spawn(move || {
                    (0..200)
                        .map(|i| {
                            let k = (i + t) % keys.len();
                            (k, a.get(&keys[k].0, &keys[k].1).unwrap().into_owned())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for t in threads {
            for (k, data) in t.join().unwrap() {
                assert_eq!(data, sequential[k], "{name} entry {k}");
            }
        }
    }
}

/// Every entry's bytes, in TOC order.
fn contents(a: &Archive) -> Vec<Vec<u8>> {
    a.entries()
        .map(|(b, arch, _)| a.get(b, arch).unwrap().into_owned())
        .collect()
}

#[test]
fn an_open_archive_keeps_its_bytes_while_an_update_moves_it_aside_and_puts_a_new_file_in_its_place()
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lib_gfx1100.kpack");
    std::fs::copy(vector_path("test_noop.kpack"), &path).unwrap();
    let open = Archive::open(&path).unwrap();
    let before = contents(&open);
    // On Windows the file is shared for reading and deleting (renaming), never for writing.
    #[cfg(windows)]
    assert!(
        std::fs::OpenOptions::new().write(true).open(&path).is_err(),
        "an open archive was opened for writing"
    );
    // An update of a file in use, as Windows installers do it (Windows refuses to delete or
    // replace a file while it is mapped, whatever its sharing): the open file renamed aside,
    // the new one renamed into its place.
    let new = dir.path().join("lib_gfx1100.kpack.new");
    std::fs::copy(vector_path("test_zstd.kpack"), &new).unwrap();
    std::fs::rename(&path, dir.path().join("lib_gfx1100.kpack.old")).unwrap();
    std::fs::rename(&new, &path).unwrap();
    assert_eq!(contents(&open), before);
    let updated = Archive::open(&path).unwrap();
    let expected = contents(&Archive::open(vector_path("test_zstd.kpack")).unwrap());
    assert_eq!(contents(&updated), expected);
}
