//! ISA target matching (spec §4.5), insensitive to feature order.
//!
//! The HIP runtime passes ISA names such as `amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-`. A
//! code object built for a target that omits a feature runs on any setting of it, so the
//! candidates for an ISA are its feature subsets, most specific first, in the reference's
//! order (mask `2^n-1` down to `0`, bit `n-1-i` selecting feature `i`: for `a,b,c` that is
//! `abc, ab, ac, a, bc, b, c, ∅`; kpack-target's [`kpack_target::feature_subsets`], which
//! [`kpack_target::TargetId`] uses too). Features are opaque strings here, as in the
//! reference: the runtime must not reject an ISA name that the strict target-ID grammar would.
//!
//! The portable SPIR-V target is asked for as `amdgcnspirv`, `spirv64-amd-amdhsa--amdgcnspirv`
//! (the triple of its bundle entry) or `amdgcn-amd-amdhsa--amdgcnspirv`: every spelling finds
//! an archive's `amdgcnspirv` entry. The HIP runtime puts it after the GPU's own ISA, so
//! native code, when an archive has it, is found first.
//!
//! Unlike the reference, a candidate matches an archive's `gfx_arches` entry when both name
//! the same processor and the same *set* of features: `gfx942:xnack-:sramecc+` matches
//! `gfx942:sramecc+:xnack-` (§9 B15).

use std::collections::HashMap;

/// The triple prefix the HIP runtime puts before ISA names.
pub const TRIPLE_PREFIX: &str = "amdgcn-amd-amdhsa--";

/// The triple prefix of the portable SPIR-V target's name (`spirv64-amd-amdhsa--amdgcnspirv`).
pub const SPIRV_TRIPLE_PREFIX: &str = "spirv64-amd-amdhsa--";

/// ISAs with more features than this yield no candidates (`2^n` of them would be probed):
/// the cap target IDs have. Real targets have at most two.
pub use kpack_target::MAX_FEATURES;

/// Removes a leading [`TRIPLE_PREFIX`] or [`SPIRV_TRIPLE_PREFIX`], but only when something
/// follows it (as the reference).
pub fn strip_target_prefix(isa: &str) -> &str {
    match isa
        .strip_prefix(TRIPLE_PREFIX)
        .or_else(|| isa.strip_prefix(SPIRV_TRIPLE_PREFIX))
    {
        Some(rest) if !rest.is_empty() => rest,
        _ => isa,
    }
}

/// `(processor, features)`: the text before the first `:`, then the non-empty `:`-separated
/// parts after it.
fn split(target: &str) -> (&str, Vec<&str>) {
    let mut parts = target.split(':');
    let processor = parts.next().unwrap_or("");
    (processor, parts.filter(|f| !f.is_empty()).collect())
}

fn join<'f>(processor: &str, features: impl IntoIterator<Item = &'f str>) -> String {
    let mut s = processor.to_owned();
    for f in features {
        s.push(':');
        s.push_str(f);
    }
    s
}

/// The candidate targets of `isa`, most specific first ([`kpack_target::feature_subsets`]),
/// each spelled with its features in the ISA's order. Empty for an empty processor or more than
/// [`MAX_FEATURES`] features.
pub fn compatible_targets(isa: &str) -> Vec<String> {
    let (processor, features) = split(strip_target_prefix(isa));
    if processor.is_empty() || features.len() > MAX_FEATURES {
        return Vec::new();
    }
    kpack_target::feature_subsets(&features)
        .map(|subset| join(processor, subset.into_iter().copied()))
        .collect()
}

/// The spelling of `target` with its features sorted and repeats dropped: equal for every
/// ordering of the same features.
pub fn canonical(target: &str) -> String {
    let (processor, mut features) = split(target);
    features.sort_unstable();
    features.dedup();
    join(processor, features)
}

/// An archive's `gfx_arches`, looked up by [`canonical`] spelling.
#[derive(Debug, Clone, Default)]
pub struct TargetIndex {
    /// Canonical spelling → the archive's own spelling (the first, if several coincide).
    by_canonical: HashMap<String, String>,
}

