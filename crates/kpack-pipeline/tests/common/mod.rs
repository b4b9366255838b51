//! Helpers shared by the pipeline's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository's `fixtures/` directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// A fixture by its path under `fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    fixtures().join(rel)
}

/// Runs an external witness tool, which the test suite's set-up installs; its absence is a
/// failure, not a skip, so a green run always means the witness was consulted.
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

/// Hex SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The real-world corpus directory (`scripts/setup.sh` fills it).
pub fn corpus() -> PathBuf {
    std::env::var_os("KPACK_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/kpack-corpus"))
}

/// bookworm's librocsparse.so.0.1 from the corpus.
pub fn librocsparse() -> PathBuf {
    let path =
        corpus().join("x/librocsparse0_5.3.0+dfsg-2/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1");
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup.sh",
        path.display()
    );
    path
}

/// The stand-in runtime and the loader driver, built once.
pub fn standin() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/standin");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kpack-standin");
        std::fs::create_dir_all(&dir).unwrap();
        let s = |p: &Path| p.display().to_string();
        run_tool(
            "gcc",
            &[
                "-shared",
                "-fPIC",
                "-O1",
                "-Wl,-soname,libamdhip64.so.5",
                &format!("-Wl,--version-script={}", s(&src.join("libamdhip64.map"))),
                &s(&src.join("libamdhip64.c")),
                "-o",
                &s(&dir.join("libamdhip64.so.5")),
            ],
        );
        run_tool(
            "gcc",
            &[&s(&src.join("load.c")), "-o", &s(&dir.join("load")), "-ldl"],
        );
        dir
    })
}

/// One `__hipRegisterFatBinary` call as the stand-in logged it.
#[derive(Debug, PartialEq, Eq)]
pub struct Registration {
    pub magic: String,
    pub version: u32,
    pub reserved1: u64,
    pub bytes: Vec<u8>,
}

/// Loads `binary` (runs it if executable, else `dlopen`s it) under the stand-in.
pub fn load(binary: &Path, log: &Path) -> Vec<Registration> {
    let dir = standin();
    let _ = std::fs::remove_file(log);
    let name = binary.file_name().unwrap().to_string_lossy().into_owned();
    let exe = !name.contains(".so");
    let mut cmd = if exe {
        Command::new(binary)
    } else {
        let mut c = Command::new(dir.join("load"));
        c.arg(binary);
        c
    };
    let out = cmd
        .env("LD_LIBRARY_PATH", dir)
        .env("KPACK_STANDIN_LOG", log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} failed to load: {}{}",
        binary.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let hex = f[3];
            Registration {
                magic: f[0].to_owned(),
                version: f[1].parse().unwrap(),
                reserved1: f[2].parse().unwrap(),
                bytes: (0..hex.len() / 2)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                    .collect(),
            }
        })
        .collect()
}

/// The hipcc shard fixtures (`fixtures/shards/build_shards.sh`).
pub const SHARDS: &[&str] = &["shard-a", "shard-b", "shard-c"];

/// Splits every shard fixture (batch mode, rocblas handler) into `out/<shard>/`.
pub fn split_shards(out: &Path) -> PathBuf {
    use kpack_pipeline::artifact::handlers::Handler;
    use kpack_pipeline::artifact::split::{SplitOptions, split_batch};
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

/// Every entry below `root` with its content (file bytes, link text, or nothing for a
/// directory) and permissions, for byte-for-byte tree comparisons.
pub fn snapshot(root: &Path) -> Vec<(String, String, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let mode = format!("{:o}", meta.permissions().mode());
            if meta.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.push((rel, mode, t.display().to_string().into_bytes()));
            } else if meta.is_dir() {
                out.push((rel, mode, Vec::new()));
                stack.push(p);
            } else {
                out.push((rel, mode, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}
