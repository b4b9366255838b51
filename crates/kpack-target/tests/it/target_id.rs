use std::collections::HashSet;

use kpack_target::{Feature, FeatureState, TargetError, TargetId};

fn t(s: &str) -> TargetId {
    TargetId::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn strings(targets: &[TargetId]) -> Vec<String> {
    targets.iter().map(ToString::to_string).collect()
}

fn offset_of(result: Result<TargetId, TargetError>) -> usize {
    match result {
        Err(TargetError::TargetId { offset, .. })
        | Err(TargetError::DuplicateFeature { offset, .. }) => offset,
        other => panic!("expected a target-id error, got {other:?}"),
    }
}

#[test]
fn parses_processor_and_features_and_prints_canonically() {
    let target = t("gfx90a:sramecc+:xnack-");
    assert_eq!(target.processor(), "gfx90a");
    assert_eq!(
        target.features(),
        &[
            Feature {
                name: "sramecc".into(),
                state: FeatureState::On
            },
            Feature {
                name: "xnack".into(),
                state: FeatureState::Off
            },
        ]
    );
    assert_eq!(target.feature("xnack"), Some(FeatureState::Off));
    assert_eq!(target.feature("sramecc"), Some(FeatureState::On));
    assert_eq!(target.feature("wavefrontsize64"), None);
    assert_eq!(target.to_string(), "gfx90a:sramecc+:xnack-");
    assert_eq!(target.as_str(), "gfx90a:sramecc+:xnack-");
}

#[test]
fn feature_order_is_normalised_to_llvm_canonical_order() {
    let swapped = t("gfx90a:xnack-:sramecc+");
    assert_eq!(swapped.to_string(), "gfx90a:sramecc+:xnack-");
    assert_eq!(swapped, t("gfx90a:sramecc+:xnack-"));
    let set: HashSet<TargetId> = [swapped, t("gfx90a:sramecc+:xnack-")].into();
    assert_eq!(set.len(), 1);
}

#[test]
fn processor_only_target_has_no_features() {
    let target: TargetId = "gfx1100".parse().unwrap();
    assert_eq!(target.processor(), "gfx1100");
    assert!(target.features().is_empty());
    assert_eq!(target.to_string(), "gfx1100");
    assert!(!target.is_generic());
}

#[test]
fn generic_processors_keep_their_dashes() {
    for name in [
        "gfx9-generic",
        "gfx9-4-generic",
        "gfx10-1-generic",
        "gfx10-3-generic",
        "gfx11-generic",
        "gfx12-generic",
        "gfx12-5-generic",
    ] {
        let target = t(name);
        assert_eq!(target.processor(), name);
        assert!(target.is_generic(), "{name}");
    }
    let target = t("gfx9-4-generic:xnack+");
    assert_eq!(target.processor(), "gfx9-4-generic");
    assert_eq!(target.feature("xnack"), Some(FeatureState::On));
    assert!(target.is_generic());
}

#[test]
fn ordering_follows_the_canonical_string() {
    let mut targets = vec![t("gfx90a:xnack+"), t("gfx90a0"), t("gfx1030"), t("gfx90a")];
    targets.sort();
    assert_eq!(
        strings(&targets),
        ["gfx1030", "gfx90a", "gfx90a0", "gfx90a:xnack+"]
    );
}

#[test]
fn tensile_spelling_parses_to_the_same_target() {
    assert_eq!(
        t("gfx90a:xnack+"),
        TargetId::parse_tensile("gfx90a-xnack+").unwrap()
    );
    assert_eq!(
        t("gfx908:xnack-"),
        TargetId::parse_tensile("gfx908-xnack-").unwrap()
    );
    assert_eq!(t("gfx942"), TargetId::parse_tensile("gfx942").unwrap());
    assert_eq!(
        t("gfx942:sramecc+:xnack-"),
        TargetId::parse_tensile("gfx942-xnack--sramecc+").unwrap()
    );
    assert_eq!(
        t("gfx9-4-generic:xnack+"),
        TargetId::parse_tensile("gfx9-4-generic-xnack+").unwrap()
    );
    assert_eq!(
        t("gfx10-3-generic"),
        TargetId::parse_tensile("gfx10-3-generic").unwrap()
    );
}

#[test]
fn tensile_spelling_prints_features_with_dashes() {
    assert_eq!(t("gfx90a:xnack+").to_tensile(), "gfx90a-xnack+");
    assert_eq!(t("gfx908:xnack-").to_tensile(), "gfx908-xnack-");
    assert_eq!(t("gfx942").to_tensile(), "gfx942");
    assert_eq!(
        t("gfx942:xnack-:sramecc+").to_tensile(),
        "gfx942-sramecc+-xnack-"
    );
    assert_eq!(
        t("gfx9-4-generic:xnack-").to_tensile(),
        "gfx9-4-generic-xnack-"
    );
    for s in [
        "gfx90a:xnack+",
        "gfx942:sramecc+:xnack-",
        "gfx11-generic",
        "gfx9-4-generic:sramecc-",
    ] {
        let target = t(s);
        assert_eq!(
            TargetId::parse_tensile(&target.to_tensile()).unwrap(),
            target
        );
    }
}

#[test]
fn tensile_spelling_rejects_malformed_names() {
    for bad in [
        "",
        "gfx90a-",
        "gfx90a-xnack",
        "gfx90a:xnack+",
        "gfx9-4-generic-",
        "gfx90a-xnack+-",
    ] {
        assert!(TargetId::parse_tensile(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(offset_of(TargetId::parse_tensile("gfx90a-xnack")), 12);
}

#[test]
fn candidates_for_two_features_follow_reference_order() {
    assert_eq!(
        strings(&t("gfx942:sramecc+:xnack-").compatible_candidates()),
        [
            "gfx942:sramecc+:xnack-",
            "gfx942:sramecc+",
            "gfx942:xnack-",
            "gfx942"
        ]
    );
}

#[test]
fn candidates_for_three_features_follow_mask_order_not_cardinality() {
    assert_eq!(
        strings(&t("gfx1:a+:b-:c+").compatible_candidates()),
        [
            "gfx1:a+:b-:c+",
            "gfx1:a+:b-",
            "gfx1:a+:c+",
            "gfx1:a+",
            "gfx1:b-:c+",
            "gfx1:b-",
            "gfx1:c+",
            "gfx1",
        ]
    );
}

#[test]
fn candidates_without_features_are_just_the_processor() {
    assert_eq!(strings(&t("gfx1100").compatible_candidates()), ["gfx1100"]);
}

#[test]
fn code_object_runs_on_agent_when_its_features_match_or_are_omitted() {
    let agent = t("gfx942:sramecc+:xnack-");
    for ok in [
        "gfx942",
        "gfx942:sramecc+",
        "gfx942:xnack-",
        "gfx942:sramecc+:xnack-",
    ] {
        assert!(t(ok).is_compatible_with_agent(&agent), "{ok}");
    }
    for bad in [
        "gfx942:xnack+",
        "gfx942:sramecc-",
        "gfx942:sramecc+:xnack+",
        "gfx90a",
        "gfx9-4-generic",
    ] {
        assert!(!t(bad).is_compatible_with_agent(&agent), "{bad}");
    }
    // An agent that does not report xnack cannot promise xnack+.
    assert!(!t("gfx1030:xnack+").is_compatible_with_agent(&t("gfx1030")));
    assert!(t("gfx1030").is_compatible_with_agent(&t("gfx1030")));
}

#[test]
fn agent_compatibility_agrees_with_candidate_list() {
    let agent = t("gfx90a:sramecc-:xnack+");
    let candidates = agent.compatible_candidates();
    for code_object in [
        "gfx90a",
        "gfx90a:xnack+",
        "gfx90a:xnack-",
        "gfx90a:sramecc-",
        "gfx90a:sramecc+",
        "gfx90a:sramecc-:xnack+",
        "gfx90a:sramecc-:xnack-",
        "gfx908:xnack+",
    ] {
        let code_object = t(code_object);
        assert_eq!(
            code_object.is_compatible_with_agent(&agent),
            candidates.contains(&code_object),
            "{code_object}"
        );
    }
}

#[test]
fn malformed_target_ids_are_rejected_with_offsets() {
    let cases: &[(&str, usize)] = &[
        ("", 0),
        (":xnack+", 0),
        ("GFX90A", 0),
        ("9gfx", 0),
        ("gfx90a:", 7),
        ("gfx90a::xnack+", 7),
        ("gfx90a:xnack", 12),
        ("gfx90a:xnack+:", 14),
        ("gfx90a:xnack*", 12),
        ("gfx90a:xnack+x", 13),
        ("gfx90a:+", 7),
        ("gfx90a:Xnack+", 7),
        ("gfx90a xnack+", 6),
        ("gfx90a-xnack+", 6),
        ("gfx9-4-generic-", 14),
        ("gfx90a:xnack+:xnack-", 14),
        ("gfx90a:xnack+:xnack+", 14),
        ("gfx90aé", 6),
        (" gfx90a", 0),
        ("gfx90a\n", 6),
    ];
    for &(input, offset) in cases {
        assert_eq!(offset_of(TargetId::parse(input)), offset, "{input:?}");
    }
    assert!(matches!(
        TargetId::parse("gfx90a:xnack+:xnack-"),
        Err(TargetError::DuplicateFeature { ref name, .. }) if name == "xnack"
    ));
}

#[test]
fn errors_name_input_offset_and_expectation() {
    let message = TargetId::parse("gfx90a:xnack").unwrap_err().to_string();
    assert_eq!(
        message,
        "invalid target id \"gfx90a:xnack\": at byte 12: expected '+' or '-' after the feature name"
    );
}
