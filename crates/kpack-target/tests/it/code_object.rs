use kpack_target::{BundleId, CodeObjectTarget, TargetError, TargetId, code_object_target};

use kpack_testkit::read_fixture as fixture;

fn t(s: &str) -> TargetId {
    TargetId::parse(s).unwrap()
}

const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

fn read_u64(data: &[u8], at: usize) -> usize {
    let bytes: [u8; 8] = data[at..at + 8].try_into().unwrap();
    usize::try_from(u64::from_le_bytes(bytes)).unwrap()
}

/// Entries `(bundle id, code object)` of the uncompressed offload bundle that
/// starts at `data[0]`: magic, u64 count, then per entry u64 offset, u64
/// size, u64 id length and the id; offsets are relative to the magic.
fn bundle_entries(data: &[u8]) -> Vec<(String, &[u8])> {
    assert!(data.starts_with(BUNDLE_MAGIC));
    let count = read_u64(data, 24);
    let mut at = 32;
    (0..count)
        .map(|_| {
            let (offset, size, id_len) = (
                read_u64(data, at),
                read_u64(data, at + 8),
                read_u64(data, at + 16),
            );
            at += 24;
            let id = std::str::from_utf8(&data[at..at + id_len])
                .unwrap()
                .to_owned();
            at += id_len;
            (id, &data[offset..offset + size])
        })
        .collect()
}

/// The bundle must be compared with the targets decoded from the ELF headers.
fn assert_bundle_targets_match_e_flags(bundle: &[u8], expected_ids: &[&str]) {
    let entries = bundle_entries(bundle);
    let ids: Vec<&str> = entries.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, expected_ids);
    for (id, code_object) in &entries {
        let id = BundleId::parse(id).unwrap();
        if id.is_host() {
            assert_eq!(id.target(), None);
            continue;
        }
        let decoded = code_object_target(code_object).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(Some(&decoded.target), id.target(), "{id}");
        assert_eq!(
            decoded.generic_version.is_some(),
            decoded.target.is_generic(),
            "{id}"
        );
    }
}

#[test]
fn gfx1030_code_object_decodes_exactly() {
    assert_eq!(
        code_object_target(&fixture("modern/mk_gfx1030.co")).unwrap(),
        CodeObjectTarget {
            target: t("gfx1030"),
            abi_version: 4,
            code_object_version: 6,
            generic_version: None,
            e_flags: 0x36,
        }
    );
}

#[test]
fn gfx90a_xnack_on_code_object_decodes_exactly() {
    // e_flags 0x73f: gfx90a, xnack on (0x300), sramecc any (0x400) = absent.
    assert_eq!(
        code_object_target(&fixture("modern/mk_gfx90a_xnackp.co")).unwrap(),
        CodeObjectTarget {
            target: t("gfx90a:xnack+"),
            abi_version: 4,
            code_object_version: 6,
            generic_version: None,
            e_flags: 0x73f,
        }
    );
}

#[test]
fn rocm5_bundle_targets_equal_e_flags_targets() {
    let bundle = fixture("bin/k1_genco.hsaco");
    assert_bundle_targets_match_e_flags(
        &bundle,
        &[
            "host-x86_64-unknown-linux",
            "hipv4-amdgcn-amd-amdhsa--gfx1030",
            "hipv4-amdgcn-amd-amdhsa--gfx900",
            "hipv4-amdgcn-amd-amdhsa--gfx906",
            "hipv4-amdgcn-amd-amdhsa--gfx908",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
        ],
    );
    // ROCm 5 wrote code object v4 (EI_ABIVERSION 2).
    let (_, gfx906) = &bundle_entries(&bundle)[3];
    let decoded = code_object_target(gfx906).unwrap();
    assert_eq!((decoded.abi_version, decoded.code_object_version), (2, 4));
}

#[test]
fn llvm22_bundle_targets_equal_e_flags_targets() {
    for path in [
        "modern/plain_align4096_llvm22.bundle",
        "modern/plain_align1_llvm22.bundle",
    ] {
        assert_bundle_targets_match_e_flags(
            &fixture(path),
            &[
                "host-x86_64-unknown-linux-gnu-",
                "hipv4-amdgcn-amd-amdhsa--gfx1030",
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            ],
        );
    }
}

#[test]
fn generic_and_sramecc_bundle_targets_equal_e_flags_targets() {
    // The .hip_fatbin of this library holds one uncompressed bundle.
    let library = fixture("modern/libmodern_nocompress.so");
    let start = library
        .windows(BUNDLE_MAGIC.len())
        .position(|w| w == BUNDLE_MAGIC)
        .unwrap();
    let bundle = &library[start..];
    assert_bundle_targets_match_e_flags(
        bundle,
        &[
            "host-x86_64-unknown-linux-gnu-",
            "hipv4-amdgcn-amd-amdhsa--gfx11-generic",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
            "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
        ],
    );
    let entries = bundle_entries(bundle);
    let generic = code_object_target(entries[1].1).unwrap();
    assert_eq!(generic.generic_version, Some(1));
    assert_eq!(generic.e_flags, 0x0100_0054);
    let gfx942 = code_object_target(entries[3].1).unwrap();
    assert_eq!(gfx942.e_flags, 0xe4c);
}

