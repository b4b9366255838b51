//! What the integration tests (and benchmarks) of several kpack crates share: the repository's
//! fixtures and their roles, the real-world corpus, external witnesses, tree helpers, and
//! the stand-in HIP runtime ([`standin`]) that loads binaries the way the HIP runtime does.
//!
//! Everything here panics with a message naming what is missing: a test either runs what it
//! promises or fails.
//!
//! Depends on `kpack-bundle` and `kpack-fs`, and on `kpack-archive`, `kpack-artifact`,
//! `kpack-elf` and `kpack-pipeline` behind features; a dev-dependency only (the layering:
//! docs/CONTRIBUTING.md).

#[cfg(feature = "transform")]
pub mod flips;
pub mod large_ccob;
pub mod measured;
mod standin;
mod wine;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use standin::{AARCH64, Foreign, PPC64LE, Registration, Standin, foreign_standin, standin};
pub use wine::{Wine, WineRegistration};

/// The repository's `fixtures/` directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// A fixture by its path under `fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    fixtures().join(rel)
}

/// The bytes of a fixture.
pub fn read_fixture(rel: &str) -> Vec<u8> {
    let path = fixture(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// What an ELF fixture is, and so which tests it feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A linked executable or shared library carrying device code: what `transform` rewrites
    /// and what the HIP runtime loads.
    LinkedFat,
    /// A relocatable object with a `.hip_fatbin` (compiled with `-c`).
    FatObject,
    /// An `-fgpu-rdc` relocatable object: bitcode sections, no bundle yet.
    RdcObject,
    /// A linked binary without device code.
    HostOnly,
    /// An AMDGPU code object (a device ELF file).
    CodeObject,
}

/// Every ELF file in `fixtures/bin` and `fixtures/modern`, sorted, with its role (a test of
/// kpack-elf checks the list is complete and the roles match what inspection finds).
pub const ELF_FIXTURE_ROLES: &[(&str, Role)] = &[
    ("bin/exe_nopie", Role::LinkedFat),
    ("bin/exe_pie", Role::LinkedFat),
    ("bin/k1.o", Role::FatObject),
    ("bin/k2.o", Role::FatObject),
    ("bin/libalign2m.so", Role::LinkedFat),
    ("bin/libhostonly.so", Role::HostOnly),
    ("bin/libone.so", Role::LinkedFat),
    ("bin/libone_gfx906.so", Role::LinkedFat),
    ("bin/libone_stripped.so", Role::LinkedFat),
    ("bin/librdc.so", Role::LinkedFat),
    ("bin/librelr.so", Role::LinkedFat),
    ("bin/libtwo.so", Role::LinkedFat),
    ("bin/rdc_a.o", Role::RdcObject),
    ("bin/rdc_b.o", Role::RdcObject),
    ("modern/exe_modern_v3", Role::LinkedFat),
    ("modern/libmodern_nocompress.so", Role::LinkedFat),
    ("modern/libmodern_two_v3.so", Role::LinkedFat),
    ("modern/libmodern_v2.so", Role::LinkedFat),
    ("modern/libmodern_v3.so", Role::LinkedFat),
    ("modern/libmodern_wide_v3.so", Role::LinkedFat),
    ("modern/mk2_v3.o", Role::FatObject),
    ("modern/mk_gfx1030.co", Role::CodeObject),
    ("modern/mk_gfx90a_xnackp.co", Role::CodeObject),
    ("modern/mk_v3.o", Role::FatObject),
];

/// The separated debug files in `fixtures/debug` (`build_debug.sh`: `objcopy
/// --only-keep-debug` of fat fixtures; uncompressed bundles, CCOB v3, executables, a stripped
/// library's with program headers past its end), sorted.
pub const DEBUG_FIXTURES: [&str; 7] = [
    "debug/demo.debug",
    "debug/exe_pie.debug",
    "debug/libdemo.so.1.debug",
    "debug/libmodern_v3.so.debug",
    "debug/libone.so.debug",
    "debug/libone_stripped.so.debug",
    "debug/libtwo.so.debug",
];

/// The aarch64 and ppc64le fat shared libraries in `fixtures/platforms`
/// (`build_platforms.sh`), with their machine.
pub const PLATFORM_FIXTURES: &[(&str, &Foreign)] = &[
    ("platforms/libbig_aarch64_lld.so", &AARCH64),
    ("platforms/libbig_ppc64le_lld.so", &PPC64LE),
    ("platforms/libmodern_aarch64_bfd.so", &AARCH64),
    ("platforms/libmodern_aarch64_lld.so", &AARCH64),
    ("platforms/libmodern_aarch64_lld_4k.so", &AARCH64),
    ("platforms/libmodern_ppc64le_bfd.so", &PPC64LE),
    ("platforms/libmodern_ppc64le_lld.so", &PPC64LE),
    ("platforms/libmodern_ppc64le_lld_4k.so", &PPC64LE),
    ("platforms/librdc_aarch64_lld.so", &AARCH64),
    ("platforms/librdc_ppc64le_lld.so", &PPC64LE),
];

/// A Windows PE32+ fat image in `fixtures/platforms` (`build_platforms.sh OUT pe`).
#[derive(Debug, Clone, Copy)]
pub struct PeFixture {
    /// Path under `fixtures/`.
    pub path: &'static str,
    /// A DLL (loaded by `platforms/loader.exe`), else an EXE run directly.
    pub dll: bool,
    /// Its wrappers (one per HIP translation unit).
    pub wrappers: usize,
    /// Whether it has base relocations (every fixture but the `/fixed` EXE).
    pub relocatable: bool,
    /// The long section names `.hip_fatbin` / `.hipFatBinSegment` (mingw GNU ld), else
    /// lld-link's `.hip_fat` / `.hipFatB`.
    pub long_names: bool,
    /// Whether the loader finds its preferred base taken and rebases it.
    pub rebased: bool,
}

/// Every PE fixture.
pub const PE_FIXTURES: &[PeFixture] = &[
    PeFixture {
        path: "platforms/hipapp.dll",
        dll: true,
        wrappers: 1,
        relocatable: true,
        long_names: false,
        rebased: false,
    },
    PeFixture {
        path: "platforms/hipapp2.dll",
        dll: true,
        wrappers: 2,
        relocatable: true,
        long_names: false,
        rebased: true,
    },
    PeFixture {
        path: "platforms/hipapp_mingw.dll",
        dll: true,
        wrappers: 1,
        relocatable: true,
        long_names: true,
        rebased: false,
    },
    PeFixture {
        path: "platforms/hipexe.exe",
        dll: false,
        wrappers: 1,
        relocatable: true,
        long_names: false,
        rebased: false,
    },
    PeFixture {
        path: "platforms/hipexe_fixed.exe",
        dll: false,
        wrappers: 1,
        relocatable: false,
        long_names: false,
        rebased: false,
    },
];

/// Every ELF fixture, sorted.
pub const ELF_FIXTURES: &[&str] = &paths::<{ count(None) }>(None);

/// The linked fat binaries ([`Role::LinkedFat`]), sorted.
pub const LINKED_FAT: &[&str] = &paths::<{ count(Some(Role::LinkedFat)) }>(Some(Role::LinkedFat));

const fn has_role(i: usize, role: Option<Role>) -> bool {
    match role {
        None => true,
        Some(r) => ELF_FIXTURE_ROLES[i].1 as u8 == r as u8,
    }
}

const fn count(role: Option<Role>) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < ELF_FIXTURE_ROLES.len() {
        if has_role(i, role) {
            n += 1;
        }
        i += 1;
    }
    n
}

