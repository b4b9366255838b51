//! The C API on archives packed from bookworm's librocsparse.so.0.1 (1.3 GB, 7 targets): one
//! `none`, one `zstd-per-kernel` and one `unified` (format v2) archive: the same entries, cold
//! and warm, on each. The first two are built here with `kpack_pipeline::pack`; the v2 one, at
//! level 3, is the archive of the library the real-world test
//! `recompress_of_librocsparse_to_unified_reads_back_whole_in_under_0_7_of_its_v1_archive`
//! made with this build's `kpack` ([`kpack_testkit::measured::kept`]), or without it one
//! built here (decoding costs about the same at any level).
//!
//! Prints, per archive: `kpack_open` (median of open+close, page cache warm) and the resident
//! memory an open archive adds; per-entry `kpack_get_kernel` (median, and throughput over
//! every entry); cold `kpack_load_code_object` (the median of loads through a new cache each,
//! so the archive is opened and the entry decoded every time: the same entry on each
//! archive), warm (median), and the same warm load through
//! `Cache::load_with` without the copy into a `malloc` buffer (for `none` that is the
//! loader's own cost; for zstd it includes the decode). Targets: open of the
//! ~200 MB zstd archive ≤ 0.2 ms with memory O(TOC); warm load ≤ 20 µs; v2 cold ≤ 2x v1 zstd
//! cold (printed as a ratio), warm unchanged. Then the cost of the digests
//! (docs/archive-v2.md §7): cold and warm loads from each archive against the same archive
//! with its digest keys stripped, samples alternating, in the same run: cold ≤ 1.2x (printed
//! as a ratio), warm unchanged. For zstd, the cold load locating its frame from the TOC's
//! frame sizes against walking the size prefixes (docs/archive-v2.md §8). Cold loads target
//! ≤ 200 µs on every scheme. Needs the corpus from `scripts/setup.sh`.

use std::ffi::{CString, c_char, c_void};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ::kpack_archive::Compression;
use kpack_hostbin::marker::MarkerMetadata;
use kpack_pipeline::pack::{PackInput, pack};
use kpack_runtime::{Archive, Cache, Config};
use kpack_testkit::{median, time};
use rmpv::Value;
use rocm_kpack::*;

/// The name `kpack pack` keys the library's entries by (its file name), as in the v2 archive
/// the real-world test made.
const KERNEL_NAME: &str = "librocsparse.so.0.1";