impl TargetIndex {
    /// Indexes an archive's `gfx_arches`.
    pub fn new<'a>(arches: impl IntoIterator<Item = &'a str>) -> TargetIndex {
        let mut by_canonical = HashMap::new();
        for arch in arches {
            by_canonical
                .entry(canonical(arch))
                .or_insert_with(|| arch.to_owned());
        }
        TargetIndex { by_canonical }
    }

    /// The archive's spelling of `target`, if it lists it in any feature order.
    pub fn find(&self, target: &str) -> Option<&str> {
        self.by_canonical
            .get(&canonical(target))
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triple_prefix_is_stripped_only_when_followed_by_a_target() {
        assert_eq!(strip_target_prefix("amdgcn-amd-amdhsa--gfx942"), "gfx942");
        assert_eq!(
            strip_target_prefix("amdgcn-amd-amdhsa--"),
            "amdgcn-amd-amdhsa--"
        );
        assert_eq!(strip_target_prefix("gfx1100"), "gfx1100");
        for isa in [
            "amdgcnspirv",
            "spirv64-amd-amdhsa--amdgcnspirv",
            "amdgcn-amd-amdhsa--amdgcnspirv",
        ] {
            assert_eq!(strip_target_prefix(isa), "amdgcnspirv");
        }
        assert_eq!(
            strip_target_prefix("spirv64-amd-amdhsa--"),
            "spirv64-amd-amdhsa--"
        );
    }

    #[test]
    fn candidates_follow_the_reference_mask_order() {
        assert_eq!(
            compatible_targets("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"),
            [
                "gfx942:sramecc+:xnack-",
                "gfx942:sramecc+",
                "gfx942:xnack-",
                "gfx942"
            ]
        );
        assert_eq!(compatible_targets("gfx1100"), ["gfx1100"]);
        assert_eq!(
            compatible_targets("p:a:b:c"),
            [
                "p:a:b:c", "p:a:b", "p:a:c", "p:a", "p:b:c", "p:b", "p:c", "p"
            ]
        );
        assert_eq!(
            compatible_targets("gfx9-4-generic:xnack+"),
            ["gfx9-4-generic:xnack+", "gfx9-4-generic"]
        );
        // Empty features are dropped, as in the reference parser.
        assert_eq!(
            compatible_targets("gfx90a::xnack+:"),
            ["gfx90a:xnack+", "gfx90a"]
        );
    }

    #[test]
    fn candidates_of_a_target_id_in_canonical_order_are_its_compatible_candidates() {
        for isa in [
            "gfx942:sramecc+:xnack-",
            "gfx90a:xnack+",
            "gfx1100",
            "gfx9-4-generic:xnack-",
        ] {
            let id = kpack_target::TargetId::parse(isa).unwrap();
            let expected: Vec<String> = id
                .compatible_candidates()
                .iter()
                .map(|t| t.to_string())
                .collect();
            assert_eq!(
                compatible_targets(&format!("{TRIPLE_PREFIX}{isa}")),
                expected
            );
        }
    }

    #[test]
    fn empty_isa_or_too_many_features_yields_no_candidates() {
        assert!(compatible_targets("").is_empty());
        assert!(compatible_targets(":xnack+").is_empty());
        assert!(compatible_targets("p:a:b:c:d:e:f:g:h:i").is_empty());
        assert_eq!(compatible_targets("p:a:b:c:d:e:f:g:h").len(), 256);
    }

    #[test]
    fn archive_targets_match_in_any_feature_order() {
        let index = TargetIndex::new(["gfx942:xnack-:sramecc+", "gfx90a", "gfx1100"]);
        assert_eq!(
            index.find("gfx942:sramecc+:xnack-"),
            Some("gfx942:xnack-:sramecc+")
        );
        assert_eq!(
            index.find("gfx942:xnack-:sramecc+"),
            Some("gfx942:xnack-:sramecc+")
        );
        assert_eq!(index.find("gfx90a"), Some("gfx90a"));
        // A feature state is part of the target: xnack+ never matches xnack-.
        assert_eq!(index.find("gfx942:sramecc+:xnack+"), None);
        assert_eq!(index.find("gfx942:sramecc+"), None);
    }
}