const fn paths<const N: usize>(role: Option<Role>) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < ELF_FIXTURE_ROLES.len() {
        if has_role(i, role) {
            out[n] = ELF_FIXTURE_ROLES[i].0;
            n += 1;
        }
        i += 1;
    }
    out
}

/// The real-world corpus directory, `$KPACK_CORPUS` or `/var/tmp/kpack-corpus`
/// (`scripts/setup.sh` fills it).
pub fn corpus() -> PathBuf {
    std::env::var_os("KPACK_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/kpack-corpus"))
}

/// A file of the corpus, which must exist.
fn corpus_file(rel: &str) -> PathBuf {
    let path = corpus().join(rel);
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup.sh",
        path.display()
    );
    path
}

/// bookworm's librocsparse.so.0.1 (1.3 GB, 111 wrappers, 7 targets) from the corpus.
pub fn librocsparse() -> PathBuf {
    corpus_file("x/librocsparse0_5.3.0+dfsg-2/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1")
}

/// Debian ROCm 7.2.4's librocblas.so.5.2 (210 MB, 65 CCOB v3 bundles, 14 targets) from the
/// corpus.
pub fn librocblas() -> PathBuf {
    corpus_file("x/librocblas5_7.2.4-1~exp1/usr/lib/x86_64-linux-gnu/librocblas.so.5.2")
}

