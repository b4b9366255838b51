//! A CCOB decoding to more than 1 GiB (real ones do: librccl 7.2.4's first bundle claims
//! 1.2 GB; [`kpack_testkit::large_ccob::write_sparse`] builds one of real code objects that
//! compresses to a few hundred KB): every command reads it as a stream, never decoded whole,
//! within the 512 MiB memory standard, and reads every code object back byte for byte;
//! damaged, it fails naming where, leaving nothing at the final path.
//!
//! The commands run one after another in one test, each measured on its own child process
//! (this process holds a few MB: a parent's peak would pass to a `vfork`ed child's).

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{json, kpack, s};
use kpack_archive::Archive;
use kpack_testkit::large_ccob::LargeCcob;

struct Inputs {
    _dir: tempfile::TempDir,
    ccob: LargeCcob,
    /// `libone.so` with the CCOB as its `.hip_fatbin`.
    host: PathBuf,
    /// An artifact directory holding `host` as `stage/lib/libhuge.so`.
    artifact: PathBuf,
}

fn kpack_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kpack"))
}

/// The CCOB, its host binary and its artifact, built once per test binary.
fn inputs() -> &'static Inputs {
    static INPUTS: OnceLock<Inputs> = OnceLock::new();
    INPUTS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let ccob = kpack_testkit::large_ccob::write_sparse(kpack_bin(), dir.path());
        let (host, artifact) = host_and_artifact(&ccob.path, dir.path(), "huge");
        Inputs {
            _dir: dir,
            ccob,
            host,
            artifact,
        }
    })
}

/// The fat binary holding the CCOB at `ccob` and an artifact holding that binary, in `dir`.
fn host_and_artifact(ccob: &Path, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let host = dir.join(format!("lib{name}.so"));
    kpack_testkit::large_ccob::host_binary(&std::fs::read(ccob).unwrap(), &host);
    let artifact = dir.join(format!("{name}_lib_generic"));
    std::fs::create_dir_all(artifact.join("stage/lib")).unwrap();
    std::fs::write(artifact.join("artifact_manifest.txt"), "stage\n").unwrap();
    std::fs::copy(&host, artifact.join("stage/lib/libhuge.so")).unwrap();
    (host, artifact)
}

/// Runs `kpack args`, which must succeed within 512 MiB; gives its peak RSS in MiB.
fn within_512_mib(args: &[&Path]) -> f64 {
    let run = kpack_testkit::measured::run_measured(kpack_bin(), args);
    eprintln!(
        "kpack {args:?}: {:.0} MiB, {:.1} s",
        run.peak_mib,
        run.wall.as_secs_f64()
    );
    assert!(
        run.peak_mib <= 512.0,
        "kpack {args:?} peaked at {:.0} MiB",
        run.peak_mib
    );
    run.peak_mib
}

/// Every code object of `archives` (`.kpack` files) by target, as SHA-256 hex.
fn archived(archives: &[PathBuf]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for path in archives {
        let archive = Archive::open(path).unwrap();
        for (binary, arch, _) in archive.entries() {
            let data = archive.get(binary, arch).unwrap();
            found.push((arch.to_owned(), kpack_testkit::sha256_hex(&data)));
        }
    }
    found.sort();
    found
}

fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    kpack_fs::walk(dir)
        .map(|e| e.unwrap().path)
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect()
}

