//! What the reference rocm-kpack split, kpack verifies and recombines
//! (`fixtures/refmade/split/`, the reference's split of `fixtures/shards/`): `verify
//! --original` judges what a rewrite means, not who wrote it; architectures come from
//! archives, indexes and records, never from directory names; recombine takes artifacts named
//! after target IDs and refuses, before writing anything, packages whose archives no marker
//! reaches (shards split by the two tools).

use std::path::{Path, PathBuf};

use kpack_artifact::ArtifactError;
use kpack_artifact::recombine::{PackagingConfig, RecombineOptions, recombine};
use kpack_artifact::verify::{VerifyOptions, VerifyReport, verify};
use kpack_testkit::{SHARDS, assert_no_debug_formatting, copy_tree, fixture, split_shards};

fn refmade(shard: &str) -> PathBuf {
    fixture(&format!("refmade/split/{shard}"))
}

fn verify_against(out: &Path, original: &Path) -> VerifyReport {
    let opts = VerifyOptions {
        original: Some(original.to_owned()),
        threads: 0,
    };
    verify(out, &opts).unwrap()
}

#[test]
fn verify_original_passes_the_references_split_of_every_shard() {
    for (shard, code_objects) in SHARDS.into_iter().zip([6, 9, 3]) {
        let report = verify_against(&refmade(shard), &fixture(&format!("shards/{shard}")));
        assert_eq!(report.lines(), Vec::<String>::new(), "{shard}");
        assert_eq!(report.code_objects, code_objects, "{shard}");
        assert_eq!(report.binaries, 2, "{shard}");
    }
}

#[test]
fn verify_takes_architectures_from_the_archives_not_the_directory_name() {
    for shard in SHARDS {
        let report = verify(&refmade(shard), &VerifyOptions::default()).unwrap();
        assert_eq!(report.lines(), Vec::<String>::new(), "{shard}");
    }
    // A database file of another architecture than the artifact's archive is still caught.
    let tmp = tempfile::tempdir().unwrap();
    let shard = tmp.path().join("shard-b");
    copy_tree(&refmade("shard-b"), &shard);
    let library = "demo/stage/lib/rocblas/library";
    let stray = shard.join(format!(
        "demo_lib_gfx908/{library}/TensileLibrary_Type_S_gfx1030.dat"
    ));
    std::fs::write(&stray, "library for gfx1030\n").unwrap();
    let report = verify(&shard, &VerifyOptions::default()).unwrap();
    assert_eq!(
        report.lines(),
        [format!(
            "{}: a file of gfx1030 in demo_lib_gfx908 (gfx908)",
            stray.display()
        )]
    );
}

/// The packaging configurations of the recombine fixtures: `fixtures/shards/config.json`'s
/// three groups, and the CI workflow's family group `gfx9` (the name the reference's packages
/// were refused for).
fn configs() -> [(PackagingConfig, [&'static str; 2]); 2] {
    let fixture_config = PackagingConfig::load(&fixture("shards/config.json")).unwrap();
    let ci = PackagingConfig::parse(
        r#"{"primary_shard": "shard-a",
            "architecture_groups": {"gfx9": {"architectures": ["gfx900", "gfx906", "gfx908", "gfx90a"]},
                                    "gfx103X": {"architectures": ["gfx1030"]}},
            "validation": {"error_on_duplicate_device_code": true, "verify_generic_artifacts_match": true,
                           "error_on_missing_architecture": true}}"#,
    )
    .unwrap();
    [
        (fixture_config, ["demo_lib_gfx9", "demo_lib_gfx90X"]),
        (ci, ["demo_lib_gfx9", "demo_lib_gfx103X"]),
    ]
}

#[test]
fn the_references_shards_recombine_with_both_configurations_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = fixture("refmade/split");
    for (i, (config, packages)) in configs().into_iter().enumerate() {
        for group_archives in [None, Some(kpack_archive::Compression::None)] {
            let out = tmp
                .path()
                .join(format!("out-{i}-{}", group_archives.is_some()));
            let opts = RecombineOptions {
                group_archives,
                ..RecombineOptions::default()
            };
            let summary = recombine(&shards, &config, &out, &opts).unwrap();
            let lib = summary
                .components
                .iter()
                .find(|c| c.component == "demo_lib")
                .unwrap();
            let gfx90a = lib
                .groups
                .iter()
                .find(|g| g.architectures.contains_key("gfx90a:xnack+"))
                .unwrap();
            assert_eq!(gfx90a.architectures["gfx90a:xnack-"], "shard-b");
            for p in packages {
                assert!(out.join(p).is_dir(), "{}", out.join(p).display());
            }
            let report = verify_against(&out, &fixture("shards"));
            assert_eq!(report.lines(), Vec::<String>::new(), "{}", out.display());
            assert_eq!(report.code_objects, 18);
        }
    }
}