/// A minimal ELF64 AMDGPU header for malformed-input and flag-table cases.
fn header(abi_version: u8, e_flags: u32) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[6] = 1;
    h[7] = 64;
    h[8] = abi_version;
    h[18..20].copy_from_slice(&224u16.to_le_bytes());
    h[48..52].copy_from_slice(&e_flags.to_le_bytes());
    h
}

fn decoded(abi_version: u8, e_flags: u32) -> String {
    code_object_target(&header(abi_version, e_flags))
        .unwrap()
        .target
        .to_string()
}

#[test]
fn v4_feature_fields_map_any_and_unsupported_to_absent() {
    for abi in [2, 3, 4] {
        assert_eq!(decoded(abi, 0x03f), "gfx90a");
        assert_eq!(decoded(abi, 0x13f), "gfx90a");
        assert_eq!(decoded(abi, 0x23f), "gfx90a:xnack-");
        assert_eq!(decoded(abi, 0x33f), "gfx90a:xnack+");
        assert_eq!(decoded(abi, 0x43f), "gfx90a");
        assert_eq!(decoded(abi, 0x83f), "gfx90a:sramecc-");
        assert_eq!(decoded(abi, 0xc3f), "gfx90a:sramecc+");
        assert_eq!(decoded(abi, 0xe4c), "gfx942:sramecc+:xnack-");
    }
}

#[test]
fn v3_feature_bits_mean_on_or_unset() {
    let v3 = code_object_target(&header(1, 0x32f)).unwrap();
    assert_eq!(v3.target, t("gfx906:sramecc+:xnack+"));
    assert_eq!(v3.code_object_version, 3);
    assert_eq!(decoded(1, 0x12f), "gfx906:xnack+");
    assert_eq!(decoded(1, 0x02f), "gfx906");
}

#[test]
fn generic_version_is_read_only_from_v6() {
    let v6 = code_object_target(&header(4, 0x0200_055f)).unwrap();
    assert_eq!(v6.target, t("gfx9-4-generic"));
    assert_eq!(v6.generic_version, Some(2));
    let v5 = code_object_target(&header(3, 0x0200_055f)).unwrap();
    assert_eq!(v5.generic_version, None);
    assert_eq!(
        code_object_target(&header(4, 0x36))
            .unwrap()
            .generic_version,
        None
    );
}

#[test]
fn non_elf_input_is_rejected() {
    assert_eq!(
        code_object_target(b"__CLANG_OFFLOAD_BUNDLE__"),
        Err(TargetError::NotElf)
    );
    assert_eq!(code_object_target(b"CCOB"), Err(TargetError::NotElf));
    assert_eq!(code_object_target(b"\x7fEL_"), Err(TargetError::NotElf));
    assert_eq!(
        code_object_target(b""),
        Err(TargetError::Truncated { len: 0, needed: 64 })
    );
    assert_eq!(
        code_object_target(b"\x7fEL"),
        Err(TargetError::Truncated { len: 3, needed: 64 })
    );
}

#[test]
fn wrong_header_fields_are_named_with_their_offsets() {
    let field_of = |bytes: &[u8]| match code_object_target(bytes) {
        Err(TargetError::HeaderField {
            field,
            offset,
            found,
            ..
        }) => (field, offset, found),
        other => panic!("{other:?}"),
    };
    let mut h = header(4, 0x36);
    h[4] = 1;
    assert_eq!(field_of(&h), ("EI_CLASS", 4, 1));
    let mut h = header(4, 0x36);
    h[5] = 2;
    assert_eq!(field_of(&h), ("EI_DATA", 5, 2));
    let mut h = header(4, 0x36);
    h[7] = 0;
    assert_eq!(field_of(&h), ("EI_OSABI", 7, 0));
    let mut h = header(4, 0x36);
    h[18] = 62;
    assert_eq!(field_of(&h), ("e_machine", 18, 62));
    assert_eq!(field_of(&header(0, 0x36)), ("EI_ABIVERSION", 8, 0));
    assert_eq!(field_of(&header(5, 0x36)), ("EI_ABIVERSION", 8, 5));
    // The host x86-64 object of a real bundle is not a code object.
    let exe = fixture("bin/exe_pie");
    assert_eq!(field_of(&exe).0, "EI_OSABI");
}

#[test]
fn unknown_mach_is_rejected() {
    for mach in [0x00, 0x01, 0x27, 0x4d, 0x56, 0xff] {
        assert_eq!(
            code_object_target(&header(4, mach)),
            Err(TargetError::UnknownMach { mach: mach as u8 })
        );
    }
    assert_eq!(
        TargetError::UnknownMach { mach: 0x27 }.to_string(),
        "unknown AMDGPU processor: EF_AMDGPU_MACH (e_flags at byte 48, mask 0xff) is 0x27"
    );
}

#[test]
fn every_single_byte_change_in_the_header_decodes_or_errs_without_panic() {
    for path in ["modern/mk_gfx1030.co", "modern/mk_gfx90a_xnackp.co"] {
        let original = fixture(path);
        for at in 0..64 {
            for value in [0x00, 0x01, 0x02, 0x04, 0x40, 0x7f, 0x80, 0xe0, 0xff] {
                let mut bytes = original.clone();
                bytes[at] = value;
                if let Ok(decoded) = code_object_target(&bytes) {
                    assert_eq!(decoded.e_flags & 0xff, u32::from(bytes[48]));
                }
            }
        }
    }
}
