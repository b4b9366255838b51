//! The packaging hierarchy of device wheels (reference spec §3.6): target → sub-family →
//! family, and the bundle key every architecture found in a wheel belongs to.
//!
//! Unlike the reference, which aborts on any key it does not know (§5.2, TheRock#5858):
//! every feature (`:xnack±`, `:sramecc±`) folds into its processor (§3.5), a processor
//! outside the table is still a target wheel (with no parents), and a generic ISA
//! (`gfx11-generic`, `gfx9-4-generic`) goes to the family or sub-family it runs on.
//!
//! The portable SPIR-V target (`amdgcnspirv`) is a key of its own, outside the hierarchy
//! ([`Level::Portable`]): its wheel serves every processor of the hierarchy (the GPUs
//! TheRock builds device wheels for, gfx9 to gfx12.5), and a GPU's extra falls back to it
//! when no wheel of the GPU's chain exists.

use kpack_target::{TargetError, TargetId};

/// The level of a bundle key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// One processor (`gfx1100`): the most specific wheel, holding that target's archives.
    Target,
    /// A group of processors that share code (`gfx110x`), between a target and its family.
    SubFamily,
    /// A whole generation (`gfx11`): the widest wheel, the last one a target's chain names.
    Family,
    /// The portable SPIR-V (`amdgcnspirv`): no chain; the fallback of every GPU of the
    /// hierarchy for which no wheel of its chain exists.
    Portable,
}

/// One sub-family: its key, the family it belongs to, its display name and its members.
struct SubFamily {
    key: &'static str,
    family: &'static str,
    display: &'static str,
    members: &'static [&'static str],
}

const SUB_FAMILIES: &[SubFamily] = &[
    SubFamily {
        key: "gfx9_0",
        family: "gfx9",
        display: "Vega",
        members: &[
            "gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c",
        ],
    },
    SubFamily {
        key: "gfx9_4",
        family: "gfx9",
        display: "MI300",
        members: &["gfx942"],
    },
    SubFamily {
        key: "gfx9_5",
        family: "gfx9",
        display: "MI350",
        members: &["gfx950"],
    },
    SubFamily {
        key: "gfx10_1",
        family: "gfx10",
        display: "RDNA1",
        members: &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    },
    SubFamily {
        key: "gfx10_3",
        family: "gfx10",
        display: "RDNA2",
        members: &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    },
    SubFamily {
        key: "gfx110x",
        family: "gfx11",
        display: "RDNA3",
        members: &["gfx1100", "gfx1101", "gfx1102", "gfx1103"],
    },
    SubFamily {
        key: "gfx115x",
        family: "gfx11",
        display: "RDNA3.5",
        members: &["gfx1150", "gfx1151", "gfx1152", "gfx1153"],
    },
    SubFamily {
        key: "gfx12_0",
        family: "gfx12",
        display: "RDNA4",
        members: &["gfx1200", "gfx1201"],
    },
    SubFamily {
        key: "gfx12_5",
        family: "gfx12",
        display: "GFX12.5",
        members: &["gfx1250", "gfx1251"],
    },
];

/// Families and their display names.
const FAMILIES: &[(&str, &str)] = &[
    ("gfx9", "GFX9"),
    ("gfx10", "GFX10"),
    ("gfx11", "RDNA3"),
    ("gfx12", "RDNA4"),
];

/// Other spellings of sub-family and family keys: the reference's aliases (`gfx11_0`,
/// `gfx11_5`) and the `x`-wildcard directory names of AOTriton (`gfx11xx`, `gfx120x`).
const ALIASES: &[(&str, &str)] = &[
    ("gfx11_0", "gfx110x"),
    ("gfx11_5", "gfx115x"),
    ("gfx90x", "gfx9_0"),
    ("gfx94x", "gfx9_4"),
    ("gfx95x", "gfx9_5"),
    ("gfx101x", "gfx10_1"),
    ("gfx103x", "gfx10_3"),
    ("gfx120x", "gfx12_0"),
    ("gfx125x", "gfx12_5"),
    ("gfx9xx", "gfx9"),
    ("gfx10xx", "gfx10"),
    ("gfx11xx", "gfx11"),
    ("gfx12xx", "gfx12"),
];

/// Why a target or name has no bundle key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BundleKeyError {
    /// A generic processor (`gfx13-generic`) whose groups name no family of the hierarchy.
    #[error("generic processor {processor} covers no known family")]
    UnknownFamily {
        /// The processor, as the target spells it.
        processor: String,
    },
    /// The name is neither a family or sub-family key nor a GPU target.
    #[error("{name:?} is not a GPU target: {source}")]
    NotATarget {
        /// The name given.
        name: String,
        /// Why it does not parse as a target.
        source: TargetError,
    },
}

