use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use crate::TargetError;

/// Most features one target ID may carry. Real AMDGPU target IDs have at
/// most two (`sramecc`, `xnack`); the cap keeps [`TargetId::compatible_candidates`]
/// (2^n entries) bounded for untrusted input.
pub const MAX_FEATURES: usize = 8;

/// Whether a target feature is requested on (`+`) or off (`-`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FeatureState {
    /// `+`.
    On,
    /// `-`.
    Off,
}

impl FeatureState {
    /// The sign used in target IDs: `'+'` or `'-'`.
    pub fn sign(self) -> char {
        match self {
            FeatureState::On => '+',
            FeatureState::Off => '-',
        }
    }

    fn from_sign(byte: u8) -> Option<Self> {
        match byte {
            b'+' => Some(FeatureState::On),
            b'-' => Some(FeatureState::Off),
            _ => None,
        }
    }
}

/// One `name±` feature of a target ID, e.g. `xnack+`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Feature {
    /// The feature's name, e.g. `xnack`.
    pub name: String,
    /// On or off.
    pub state: FeatureState,
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.name, self.state.sign())
    }
}

/// An AMDGPU target ID: a processor plus explicitly set features, e.g.
/// `gfx90a:sramecc+:xnack-`.
///
/// Features are kept sorted by name (LLVM's canonical order), so two
/// spellings that differ only in feature order are equal. Equality, hashing
/// and ordering all work on the canonical string.
#[derive(Debug, Clone)]
pub struct TargetId {
    canonical: String,
    processor_len: usize,
    features: Vec<Feature>,
}

/// The separator between processor and features, and between features.
#[derive(Clone, Copy)]
struct Spelling {
    separator: u8,
    expected_separator: &'static str,
}

const CANONICAL: Spelling = Spelling {
    separator: b':',
    expected_separator: "':' before a feature, or the end",
};

const TENSILE: Spelling = Spelling {
    separator: b'-',
    expected_separator: "'-' before a feature, or the end",
};

/// The processor name of the portable target, SPIR-V (`--offload-arch=amdgcnspirv`): its
/// bundle entry (`hipv4-spirv64-amd-amdhsa--amdgcnspirv`) holds a SPIR-V module, not an ELF
/// code object, which the HIP runtime translates for any AMD GPU that has no native code
/// object.
pub const SPIRV: &str = "amdgcnspirv";

/// The processors each generic processor's code runs on, as LLVM's AMDGPU backend defines
/// them (`llvm/lib/Target/AMDGPU/GCNProcessors.td`, the comment above each generic
/// processor; the code-object `EF_AMDGPU_MACH` values are in `code_object.rs`).
pub const GENERIC_MEMBERS: &[(&str, &[&str])] = &[
    (
        "gfx9-generic",
        &["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"],
    ),
    ("gfx9-4-generic", &["gfx942"]),
    (
        "gfx10-1-generic",
        &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    ),
    (
        "gfx10-3-generic",
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    ),
    (
        "gfx11-generic",
        &[
            "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153",
        ],
    ),
    ("gfx12-generic", &["gfx1200", "gfx1201"]),
    ("gfx12-5-generic", &["gfx1250", "gfx1251"]),
];

impl TargetId {
    /// Parses the LLVM spelling `processor(:feature±)*`.
    ///
    /// The processor is `[a-z][a-z0-9_]*`, then any `-<digits>` groups, then
    /// optionally `-generic` (`gfx90a`, `gfx9-4-generic`). Feature names are
    /// `[a-z][a-z0-9_]*`. Empty input, empty features, features without a
    /// sign, repeated features and any other character are rejected.
    pub fn parse(s: &str) -> Result<TargetId, TargetError> {
        Self::parse_spelling(s, CANONICAL)
    }

    /// Parses the Tensile file-name spelling, where `:` is written `-`:
    /// `gfx90a-xnack+`, `gfx942-sramecc+-xnack-`, `gfx9-4-generic-xnack+`.
    ///
    /// The processor grammar decides where the processor ends, so the `-`
    /// inside generic processor names is never taken for a feature separator.
    pub fn parse_tensile(s: &str) -> Result<TargetId, TargetError> {
        Self::parse_spelling(s, TENSILE)
    }

