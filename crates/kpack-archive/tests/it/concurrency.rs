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
