//! Build artifacts: the paths two of them would both install, and the shard fixtures split.

use std::path::Path;
#[cfg(feature = "shards")]
use std::path::PathBuf;

#[cfg(feature = "shards")]
use crate::fixture;

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
    use kpack_artifact::split::{SplitOptions, split_batch};
    use kpack_package::handlers::Handler;
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
