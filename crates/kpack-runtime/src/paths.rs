//! Search-path resolution and `@GFXARCH@` expansion (spec §4.4).

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// The placeholder a search path carries for the target name.
pub const GFXARCH: &str = "@GFXARCH@";

/// Resolves an embedded search path against the binary's directory: absolute paths as they
/// are, relative ones joined to `binary_dir` and made weakly canonical (see
/// [`weakly_canonical`]). This touches the file system: callers cache it.
pub fn resolve(binary_dir: &Path, pattern: &str) -> PathBuf {
    let pattern = Path::new(pattern);
    if pattern.is_absolute() {
        pattern.to_owned()
    } else {
        weakly_canonical(&binary_dir.join(pattern))
    }
}

/// C++ `std::filesystem::weakly_canonical`: the longest prefix of `path` that exists,
/// canonicalised (symlinks, `.` and `..` resolved, made absolute), followed by the rest with
/// `.` and `..` resolved lexically. A path none of which exists is only normalised lexically.
pub fn weakly_canonical(path: &Path) -> PathBuf {
    let components: Vec<Component<'_>> = path.components().collect();
    for split in (1..=components.len()).rev() {
        let head: PathBuf = components[..split].iter().collect();
        if let Ok(mut resolved) = std::fs::canonicalize(&head) {
            push_lexically(&mut resolved, &components[split..]);
            return resolved;
        }
    }
    let mut out = PathBuf::new();
    push_lexically(&mut out, &components);
    out
}

