//! The reader's runtime costs on archives shaped like bookworm's librocsparse ones (111
//! binaries × 7 arches = 777 entries, one distinct blob each), built here from the real code
//! objects in `fixtures/` (each entry is one of them plus a unique 8-byte tail).
//!
//! Prints medians for: `Archive::open` (page cache warm), the same from bytes already in memory
//! (the parse without the open and map), the first `get` after open (zstd: builds the frame
//! index), a warm `get` and `get_into` of a ~33 KB code object, and a pass over every entry;
//! with the ratio to the runtime's targets (open ≤ 200 µs, warm load ≤ 20 µs). Archives named
//! in `KPACK_BENCH_ARCHIVES` (`:`-separated, e.g. the librocsparse archives `kpack pack` makes
//! from the corpus) are measured the same way; the C API figures on those come from
//! `cargo bench -p kpack-capi --bench capi`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kpack_archive::{Archive, ArchiveWriter, Compression};
use kpack_testkit::{median, time};

const OPEN_TARGET: Duration = Duration::from_micros(200);
const LOAD_TARGET: Duration = Duration::from_micros(20);

const ARCHES: [&str; 7] = [
    "gfx1030",
    "gfx803",
    "gfx900:xnack-",
    "gfx906:xnack-",
    "gfx908:xnack-",
    "gfx90a:xnack+",
    "gfx90a:xnack-",
];
const BINARIES: u32 = 111;
/// Largest first: the warm figures use entry 0, the 33 KB one.
const CODE_OBJECTS: [&str; 4] = [
    "bin/k1_genco.hsaco",
    "bin/k1_gfx90a.hsaco",
    "modern/mk_gfx90a_xnackp.co",
    "modern/mk_gfx1030.co",
];

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn synthetic(dir: &Path, compression: Compression) -> PathBuf {
    let objects: Vec<Vec<u8>> = CODE_OBJECTS.iter().map(|n| fixture(n)).collect();
    let mut w = ArchiveWriter::new("rocsparse", "gfx9", compression);
    let mut n = 0u64;
    for b in 0..BINARIES {
        let key = kpack_archive::binary_key("lib/librocsparse.so.0.1", b);
        for arch in ARCHES {
            let mut data = objects[n as usize % objects.len()].clone();
            data.extend(n.to_le_bytes());
            w.add(&key, arch, data, &[]).unwrap();
            n += 1;
        }
    }
    let path = dir.join(format!("synthetic-{}.kpack", compression.scheme().name()));
    w.write_file(&path).unwrap();
    path
}

fn us(d: Duration) -> String {
    format!("{:.2} µs", d.as_secs_f64() * 1e6)
}

fn vs(d: Duration, target: Duration) -> String {
    format!(
        "{:.2}× target {}",
        d.as_secs_f64() / target.as_secs_f64(),
        us(target)
    )
}

fn bench(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    let toc_offset = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    let toc_len = bytes.len() as u64 - toc_offset;
    drop(bytes);

    let open = median(
        (0..300)
            .map(|_| time(|| Archive::open(path).unwrap()).0)
            .collect(),
    );
    // Archives too big to copy whole (the corpus's `none` one) are measured mapped only.
    let parse = (std::fs::metadata(path).unwrap().len() <= 1 << 28).then(|| {
        let shared: std::sync::Arc<[u8]> = std::fs::read(path).unwrap().into();
        median(
            (0..300)
                .map(|_| time(|| Archive::from_backing(shared.clone()).unwrap()).0)
                .collect(),
        )
    });
    let a = Archive::open(path).unwrap();
    let entries: Vec<(String, String, u64)> = a
        .entries()
        .map(|(b, arch, e)| (b.to_owned(), arch.to_owned(), e.original_size))
        .collect();
    println!(
        "{} ({}, {:.1} MB, TOC {:.1} KB, {} entries, {} blobs)",
        path.display(),
        a.compression_scheme().name(),
        std::fs::metadata(path).unwrap().len() as f64 / 1e6,
        toc_len as f64 / 1024.0,
        entries.len(),
        a.blob_count()
    );
    println!(
        "  open             median {:>10}  ({})",
        us(open),
        vs(open, OPEN_TARGET)
    );
    if let Some(parse) = parse {
        println!(
            "  from memory      median {:>10}  (the same, bytes already read)",
            us(parse)
        );
    }

    let (b0, arch0, size0) = &entries[0];
    let first = median(
        (0..30)
            .map(|_| {
                let a = Archive::open(path).unwrap();
                time(|| a.get(b0, arch0).unwrap().len()).0
            })
            .collect(),
    );
    println!(
        "  first get        median {:>10}  (after a fresh open)",
        us(first)
    );

    let warm = median(
        (0..2000)
            .map(|_| time(|| a.get(b0, arch0).unwrap().len()).0)
            .collect(),
    );
    println!(
        "  warm get         median {:>10}  ({} KB; {})",
        us(warm),
        size0 / 1024,
        vs(warm, LOAD_TARGET)
    );
    let mut out = vec![0u8; *size0 as usize];
    let into = median(
        (0..2000)
            .map(|_| time(|| a.get_into(b0, arch0, &mut out).unwrap()).0)
            .collect(),
    );
    println!(
        "  warm get_into    median {:>10}  ({})",
        us(into),
        vs(into, LOAD_TARGET)
    );

    let mut buf = Vec::new();
    let (all, total) = time(|| {
        entries
            .iter()
            .map(|(b, arch, size)| {
                buf.resize(*size as usize, 0);
                a.get_into(b, arch, &mut buf).unwrap()
            })
            .sum::<usize>()
    });
    println!(
        "  every entry      {:>10} total  (get_into: {:.1} MB, {:.0} MB/s)",
        us(all),
        total as f64 / 1e6,
        total as f64 / 1e6 / all.as_secs_f64()
    );
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    // unified: the entries differ only in their tails, so nearly all are delta frames, each
    // decoded against its reference on every `get` (the worst case for v2's read cost).
    for compression in [
        Compression::None,
        Compression::zstd(),
        Compression::unified(),
    ] {
        bench(&synthetic(dir.path(), compression));
    }
    if let Some(paths) = std::env::var_os("KPACK_BENCH_ARCHIVES") {
        for path in std::env::split_paths(&paths) {
            bench(&path);
        }
    }
}
