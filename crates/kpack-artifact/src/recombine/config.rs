//! The packaging configuration: the architecture groups and the validation flags, parsed
//! with every field named in its errors.

use std::path::Path;

use serde::Deserialize;

use crate::ArtifactError;
use kpack_package::handlers::parse_target;

/// One architecture group of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArchGroup {
    /// The group name (`C_<name>` artifacts).
    pub name: String,
    /// Its human-readable name.
    pub display_name: String,
    /// Processors (`gfx90a`), in configuration order.
    pub architectures: Vec<String>,
}

/// The `validation` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Validation {
    /// Two shards providing device code for one architecture is an error.
    pub error_on_duplicate_device_code: bool,
    /// Every shard's generic artifact must equal the primary's.
    pub verify_generic_artifacts_match: bool,
    /// A group architecture no shard provides is an error.
    pub error_on_missing_architecture: bool,
}

impl Default for Validation {
    fn default() -> Self {
        Validation {
            error_on_duplicate_device_code: true,
            verify_generic_artifacts_match: false,
            error_on_missing_architecture: false,
        }
    }
}

/// `packaging.json` (spec §5.4).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PackagingConfig {
    /// The shard whose generic artifacts are used.
    pub primary_shard: String,
    /// The groups to package, in configuration order.
    pub architecture_groups: Vec<ArchGroup>,
    /// What to check.
    pub validation: Validation,
}

/// Why a packaging configuration was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Not JSON, an unknown or missing field, a value of the wrong type, a group defined
    /// twice; `path` is where (`validation.error_on_missing_architecture`).
    #[error("{path}: {source}")]
    Schema {
        /// Where in the file.
        path: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// `primary_shard` is not a directory name.
    #[error("primary_shard: {}: expected a shard directory name (non-empty, no '/')", written(.0))]
    PrimaryShard(String),
    /// No architecture group.
    #[error("architecture_groups: expected at least one group")]
    NoGroups,
    /// A group name that cannot name a package.
    #[error(
        "architecture_groups.{}: invalid group name (expected ASCII letters, digits, '-' or '.', \
         not `generic`: it names the package <component>_<group>)",
        written(.0)
    )]
    GroupName(String),
    /// A group without architectures.
    #[error("architecture_groups.{0}.architectures: expected at least one architecture")]
    EmptyGroup(String),
    /// An architecture that is not a GPU processor name.
    #[error(
        "architecture_groups.{group}.architectures: expected GPU processor names (gfx90a, \
         gfx1100, gfx11-generic), got {}", written(.architecture)
    )]
    Architecture {
        /// The group.
        group: String,
        /// The architecture as written.
        architecture: String,
    },
    /// An architecture listed twice in one group.
    #[error("architecture_groups.{group}.architectures: {architecture} listed twice")]
    RepeatedArchitecture {
        /// The group.
        group: String,
        /// The architecture.
        architecture: String,
    },
}

/// A name from the file as a message shows it: as written, or `(empty)`, so that an empty
/// name still shows where it is.
fn written(name: &str) -> &str {
    if name.is_empty() { "(empty)" } else { name }
}

/// The file as written; [`PackagingConfig::parse`] checks what the types cannot.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    primary_shard: String,
    architecture_groups: GroupsFile,
    #[serde(default)]
    validation: Validation,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupFile {
    display_name: Option<String>,
    architectures: Vec<String>,
}

/// The groups in file order (the packages are written in it); a group named twice is an
/// error where a map would keep the last silently.
struct GroupsFile(Vec<(String, GroupFile)>);

impl<'de> Deserialize<'de> for GroupsFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = GroupsFile;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of groups")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<GroupsFile, A::Error> {
                let mut groups: Vec<(String, GroupFile)> = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    if groups.iter().any(|(n, _)| *n == name) {
                        return Err(serde::de::Error::custom(format!(
                            "group {} defined twice",
                            written(&name)
                        )));
                    }
                    let group = map.next_value()?;
                    groups.push((name, group));
                }
                Ok(GroupsFile(groups))
            }
        }
        d.deserialize_map(Visitor)
    }
}

impl PackagingConfig {
    /// Reads and checks a configuration file.
    pub fn load(path: &Path) -> Result<PackagingConfig, ArtifactError> {
        let text = std::fs::read_to_string(path).map_err(ArtifactError::io(path))?;
        Self::parse(&text).map_err(|source| ArtifactError::Config {
            path: path.to_owned(),
            source,
        })
    }

    /// Parses and checks a configuration; the error says which key is wrong and what was
    /// expected.
    pub fn parse(text: &str) -> Result<PackagingConfig, ConfigError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let file: ConfigFile =
            serde_path_to_error::deserialize(&mut de).map_err(|e| ConfigError::Schema {
                path: e.path().to_string(),
                source: e.into_inner(),
            })?;
        de.end().map_err(|source| ConfigError::Schema {
            path: ".".to_owned(),
            source,
        })?;
        if file.primary_shard.is_empty() || file.primary_shard.contains('/') {
            return Err(ConfigError::PrimaryShard(file.primary_shard));
        }
        if file.architecture_groups.0.is_empty() {
            return Err(ConfigError::NoGroups);
        }
        let mut architecture_groups = Vec::new();
        for (name, g) in file.architecture_groups.0 {
            let valid_name = !name.is_empty()
                && name != "generic"
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            if !valid_name {
                return Err(ConfigError::GroupName(name));
            }
            if g.architectures.is_empty() {
                return Err(ConfigError::EmptyGroup(name));
            }
            let mut architectures: Vec<String> = Vec::new();
            for arch in g.architectures {
                if !parse_target(&arch).is_some_and(|t| t.features().is_empty()) {
                    return Err(ConfigError::Architecture {
                        group: name,
                        architecture: arch,
                    });
                }
                if architectures.contains(&arch) {
                    return Err(ConfigError::RepeatedArchitecture {
                        group: name,
                        architecture: arch,
                    });
                }
                architectures.push(arch);
            }
            architecture_groups.push(ArchGroup {
                display_name: g.display_name.unwrap_or_else(|| name.clone()),
                name,
                architectures,
            });
        }
        Ok(PackagingConfig {
            primary_shard: file.primary_shard,
            architecture_groups,
            validation: file.validation,
        })
    }
}
