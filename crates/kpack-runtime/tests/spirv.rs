//! The portable SPIR-V target: every ISA spelling the HIP runtime uses for it loads the
//! `amdgcnspirv` entry, and a GPU's native entry wins when an archive has one.

mod support;

use kpack_archive::Compression;
use kpack_runtime::{Cache, Config};
use support::*;

/// The SPIR-V module and the gfx1100 code object of the clang-22 fixture bundle.
fn entries() -> (Vec<u8>, Vec<u8>) {
    let bundle = read_fixture("spirv/spirv_genco.hsaco");
    let decoded = kpack_bundle::DecodedBundle::decode(&bundle).unwrap();
    let entry = |id: &str| {
        let b = decoded.bundle().unwrap();
        b.entries()
            .iter()
            .find(|e| e.triple == id)
            .unwrap()
            .data
            .to_vec()
    };
    (
        entry("hipv4-spirv64-amd-amdhsa--amdgcnspirv"),
        entry("hipv4-amdgcn-amd-amdhsa--gfx1100"),
    )
}

#[test]
fn every_spirv_isa_spelling_loads_the_spirv_entry_and_a_native_isa_its_own_entry() {
    let (spirv, native) = entries();
    assert_eq!(spirv[..4], 0x0723_0203u32.to_le_bytes(), "a SPIR-V module");
    assert_eq!(native[..4], *b"\x7fELF");
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("lib/libspirv.so");
    std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
    std::fs::write(&binary, b"").unwrap();
    for (arch, data) in [("amdgcnspirv", &spirv), ("gfx1100", &native)] {
        write_archive(
            &dir.path().join(format!("lib/libspirv_{arch}.kpack")),
            Compression::zstd(),
            &[("libspirv.so#0", arch, data)],
            None,
        );
    }
    let cache = Cache::new(Config::default());
    let load = |isas: &[&str]| {
        cache
            .load_with(
                &meta("libspirv.so", &["libspirv_@GFXARCH@.kpack"]),
                &binary,
                0,
                isas,
                |f| (f.bytes.to_vec(), f.arch.to_owned()),
            )
            .unwrap()
    };
    for isa in [
        "amdgcnspirv",
        "spirv64-amd-amdhsa--amdgcnspirv",
        "amdgcn-amd-amdhsa--amdgcnspirv",
    ] {
        assert_eq!(load(&[isa]), (spirv.clone(), "amdgcnspirv".into()), "{isa}");
        // A GPU with no native code object falls back to SPIR-V, listed after its ISA.
        assert_eq!(
            load(&["amdgcn-amd-amdhsa--gfx1030", isa]),
            (spirv.clone(), "amdgcnspirv".into()),
            "gfx1030, {isa}"
        );
        // Native code, when it exists, comes first.
        assert_eq!(
            load(&["amdgcn-amd-amdhsa--gfx1100", isa]),
            (native.clone(), "gfx1100".into()),
            "gfx1100, {isa}"
        );
    }
}