    fn parse_spelling(s: &str, spelling: Spelling) -> Result<TargetId, TargetError> {
        let bytes = s.as_bytes();
        let err = |offset: usize, expected: &'static str| TargetError::TargetId {
            input: s.to_owned(),
            offset,
            expected,
        };
        let processor_len = processor_prefix_len(bytes);
        if processor_len == 0 {
            return Err(err(0, "a processor name starting with a lowercase letter"));
        }
        let mut features: Vec<Feature> = Vec::new();
        let mut i = processor_len;
        while i < bytes.len() {
            if bytes[i] != spelling.separator {
                return Err(err(i, spelling.expected_separator));
            }
            i += 1;
            let name_start = i;
            if !bytes.get(i).is_some_and(u8::is_ascii_lowercase) {
                return Err(err(i, "a feature name starting with a lowercase letter"));
            }
            while bytes.get(i).copied().is_some_and(is_name_byte) {
                i += 1;
            }
            let Some(state) = bytes.get(i).copied().and_then(FeatureState::from_sign) else {
                return Err(err(i, "'+' or '-' after the feature name"));
            };
            let name = &s[name_start..i];
            i += 1;
            if features.iter().any(|f| f.name == name) {
                return Err(TargetError::DuplicateFeature {
                    input: s.to_owned(),
                    offset: name_start,
                    name: name.to_owned(),
                });
            }
            if features.len() == MAX_FEATURES {
                return Err(TargetError::TooManyFeatures {
                    input: s.to_owned(),
                    offset: name_start,
                    max: MAX_FEATURES,
                });
            }
            features.push(Feature {
                name: name.to_owned(),
                state,
            });
        }
        Ok(Self::from_parts(&s[..processor_len], features))
    }

    /// Builds a target ID from parts that are already known to be valid.
    pub(crate) fn from_parts(processor: &str, mut features: Vec<Feature>) -> TargetId {
        features.sort_by(|a, b| a.name.cmp(&b.name));
        let mut canonical = String::from(processor);
        for feature in &features {
            canonical.push(':');
            canonical.push_str(&feature.name);
            canonical.push(feature.state.sign());
        }
        TargetId {
            canonical,
            processor_len: processor.len(),
            features,
        }
    }

    /// The Tensile file-name spelling, e.g. `gfx90a-xnack+`.
    pub fn to_tensile(&self) -> String {
        self.canonical.replace(':', "-")
    }

    /// The processor name, e.g. `gfx90a` or `gfx9-4-generic`.
    pub fn processor(&self) -> &str {
        &self.canonical[..self.processor_len]
    }

    /// The explicitly set features, sorted by name.
    pub fn features(&self) -> &[Feature] {
        &self.features
    }

    /// The canonical string, e.g. `gfx90a:sramecc+:xnack-`.
    pub fn as_str(&self) -> &str {
        &self.canonical
    }

    /// True for the portable SPIR-V target ([`SPIRV`]).
    pub fn is_spirv(&self) -> bool {
        self.processor() == SPIRV
    }

    /// True for the family-wide generic processors (`gfx9-generic`,
    /// `gfx9-4-generic`, `gfx10-1-generic`, `gfx11-generic`, ...).
    pub fn is_generic(&self) -> bool {
        self.processor().ends_with("-generic")
    }

    /// The processors whose GPUs run code of this target: for a generic processor its
    /// members ([`GENERIC_MEMBERS`]), none if it is one kpack does not know; otherwise the
    /// processor itself.
    pub fn runs_on(&self) -> Vec<&str> {
        if !self.is_generic() {
            return vec![self.processor()];
        }
        GENERIC_MEMBERS
            .iter()
            .find(|(generic, _)| *generic == self.processor())
            .map_or(Vec::new(), |(_, members)| members.to_vec())
    }

    /// The state of feature `name`, or `None` when it is not set (= "any").
    pub fn feature(&self, name: &str) -> Option<FeatureState> {
        self.features
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.state)
    }

    /// Target IDs whose code objects an agent with this ISA can load, most
    /// specific first: every subset of the features, in the order of
    /// [`feature_subsets`].
    pub fn compatible_candidates(&self) -> Vec<TargetId> {
        feature_subsets(&self.features)
            .map(|subset| Self::from_parts(self.processor(), subset.into_iter().cloned().collect()))
            .collect()
    }

    /// Every target whose device code a GPU of this ISA runs, in the order it prefers them:
    /// its [`compatible_candidates`](Self::compatible_candidates), then those of the
    /// generic processor covering it ([`GENERIC_MEMBERS`]), then the portable [`SPIRV`],
    /// which the HIP runtime translates when neither native nor generic code exists.
    pub fn runnable_targets(&self) -> Vec<TargetId> {
        let mut targets = self.compatible_candidates();
        if let Some((generic, _)) = GENERIC_MEMBERS
            .iter()
            .find(|(_, members)| members.contains(&self.processor()))
        {
            targets
                .extend(feature_subsets(&self.features).map(|subset| {
                    Self::from_parts(generic, subset.into_iter().cloned().collect())
                }));
        }
        if !self.is_spirv() {
            targets.push(Self::from_parts(SPIRV, Vec::new()));
        }
        targets
    }

    /// True if a code object built for `self` runs on an agent whose ISA is
    /// `agent`: same processor, and every feature `self` sets has the same
    /// state in `agent` (a feature `self` omits matches anything). Equivalent
    /// to `agent.compatible_candidates().contains(self)`.
    pub fn is_compatible_with_agent(&self, agent: &TargetId) -> bool {
        self.processor() == agent.processor()
            && self
                .features
                .iter()
                .all(|f| agent.feature(&f.name) == Some(f.state))
    }
}