#[test]
fn every_command_streams_a_ccob_decoding_to_more_than_1_gib_within_512_mib() {
    let inputs = inputs();
    let large = &inputs.ccob;
    assert!(large.decoded_len > 1 << 30, "{}", large.decoded_len);
    let mut want = large.entries.clone();
    want.sort();
    let out = tempfile::tempdir().unwrap();
    let at = |name: &str| out.path().join(name);

    // inspect: the entry table, the claimed size, the hash verified.
    within_512_mib(&[Path::new("inspect"), &large.path]);
    let report = json(&["inspect", s(&large.path), "--json"]);
    let bundle = &report[0]["details"]["bundles"][0];
    assert_eq!(bundle["uncompressed_size"], large.decoded_len, "{report}");
    assert_eq!(bundle["hash"], "verified", "{report}");
    assert_eq!(bundle["entries"].as_array().unwrap().len(), want.len());

    // unbundle: every code object, byte for byte.
    let unbundled = at("unbundled");
    within_512_mib(&[
        Path::new("unbundle"),
        &large.path,
        Path::new("-o"),
        &unbundled,
    ]);
    let mut got: Vec<(String, String)> = files_with_extension(&unbundled, "co")
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let id = name.split('.').rev().nth(1).unwrap().to_owned();
            let arch = id.rsplit("--").next().unwrap().to_owned();
            (arch, kpack_testkit::sha256_hex(&std::fs::read(p).unwrap()))
        })
        .collect();
    got.sort();
    assert_eq!(got, want, "unbundle");

    // pack (zstd, the default): one archive of every code object.
    let packed = at("large.kpack");
    within_512_mib(&[Path::new("pack"), &large.path, Path::new("-o"), &packed]);
    assert_eq!(archived(&[packed]), want, "pack");

    // transform: the host binary loses the bundle, the archives hold every code object.
    let kpack_dir = at("kpack");
    within_512_mib(&[
        Path::new("transform"),
        &inputs.host,
        Path::new("-o"),
        &at("libhuge.so"),
        Path::new("--kpack-dir"),
        &kpack_dir,
    ]);
    assert_eq!(
        archived(&files_with_extension(&kpack_dir, "kpack")),
        want,
        "transform"
    );

    // prune: the binary keeps gfx90a, recompressed from the stream.
    let pruned = at("libpruned.so");
    within_512_mib(&[
        Path::new("prune"),
        &inputs.host,
        Path::new("-o"),
        &pruned,
        Path::new("--keep"),
        Path::new("gfx90a"),
    ]);
    let kept = at("kept");
    common::kpack_ok(&["unbundle", s(&pruned), "-o", s(&kept)]);
    let kept: Vec<String> = files_with_extension(&kept, "co")
        .iter()
        .map(|p| kpack_testkit::sha256_hex(&std::fs::read(p).unwrap()))
        .collect();
    let gfx90a: Vec<String> = want
        .iter()
        .filter(|(arch, _)| arch.starts_with("gfx90a"))
        .map(|(_, d)| d.clone())
        .collect();
    assert!(!gfx90a.is_empty());
    assert_eq!(kept, gfx90a, "prune");

    // split of an artifact holding it, and verify of the split against it.
    let split = at("split");
    within_512_mib(&[
        Path::new("split"),
        &inputs.artifact,
        Path::new("-o"),
        &split,
        Path::new("--component"),
        Path::new("huge_lib"),
    ]);
    assert_eq!(
        archived(&files_with_extension(&split, "kpack")),
        want,
        "split"
    );
    within_512_mib(&[
        Path::new("verify"),
        &split,
        Path::new("--original"),
        &inputs.artifact,
    ]);
    let report = json(&[
        "verify",
        s(&split),
        "--original",
        s(&inputs.artifact),
        "--json",
    ]);
    assert_eq!(report["code_objects"], want.len(), "{report}");
}