/// A bundle key: the unit one device wheel holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct BundleKey(String);

impl BundleKey {
    /// The key as the reference spells it (`gfx1100`, `gfx110x`, `gfx12_0`, `gfx11`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key in a distribution name (`_` → `-`: `gfx12-0`).
    pub fn dist_suffix(&self) -> String {
        self.0.replace('_', "-")
    }

    /// Whether this key names a family, a sub-family or one target (whatever is in neither
    /// hierarchy table is a target).
    pub fn level(&self) -> Level {
        if self.0 == kpack_target::SPIRV {
            Level::Portable
        } else if FAMILIES.iter().any(|(f, _)| *f == self.0) {
            Level::Family
        } else if SUB_FAMILIES.iter().any(|s| s.key == self.0) {
            Level::SubFamily
        } else {
            Level::Target
        }
    }

    /// The name in a device wheel's `Summary` (the target itself for targets).
    pub fn display_name(&self) -> &str {
        if self.level() == Level::Portable {
            return "portable SPIR-V";
        }
        if let Some((_, d)) = FAMILIES.iter().find(|(f, _)| *f == self.0) {
            return d;
        }
        match SUB_FAMILIES.iter().find(|s| s.key == self.0) {
            Some(s) => s.display,
            None => &self.0,
        }
    }

    /// The host wheel's extra that installs this key's wheels (`device-gfx1100`).
    pub fn extra(&self) -> String {
        format!("device-{self}")
    }

    /// This key and the keys above it, nearest first (`gfx1100` → `gfx110x` → `gfx11`).
    pub fn chain(&self) -> Vec<BundleKey> {
        let mut chain = vec![self.clone()];
        match self.level() {
            Level::Target => {
                if let Some(s) = SUB_FAMILIES.iter().find(|s| s.members.contains(&&*self.0)) {
                    chain.push(BundleKey(s.key.to_owned()));
                    chain.push(BundleKey(s.family.to_owned()));
                }
            }
            Level::SubFamily => {
                if let Some(s) = SUB_FAMILIES.iter().find(|s| s.key == self.0) {
                    chain.push(BundleKey(s.family.to_owned()));
                }
            }
            Level::Family | Level::Portable => {}
        }
        chain
    }

    /// The portable SPIR-V key a target of the hierarchy falls back to when no wheel of its
    /// chain exists; `None` for other keys.
    pub fn portable_fallback(&self) -> Option<BundleKey> {
        (self.level() == Level::Target
            && SUB_FAMILIES.iter().any(|s| s.members.contains(&&*self.0)))
        .then(|| BundleKey(kpack_target::SPIRV.to_owned()))
    }

    /// The targets a device wheel of this key serves when it holds code or databases for
    /// `architectures` (full target ids, or database architectures such as `gfx1100` or a
    /// sub-family's `gfx110x`): the processors each runs on (a generic processor's members,
    /// [`TargetId::runs_on`]; a family spelling's members in the hierarchy) whose chain names
    /// this key, in first-seen order. The portable key's wheel serves every processor of the
    /// hierarchy, in table order, when it holds SPIR-V.
    pub fn served_targets<'a>(
        &self,
        architectures: impl IntoIterator<Item = &'a str>,
    ) -> Vec<BundleKey> {
        let mut served: Vec<BundleKey> = Vec::new();
        if self.level() == Level::Portable {
            if architectures.into_iter().any(|a| a == kpack_target::SPIRV) {
                served.extend(
                    SUB_FAMILIES
                        .iter()
                        .flat_map(|s| s.members.iter().map(|m| BundleKey((*m).to_owned()))),
                );
            }
            return served;
        }
        for arch in architectures {
            let processors: Vec<String> = match BundleKey::of_family(arch) {
                Some(family) => family.members(),
                None => TargetId::parse(arch).map_or(Vec::new(), |t| {
                    t.runs_on().into_iter().map(str::to_owned).collect()
                }),
            };
            for p in processors {
                let target = BundleKey(p);
                if target.chain().contains(self) && !served.contains(&target) {
                    served.push(target);
                }
            }
        }
        served
    }

    /// The processors of a sub-family, or of a family's sub-families; a target's own.
    fn members(&self) -> Vec<String> {
        match self.level() {
            Level::Target => vec![self.0.clone()],
            Level::Portable => Vec::new(),
            Level::SubFamily | Level::Family => SUB_FAMILIES
                .iter()
                .filter(|s| s.key == self.0 || s.family == self.0)
                .flat_map(|s| s.members.iter().map(|m| (*m).to_owned()))
                .collect(),
        }
    }

    /// The bundle key of a GPU target (features folded into the processor; a generic
    /// processor to the sub-family or family it covers).
    pub fn of_target(target: &TargetId) -> Result<BundleKey, BundleKeyError> {
        let processor = target.processor();
        if let Some(groups) = processor.strip_suffix("-generic") {
            // `gfx9-4-generic` → gfx9_4, `gfx11-generic` → gfx11.
            let key = groups.replacen('-', "_", 1);
            return BundleKey::of_family(&key).ok_or_else(|| BundleKeyError::UnknownFamily {
                processor: processor.to_owned(),
            });
        }
        Ok(BundleKey(processor.to_owned()))
    }

    /// The key of a family or sub-family spelling (`gfx11`, `gfx110x`, `gfx12_0`,
    /// `gfx11xx`, `gfx120x`), or `None` when it names none.
    pub fn of_family(name: &str) -> Option<BundleKey> {
        let name = ALIASES
            .iter()
            .find(|(alias, _)| *alias == name)
            .map_or(name, |(_, key)| key);
        (FAMILIES.iter().any(|(f, _)| *f == name) || SUB_FAMILIES.iter().any(|s| s.key == name))
            .then(|| BundleKey(name.to_owned()))
    }

    /// The key named by `s` as printed by [`BundleKey::as_str`] (a target, sub-family or
    /// family key).
    pub fn parse(s: &str) -> Result<BundleKey, BundleKeyError> {
        if let Some(k) = BundleKey::of_family(s) {
            return Ok(k);
        }
        let t = TargetId::parse(s).map_err(|source| BundleKeyError::NotATarget {
            name: s.to_owned(),
            source,
        })?;
        BundleKey::of_target(&t)
    }
}

