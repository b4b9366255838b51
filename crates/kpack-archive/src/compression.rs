//! Compression as users name it (`--compression none|zstd|unified`, `--level N`; the Python
//! API's `compression=` and `level=`): one constructor, so the command line and Python pick
//! the same scheme and default level for the same words.

use crate::{Compression, DEFAULT_UNIFIED_LEVEL, DEFAULT_ZSTD_LEVEL};

/// The scheme names [`Compression::from_args`] accepts, as users spell them.
pub const COMPRESSION_NAMES: [&str; 3] = ["none", "zstd", "unified"];

/// Why compression options were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompressionArgsError {
    /// The scheme is not one of [`COMPRESSION_NAMES`].
    #[error("unknown compression '{0}'; expected none, zstd or unified")]
    UnknownScheme(String),
    /// The level is outside zstd's 1 to 22.
    #[error("zstd level {0} is not in 1..=22")]
    Level(i32),
}

impl Compression {
    /// The compression `scheme` (one of [`COMPRESSION_NAMES`]) names, at `level`, or at the
    /// scheme's default level ([`DEFAULT_ZSTD_LEVEL`], [`DEFAULT_UNIFIED_LEVEL`]) when `None`.
    /// A level is checked whatever the scheme; `none` has no use for it.
    pub fn from_args(
        scheme: &str,
        level: Option<i32>,
    ) -> Result<Compression, CompressionArgsError> {
        if let Some(level) = level.filter(|l| !(1..=22).contains(l)) {
            return Err(CompressionArgsError::Level(level));
        }
        match scheme {
            "none" => Ok(Compression::None),
            "zstd" => Ok(Compression::Zstd {
                level: level.unwrap_or(DEFAULT_ZSTD_LEVEL),
            }),
            "unified" => Ok(Compression::Unified {
                level: level.unwrap_or(DEFAULT_UNIFIED_LEVEL),
            }),
            other => Err(CompressionArgsError::UnknownScheme(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scheme_takes_its_own_default_level() {
        assert_eq!(Compression::from_args("none", None), Ok(Compression::None));
        assert_eq!(
            Compression::from_args("zstd", None),
            Ok(Compression::Zstd { level: 3 })
        );
        assert_eq!(
            Compression::from_args("unified", None),
            Ok(Compression::Unified { level: 19 })
        );
        assert_eq!(
            Compression::from_args("unified", Some(5)),
            Ok(Compression::Unified { level: 5 })
        );
    }

    #[test]
    fn an_unknown_scheme_or_a_level_outside_zstds_range_is_refused() {
        assert_eq!(
            Compression::from_args("zstd-per-kernel", None),
            Err(CompressionArgsError::UnknownScheme(
                "zstd-per-kernel".into()
            ))
        );
        for level in [0, 23] {
            for scheme in COMPRESSION_NAMES {
                assert_eq!(
                    Compression::from_args(scheme, Some(level)),
                    Err(CompressionArgsError::Level(level))
                );
            }
        }
    }
}
