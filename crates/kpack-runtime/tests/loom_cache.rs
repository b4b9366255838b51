//! A loom model of the cache: concurrent cold and warm loads through one cache, under every
//! interleaving of its lock, agree with a single thread and open each archive once.
//!
//! ```sh
//! cargo test -p kpack-runtime --features loom-model --release --test loom_cache
//! ```
#![cfg(feature = "loom-model")]

mod support;

use kpack_archive::Compression;
use kpack_runtime::{Cache, Config, ErrorCode};
use support::*;

#[test]
fn concurrent_loads_agree_and_open_each_archive_once_in_every_interleaving() {
    let tmp = tempfile::tempdir().unwrap();
    let co = gfx1030();
    write_archive(
        &tmp.path().join("a.kpack"),
        Compression::None,
        &[("lib/other.so#0", "gfx1030", &co)],
        None,
    );
    write_archive(
        &tmp.path().join("b.kpack"),
        Compression::zstd(),
        &[("lib/x.so#0", "gfx1030", &co)],
        None,
    );
    let bin = tmp.path().join("x.so");
    let metadata = meta("lib/x.so", &["a.kpack", "b.kpack", "missing.kpack"]);

    let iterations = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = iterations.clone();
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cache = loom::sync::Arc::new(Cache::new(Config::default()));
        let threads: Vec<_> = (0..2u32)
            .map(|t| {
                let (cache, metadata, bin, co) =
                    (cache.clone(), metadata.clone(), bin.clone(), co.clone());
                loom::thread::spawn(move || {
                    // Thread 1 also asks for a kernel no archive has.
                    let got = cache.load(&metadata, &bin, 0, &["gfx1030"]).unwrap();
                    assert_eq!(got, co);
                    let err = cache
                        .load(&metadata, &bin, t, &["gfx1030"])
                        .map(|_| ())
                        .map_err(|e| e.code());
                    assert_eq!(
                        err,
                        if t == 0 {
                            Ok(())
                        } else {
                            Err(ErrorCode::KernelNotFound)
                        }
                    );
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let stats = cache.stats();
        assert_eq!(
            (stats.resolutions, stats.probes, stats.archives_opened),
            (3, 3, 2)
        );
    });
    // The model really explored interleavings (the lock is taken several times per load).
    let n = iterations.load(std::sync::atomic::Ordering::Relaxed);
    println!("loom explored {n} interleavings");
    assert!(n > 10, "{n}");
}
