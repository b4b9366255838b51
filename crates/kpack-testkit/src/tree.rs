//! Trees compared byte for byte, copied, and copied elsewhere as users copy them.

use std::path::{Path, PathBuf};

use crate::run_tool;

/// Hex SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(data))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
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

/// The names of `dir`'s entries, sorted (lossy where not Unicode): what a test asserts was
/// written, and that nothing else was.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