#[test]
fn shards_split_by_both_tools_are_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    // shard-a split by the reference, shards b and c by kpack.
    let shards = split_shards(&tmp.path().join("shards"));
    std::fs::remove_dir_all(shards.join("shard-a")).unwrap();
    copy_tree(&refmade("shard-a"), &shards.join("shard-a"));
    for lenient in [true, false] {
        let config = PackagingConfig::parse(&format!(
            r#"{{"primary_shard": "shard-a",
                "architecture_groups": {{"gfx9": {{"architectures": ["gfx900", "gfx906"]}},
                                        "gfx90X": {{"architectures": ["gfx908", "gfx90a"]}},
                                        "gfx103X": {{"architectures": ["gfx1030"]}}}},
                "validation": {{"verify_generic_artifacts_match": {}}}}}"#,
            !lenient
        ))
        .unwrap();
        let out = tmp.path().join("out");
        let err = recombine(&shards, &config, &out, &RecombineOptions::default()).unwrap_err();
        assert!(!out.exists(), "a refused recombine wrote {}", out.display());
        let ArtifactError::Validation { what, problems } = err else {
            panic!("expected a validation error, got {err}");
        };
        if !lenient {
            assert_eq!(
                what,
                "generic artifacts differ (verify_generic_artifacts_match)"
            );
            continue;
        }
        assert_no_debug_formatting(&problems.join("\n"));
        assert!(what.starts_with("code no marker would reach"), "{what}");
        // Every archive of shards b and c: 2 modules × (gfx908, gfx90a:xnack±, gfx1030).
        assert_eq!(problems.len(), 8, "{problems:#?}");
        assert_eq!(
            problems[0],
            "demo_lib_gfx90X/demo/stage/.kpack/bin_demo_gfx908.kpack: no marker of \
             demo_lib_generic reaches this archive: it is named <module>_<target>.kpack as \
             kpack's split names archives, and the markers search \
             ../.kpack/demo_lib_@GFXARCH@.kpack, named <component>_<target>.kpack as the \
             reference's split names archives (shards split by the two tools cannot be \
             recombined together)"
        );
    }
}

/// The ELF section `name` of the file `path`: (file offset, address).
fn section(path: &Path, name: &str) -> (u64, u64) {
    let bytes = std::fs::read(path).unwrap();
    let elf = kpack_elf::ElfFile::parse(&bytes).unwrap();
    let s = elf.section_by_name(name).unwrap();
    (s.sh_offset, s.sh_addr)
}

/// Adds 1 to the byte at `offset` of `path`.
fn bump(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset as usize] = bytes[offset as usize].wrapping_add(1);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_byte_changed_outside_the_device_code_fails_verify_original_naming_its_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let kpack_split = split_shards(&tmp.path().join("kpack")).join("shard-a");
    let reference = tmp.path().join("reference");
    copy_tree(&refmade("shard-a"), &reference);
    for split in [kpack_split, reference] {
        let lib = split.join("demo_lib_generic/demo/stage/lib/libdemo.so.1");
        let (text, _) = section(&lib, ".text");
        let (original_text, _) = section(
            &fixture("shards/shard-a/demo_lib_gfx90X/demo/stage/lib/libdemo.so.1"),
            ".text",
        );
        bump(&lib, text + 0x10);
        let report = verify_against(&split, &fixture("shards/shard-a"));
        assert_no_debug_formatting(&report.lines().join("\n"));
        assert_eq!(
            report.lines(),
            [format!(
                "demo/stage/lib/libdemo.so.1: the rewritten binary differs from its original \
                 outside the device code: section 13 (.text) differs from the original's at \
                 offset {:#x} (the original's {:#x})",
                text + 0x10,
                original_text + 0x10
            )],
            "{}",
            split.display()
        );
    }
}

/// A wrapper whose RELA addend is off by one (or by 0x101, past the marker's end) is refused
/// by plain `verify` and by `verify --original` alike, in one line naming the file, the
/// wrapper, its offset and where its pointer lands.
#[test]
fn a_wrapper_whose_pointer_misses_the_marker_fails_verify_with_or_without_the_original() {
    let tmp = tempfile::tempdir().unwrap();
    let split = tmp.path().join("reference");
    copy_tree(&refmade("shard-a"), &split);
    let lib = split.join("demo_lib_generic/demo/stage/lib/libdemo.so.1");
    let bytes = std::fs::read(&lib).unwrap();
    let fat = kpack_elf::inspect(&bytes).unwrap();
    let marker = fat.marker.as_ref().unwrap().vaddr;
    let wrapper = &fat.wrappers[1];
    let kpack_elf::PointerSource::Rela {
        section_index,
        entry_index,
        ..
    } = wrapper.pointer
    else {
        panic!("the reference fills wrapper pointers by RELA");
    };
    let elf = kpack_elf::ElfFile::parse(&bytes).unwrap();
    let rela = &elf.section_headers()[section_index];
    // r_addend is the entry's third word: off by one, then by 0x101, past the marker's end.
    let addend = rela.sh_offset + entry_index as u64 * 24 + 16;
    let prefix = format!(
        "{}: wrapper 1 at offset {:#x}: at run time its pointer lands at load base + ",
        lib.display(),
        wrapper.offset
    );
    let plain_and_original = || {
        [
            verify(&split, &VerifyOptions::default()).unwrap(),
            verify_against(&split, &fixture("shards/shard-a")),
        ]
    };
    bump(&lib, addend);
    for report in plain_and_original() {
        assert_eq!(
            report.lines(),
            [format!(
                "{prefix}{:#x}, 1 bytes into the marker, not at its start",
                marker + 1
            )]
        );
    }
    bump(&lib, addend + 1);
    for report in plain_and_original() {
        let lines = report.lines();
        assert_no_debug_formatting(&lines.join("\n"));
        let [line] = lines.as_slice() else {
            panic!("expected one failure: {lines:#?}");
        };
        assert!(
            line.starts_with(&format!("{prefix}{:#x}", marker + 0x101)),
            "{line}"
        );
        assert!(
            line.contains(&format!(
                "not on the marker .rocm_kpack_ref at load base + {marker:#x}"
            )),
            "{line}"
        );
    }
}