fn push_lexically(out: &mut PathBuf, components: &[Component<'_>]) {
    for c in components {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
}

/// The files that `pattern` can name: itself when it has no `@GFXARCH@`, else the regular
/// files of its directory whose names match with any text in place of the placeholder
/// (sorted). Only a placeholder in the file name is matched; one in a directory name
/// yields nothing. What the runtime would try for an unknown target: `kpack restore` and
/// `kpack inspect --resolve` list the targets a binary's archives hold this way.
pub fn files_matching(pattern: &Path) -> Vec<PathBuf> {
    if !has_placeholder(pattern) {
        return if pattern.is_file() {
            vec![pattern.to_owned()]
        } else {
            Vec::new()
        };
    }
    let (Some(dir), Some(name)) = (pattern.parent(), pattern.file_name()) else {
        return Vec::new();
    };
    let name = name.as_encoded_bytes();
    if has_placeholder(dir) {
        return Vec::new();
    }
    let Some(at) = find(name, GFXARCH.as_bytes()) else {
        return Vec::new();
    };
    let (prefix, suffix) = (&name[..at], &name[at + GFXARCH.len()..]);
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name();
            let n = n.as_encoded_bytes();
            n.len() > prefix.len() + suffix.len() && n.starts_with(prefix) && n.ends_with(suffix)
        })
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

/// Whether `path` holds `@GFXARCH@`.
pub fn has_placeholder(path: &Path) -> bool {
    find(path.as_os_str().as_encoded_bytes(), GFXARCH.as_bytes()).is_some()
}

/// `path` with every `@GFXARCH@` replaced by `target`. (The reference replaces only the
/// first; writers emit one, and a second left literal could never name a file.) The rest of
/// the path is kept exactly, whether or not it is valid Unicode.
pub fn expand(path: &Path, target: &str) -> PathBuf {
    replace_in_path(path, GFXARCH, target)
}

fn find<T: PartialEq>(haystack: &[T], needle: &[T]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `haystack` with every `needle` replaced by `with`: over bytes on Unix, over UTF-16 units
/// on Windows (a path's own code units, so that nothing else in it changes).
fn replace_all<T: PartialEq + Copy>(mut haystack: &[T], needle: &[T], with: &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(haystack.len() + with.len());
    while let Some(at) = find(haystack, needle) {
        out.extend_from_slice(&haystack[..at]);
        out.extend_from_slice(with);
        haystack = &haystack[at + needle.len()..];
    }
    out.extend_from_slice(haystack);
    out
}

#[cfg(unix)]
fn replace_in_path(path: &Path, from: &str, to: &str) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let bytes = replace_all(path.as_os_str().as_bytes(), from.as_bytes(), to.as_bytes());
    PathBuf::from(std::ffi::OsString::from_vec(bytes))
}

#[cfg(windows)]
fn replace_in_path(path: &Path, from: &str, to: &str) -> PathBuf {
    use std::os::windows::ffi::{OsStrExt, OsStringExt};
    let units: Vec<u16> = path.as_os_str().encode_wide().collect();
    let (from, to): (Vec<u16>, Vec<u16>) =
        (from.encode_utf16().collect(), to.encode_utf16().collect());
    PathBuf::from(std::ffi::OsString::from_wide(&replace_all(
        &units, &from, &to,
    )))
}

/// The directory a binary's relative search paths start from (empty: the working directory).
pub fn binary_dir(binary_path: &OsStr) -> PathBuf {
    Path::new(binary_path)
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_expanded() {
        assert_eq!(
            expand(Path::new("/o/.kpack/blas_@GFXARCH@.kpack"), "gfx942:xnack+"),
            Path::new("/o/.kpack/blas_gfx942:xnack+.kpack")
        );
        assert_eq!(
            expand(Path::new("@GFXARCH@/x_@GFXARCH@"), "gfx90a"),
            Path::new("gfx90a/x_gfx90a")
        );
        assert_eq!(
            expand(Path::new("/plain.kpack"), "gfx90a"),
            Path::new("/plain.kpack")
        );
        assert!(has_placeholder(Path::new("a/@GFXARCH@.kpack")));
        assert!(!has_placeholder(Path::new("a/@GFXARCH.kpack")));
    }

    #[test]
    fn relative_paths_resolve_against_the_binary_directory_through_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir_all(real.join("lib")).unwrap();
        std::fs::create_dir_all(real.join(".kpack")).unwrap();
        // The binary's directory through a link to `real`. On Windows `real` itself: wine 8
        // (where the Windows tests run) reports CreateSymbolicLinkW done but makes no link.
        #[cfg(unix)]
        let lib = {
            std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
            tmp.path().join("link/lib")
        };
        #[cfg(windows)]
        let lib = real.join("lib");
        let canonical_real = std::fs::canonicalize(&real).unwrap();
        let resolved = resolve(&lib, "../.kpack/blas_@GFXARCH@.kpack");
        assert_eq!(resolved, canonical_real.join(".kpack/blas_@GFXARCH@.kpack"));
        // The part that does not exist is normalised lexically.
        let resolved = resolve(&lib, "../missing/./x/../y.kpack");
        assert_eq!(resolved, canonical_real.join("missing/y.kpack"));
        let absolute = if cfg!(windows) {
            r"C:\abs\x.kpack"
        } else {
            "/abs/x.kpack"
        };
        assert_eq!(resolve(Path::new("/any"), absolute), Path::new(absolute));
    }

    #[test]
    fn expansion_keeps_the_rest_of_a_path_that_is_not_unicode() {
        #[cfg(unix)]
        let odd =
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"d\xff").to_owned();
        #[cfg(windows)]
        let odd =
            <std::ffi::OsString as std::os::windows::ffi::OsStringExt>::from_wide(&[0x64, 0xD800]);
        let dir = PathBuf::from(odd);
        assert!(dir.to_str().is_none());
        assert_eq!(
            expand(&dir.join("x_@GFXARCH@.kpack"), "gfx1100"),
            dir.join("x_gfx1100.kpack")
        );
    }

    #[test]
    fn a_path_that_does_not_exist_at_all_is_normalised_lexically() {
        assert_eq!(
            weakly_canonical(Path::new("no-such-dir-kpack/./a/../b.kpack")),
            Path::new("no-such-dir-kpack/b.kpack")
        );
        assert_eq!(binary_dir(OsStr::new("libx.so")), Path::new(""));
        assert_eq!(
            binary_dir(OsStr::new("/usr/lib/libx.so")),
            Path::new("/usr/lib")
        );
    }
}