/// bookworm's arm64 librocrand.so.1.1 (5.3.3, GNU ld, 25 MB, 1 wrapper, 7 targets) from the
/// corpus.
pub fn librocrand_arm64() -> PathBuf {
    corpus_file("x/librocrand1_5.3.3-4_arm64/usr/lib/aarch64-linux-gnu/librocrand.so.1.1")
}

/// The versions of the PyPI `jax-rocm7-plugin` wheels in the corpus.
pub const JAX_VERSIONS: [&str; 2] = ["0.10.0", "0.12.0"];

/// The unpacked `jax-rocm7-plugin` wheel of `version` in the corpus.
pub fn jax_wheel_dir(version: &str) -> PathBuf {
    let wx = corpus().join("wx");
    let prefix = format!("jax_rocm7_plugin-{version}-");
    std::fs::read_dir(&wx)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/setup.sh", wx.display()))
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix)
        })
        .unwrap_or_else(|| {
            panic!(
                "jax-rocm7-plugin {version} is not unpacked in {}",
                wx.display()
            )
        })
}

/// The PyPI wheel `<name>-<version>-*.whl` of the corpus (`name` as the file spells it,
/// `cupy_rocm_7_0`).
pub fn corpus_wheel(name: &str, version: &str) -> PathBuf {
    let dir = corpus().join("wheels");
    let prefix = format!("{name}-{version}-");
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/setup.sh", dir.display()))
        .map(|e| e.unwrap().path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(&prefix) && n.ends_with(".whl")
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} {version} is not in {}: run scripts/setup.sh",
                dir.display()
            )
        })
}