#[test]
fn a_marker_that_reaches_no_archive_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = split_shards(&tmp.path().join("shards"));
    // Every archive of bin/demo gone: its marker finds nothing in any package.
    for shard in SHARDS {
        for entry in std::fs::read_dir(shards.join(shard)).unwrap() {
            let kpack = entry.unwrap().path().join("demo/stage/.kpack");
            for archive in std::fs::read_dir(&kpack).into_iter().flatten() {
                let archive = archive.unwrap().path();
                if archive
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("bin_demo_")
                {
                    std::fs::remove_file(archive).unwrap();
                }
            }
        }
    }
    let config = PackagingConfig::load(&fixture("shards/config.json")).unwrap();
    let out = tmp.path().join("out");
    let err = recombine(&shards, &config, &out, &RecombineOptions::default()).unwrap_err();
    assert!(!out.exists());
    let ArtifactError::Validation { problems, .. } = err else {
        panic!("expected a validation error, got {err}");
    };
    assert_eq!(
        problems,
        [format!(
            "{}: its marker (search paths ../.kpack/bin_demo_@GFXARCH@.kpack) reaches no archive \
             of the packages of demo_lib",
            shards
                .join("shard-a/demo_lib_generic/demo/stage/bin/demo")
                .display()
        )]
    );
}

#[test]
fn a_changed_header_or_section_address_fails_verify_original_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let split = tmp.path().join("reference");
    copy_tree(&refmade("shard-c"), &split);
    let demo = split.join("demo_lib_generic/demo/stage/bin/demo");
    let mut bytes = std::fs::read(&demo).unwrap();
    let elf = kpack_elf::ElfFile::parse(&bytes).unwrap();
    let entry = elf.header().e_entry;
    let shoff = elf.header().e_shoff as usize;
    let text = elf.section_by_name(".text").unwrap().clone();
    // e_entry (offset 24), and .text's sh_addr (offset 16 of its 64-byte header).
    bytes[24..32].copy_from_slice(&(entry + 4).to_le_bytes());
    let at = shoff + text.index * 64 + 16;
    bytes[at..at + 8].copy_from_slice(&(text.sh_addr + 0x10).to_le_bytes());
    std::fs::write(&demo, bytes).unwrap();
    let report = verify_against(&split, &fixture("shards/shard-c"));
    let prefix = "demo/stage/bin/demo: the rewritten binary differs from its original outside \
                  the device code";
    assert_eq!(
        report.lines(),
        [
            format!(
                "{prefix}: ELF header field e_entry is {:#x}, the original's {entry:#x}",
                entry + 4
            ),
            format!(
                "{prefix}: section {} (.text): sh_addr is {:#x}, the original's {:#x}",
                text.index,
                text.sh_addr + 0x10,
                text.sh_addr
            ),
        ]
    );
}

#[test]
fn an_archive_of_another_group_in_a_recombined_package_is_named_with_its_architectures() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let config = PackagingConfig::load(&fixture("shards/config.json")).unwrap();
    recombine(
        &fixture("refmade/split"),
        &config,
        &out,
        &RecombineOptions::default(),
    )
    .unwrap();
    let stray = out.join("demo_lib_gfx9/demo/stage/.kpack/demo_lib_gfx1030.kpack");
    std::fs::copy(
        refmade("shard-c").join("demo_lib_gfx1030/demo/stage/.kpack/demo_lib_gfx1030.kpack"),
        &stray,
    )
    .unwrap();
    let lines = verify(&out, &VerifyOptions::default()).unwrap().lines();
    assert_no_debug_formatting(&lines.join("\n"));
    let want = format!(
        "{}: holds gfx1030, not an architecture of demo_lib_gfx9 (gfx900, gfx906)",
        stray.display()
    );
    assert!(lines.contains(&want), "{lines:#?}");
}