/// The level-3 v2 archive of the library that the real-world test made with the `kpack` of
/// this build, if it did.
fn tested_v2_archive() -> Option<PathBuf> {
    // This bench is target/<triple>/release/deps/capi-<hash>; kpack is in release/.
    let exe = std::env::current_exe().ok()?;
    let kpack = exe.parent()?.parent()?.join("kpack");
    kpack_testkit::measured::kept(&kpack, "recompress-v1-unified-3-librocsparse.so.0.1")
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn us(d: Duration) -> String {
    format!("{:.2} µs", d.as_secs_f64() * 1e6)
}

/// The HIP runtime's call for wrapper 0 of the library beside the archive at `path`: its
/// marker (the archive its one search path), the library's path and the agent's ISAs (the
/// device's full ISA first, then a generic one).
fn load_call(path: &Path, processor: &str) -> (MarkerMetadata, PathBuf, [String; 2]) {
    let dir = path.parent().unwrap();
    let metadata = MarkerMetadata {
        kernel_name: KERNEL_NAME.to_owned(),
        search_paths: vec![path.file_name().unwrap().to_str().unwrap().to_owned()],
        host_entry_id: None,
    };
    let isas = [
        format!("amdgcn-amd-amdhsa--{processor}:sramecc+:xnack-"),
        "amdgcn-amd-amdhsa--gfx9-generic".to_owned(),
    ];
    (metadata, dir.join("librocsparse.so.0.1"), isas)
}

/// Cold `kpack_load_code_object` (the median of loads through a new cache each, so the
/// archive is opened and the entry decoded every time) and warm (median) of wrapper 0 from
/// each archive of `paths`, with the code object's size. The archives' samples alternate, so
/// that a comparison is measured under the same load of the machine.
fn load_times<const N: usize>(
    paths: [&Path; N],
    processor: &str,
) -> [(Duration, Duration, usize); N] {
    let calls = paths.map(|path| {
        let (metadata, binary, isas) = load_call(path, processor);
        let encoded = metadata.encode().unwrap();
        let binary = CString::new(binary.to_str().unwrap()).unwrap();
        let isas = isas.map(|s| CString::new(s).unwrap());
        (encoded, binary, isas)
    });
    let new_cache = || {
        let mut cache: kpack_cache_t = std::ptr::null_mut();
        // SAFETY: a writable handle slot.
        let e = unsafe { kpack_cache_create(&mut cache) };
        assert_eq!(e, kpack_error_t::KPACK_SUCCESS);
        cache
    };
    let load = |cache: kpack_cache_t, i: usize| {
        let (encoded, binary, isas) = &calls[i];
        let isa_ptrs: Vec<*const c_char> = isas.iter().map(|s| s.as_ptr()).collect();
        let (mut p, mut n): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
        // SAFETY: live cache, metadata bytes, NUL-terminated strings, writable outputs.
        let e = unsafe {
            kpack_load_code_object(
                cache,
                encoded.as_ptr().cast(),
                binary.as_ptr(),
                0,
                isa_ptrs.as_ptr(),
                isa_ptrs.len(),
                &mut p,
                &mut n,
            )
        };
        assert_eq!(e, kpack_error_t::KPACK_SUCCESS);
        // SAFETY: `p` came from kpack_load_code_object.
        unsafe { kpack_free_code_object(p) };
        n
    };
    // 400 rounds (a cold load takes 0.1-0.3 ms): the median of fewer followed the machine's
    // slow spells on a shared 2-core runner.
    let mut cold = [(); N].map(|_| Vec::new());
    for _ in 0..400 {
        for (i, samples) in cold.iter_mut().enumerate() {
            let cache = new_cache();
            samples.push(time(|| load(cache, i)).0);
            // SAFETY: created above, destroyed once.
            unsafe { kpack_cache_destroy(cache) };
        }
    }
    let caches = [(); N].map(|_| new_cache());
    let sizes: Vec<usize> = (0..N).map(|i| load(caches[i], i)).collect();
    let mut warm = [(); N].map(|_| Vec::new());
    for _ in 0..2000 {
        for (i, samples) in warm.iter_mut().enumerate() {
            samples.push(time(|| load(caches[i], i)).0);
        }
    }
    for cache in caches {
        // SAFETY: created above, destroyed once.
        unsafe { kpack_cache_destroy(cache) };
    }
    let mut out = [(Duration::ZERO, Duration::ZERO, 0); N];
    for (i, (c, w)) in cold.into_iter().zip(warm).enumerate() {
        out[i] = (median(c), median(w), sizes[i]);
    }
    out
}

/// Benchmarks the archive at `path`; returns the median cold `kpack_load_code_object` and the
/// median `kpack_get_kernel` per entry.
fn bench(path: &Path, label: &str, processor: &str) -> (Duration, Duration) {
    let size = std::fs::metadata(path).unwrap().len();
    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    let bytes_head = std::fs::read(path).map(|b| b[8..16].to_vec()).unwrap();
    let toc_len = size - u64::from_le_bytes(bytes_head.try_into().unwrap());
    println!(
        "{label}: {} ({:.1} MB, TOC {} KB)",
        path.display(),
        size as f64 / 1e6,
        toc_len / 1024
    );

    let open = || {
        let mut a: kpack_archive_t = std::ptr::null_mut();
        // SAFETY: a NUL-terminated path and a writable handle slot.
        let e = unsafe { kpack_open(c_path.as_ptr(), &mut a) };
        assert_eq!(e, kpack_error_t::KPACK_SUCCESS);
        a
    };
    // SAFETY: the handle is open and closed once.
    unsafe { kpack_close(open()) };
    let samples = (0..200)
        .map(|_| {
            let (d, a) = time(open);
            // SAFETY: as above.
            unsafe { kpack_close(a) };
            d
        })
        .collect();
    let before = rss_kib();
    let a = open();
    let added = rss_kib().saturating_sub(before);
    println!(
        "  kpack_open                 median {} (+{added} KiB resident while open)",
        us(median(samples))
    );

    // The archive reader alone (kpack-archive), to attribute the open cost.
    let reader = median(
        (0..200)
            .map(|_| time(|| Archive::open(path).unwrap()).0)
            .collect(),
    );
    println!("  (Archive::open alone       median {})", us(reader));
    let archive = Archive::open(path).unwrap();
    let entries: Vec<(CString, CString)> = archive
        .entries()
        .map(|(b, arch, _)| (CString::new(b).unwrap(), CString::new(arch).unwrap()))
        .collect();
    let mut per_entry = Vec::with_capacity(entries.len());
    let mut total = 0usize;
    let all = Instant::now();
    for (b, arch) in &entries {
        let (mut p, mut n): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
        let (d, e) = time(|| {
            // SAFETY: open handle, NUL-terminated names, writable outputs.
            let e = unsafe { kpack_get_kernel(a, b.as_ptr(), arch.as_ptr(), &mut p, &mut n) };
            // SAFETY: `p` came from kpack_get_kernel (or is NULL).
            unsafe { kpack_free_kernel(p) };
            e
        });
        assert_eq!(e, kpack_error_t::KPACK_SUCCESS);
        per_entry.push(d);
        total += n;
    }
    let all = all.elapsed();
    let per_entry = median(per_entry);
    println!(
        "  kpack_get_kernel           median {} per entry over {} entries ({:.0} MB/s, {:.1} MB in {:.2} s)",
        us(per_entry),
        entries.len(),
        total as f64 / 1e6 / all.as_secs_f64(),
        total as f64 / 1e6,
        all.as_secs_f64()
    );
    // SAFETY: as above.
    unsafe { kpack_close(a) };

    let [(cold, warm, n)] = load_times([path], processor);
    let (metadata, binary_path, isas) = load_call(path, processor);
    let isas: Vec<&str> = isas.iter().map(String::as_str).collect();
    let runtime = Cache::new(Config::default());
    let no_copy = || {
        runtime
            .load_with(&metadata, &binary_path, 0, &isas, |f| f.bytes.len())
            .unwrap()
    };
    no_copy();
    let lookup = median((0..2000).map(|_| time(no_copy).0).collect());
    println!(
        "  kpack_load_code_object     cold median {} (target <= 200 µs), warm median {} for a {} KB \
         code object; Cache::load_with without the copy (zstd: decode included) median {}",
        us(cold),
        us(warm),
        n / 1024,
        us(lookup)
    );
    if archive.compression_scheme() == kpack_runtime::CompressionScheme::Unified {
        for (b, arch, _) in archive.entries() {
            archive.get(b, arch).unwrap();
        }
        println!(
            "  reference frames held after reading every entry: {:.1} MiB (budget {} MiB)",
            archive.reference_cache_bytes() as f64 / (1u64 << 20) as f64,
            ::kpack_archive::REFERENCE_CACHE_BUDGET >> 20
        );
    }
    (cold, per_entry)
}

/// The archive at `path` written to `out` without its digests: the same header and blobs,
/// the TOC without `xxh3` and `toc_xxh3`, so that readers check nothing, as on an archive
/// written before digests existed (zstd frames keep their checksums, which the decoder
/// verifies either way); and without the TOC's other root keys `dropped`.
fn without_digests(path: &Path, out: &Path, dropped: &[&str]) {
    let mut file = File::open(path).unwrap();
    let mut header = [0u8; 16];
    file.read_exact(&mut header).unwrap();
    let toc_offset = u64::from_le_bytes(header[8..16].try_into().unwrap());
    file.seek(SeekFrom::Start(toc_offset)).unwrap();
    let Value::Map(mut toc) = rmpv::decode::read_value(&mut file).unwrap() else {
        panic!("{}: the TOC is not a map", path.display());
    };
    toc.retain(|(key, _)| {
        key.as_str()
            .is_none_or(|k| k != "toc_xxh3" && !dropped.contains(&k))
    });
    for (key, binaries) in &mut toc {
        if let (Some("toc"), Value::Map(binaries)) = (key.as_str(), binaries) {
            for (_, arches) in binaries {
                let Value::Map(arches) = arches else { continue };
                for (_, entry) in arches {
                    if let Value::Map(fields) = entry {
                        fields.retain(|(key, _)| key.as_str() != Some("xxh3"));
                    }
                }
            }
        }
    }
    let mut written = File::create(out).unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    std::io::copy(&mut (&mut file).take(toc_offset), &mut written).unwrap();
    rmpv::encode::write_value(&mut written, &Value::Map(toc)).unwrap();
    drop(written);
    assert!(!Archive::open(out).unwrap().has_digests());
}

fn main() {
    let input = kpack_testkit::librocsparse();
    let tmp = tempfile::Builder::new()
        .prefix("kpack-capi-bench-")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    let mut figures = Vec::new();
    let tested_v2 = tested_v2_archive();
    for (label, compression, name) in [
        ("none", Compression::None, "rocsparse-none.kpack"),
        (
            "zstd-per-kernel",
            Compression::zstd(),
            "rocsparse-zstd.kpack",
        ),
        (
            "unified (v2, level 3)",
            Compression::Unified { level: 3 },
            "rocsparse-unified.kpack",
        ),
    ] {
        let out = tmp.path().join(name);
        let inputs = [PackInput {
            path: input.clone(),
            kernel_name: KERNEL_NAME.to_owned(),
        }];
        let gfx_arches = match (&tested_v2, compression) {
            (Some(tested), Compression::Unified { .. }) => {
                // A copy beside the library path the loads name, as a packed one is.
                std::fs::copy(tested, &out).unwrap();
                let archive = ::kpack_archive::Archive::open(&out).unwrap();
                println!(
                    "{label}: {} entries, {:?}, made by the real-world test ({})",
                    archive.entries().count(),
                    archive.gfx_arches(),
                    tested.display()
                );
                archive.gfx_arches().to_vec()
            }
            _ => {
                let (d, summary) =
                    time(|| pack(&inputs, &out, "rocsparse", None, compression).unwrap());
                println!(
                    "packed {label}: {} entries, {:?}, in {:.1} s",
                    summary.entries,
                    summary.gfx_arches,
                    d.as_secs_f64()
                );
                summary.gfx_arches
            }
        };
        // A gfx90a device if the library has code for one, else its first target.
        let arch = gfx_arches
            .iter()
            .find(|a| a.starts_with("gfx90a"))
            .unwrap_or(&gfx_arches[0]);
        let processor = arch.split(':').next().unwrap();
        figures.push(bench(&out, label, processor));
        // What the digests cost a load, against the same archive without them.
        let plain = tmp.path().join(format!("nodigest-{name}"));
        without_digests(&out, &plain, &[]);
        let [(cold, warm, _), (cold0, warm0, _)] = load_times([&out, &plain], processor);
        println!(
            "  digests: cold {} = {:.2}x {} without (target <= 1.2x), warm {} = {:.2}x {} \
             without (target: unchanged)",
            us(cold),
            cold.as_secs_f64() / cold0.as_secs_f64(),
            us(cold0),
            us(warm),
            warm.as_secs_f64() / warm0.as_secs_f64(),
            us(warm0)
        );
        if compression == Compression::zstd() {
            // Locating the frame from the TOC's frame sizes against walking the size
            // prefixes, as a reader must without them (docs/archive-v2.md §8).
            let walked = tmp.path().join(format!("walked-{name}"));
            without_digests(&out, &walked, &["zstd_frame_sizes"]);
            let [(cold, _, _), (cold_walked, _, _)] = load_times([&plain, &walked], processor);
            println!(
                "  frame sizes: cold {} locating the frame from the TOC, {} = {:.2}x walking the \
                 size prefixes (both without digests)",
                us(cold),
                us(cold_walked),
                cold_walked.as_secs_f64() / cold.as_secs_f64()
            );
            std::fs::remove_file(&walked).unwrap();
        }
        std::fs::remove_file(&plain).unwrap();
        std::fs::remove_file(&out).unwrap();
    }
    if let [_, (v1, v1_get), (v2, v2_get)] = figures[..] {
        println!(
            "cold kpack_load_code_object, same entry: v2 unified {} = {:.2}x v1 zstd {} (target <= 2x)",
            us(v2),
            v2.as_secs_f64() / v1.as_secs_f64(),
            us(v1)
        );
        println!(
            "kpack_get_kernel per entry: v2 unified {} = {:.2}x v1 zstd {} (target <= 1.0x)",
            us(v2_get),
            v2_get.as_secs_f64() / v1_get.as_secs_f64(),
            us(v1_get)
        );
    }
}