/// Runs an external witness tool, which the test suite's set-up installs; its absence is a
/// failure, not a skip, so a green run always means the witness was consulted. Returns its
/// standard output.
pub fn run_tool(program: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} is required (scripts/setup.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs a tool of LLVM 22 (`clang-offload-bundler`, `llvm-objdump`, `llvm-offload-binary`, …)
/// from the trixie root `scripts/setup.sh` unpacks into the corpus, through its own `ld.so`
/// (it needs glibc 2.38+). Like [`run_tool`], a missing tool fails the test. Returns its
/// standard output.
pub fn run_llvm22(tool: &str, args: &[&str]) -> Vec<u8> {
    let wrapper = corpus_file("llvmv");
    let mut full = vec!["22", tool];
    full.extend_from_slice(args);
    run_tool(wrapper.to_str().expect("corpus path is UTF-8"), &full)
}

/// The bundles of `.hip_fatbin` in `path` as stored: the section dumped by `objcopy` (the
/// file's machine's; an independent reader), cut at the offsets `kpack inspect` reports; a raw bundle or CCOB file
/// is one bundle.
#[cfg(feature = "transform")]
pub fn fatbin_bundles(path: &Path, tmp: &Path) -> Vec<Vec<u8>> {
    use kpack_pipeline::inspect::{self, Details};
    let bytes = std::fs::read(path).unwrap();
    let report = inspect::inspect(&path.display().to_string(), &bytes).unwrap();
    match report.details {
        Details::Elf(elf) => {
            let section = tmp.join("fatbin.bin");
            let machine = u16::from_le_bytes([bytes[18], bytes[19]]);
            let objcopy = [&AARCH64, &PPC64LE]
                .into_iter()
                .find(|m| m.e_machine == machine)
                .map_or_else(|| "objcopy".to_owned(), |m| m.tool("objcopy"));
            run_tool(
                &objcopy,
                &[
                    &format!("--dump-section=.hip_fatbin={}", section.display()),
                    path.to_str().unwrap(),
                    tmp.join("discard.o").to_str().unwrap(),
                ],
            );
            let data = std::fs::read(&section).unwrap();
            let base = elf.fatbin.unwrap().offset;
            elf.bundles
                .iter()
                .map(|b| {
                    let start = (b.offset - base) as usize;
                    data[start..start + b.size as usize].to_vec()
                })
                .collect()
        }
        Details::Bundles { .. } => vec![bytes],
        other => panic!("{}: not a bundle container: {other:?}", path.display()),
    }
}

/// Every entry of `bundle` (an uncompressed bundle or a CCOB) as clang-offload-bundler lists
/// and unbundles it: `clang-offload-bundler-15` for an uncompressed bundle, LLVM 22's for a
/// CCOB (LLVM 15 cannot read one). Keyed by bundle entry id, host entry included.
pub fn witness_entries(bundle: &[u8], tmp: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let input = tmp.join("witness.bundle");
    std::fs::write(&input, bundle).unwrap();
    let run = |args: &[&str]| {
        if bundle.starts_with(b"CCOB") {
            run_llvm22("clang-offload-bundler", args)
        } else {
            run_tool("clang-offload-bundler-15", args)
        }
    };
    let input_arg = format!("--input={}", input.display());
    let listing = run(&["--list", "--type=o", &input_arg]);
    let triples: Vec<String> = String::from_utf8(listing)
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    // One call unbundles every entry (a CCOB is decompressed once).
    let outputs: Vec<PathBuf> = (0..triples.len())
        .map(|i| tmp.join(format!("witness{i}.co")))
        .collect();
    let mut args = vec![
        "--unbundle".to_owned(),
        "--type=o".to_owned(),
        input_arg.clone(),
        format!("--targets={}", triples.join(",")),
    ];
    args.extend(outputs.iter().map(|o| format!("--output={}", o.display())));
    run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    triples
        .into_iter()
        .zip(&outputs)
        .map(|(t, o)| (t, std::fs::read(o).unwrap()))
        .collect()
}

/// Hex SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(data))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every entry below `root` with its permissions and content (file bytes, link text, or
/// nothing for a directory), sorted by path, for byte-for-byte tree comparisons.
pub fn snapshot(root: &Path) -> Vec<(String, String, Vec<u8>)> {
    snapshot_by(root, |p| std::fs::read(p).unwrap())
}

/// Like [`snapshot`], with each file's content as its hex SHA-256, read in chunks: for trees
/// too large to hold in memory.
pub fn snapshot_digests(root: &Path) -> Vec<(String, String, Vec<u8>)> {
    use sha2::Digest;
    snapshot_by(root, |p| {
        let mut hash = sha2::Sha256::new();
        std::io::copy(&mut std::fs::File::open(p).unwrap(), &mut hash).unwrap();
        hex(&hash.finalize()).into_bytes()
    })
}

fn snapshot_by(root: &Path, file: impl Fn(&Path) -> Vec<u8>) -> Vec<(String, String, Vec<u8>)> {
    let mut out: Vec<_> = kpack_fs::walk(root)
        .map(|e| {
            let e = e.unwrap_or_else(|e| panic!("{e}"));
            let meta = std::fs::symlink_metadata(&e.path).unwrap();
            // The whole st_mode on Unix (file type included); Windows has only read-only.
            #[cfg(unix)]
            let mode = format!("{:o}", std::os::unix::fs::MetadataExt::mode(&meta));
            #[cfg(not(unix))]
            let mode = format!("{:o}", kpack_fs::mode(&meta));
            let content = if e.file_type.is_symlink() {
                let t = std::fs::read_link(&e.path).unwrap();
                t.display().to_string().into_bytes()
            } else if e.file_type.is_dir() {
                Vec::new()
            } else {
                file(&e.path)
            };
            (e.rel.display().to_string(), mode, content)
        })
        .collect();
    out.sort();
    out
}

/// Two copies of the tree `tree` under `dir`, as users make them: `cp -a` and a `tar` round
/// trip; what holds links (relative ones keep working) is copied with them as links.
pub fn copied_elsewhere(tree: &Path, dir: &Path) -> [PathBuf; 2] {
    let copied = dir.join("elsewhere/copied");
    std::fs::create_dir_all(copied.parent().unwrap()).unwrap();
    run_tool(
        "cp",
        &["-a", tree.to_str().unwrap(), copied.to_str().unwrap()],
    );
    let tarball = dir.join("tree.tar");
    let (tarball, tree) = (tarball.to_str().unwrap(), tree.to_str().unwrap());
    run_tool("tar", &["-cf", tarball, "-C", tree, "."]);
    let untarred = dir.join("untarred");
    std::fs::create_dir(&untarred).unwrap();
    run_tool("tar", &["-xf", tarball, "-C", untarred.to_str().unwrap()]);
    [copied, untarred]
}

/// Copies the tree `from` into `to` (created if missing, merged if not), keeping symbolic
/// links as links; file contents never pass through memory whole.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in kpack_fs::walk(from) {
        let e = e.unwrap_or_else(|e| panic!("{e}"));
        let dst = to.join(&e.rel);
        if e.file_type.is_symlink() {
            kpack_fs::symlink(&std::fs::read_link(&e.path).unwrap(), &dst).unwrap();
        } else if e.file_type.is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
        } else {
            std::fs::copy(&e.path, &dst)
                .unwrap_or_else(|err| panic!("copying {}: {err}", e.path.display()));
        }
    }
}