impl std::fmt::Display for BundleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_without_a_bundle_key_says_why() {
        let e = BundleKey::parse("gfx13-generic").unwrap_err();
        assert!(matches!(e, BundleKeyError::UnknownFamily { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "generic processor gfx13-generic covers no known family"
        );
        let e = BundleKey::parse("gfx90a:xnack").unwrap_err();
        assert!(matches!(e, BundleKeyError::NotATarget { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("\"gfx90a:xnack\" is not a GPU target: "),
            "{e}"
        );
    }

    fn served(key: &str, architectures: &[&str]) -> Vec<String> {
        let key = BundleKey::parse(key).unwrap();
        key.served_targets(architectures.iter().copied())
            .iter()
            .map(|k| k.as_str().to_owned())
            .collect()
    }

    #[test]
    fn a_wheel_serves_the_processors_its_code_runs_on_that_its_key_covers() {
        assert_eq!(
            served("gfx11", &["gfx11-generic"]),
            [
                "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152",
                "gfx1153"
            ]
        );
        // gfx12-generic runs on gfx1200 and gfx1201, not on the gfx12 family's gfx1250.
        assert_eq!(served("gfx12", &["gfx12-generic"]), ["gfx1200", "gfx1201"]);
        assert_eq!(served("gfx9_4", &["gfx9-4-generic:xnack-"]), ["gfx942"]);
        // A sub-family's database directory serves its members.
        assert_eq!(
            served("gfx110x", &["gfx110x"]),
            ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]
        );
        assert_eq!(served("gfx1100", &["gfx1100"]), ["gfx1100"]);
        assert!(served("gfx11", &["gfx99-generic"]).is_empty());
    }

    #[test]
    fn the_portable_spirv_wheel_serves_every_processor_of_the_hierarchy() {
        let all = served("amdgcnspirv", &["amdgcnspirv"]);
        assert_eq!(all.len(), 33);
        assert_eq!(all.first().map(String::as_str), Some("gfx900"));
        assert_eq!(all.last().map(String::as_str), Some("gfx1251"));
        for p in [
            "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1151", "gfx1201",
        ] {
            assert!(all.iter().any(|t| t == p), "{p}");
        }
        let key = BundleKey::parse("amdgcnspirv").unwrap();
        assert_eq!(key.level(), Level::Portable);
        assert_eq!(key.chain(), std::slice::from_ref(&key));
        // Native code is not SPIR-V: a portable key holding none serves nothing.
        assert!(served("amdgcnspirv", &["gfx1100"]).is_empty());
        // No chain leads to the portable key.
        assert!(served("gfx1100", &["amdgcnspirv"]).is_empty());
        let fallback = |k: &str| BundleKey::parse(k).unwrap().portable_fallback();
        assert_eq!(fallback("gfx1030"), Some(key.clone()));
        assert_eq!(fallback("gfx11"), None);
        assert_eq!(fallback("gfx9999"), None);
        assert_eq!(fallback("amdgcnspirv"), None);
    }
}
