use kpack_target::{BundleId, OffloadKind, TargetError, TargetId};

fn b(s: &str) -> BundleId {
    BundleId::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// `(id, kind, triple, environment, target)`.
type RealId = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
);

/// Every bundle-id form seen in the fixtures (bundle headers, CCOB payloads,
/// `__CLANG_OFFLOAD_BUNDLE__` section names) plus the LLVM 18/19 form that
/// prints the environment.
const REAL_IDS: &[RealId] = &[
    // LLVM 18/19 host entry: the id written twice over (modern/ccob_v1_llvm18.bundle).
    (
        "host-x86_64-unknown-linux-gnu-host-x86_64-unknown-linux-gnu-",
        "host",
        "x86_64-unknown-linux-gnu",
        Some("gnu"),
        None,
    ),
    // ROCm 5 host entry: three-component host triple (bin/k1_genco.hsaco).
    (
        "host-x86_64-unknown-linux",
        "host",
        "x86_64-unknown-linux",
        None,
        None,
    ),
    // Modern host entries (modern/*.bundle and CCOB payloads).
    (
        "host-x86_64-unknown-linux-gnu-",
        "host",
        "x86_64-unknown-linux-gnu",
        Some("gnu"),
        None,
    ),
    (
        "host-x86_64-unknown-linux-gnu",
        "host",
        "x86_64-unknown-linux-gnu",
        Some("gnu"),
        None,
    ),
    // Object-file section name (bin/rdc_a.o).
    (
        "host-x86_64-pc-linux-gnu",
        "host",
        "x86_64-pc-linux-gnu",
        Some("gnu"),
        None,
    ),
    (
        "hipv4-amdgcn-amd-amdhsa--gfx1030",
        "hipv4",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx1030"),
    ),
    (
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
        "hipv4",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx90a:xnack+"),
    ),
    (
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
        "hipv4",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx90a:xnack-"),
    ),
    (
        "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
        "hipv4",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx942:sramecc+:xnack-"),
    ),
    (
        "hipv4-amdgcn-amd-amdhsa--gfx11-generic",
        "hipv4",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx11-generic"),
    ),
    (
        "hipv4-amdgcn-amd-amdhsa--gfx9-4-generic",
        "hipv4",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx9-4-generic"),
    ),
    (
        "hipv4-amdgcn-amd-amdhsa--gfx10-3-generic",
        "hipv4",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx10-3-generic"),
    ),
    (
        "hip-amdgcn-amd-amdhsa--gfx1100",
        "hip",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx1100"),
    ),
    // Section names in -fgpu-rdc objects: no environment field at all.
    (
        "hip-amdgcn-amd-amdhsa-gfx1030",
        "hip",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx1030"),
    ),
    (
        "hip-amdgcn-amd-amdhsa-gfx90a:xnack-",
        "hip",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx90a:xnack-"),
    ),
    (
        "hip-amdgcn-amd-amdhsa-gfx9-4-generic:xnack+",
        "hip",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx9-4-generic:xnack+"),
    ),
    // LLVM 18/19 print the (unknown) environment.
    (
        "hipv4-amdgcn-amd-amdhsa-unknown-gfx942:sramecc+:xnack-",
        "hipv4",
        "amdgcn-amd-amdhsa-unknown",
        Some("unknown"),
        Some("gfx942:sramecc+:xnack-"),
    ),
    (
        "openmp-amdgcn-amd-amdhsa--gfx90a",
        "openmp",
        "amdgcn-amd-amdhsa",
        None,
        Some("gfx90a"),
    ),
];

#[test]
fn every_real_bundle_id_form_parses() {
    for &(id, kind, triple, env, target) in REAL_IDS {
        let parsed = b(id);
        assert_eq!(parsed.kind().as_str(), kind, "{id}");
        assert_eq!(parsed.triple(), triple, "{id}");
        assert_eq!(parsed.environment(), env, "{id}");
        assert_eq!(
            parsed.target().map(ToString::to_string).as_deref(),
            target,
            "{id}"
        );
        assert_eq!(parsed.is_host(), kind == "host", "{id}");
    }
}

#[test]
fn bundle_id_prints_back_exactly_as_read() {
    for &(id, ..) in REAL_IDS {
        assert_eq!(b(id).to_string(), id);
        assert_eq!(b(id).as_str(), id);
    }
    // Even when the target inside is not in canonical order.
    let odd = "hipv4-amdgcn-amd-amdhsa--gfx942:xnack-:sramecc+";
    let parsed = b(odd);
    assert_eq!(parsed.to_string(), odd);
    assert_eq!(
        parsed.target().unwrap().to_string(),
        "gfx942:sramecc+:xnack-"
    );
}

#[test]
fn target_is_the_text_after_the_last_double_dash() {
    for &(id, ..) in REAL_IDS {
        if let Some((_, after)) = id.rsplit_once("--") {
            assert_eq!(
                b(id).target(),
                Some(&TargetId::parse(after).unwrap()),
                "{id}"
            );
        }
    }
}