/// The paths that two packages (the artifact directories under `out`) would both install,
/// each with the packages: a file or symlink in two of them, or a directory in one and not
/// in another. Every manifest prefix installs at one root, so a path is taken below its
/// prefix; `artifact_manifest.txt` and `kpack_artifact.json` describe an artifact and are not
/// installed.
pub fn shared_installed_paths(out: &Path) -> Vec<(String, Vec<String>)> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, bool)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let is_dir = e.file_type().unwrap().is_dir();
            out.push((path.clone(), is_dir));
            if is_dir {
                walk(&e.path(), &path, out);
            }
        }
    }
    let mut owners: std::collections::BTreeMap<String, Vec<(String, bool)>> = Default::default();
    for e in std::fs::read_dir(out).unwrap() {
        let artifact = e.unwrap().path();
        let Ok(manifest) = std::fs::read_to_string(artifact.join("artifact_manifest.txt")) else {
            continue;
        };
        let name = artifact.file_name().unwrap().to_string_lossy().into_owned();
        let mut entries = Vec::new();
        for prefix in manifest.lines().map(str::trim).filter(|l| !l.is_empty()) {
            walk(&artifact.join(prefix), "", &mut entries);
        }
        for (path, is_dir) in entries {
            let o = owners.entry(path).or_default();
            if !o.contains(&(name.clone(), is_dir)) {
                o.push((name.clone(), is_dir));
            }
        }
    }
    owners
        .into_iter()
        .filter(|(_, o)| o.len() > 1 && o.iter().any(|(_, is_dir)| !is_dir))
        .map(|(path, o)| (path, o.into_iter().map(|(n, _)| n).collect()))
        .collect()
}

/// The hipcc shard fixtures (`fixtures/shards/build_shards.sh`).
pub const SHARDS: [&str; 3] = ["shard-a", "shard-b", "shard-c"];

/// Splits every shard fixture (batch mode, rocblas handler) into `out/<shard>/`; returns
/// `out`.
#[cfg(feature = "shards")]
pub fn split_shards(out: &Path) -> PathBuf {
    use kpack_artifact::handlers::Handler;
    use kpack_artifact::split::{SplitOptions, split_batch};
    let opts = SplitOptions {
        handlers: vec![Handler::Rocblas],
        ..SplitOptions::default()
    };
    for shard in SHARDS {
        split_batch(
            &fixture(&format!("shards/{shard}")),
            &out.join(shard),
            &opts,
            &|_, _| {},
        )
        .unwrap_or_else(|e| panic!("{shard}: {e}"));
    }
    out.to_owned()
}

