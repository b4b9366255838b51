//! The environment a [`crate::Cache`] reads once, when it is created (spec §4.3).

use std::ffi::OsString;
use std::path::PathBuf;

/// `ROCM_KPACK_PATH`: archive paths that replace every other search path.
pub const ENV_PATH: &str = "ROCM_KPACK_PATH";
/// `ROCM_KPACK_PATH_PREFIX`: archive paths searched before the embedded ones.
pub const ENV_PATH_PREFIX: &str = "ROCM_KPACK_PATH_PREFIX";
/// `ROCM_KPACK_DISABLE`: when truthy, every load fails with `NOT_IMPLEMENTED`.
pub const ENV_DISABLE: &str = "ROCM_KPACK_DISABLE";
/// `ROCM_KPACK_DEBUG`: when truthy, the loader logs `kpack: ...` lines to stderr.
pub const ENV_DEBUG: &str = "ROCM_KPACK_DEBUG";

/// How a cache searches. `Config::default()` is an empty environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// `ROCM_KPACK_PATH` entries. When non-empty, the only paths searched. `@GFXARCH@` is
    /// expanded; relative paths are relative to the working directory.
    pub override_paths: Vec<PathBuf>,
    /// `ROCM_KPACK_PATH_PREFIX` entries, searched before the embedded paths (ignored when
    /// `override_paths` is non-empty). `@GFXARCH@` is expanded.
    pub prefix_paths: Vec<PathBuf>,
    /// [`ENV_DISABLE`] is truthy: every load fails with `NOT_IMPLEMENTED`.
    pub disabled: bool,
    /// [`ENV_DEBUG`] is truthy: the loader logs `kpack: ...` lines to stderr.
    pub debug: bool,
    /// `@GFXARCH@` names archives with a target's `:` spelled `@`, as kpack names archives
    /// for Windows (`kpack_target::file_name_spelling`). Always so on Windows, where the `:`
    /// spelling is never tried; elsewhere only when a tool reading a tree meant for Windows
    /// sets it (`kpack restore`, `kpack inspect --resolve`).
    pub windows_archive_names: bool,
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Config {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// Reads the variables through `lookup` (the environment, or a test's map). Path lists
    /// split on the platform separator (`:` on Unix, `;` on Windows, where `:` follows drive
    /// letters; `std::env::split_paths`) and drop empty parts; a flag is on when
    /// set, non-empty and not starting with `0` (so `false` turns it on, as in the reference).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Config {
        let paths = |name| {
            lookup(name)
                .map(|v| {
                    std::env::split_paths(&v)
                        .filter(|p| !p.as_os_str().is_empty())
                        .collect()
                })
                .unwrap_or_default()
        };
        let flag = |name| {
            lookup(name).is_some_and(|v| v.as_encoded_bytes().first().is_some_and(|&b| b != b'0'))
        };
        Config {
            override_paths: paths(ENV_PATH),
            prefix_paths: paths(ENV_PATH_PREFIX),
            disabled: flag(ENV_DISABLE),
            debug: flag(ENV_DEBUG),
            windows_archive_names: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Config {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn flags_follow_the_reference_truthiness_rule() {
        for (value, on) in [
            ("1", true),
            ("false", true),
            ("yes", true),
            ("0", false),
            ("", false),
            ("00", false),
        ] {
            let c = config(&[(ENV_DISABLE, value), (ENV_DEBUG, value)]);
            assert_eq!((c.disabled, c.debug), (on, on), "{value:?}");
        }
        assert_eq!(config(&[]), Config::default());
    }

    #[cfg(unix)]
    #[test]
    fn path_lists_split_on_colons_and_drop_empty_components() {
        let c = config(&[
            (ENV_PATH, ":/a/x.kpack::rel/y.kpack:"),
            (ENV_PATH_PREFIX, "/p/@GFXARCH@.kpack"),
        ]);
        assert_eq!(
            c.override_paths,
            [PathBuf::from("/a/x.kpack"), PathBuf::from("rel/y.kpack")]
        );
        assert_eq!(c.prefix_paths, [PathBuf::from("/p/@GFXARCH@.kpack")]);
        assert!(config(&[(ENV_PATH, ":::")]).override_paths.is_empty());
    }

    #[cfg(windows)]
    #[test]
    fn path_lists_split_on_semicolons_not_drive_colons_and_drop_empty_components() {
        let c = config(&[
            (
                ENV_PATH,
                r";C:\a\x.kpack;;rel/y.kpack;D:/b/@GFXARCH@.kpack;",
            ),
            (ENV_PATH_PREFIX, r"\\server\share\p\@GFXARCH@.kpack"),
        ]);
        assert_eq!(
            c.override_paths,
            [
                PathBuf::from(r"C:\a\x.kpack"),
                PathBuf::from("rel/y.kpack"),
                PathBuf::from("D:/b/@GFXARCH@.kpack")
            ]
        );
        assert_eq!(
            c.prefix_paths,
            [PathBuf::from(r"\\server\share\p\@GFXARCH@.kpack")]
        );
        assert!(config(&[(ENV_PATH, ";;;")]).override_paths.is_empty());
    }
}
