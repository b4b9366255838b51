//! The real-world corpus `scripts/setup.sh` fetches: its directory and the files and wheels
//! of it that several tests use.

use std::path::PathBuf;

/// The real-world corpus directory, `$KPACK_CORPUS` or `/var/tmp/kpack-corpus`
/// (`scripts/setup.sh` fills it).
pub fn corpus() -> PathBuf {
    std::env::var_os("KPACK_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/kpack-corpus"))
}

/// A file of the corpus, which must exist.
pub(crate) fn corpus_file(rel: &str) -> PathBuf {
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