/// Every subset of `features`, most specific first, in the order the kpack
/// runtime probes them (mask from 2^n-1 down to 0; bit n-1-i selects feature
/// i): for `a,b,c` that is `abc, ab, ac, a, bc, b, c, ∅`. Each subset keeps
/// the features' order. Serves both [`TargetId::compatible_candidates`] and the
/// runtime, which enumerates the features of an ISA name as opaque strings
/// (as the reference does). `2^n` subsets: callers cap `n` at
/// [`MAX_FEATURES`].
pub fn feature_subsets<T>(features: &[T]) -> impl Iterator<Item = Vec<&T>> {
    let n = features.len();
    (0..1u32 << n).rev().map(move |mask| {
        (0..n)
            .filter(|i| mask & (1 << (n - 1 - i)) != 0)
            .map(|i| &features[i])
            .collect()
    })
}

/// Length of the longest prefix of `s` that is a processor name:
/// `[a-z][a-z0-9_]*`, then `-<digits>` groups, then optionally `-generic`.
/// Feature names start with a letter, so a digit group is never a feature,
/// which keeps the Tensile spelling unambiguous.
fn processor_prefix_len(s: &[u8]) -> usize {
    if !s.first().is_some_and(u8::is_ascii_lowercase) {
        return 0;
    }
    let mut end = 1 + s[1..].iter().take_while(|&&b| is_name_byte(b)).count();
    while s.get(end) == Some(&b'-') {
        let group = &s[end + 1..];
        let group_len = group
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        let group = &group[..group_len];
        if group == b"generic" {
            return end + 1 + group_len;
        }
        if group.is_empty() || !group.iter().all(u8::is_ascii_digit) {
            break;
        }
        end += 1 + group_len;
    }
    end
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical)
    }
}

impl FromStr for TargetId {
    type Err = TargetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TargetId::parse(s)
    }
}

impl PartialEq for TargetId {
    fn eq(&self, other: &Self) -> bool {
        self.canonical == other.canonical
    }
}

impl Eq for TargetId {}

impl Hash for TargetId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.canonical.hash(state);
    }
}

impl PartialOrd for TargetId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TargetId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.canonical.cmp(&other.canonical)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_code_runs_on_llvms_members_and_other_code_on_its_own_processor() {
        let runs_on = |t: &str| TargetId::parse(t).unwrap().runs_on().join(" ");
        assert_eq!(runs_on("gfx1100"), "gfx1100");
        assert_eq!(runs_on("gfx90a:xnack+"), "gfx90a");
        assert_eq!(
            runs_on("gfx11-generic"),
            "gfx1100 gfx1101 gfx1102 gfx1103 gfx1150 gfx1151 gfx1152 gfx1153"
        );
        assert_eq!(runs_on("gfx12-generic"), "gfx1200 gfx1201");
        assert_eq!(runs_on("gfx9-4-generic:xnack-"), "gfx942");
        assert_eq!(
            runs_on("gfx99-generic"),
            "",
            "a generic kpack does not know"
        );
        // Every generic of the table is a processor code objects name, and its members
        // are processors too.
        let machs: Vec<&str> = (0..=u8::MAX)
            .filter_map(crate::code_object::processor_for_mach)
            .collect();
        for (generic, members) in GENERIC_MEMBERS {
            assert!(machs.contains(generic), "{generic}");
            for m in *members {
                assert!(machs.contains(m), "{generic}: {m}");
            }
        }
    }

    #[test]
    fn a_gpu_runs_its_own_code_then_its_generic_code_then_portable_spirv() {
        let runnable = |t: &str| {
            TargetId::parse(t)
                .unwrap()
                .runnable_targets()
                .iter()
                .map(TargetId::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(runnable("gfx1100"), "gfx1100 gfx11-generic amdgcnspirv");
        assert_eq!(
            runnable("gfx942:sramecc+"),
            "gfx942:sramecc+ gfx942 gfx9-4-generic:sramecc+ gfx9-4-generic amdgcnspirv"
        );
        // No generic processor covers gfx950.
        assert_eq!(runnable("gfx950"), "gfx950 amdgcnspirv");
        assert_eq!(runnable(SPIRV), "amdgcnspirv");
        assert!(TargetId::parse(SPIRV).unwrap().is_spirv());
    }

    #[test]
    fn processor_prefix_stops_before_features_in_either_spelling() {
        let len = |s: &str| processor_prefix_len(s.as_bytes());
        assert_eq!(len("gfx90a"), 6);
        assert_eq!(len("gfx90a-xnack+"), 6);
        assert_eq!(len("gfx9-4-generic-xnack+"), 14);
        assert_eq!(len("gfx10-3-generic:xnack+"), 15);
        assert_eq!(len("gfx9-4x"), 4);
        assert_eq!(len("gfx9-"), 4);
        assert_eq!(len("9gfx"), 0);
        assert_eq!(len(""), 0);
    }

    #[test]
    fn candidates_are_capped_by_max_features() {
        let s = "gfx1:a+:b+:c+:d+:e+:f+:g+:h+";
        let target = TargetId::parse(s).unwrap();
        assert_eq!(target.compatible_candidates().len(), 1 << MAX_FEATURES);
        let too_many = format!("{s}:i+");
        assert!(matches!(
            TargetId::parse(&too_many),
            Err(TargetError::TooManyFeatures { offset: 29, .. })
        ));
    }
}