#[test]
fn offload_kinds_are_recognised() {
    assert_eq!(
        b("host-x86_64-unknown-linux-gnu-").kind(),
        &OffloadKind::Host
    );
    assert_eq!(
        b("hip-amdgcn-amd-amdhsa--gfx1100").kind(),
        &OffloadKind::Hip
    );
    assert_eq!(
        b("hipv4-amdgcn-amd-amdhsa--gfx1100").kind(),
        &OffloadKind::HipV4
    );
    assert_eq!(
        b("openmp-amdgcn-amd-amdhsa--gfx1100").kind(),
        &OffloadKind::OpenMp
    );
    assert_eq!(
        b("sycl-spir64-unknown-unknown").kind(),
        &OffloadKind::Other("sycl".into())
    );
}

#[test]
fn arch_is_the_first_triple_component() {
    assert_eq!(b("hipv4-amdgcn-amd-amdhsa--gfx1030").arch(), "amdgcn");
    assert_eq!(b("host-x86_64-unknown-linux").arch(), "x86_64");
}

#[test]
fn device_entry_without_target_has_none() {
    let id = b("hipv4-amdgcn-amd-amdhsa-");
    assert_eq!(id.target(), None);
    assert_eq!(id.triple(), "amdgcn-amd-amdhsa");
}

#[test]
fn host_entry_with_target_is_rejected() {
    assert_eq!(
        BundleId::parse("host-x86_64-unknown-linux-gnu-gfx90a"),
        Err(TargetError::HostWithTarget {
            input: "host-x86_64-unknown-linux-gnu-gfx90a".into(),
            offset: 30
        })
    );
    assert!(matches!(
        BundleId::parse("host-x86_64-unknown-linux--gfx90a"),
        Err(TargetError::HostWithTarget { offset: 27, .. })
    ));
}

#[test]
fn malformed_bundle_ids_are_rejected_with_offsets() {
    let cases: &[(&str, usize)] = &[
        ("", 0),
        ("host", 4),
        ("host-", 5),
        ("-amdgcn-amd-amdhsa--gfx90a", 0),
        ("hipv4-amdgcn", 12),
        ("hipv4-amdgcn-amd", 16),
        ("hipv4-amdgcn-amd-", 17),
        ("hipv4--amd-amdhsa--gfx90a", 6),
        ("hipv4-amdgcn-amd-amdhsa:gfx90a", 23),
        ("hipv4-amdgcn-amd-amdhsa-un:known-gfx90a", 26),
        ("hipv4 -amdgcn-amd-amdhsa--gfx90a", 5),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a\0", 31),
    ];
    for &(input, offset) in cases {
        match BundleId::parse(input) {
            Err(TargetError::BundleId { offset: got, .. }) => assert_eq!(got, offset, "{input:?}"),
            Err(TargetError::BundleTarget {
                offset: start,
                source,
                ..
            }) => match *source {
                TargetError::TargetId { offset: inner, .. } => {
                    assert_eq!(start + inner, offset, "{input:?}")
                }
                other => panic!("{input:?}: {other:?}"),
            },
            other => panic!("{input:?}: expected an error, got {other:?}"),
        }
    }
}

#[test]
fn malformed_target_inside_bundle_id_reports_where_it_starts() {
    let err = BundleId::parse("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack").unwrap_err();
    let TargetError::BundleTarget { offset, source, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*offset, 25);
    assert!(matches!(**source, TargetError::TargetId { offset: 12, .. }));
    for bad in [
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+:xnack-",
        "hipv4-amdgcn-amd-amdhsa---gfx90a",
        "hipv4-amdgcn-amd-amdhsa--gfx90a--x",
        "hip-amdgcn-amd-amdhsa-gfx90a-xnack+",
    ] {
        assert!(BundleId::parse(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn parsers_survive_every_prefix_and_single_byte_mutation() {
    let alphabet = ['-', ':', '+', 'g', '0', '_', '.', ' ', 'é', '\0'];
    for &(id, ..) in REAL_IDS {
        let mut inputs: Vec<String> = (0..=id.len()).map(|n| id[..n].to_owned()).collect();
        for at in 0..id.len() {
            for c in alphabet {
                let mut mutated = id.to_owned();
                mutated.replace_range(at..at + 1, c.encode_utf8(&mut [0; 4]));
                inputs.push(mutated);
            }
        }
        for input in inputs {
            if let Ok(parsed) = BundleId::parse(&input) {
                assert_eq!(parsed.to_string(), input);
            }
            if let Ok(target) = TargetId::parse(&input) {
                assert_eq!(TargetId::parse(&target.to_string()).unwrap(), target);
            }
            if let Ok(target) = TargetId::parse_tensile(&input) {
                assert_eq!(
                    TargetId::parse_tensile(&target.to_tensile()).unwrap(),
                    target
                );
            }
        }
    }
}
