//! Helpers shared by the pipeline's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

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
