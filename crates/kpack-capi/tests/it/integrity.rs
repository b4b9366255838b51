//! Issue 20: a damaged archive hands out its original code objects or an error, never other
//! bytes, through every reader (the C API, the Rust reader, the runtime's cache); a load falls
//! through a damaged archive to an intact one on the search path, and reports the damage when
//! there is none. `kpack extract` is driven over the same flips by kpack-cli's
//! `tests/it/integrity.rs`.

use std::collections::BTreeMap;
use std::ffi::{CString, c_char, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_archive::{Archive, ArchiveError, ArchiveWriter, Compression};
use kpack_hostbin::marker::MarkerMetadata;
use kpack_runtime::{Cache, Config, ErrorCode};
use kpack_testkit::fixture;
use kpack_testkit::flips::{
    ENCODINGS, Flip, StoredEntry, archive_flips, damage_kernel_name as kernel_name,
    damage_originals, packed_fixture, stored_entries,
};
use rocm_kpack::{
    kpack_archive_t, kpack_cache_create, kpack_cache_destroy, kpack_cache_t, kpack_close,
    kpack_error_t, kpack_free_code_object, kpack_get_kernel, kpack_load_code_object, kpack_open,
};

/// `KPACK_ERROR_INTEGRITY_CHECK_FAILED`.
const INTEGRITY: u32 = kpack_error_t::KPACK_ERROR_INTEGRITY_CHECK_FAILED as u32;

/// The entry the search-path tests load: no other target of the fixture is compatible with
/// gfx908, so a damaged gfx908 entry cannot be stood in for by another of the same archive.
const LONE_ARCH: &str = "gfx908";

/// A code object keyed as the archive keys it: (binary key, arch).
type Key = (String, String);

/// The ISA name the HIP runtime passes for an agent of `target`.
fn isa(target: &str) -> String {
    format!("amdgcn-amd-amdhsa--{target}")
}

/// The wrapper index of a binary key `name#N`.
fn wrapper(binary: &str) -> u32 {
    binary.rsplit_once('#').unwrap().1.parse().unwrap()
}

/// What a reader made of one entry: the bytes and the entry it says they are (the runtime may
/// serve a compatible target), or an error code.
type Outcome = Result<(Vec<u8>, Key), u32>;

fn code(e: &ArchiveError) -> u32 {
    ErrorCode::from(e) as u32
}

/// Every entry of the archive at `path` through `kpack_open` and `kpack_get_kernel`.
fn c_api_reads(path: &Path, entries: &[StoredEntry]) -> Vec<Outcome> {
    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    let mut archive: kpack_archive_t = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path and a writable handle slot.
    let opened = unsafe { kpack_open(c_path.as_ptr(), &mut archive) };
    if opened != kpack_error_t::KPACK_SUCCESS {
        return vec![Err(opened as u32); entries.len()];
    }
    let reads = entries
        .iter()
        .map(|e| {
            let binary = CString::new(e.binary.as_str()).unwrap();
            let arch = CString::new(e.arch.as_str()).unwrap();
            let (mut data, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
            // SAFETY: an open handle, NUL-terminated names, writable outputs.
            let rc = unsafe {
                kpack_get_kernel(
                    archive,
                    binary.as_ptr(),
                    arch.as_ptr(),
                    &mut data,
                    &mut size,
                )
            };
            let bytes = taken(rc, data, size)?;
            Ok((bytes, (e.binary.clone(), e.arch.clone())))
        })
        .collect();
    // SAFETY: opened above, closed once.
    unsafe { kpack_close(archive) };
    reads
}

/// Every entry through `Archive::get` and then `Archive::get_into`, one archive for both.
fn rust_reads(path: &Path, entries: &[StoredEntry]) -> [Vec<Outcome>; 2] {
    let archive = match Archive::open(path) {
        Ok(a) => a,
        Err(e) => {
            return [
                vec![Err(code(&e)); entries.len()],
                vec![Err(code(&e)); entries.len()],
            ];
        }
    };
    let key = |e: &StoredEntry| (e.binary.clone(), e.arch.clone());
    let get = entries
        .iter()
        .map(|e| match archive.get(&e.binary, &e.arch) {
            Ok(bytes) => Ok((bytes.into_owned(), key(e))),
            Err(err) => Err(code(&err)),
        })
        .collect();
    let get_into = entries
        .iter()
        .map(|e| {
            // The buffer the C API would allocate from the TOC's size (bounded: the test
            // must not be the one to allocate what a damaged size claims).
            let size = archive
                .info(&e.binary, &e.arch)
                .map_or(0, |i| i.original_size);
            let mut out = vec![0u8; size.min(1 << 24) as usize];
            match archive.get_into(&e.binary, &e.arch, &mut out) {
                Ok(n) => Ok((out[..n].to_vec(), key(e))),
                Err(err) => Err(code(&err)),
            }
        })
        .collect();
    [get, get_into]
}

/// Every entry through the runtime's cache, searching only the archive at `path`, for an
/// agent of the entry's own target.
fn runtime_reads(path: &Path, entries: &[StoredEntry]) -> Vec<Outcome> {
    let cache = Cache::new(Config {
        override_paths: vec![path.to_owned()],
        ..Config::default()
    });
    let metadata = MarkerMetadata {
        kernel_name: kernel_name(),
        search_paths: Vec::new(),
        host_entry_id: None,
    };
    let binary = path.with_file_name(kernel_name());
    entries
        .iter()
        .map(|e| {
            let isa = isa(&e.arch);
            cache
                .load_with(&metadata, &binary, wrapper(&e.binary), &[&isa], |f| {
                    (f.bytes.to_vec(), (e.binary.clone(), f.arch.to_owned()))
                })
                .map_err(|err| err.code() as u32)
        })
        .collect()
}

/// The readers [`every_reader`] reads through, in its order.
const READERS: [&str; 4] = [
    "kpack_get_kernel",
    "Archive::get",
    "Archive::get_into",
    "Cache::load_with",
];

/// Every entry of the archive at `path` through every reader, in [`READERS`] order.
fn every_reader(path: &Path, entries: &[StoredEntry]) -> [Vec<Outcome>; 4] {
    let [get, get_into] = rust_reads(path, entries);
    [
        c_api_reads(path, entries),
        get,
        get_into,
        runtime_reads(path, entries),
    ]
}

/// What one reader returned over every flip of one archive.
#[derive(Default)]
struct Tally {
    originals: usize,
    /// Errors by C error code.
    errors: BTreeMap<u32, usize>,
    /// Results that are neither an original nor an error, described.
    wrong: Vec<String>,
}

impl Tally {
    fn note(
        &mut self,
        outcome: &Outcome,
        want: &BTreeMap<Key, Vec<u8>>,
        what: &dyn Fn() -> String,
    ) {
        match outcome {
            Err(code) => *self.errors.entry(*code).or_default() += 1,
            Ok((bytes, served)) if want.get(served) == Some(bytes) => self.originals += 1,
            Ok((bytes, served)) => self.wrong.push(format!(
                "{}: {} bytes served as {served:?}, not its original",
                what(),
                bytes.len()
            )),
        }
    }
}

/// Writes `bytes` to `path` by replacing the file, so a mapping of the previous one (an
/// archive not yet dropped) never sees the new bytes.
fn write_archive(path: &Path, bytes: &[u8]) {
    kpack_fs::write_atomic(path, |f| std::io::Write::write_all(f, bytes), |_, e| e).unwrap();
}

#[test]
fn flipped_bits_anywhere_in_an_archive_read_back_as_the_original_or_an_error_through_every_reader()
{
    let tmp = tempfile::tempdir().unwrap();
    let want = damage_originals();
    for (label, compression) in ENCODINGS {
        let intact = packed_fixture(tmp.path(), label, compression);
        let bytes = std::fs::read(&intact).unwrap();
        let entries = stored_entries(&bytes);
        let keys: Vec<Key> = entries
            .iter()
            .map(|e| (e.binary.clone(), e.arch.clone()))
            .collect();
        assert_eq!(
            keys.len(),
            want.len(),
            "{label}: every code object is an entry"
        );
        // Under wine each flip's rewrite and reopen of the archive costs milliseconds, and the
        // ~2,000 flips per encoding took CI's Windows stage minutes: there every 8th flip runs
        // (the decoding is the same code; Linux runs every flip).
        let flips: Vec<Flip> = archive_flips(&bytes, 400)
            .into_iter()
            .step_by(if cfg!(windows) { 8 } else { 1 })
            .collect();
        for e in &entries {
            assert!(
                flips.iter().any(|f| e.stored.contains(&f.at)),
                "{label}: no flip in the stored bytes of {e:?}"
            );
        }
        let damaged = tmp.path().join(format!("damaged-{label}.kpack"));
        let mut tallies: Vec<Tally> = READERS.iter().map(|_| Tally::default()).collect();
        // The intact archive first: every reader returns every original.
        for flip in std::iter::once(None).chain(flips.iter().copied().map(Some)) {
            let mutated = flip.map_or_else(|| bytes.clone(), |f: Flip| f.apply(&bytes));
            write_archive(&damaged, &mutated);
            let outcomes = every_reader(&damaged, &entries);
            for ((reader, tally), outcomes) in READERS.iter().zip(&mut tallies).zip(&outcomes) {
                for (key, outcome) in keys.iter().zip(outcomes) {
                    let what = || format!("{label} {flip:?}: {reader} {key:?}");
                    if flip.is_none() {
                        assert!(
                            matches!(outcome, Ok((b, _)) if want.get(key) == Some(b)),
                            "{}: the intact archive reads back its original",
                            what()
                        );
                    } else {
                        tally.note(outcome, &want, &what);
                    }
                }
            }
        }
        for (reader, t) in READERS.iter().zip(&tallies) {
            let errors: usize = t.errors.values().sum();
            println!(
                "{label}: {} flips, {reader}: {} reads, {} originals, {errors} errors (by code {:?}), {} wrong",
                flips.len(),
                t.originals + errors + t.wrong.len(),
                t.originals,
                t.errors,
                t.wrong.len()
            );
        }
        // Every error is the damage it is (docs/archive-v2.md §7), whatever the flip hit.
        for (reader, t) in READERS.iter().zip(&tallies) {
            assert!(
                t.errors.keys().all(|&code| code == INTEGRITY),
                "{label}: {reader} reported damage as other errors: {:?}",
                t.errors
            );
        }
        let wrong: Vec<&String> = tallies.iter().flat_map(|t| &t.wrong).collect();
        assert!(
            wrong.is_empty(),
            "{label}: {} reads returned bytes that are not the original, e.g.:\n{}",
            wrong.len(),
            wrong
                .iter()
                .take(10)
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// What `kpack_load_code_object` returns for wrapper `co_index` for an agent of `arch`,
/// through `cache`, with the archives at `search_paths` (absolute) as the marker's paths.
fn load_code_object(
    cache: kpack_cache_t,
    search_paths: &[&Path],
    co_index: u32,
    arch: &str,
) -> Result<Vec<u8>, u32> {
    let metadata = MarkerMetadata {
        kernel_name: kernel_name(),
        search_paths: search_paths
            .iter()
            .map(|p| p.to_str().unwrap().to_owned())
            .collect(),
        host_entry_id: None,
    };
    let encoded = metadata.encode().unwrap();
    let binary = search_paths[0].with_file_name(kernel_name());
    let binary = CString::new(binary.to_str().unwrap()).unwrap();
    let isa = CString::new(isa(arch)).unwrap();
    let isas: [*const c_char; 1] = [isa.as_ptr()];
    let (mut out, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
    // SAFETY: a live cache, the whole msgpack marker, NUL-terminated strings that outlive the
    // call, writable outputs.
    let rc = unsafe {
        kpack_load_code_object(
            cache,
            encoded.as_ptr().cast(),
            binary.as_ptr(),
            co_index,
            isas.as_ptr(),
            isas.len(),
            &mut out,
            &mut size,
        )
    };
    taken(rc, out, size)
}

/// What a C call that hands out a `malloc` buffer returned (`rc`, and the buffer `data` of
/// `size` bytes): the bytes, the buffer freed, or the error code.
fn taken(rc: kpack_error_t, data: *mut c_void, size: usize) -> Result<Vec<u8>, u32> {
    if rc != kpack_error_t::KPACK_SUCCESS {
        return Err(rc as u32);
    }
    // SAFETY: on success the call set `data` to `size` bytes from malloc, freed once here
    // (`kpack_free_kernel` and `kpack_free_code_object` are both `free`).
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size).to_vec() };
    // SAFETY: as above.
    unsafe { kpack_free_code_object(data) };
    Ok(bytes)
}

/// Runs `f` with a new C API cache (the environment read at creation), destroyed after.
fn with_cache<R>(f: impl FnOnce(kpack_cache_t) -> R) -> R {
    let mut cache: kpack_cache_t = std::ptr::null_mut();
    // SAFETY: a writable handle slot.
    let created = unsafe { kpack_cache_create(&mut cache) };
    assert_eq!(created, kpack_error_t::KPACK_SUCCESS);
    let r = f(cache);
    // SAFETY: created above, destroyed once.
    unsafe { kpack_cache_destroy(cache) };
    r
}

/// Where a flip damages an archive for the search-path tests.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// The middle of the lone entry's stored bytes: the archive opens, that entry fails.
    Entry,
    /// The TOC: the archive fails at open.
    Toc,
}

/// The damage fixture packed as `label` in `dir` (intact), and a copy with `damage`; returns
/// both paths and the lone entry.
fn intact_and_damaged(
    dir: &Path,
    label: &str,
    compression: Compression,
    damage: Damage,
) -> (PathBuf, PathBuf, StoredEntry) {
    let intact = packed_fixture(dir, label, compression);
    let bytes = std::fs::read(&intact).unwrap();
    let lone = stored_entries(&bytes)
        .into_iter()
        .find(|e| e.arch == LONE_ARCH)
        .unwrap();
    let at = match damage {
        Damage::Entry => (lone.stored.start + lone.stored.end) / 2,
        Damage::Toc => u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize + 20,
    };
    let damaged = dir.join(format!("{label}-{damage:?}-damaged.kpack"));
    write_archive(&damaged, &Flip { at, mask: 0x10 }.apply(&bytes));
    (intact, damaged, lone)
}

#[test]
fn a_load_falls_through_a_damaged_archive_to_an_intact_one_and_reports_the_damage_without_one() {
    let tmp = tempfile::tempdir().unwrap();
    let want = damage_originals();
    for (label, compression) in ENCODINGS {
        for damage in [Damage::Entry, Damage::Toc] {
            let dir = tmp.path().join(format!("{label}-{damage:?}"));
            std::fs::create_dir_all(&dir).unwrap();
            let (intact, damaged, lone) = intact_and_damaged(&dir, label, compression, damage);
            let original = &want[&(lone.binary.clone(), lone.arch.clone())];
            let w = wrapper(&lone.binary);
            let what = format!("{label}, damaged {damage:?}");
            // Twice through one cache: the second load meets the remembered failed open (TOC
            // damage) or the open damaged archive (entry damage).
            with_cache(|cache| {
                for _ in 0..2 {
                    let got = load_code_object(cache, &[&damaged, &intact], w, LONE_ARCH);
                    assert_eq!(got.as_ref(), Ok(original), "{what}: damaged, then intact");
                }
            });
            with_cache(|cache| {
                for _ in 0..2 {
                    let got = load_code_object(cache, &[&damaged], w, LONE_ARCH);
                    assert_eq!(got, Err(INTEGRITY), "{what}: damaged alone");
                }
            });
        }
    }
}

/// An archive listing [`LONE_ARCH`] whose only entry is another binary's: a load of the
/// damage fixture's kernel finds the target but not the kernel.
fn archive_without_the_kernel(path: &Path) {
    let mut w = ArchiveWriter::new("other", "other", Compression::zstd());
    w.add(
        "libother.so#0",
        LONE_ARCH,
        b"other code object".to_vec(),
        &[],
    )
    .unwrap();
    w.write_file(path).unwrap();
}

#[test]
fn with_nothing_intact_on_the_search_path_the_load_reports_the_damage_over_lesser_failures() {
    let tmp = tempfile::tempdir().unwrap();
    let lacking = tmp.path().join("lacking.kpack");
    archive_without_the_kernel(&lacking);
    let not_an_archive = tmp.path().join("not-an-archive.kpack");
    write_archive(
        &not_an_archive,
        b"this is not a kpack archive at all, just text\n",
    );
    for damage in [Damage::Entry, Damage::Toc] {
        let (_, damaged, lone) =
            intact_and_damaged(tmp.path(), "zstd", Compression::zstd(), damage);
        let w = wrapper(&lone.binary);
        // A kernel missing from another archive, or a file that is no archive at all, tells
        // less than a damaged archive that should have held it: whichever comes first.
        for paths in [
            [&damaged, &lacking],
            [&lacking, &damaged],
            [&not_an_archive, &damaged],
            [&damaged, &not_an_archive],
        ] {
            let paths = paths.map(PathBuf::as_path);
            let got = with_cache(|cache| load_code_object(cache, &paths, w, LONE_ARCH));
            assert_eq!(got, Err(INTEGRITY), "{damage:?}: {paths:?}");
        }
    }
}

/// The variable that makes a run of this test binary the child of
/// [`with_rocm_kpack_debug_the_log_names_the_damaged_file_entry_and_offset`]: it holds the
/// damaged archive the child loads.
const CHILD_ARCHIVE: &str = "KPACK_TEST_DAMAGED_ARCHIVE";

#[test]
fn with_rocm_kpack_debug_the_log_names_the_damaged_file_entry_and_offset() {
    // The test's name as the harness knows it: its module path within the test binary.
    let name = format!(
        "{}::with_rocm_kpack_debug_the_log_names_the_damaged_file_entry_and_offset",
        module_path!()
            .split_once("::")
            .map_or("", |(_, module)| module)
    );
    // The child: ROCM_KPACK_DEBUG is read from the environment when the cache is created,
    // and the log goes to the process's stderr, so the load runs in a process of its own.
    if let Some(damaged) = std::env::var_os(CHILD_ARCHIVE) {
        let damaged = PathBuf::from(damaged);
        let got = with_cache(|cache| load_code_object(cache, &[&damaged], 0, LONE_ARCH));
        assert_eq!(got, Err(INTEGRITY));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (_, damaged, lone) =
        intact_and_damaged(tmp.path(), "none", Compression::None, Damage::Entry);
    assert_eq!(wrapper(&lone.binary), 0);
    let out = Command::new(std::env::current_exe().unwrap())
        .arg(&name)
        .args(["--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ARCHIVE, &damaged)
        .env("ROCM_KPACK_DEBUG", "1")
        .env_remove("ROCM_KPACK_PATH")
        .env_remove("ROCM_KPACK_PATH_PREFIX")
        .env_remove("ROCM_KPACK_DISABLE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed:\n{stderr}");
    let canonical = std::fs::canonicalize(&damaged).unwrap();
    let line = stderr
        .lines()
        .find(|l| l.starts_with("kpack: ") && l.contains("the archive is damaged"))
        .unwrap_or_else(|| panic!("no damage logged:\n{stderr}"));
    for part in [
        canonical.display().to_string(),
        format!("binary {}, arch {LONE_ARCH}", lone.binary),
        format!("at byte {}", lone.stored.start),
    ] {
        assert!(line.contains(&part), "{part:?} missing from {line:?}");
    }
}

#[test]
fn archives_written_before_digests_load_their_original_code_objects() {
    let want = damage_originals();
    for (label, _) in ENCODINGS {
        let path = fixture(&format!(
            "archives/pre-digest/libmodern_wide_v3-{label}.kpack"
        ));
        let bytes = std::fs::read(&path).unwrap();
        let archive = Archive::open(&path).unwrap();
        assert!(!archive.has_digests(), "{label}: written before digests");
        assert!(archive.entries().all(|(_, _, info)| info.digest.is_none()));
        let entries = stored_entries(&bytes);
        assert_eq!(
            entries.len(),
            want.len(),
            "{label}: every code object is an entry"
        );
        let outcomes = every_reader(&path, &entries);
        for (reader, outcomes) in READERS.iter().zip(&outcomes) {
            for (e, outcome) in entries.iter().zip(outcomes) {
                let key = (e.binary.clone(), e.arch.clone());
                assert!(
                    matches!(outcome, Ok((b, served)) if *served == key && want.get(&key) == Some(b)),
                    "{label}: {reader} {key:?}: {:?}",
                    outcome.as_ref().map(|(b, served)| (b.len(), served))
                );
            }
        }
        // And through the loader's C entry point, the archive its marker's one search path.
        with_cache(|cache| {
            for e in &entries {
                let got = load_code_object(cache, &[&path], wrapper(&e.binary), &e.arch);
                let key = (e.binary.clone(), e.arch.clone());
                assert_eq!(got.as_ref(), Ok(&want[&key]), "{label}: {key:?}");
            }
        });
    }
}