/// The zstd frames of every CCOB of `lib`'s `.hip_fatbin`, concatenated into `out`; returns
/// their length (0 for a library of uncompressed bundles). What `zstd -d` of them takes is the floor of any command that must decode
/// the library's device code (the benchmarks' baseline).
///
/// Read bundle by bundle: on Linux a child's `ru_maxrss` starts from this process's peak
/// (the mm `exec` replaces), so this process must stay small for the children's figures to
/// be theirs.
#[cfg(feature = "transform")]
pub fn ccob_frames(lib: &Path, out: &Path) -> u64 {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(lib).unwrap();
    let map = kpack_pipeline::map_file(&file, lib).unwrap();
    let fat = kpack_elf::inspect(&map).unwrap();
    let section = fat.fatbin.unwrap();
    let mut frames = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let mut total = 0;
    let mut ccob = Vec::new();
    let compressed = fat
        .bundles
        .iter()
        .filter(|b| map[(section.offset + b.offset) as usize..].starts_with(b"CCOB"));
    for b in compressed {
        ccob.resize(b.len as usize, 0);
        file.read_exact_at(&mut ccob, section.offset + b.offset)
            .unwrap();
        let header_len = match u16::from_le_bytes([ccob[4], ccob[5]]) {
            2 => 24,
            3 => 32,
            v => panic!("CCOB v{v} in {}", lib.display()),
        };
        frames.write_all(&ccob[header_len..]).unwrap();
        total += (ccob.len() - header_len) as u64;
    }
    frames.flush().unwrap();
    total
}

/// `input` transformed into an install-like tree, `root/lib/<name>` plus `root/.kpack/`, with
/// the default group, kernel name and search path; returns the host binary and the summary.
#[cfg(feature = "transform")]
pub fn transform_into(
    input: &Path,
    root: &Path,
    compression: kpack_archive::Compression,
) -> (PathBuf, kpack_pipeline::transform::TransformSummary) {
    use kpack_pipeline::transform::{Outcome, TransformOptions, transform};
    let output = root.join("lib").join(input.file_name().unwrap());
    std::fs::create_dir_all(output.parent().unwrap()).unwrap();
    let opts = TransformOptions {
        output: output.clone(),
        kpack_dir: root.join(".kpack"),
        group: None,
        kernel_name: None,
        search_paths: Vec::new(),
        compression,
    };
    match transform(input, &opts).unwrap_or_else(|e| panic!("{}: {e}", input.display())) {
        Outcome::Transformed(summary) => (output, summary),
        other => panic!("{}: not transformed: {other:?}", input.display()),
    }
}

/// The original code objects of a fat binary by (wrapper index, target).
#[cfg(feature = "transform")]
pub fn originals(binary: &Path) -> std::collections::BTreeMap<(u64, String), Vec<u8>> {
    let bytes = std::fs::read(binary).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for obj in kpack_pipeline::source::device_code_objects(&bytes).unwrap() {
        let target = obj.bundle_id.target().unwrap().to_string();
        for &w in &obj.wrappers {
            out.insert((w as u64, target.clone()), obj.data.to_vec());
        }
    }
    out
}

#[cfg(feature = "transform")]
/// The code objects a kpacked binary's registrations lead to: for each one, the marker's
/// search paths (relative to the binary's directory, `@GFXARCH@` per target) name the
/// archive, and `kernel_name#reserved1` the entry. Returns them with their wrapper index.
pub fn fetch_through_markers(
    regs: &[Registration],
    binary: &Path,
    objects: &[kpack_pipeline::source::OwnedDeviceCode],
) -> Vec<(u64, String, Vec<u8>)> {
    let dir = binary.parent().unwrap();
    let mut fetched = Vec::new();
    for r in regs {
        let (meta, used) = kpack_archive::marker::MarkerMetadata::decode(&r.bytes).unwrap();
        assert_eq!(used, r.bytes.len());
        let key = format!("{}#{}", meta.kernel_name, r.reserved1);
        for obj in objects
            .iter()
            .filter(|o| o.wrappers.contains(&(r.reserved1 as usize)))
        {
            let target = obj.bundle_id.target().unwrap().to_string();
            let archive = meta
                .search_paths
                .iter()
                .map(|p| dir.join(p.replace("@GFXARCH@", &target)))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("no archive for {target} in {:?}", meta.search_paths));
            let archive = kpack_archive::Archive::open(&archive).unwrap();
            let data = archive.get(&key, &target).unwrap().into_owned();
            fetched.push((r.reserved1, target, data));
        }
    }
    fetched
}

