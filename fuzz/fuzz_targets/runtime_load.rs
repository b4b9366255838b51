//! The loader on an arbitrary archive file: open through the cache, target matching, the
//! fall-through search and the entry read. Input: one byte n, n bytes of ISA list
//! (`;`-separated), then the archive. Errors are fine; panics, aborts and unbounded
//! allocations are not.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use kpack_hostbin::marker::MarkerMetadata;
use kpack_runtime::{Cache, Config};
use libfuzzer_sys::fuzz_target;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("kpack-fuzz-runtime-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else { return };
    let (isas, archive) = rest.split_at(usize::from(n).min(rest.len()));
    let isas = String::from_utf8_lossy(isas);
    let isas: Vec<&str> = isas.split(';').collect();
    std::fs::write(dir().join("a.kpack"), archive).unwrap();
    // A fresh cache each time: a cached archive would hide the new file.
    let cache = Cache::new(Config::default());
    let arches: Vec<String> = kpack_runtime::Archive::open(dir().join("a.kpack"))
        .map(|a| a.binaries().map(|b| b.rsplit_once('#').map_or(b, |(k, _)| k).to_owned()).collect())
        .unwrap_or_default();
    for kernel in arches.iter().map(String::as_str).chain(["lib/x.so"]) {
        let meta = MarkerMetadata {
            kernel_name: kernel.to_owned(),
            search_paths: vec!["a.kpack".to_owned(), "@GFXARCH@.kpack".to_owned()],
            host_entry_id: None,
        };
        let _ = cache.load_with(&meta, &dir().join("bin"), 0, &isas, |found| found.bytes.len());
    }
});