#[test]
fn a_damaged_ccob_decoding_to_more_than_1_gib_fails_naming_its_offset_and_leaves_nothing() {
    let inputs = inputs();
    let dir = tempfile::tempdir().unwrap();
    // A flipped byte in the zstd data: the stream decodes, or fails, or its hash differs;
    // either way only after the entries before it were handed over.
    let mut bytes = std::fs::read(&inputs.ccob.path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    let damaged = dir.path().join("damaged.ccob");
    std::fs::write(&damaged, &bytes).unwrap();
    let (_, artifact) = host_and_artifact(&damaged, dir.path(), "damaged");

    let res = kpack(&["inspect", s(&damaged)]);
    assert!(!res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("bundle 0 at file offset 0x0"), "{err}");
    assert!(err.contains("0x"), "{err}");

    let out = dir.path().join("split");
    let res = kpack(&[
        "split",
        s(&artifact),
        "-o",
        s(&out),
        "--component",
        "damaged_lib",
    ]);
    assert!(!res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("libhuge.so"), "{err}");
    assert!(err.contains("bundle 0 at file offset 0x"), "{err}");
    let left: Vec<_> = kpack_fs::walk(dir.path())
        .map(|e| e.unwrap().path)
        .filter(|p| p.starts_with(&out) && p.is_file())
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // The hash alone wrong: the stream decodes to the right size, the hash tells.
    let mut bytes = std::fs::read(&inputs.ccob.path).unwrap();
    bytes[24] ^= 1;
    let wrong_hash = dir.path().join("wrong-hash.ccob");
    std::fs::write(&wrong_hash, &bytes).unwrap();
    let res = kpack(&["inspect", s(&wrong_hash)]);
    assert!(!res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("hash"), "{err}");

    // Truncated: the stream ends before the claimed size.
    let bytes = std::fs::read(&inputs.ccob.path).unwrap();
    let cut = dir.path().join("cut.ccob");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let res = kpack(&["inspect", s(&cut)]);
    assert!(!res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("0x"), "{err}");
}

/// RCCL 7.2.4's bundle holds 9 code objects of 120-200 MB: streamed, each entry is a part
/// alone. Before, a reader held the next entry beside the part it had not yet handed over
/// (inspect of librccl peaked at 588 MiB), and transform copied each entry before compressing
/// it and kept a scratch buffer of its size per target (1.05 GiB); now one entry at a time.
/// What was written is checked by child processes (`verify --original` and the archives'
/// tables), so that this process never holds an entry (its peak would pass to the children
/// measured after it).
#[test]
fn a_ccob_of_entries_larger_than_a_part_is_read_one_entry_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let entry_len = 280u64 << 20;
    let padded = kpack_testkit::large_ccob::write_padded(kpack_bin(), dir.path(), 4, entry_len);
    assert!(padded.decoded_len > 1 << 30, "{}", padded.decoded_len);
    let (host, artifact) = host_and_artifact(&padded.path, dir.path(), "padded");
    let at = |name: &str| dir.path().join(name);
    within_512_mib(&[Path::new("inspect"), &padded.path]);
    let kpack_dir = at("kpack");
    // Transform, split and verify code or hash each entry as it is decoded: none holds one
    // (they held each whole, 296 MiB, until the entries were taken in pieces).
    let entry_mib = (entry_len >> 20) as f64;
    let held = |command: &str, peak: f64| {
        assert!(
            peak < entry_mib / 2.0,
            "{command} peaked at {peak:.0} MiB: it holds an entry of {entry_mib} MiB"
        );
    };
    let peak = within_512_mib(&[
        Path::new("transform"),
        &host,
        Path::new("-o"),
        &at("libpadded.so"),
        Path::new("--kpack-dir"),
        &kpack_dir,
    ]);
    held("transform", peak);
    let archives = files_with_extension(&kpack_dir, "kpack");
    assert_eq!(archives.len(), 4, "{archives:?}");
    for archive in &archives {
        let report = json(&["inspect", "--json", s(archive)]);
        let entries = report[0]["details"]["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{report}");
        assert_eq!(entries[0]["size"], entry_len, "{report}");
    }
    let split = at("split");
    let peak = within_512_mib(&[
        Path::new("split"),
        &artifact,
        Path::new("-o"),
        &split,
        Path::new("--component"),
        Path::new("padded_lib"),
    ]);
    held("split", peak);
    let peak = within_512_mib(&[
        Path::new("verify"),
        &split,
        Path::new("--original"),
        &artifact,
    ]);
    held("verify --original", peak);
    let report = json(&["verify", s(&split), "--original", s(&artifact), "--json"]);
    assert_eq!(report["code_objects"], padded.entries.len(), "{report}");
    assert_eq!(report["failures"], serde_json::json!([]), "{report}");
}