/// Checks that every code object fetched through markers ([`fetch_through_markers`]) is byte
/// for byte the original's of the same wrapper and target (`what` names the binary).
#[cfg(feature = "transform")]
pub fn assert_fetched_are_the_originals(
    fetched: &[(u64, String, Vec<u8>)],
    objects: &[kpack_pipeline::source::OwnedDeviceCode],
    what: &str,
) {
    for (wrapper, target, data) in fetched {
        let want = objects
            .iter()
            .find(|o| {
                o.wrappers.contains(&(*wrapper as usize))
                    && o.bundle_id.target().unwrap().to_string() == *target
            })
            .unwrap_or_else(|| panic!("{what}: no original for wrapper {wrapper} {target}"));
        assert_eq!(
            data[..],
            want.data[..],
            "{what}: wrapper {wrapper} {target}"
        );
    }
}

/// The median of timing samples (benchmarks).
pub fn median(mut samples: Vec<std::time::Duration>) -> std::time::Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Peak resident set (VmHWM) of this process in KiB (benchmarks).
pub fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Resets VmHWM to the current RSS (writing 5 to clear_refs, Linux >= 4.0), so the next
/// [`peak_rss_kib`] is the peak of what follows (benchmarks).
pub fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// CPU time (user + system, every thread) this process has used so far, from
/// `/proc/self/stat` in clock ticks (benchmarks: unlike wall time, it does not count the
/// time spent waiting for a core on a loaded machine).
pub fn cpu_time() -> std::time::Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The command name (field 2) may hold spaces; the fields after it do not.
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<u64> = after_name
        .split(' ')
        .skip(11) // state .. cmajflt: utime is field 14 of the whole line
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    // Linux reports these in USER_HZ, which is 100 on every architecture it exports /proc on.
    std::time::Duration::from_secs_f64((fields[0] + fields[1]) as f64 / 100.0)
}

/// KiB to MiB.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// How long `f` takes, with its result (benchmarks).
pub fn time<R>(f: impl FnOnce() -> R) -> (std::time::Duration, R) {
    let start = std::time::Instant::now();
    let r = f();
    (start.elapsed(), r)
}

/// The wheel `from` zipped again at `to`, member by member in its order, each member's
/// content first passed through `edit(name, content)`; members named in `stored` are
/// written uncompressed, the others deflated. Tests make damaged wheels, or wheels whose
/// RECORD is written otherwise, from the fixture wheel with it.
pub fn rezip_wheel(
    from: &Path,
    to: &Path,
    stored: &[&str],
    mut edit: impl FnMut(&str, &mut Vec<u8>),
) {
    let mut src = zip::ZipArchive::new(std::fs::File::open(from).unwrap()).unwrap();
    let mut w = zip::ZipWriter::new(std::fs::File::create(to).unwrap());
    for i in 0..src.len() {
        let mut f = src.by_index(i).unwrap();
        let name = f.name().to_owned();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut data).unwrap();
        edit(&name, &mut data);
        let method = if stored.contains(&name.as_str()) {
            zip::CompressionMethod::Stored
        } else {
            zip::CompressionMethod::Deflated
        };
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .unix_permissions(f.unix_mode().unwrap_or(0o644) & 0o7777);
        w.start_file(name, options).unwrap();
        std::io::Write::write_all(&mut w, &data).unwrap();
    }
    w.finish().unwrap();
}

/// `record` (a wheel's RECORD) with every hash field emptied, as some wheels on PyPI list
/// their files (`pkg/LICENSE,,1073`), and the size field too where `no_size(path)`.
pub fn unhashed_record(record: &[u8], no_size: impl Fn(&str) -> bool) -> Vec<u8> {
    let text = std::str::from_utf8(record).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut fields = line.rsplitn(3, ',');
        let (size, _hash, path) = (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
        );
        let size = if no_size(path) { "" } else { size };
        out.push_str(&format!("{path},,{size}\n"));
    }
    out.into_bytes()
}

/// Flips one byte in the middle of the stored (compressed) data of `member` of the zip at
/// `wheel`, in place: the central directory, sizes and CRC-32 stay as they were.
pub fn flip_member_byte(wheel: &Path, member: &str) {
    let (start, len) = {
        let mut z = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
        let f = z.by_name(member).unwrap();
        (f.data_start().unwrap(), f.compressed_size())
    };
    let mut bytes = std::fs::read(wheel).unwrap();
    bytes[(start + len / 2) as usize] ^= 0x20;
    std::fs::write(wheel, bytes).unwrap();
}
