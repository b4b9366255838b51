//! The host rewrite on every linked fat fixture (x86-64, aarch64, ppc64le): the output passes our verifier and the
//! independent witnesses (`readelf`, `eu-elflint --gnu-ld`, `strip`, `patchelf`) report
//! nothing new; refusals leave nothing behind.

use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_elf::rewrite::{RewriteError, plan};
use kpack_elf::{ElfFile, FatBinaryKind, PointerSource, WrapperMagic, inspect, verify};
use kpack_hostbin::marker::MarkerMetadata;
use kpack_testkit::{ELF_FIXTURES, LINKED_FAT, PLATFORM_FIXTURES, read_fixture};
use object::elf::*;

pub(crate) fn marker() -> (MarkerMetadata, Vec<u8>) {
    let meta = MarkerMetadata {
        kernel_name: "lib/libtest.so".into(),
        search_paths: vec!["../.kpack/test_@GFXARCH@.kpack".into()],
        host_entry_id: None,
    };
    let bytes = meta.encode().unwrap();
    (meta, bytes)
}

fn tool(program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} is required (scripts/setup.sh installs it): {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Lines of a witness's output that signal trouble (the reference's list plus elflint's
/// own phrasing), with file names removed so input and output compare.
fn complaints(text: &str, path: &Path) -> Vec<String> {
    let name = path.display().to_string();
    text.lines()
        .map(|l| l.replace(&name, "FILE"))
        .filter(|l| {
            let l = l.to_lowercase();
            !l.trim().is_empty()
                && !l.starts_with("no errors")
                && [
                    "corrupt",
                    "invalid",
                    "warning",
                    "error",
                    "truncated",
                    "out of range",
                    "overlap",
                    "section [",
                    "segment",
                    "not ",
                    "phdr",
                ]
                .iter()
                .any(|k| l.contains(k))
        })
        .collect()
}

fn elflint(path: &Path) -> Vec<String> {
    let (_, text) = tool("eu-elflint", &["--gnu-ld", &path.display().to_string()]);
    complaints(&text, path)
}

fn readelf(path: &Path) -> Vec<String> {
    let (ok, text) = tool("readelf", &["-lSW", &path.display().to_string()]);
    assert!(ok, "readelf failed on {}: {text}", path.display());
    complaints(&text, path)
        .into_iter()
        .filter(|l| l.contains("arning") || l.contains("rror"))
        .collect()
}

fn new_lines(before: &[String], after: &[String]) -> Vec<String> {
    after
        .iter()
        .filter(|l| !before.contains(l))
        .cloned()
        .collect()
}

/// Every linked fat fixture with the GNU strip of its machine: the x86-64 ones, then the
/// aarch64 and ppc64le ones of `fixtures/platforms`.
fn fat_fixtures() -> impl Iterator<Item = (&'static str, String)> {
    let x86 = LINKED_FAT.iter().map(|&rel| (rel, "strip".to_owned()));
    let others = PLATFORM_FIXTURES
        .iter()
        .map(|&(rel, machine)| (rel, machine.tool("strip")));
    x86.chain(others)
}

fn rewrite_fixture(rel: &str, dir: &Path) -> (PathBuf, Vec<u8>, Vec<u8>) {
    let input = read_fixture(rel);
    let (_, m) = marker();
    let rw = plan(&input, &m).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let out = rw.to_vec(&input);
    assert_eq!(out.len() as u64, rw.summary.output_len, "{rel}");
    let mut streamed = Vec::new();
    rw.write_to(&input, &mut streamed).unwrap();
    assert_eq!(streamed, out);
    let path = dir.join(rel.replace('/', "_"));
    std::fs::write(&path, &out).unwrap();
    (path, input, out)
}

#[test]
fn every_fat_fixture_rewrites_to_a_verified_file() {
    let dir = tempfile::tempdir().unwrap();
    let (meta, m) = marker();
    for (rel, _) in fat_fixtures() {
        let (_, input, out) = rewrite_fixture(rel, dir.path());
        if let Err(issues) = verify(&out) {
            panic!("{rel}: {issues:#?}");
        }
        let fat = inspect(&out).unwrap();
        assert_eq!(fat.kind, FatBinaryKind::Kpacked, "{rel}");
        let marker = fat.marker.clone().unwrap();
        assert_eq!(marker.bytes(&out).unwrap(), &m[..], "{rel}");
        assert_eq!(MarkerMetadata::decode(&m).unwrap().0, meta);
        let before = inspect(&input).unwrap();
        assert_eq!(fat.wrappers.len(), before.wrappers.len(), "{rel}");
        for w in &fat.wrappers {
            assert_eq!(w.magic, WrapperMagic::Hipk, "{rel}");
            assert_eq!(w.version, 1);
            assert_eq!(w.reserved1, w.index as u64);
            assert_eq!(w.target, Some(marker.vaddr), "{rel} wrapper {}", w.index);
            assert_eq!(
                w.binary, marker.vaddr,
                "{rel}: the in-file pointer is the marker too"
            );
        }
        let fatbin = fat.fatbin.unwrap();
        assert!(fatbin.nobits, "{rel}");
        // Device code bytes left in the file are zero. (In an executable the new segment,
        // the program header table and the marker, may fill .hip_fatbin's first pages.)
        let old = before.fatbin.unwrap();
        let elf = ElfFile::parse(&out).unwrap();
        let new_segment = elf.load_segment_for_vaddr(marker.vaddr).unwrap();
        for off in [old.vaddr, old.vaddr + old.size - 1] {
            if new_segment.contains_vaddr(off) {
                continue;
            }
            if let Some(o) = elf.vaddr_to_offset(off) {
                assert_eq!(
                    out[o as usize], 0,
                    "{rel}: fatbin byte at {off:#x} left in the file"
                );
            }
        }
    }
}

#[test]
fn big_fatbins_shrink_the_file_by_whole_pages() {
    let dir = tempfile::tempdir().unwrap();
    for rel in ["bin/libone.so", "bin/libtwo.so", "bin/librdc.so"] {
        let input = read_fixture(rel);
        let (_, m) = marker();
        let rw = plan(&input, &m).unwrap();
        let s = &rw.summary;
        assert!(
            s.removed > 0 && s.removed.is_multiple_of(4096),
            "{rel}: {s:?}"
        );
        assert!(s.output_len < s.input_len, "{rel}: {s:?}");
        let _ = rewrite_fixture(rel, dir.path());
    }
}

/// What eu-elflint reports for `path` and not for the original `orig`, less two checks it
/// makes by file offset that a cut of `.hip_fatbin` trips although the file is sound; the
/// properties they stand for are checked here directly.
fn elflint_new_problems(rel: &str, orig: &Path, path: &Path) -> Vec<String> {
    let mut added = new_lines(&elflint(orig), &elflint(path));
    // When `.hip_fatbin` does not start on a page (the aarch64/ppc64le lld fixtures,
    // 4 KiB-aligned in 64 KiB pages), its segment keeps the zeroed partial page in the
    // file, so the NOBITS section starts inside the segment's file bytes, and elflint reads
    // sh_size bytes from there, past them. The segment's own bytes there must be zero.
    let out = std::fs::read(path).unwrap();
    let b = ElfFile::parse(&out).unwrap();
    let fatbin = b
        .section_headers()
        .iter()
        .find(|x| x.name == ".hip_fatbin")
        .unwrap();
    // In an executable, the new segment (the program header table and the marker) may
    // fill .hip_fatbin's first pages: the same message, about bytes that are not its.
    let marker = b.section_by_name(".rocm_kpack_ref").unwrap();
    for p in b.program_headers().iter().filter(|p| p.p_type == PT_LOAD) {
        let file_end = p.p_offset + p.p_filesz;
        if p.p_offset <= fatbin.sh_offset && fatbin.sh_offset < file_end {
            let end = file_end.min(fatbin.sh_offset + fatbin.sh_size);
            assert!(
                p.contains_vaddr(marker.sh_addr)
                    || out[fatbin.sh_offset as usize..end as usize]
                        .iter()
                        .all(|&x| x == 0),
                "{rel}: file bytes of .hip_fatbin's partial page are not zero"
            );
            let nobits_read = format!(
                "section [{:2}] '.hip_fatbin' has type NOBITS but is read from the file",
                fatbin.index
            );
            added.retain(|l| !l.starts_with(&nobits_read));
        }
    }
    // elflint places a NOBITS section in a segment by its file offset against
    // `p_offset + p_memsz`; after the cut, the offsets of later NOBITS sections
    // (`.relro_padding`, `.bss`) can fall in piece 1's zero-filled tail although their
    // addresses lie in their own segment. What that check stands for, the section's
    // memory inside one PT_LOAD, is checked here by address instead.
    for sec in b
        .section_headers()
        .iter()
        .filter(|x| x.sh_type == SHT_NOBITS)
    {
        let in_memory = b.program_headers().iter().any(|p| {
            p.p_type == PT_LOAD
                && p.p_vaddr <= sec.sh_addr
                && sec.sh_addr + sec.sh_size <= p.p_vaddr + p.p_memsz
        });
        assert!(in_memory, "{rel}: {} is not in a PT_LOAD", sec.name);
        let by_offset = format!(
            "section [{:2}] '{}' not fully contained in segment",
            sec.index, sec.name
        );
        added.retain(|l| !l.starts_with(&by_offset));
    }
    added
}

#[test]
#[cfg_attr(windows, ignore = "needs eu-elflint, readelf, strip and patchelf")]
fn witnesses_report_nothing_new_on_rewritten_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    for (rel, strip) in fat_fixtures() {
        let (path, input, _) = rewrite_fixture(rel, dir.path());
        let orig = dir.path().join(format!("orig_{}", rel.replace('/', "_")));
        std::fs::write(&orig, &input).unwrap();
        let added = elflint_new_problems(rel, &orig, &path);
        assert!(
            added.is_empty(),
            "{rel}: eu-elflint --gnu-ld reports new problems: {added:#?}"
        );
        let added = new_lines(&readelf(&orig), &readelf(&path));
        assert!(
            added.is_empty(),
            "{rel}: readelf reports new problems: {added:#?}"
        );

        // strip and patchelf keep the result a valid, verifiable kpacked file.
        let stripped = dir
            .path()
            .join(format!("stripped_{}", rel.replace('/', "_")));
        let (ok, text) = tool(
            &strip,
            &[
                "-o",
                &stripped.display().to_string(),
                &path.display().to_string(),
            ],
        );
        assert!(ok, "{rel}: strip failed: {text}");
        let bytes = std::fs::read(&stripped).unwrap();
        assert_eq!(
            inspect(&bytes).unwrap().kind,
            FatBinaryKind::Kpacked,
            "{rel}"
        );
        let added = elflint_new_problems(rel, &orig, &stripped);
        assert!(added.is_empty(), "{rel}: strip output: {added:#?}");

        let patched = dir
            .path()
            .join(format!("patched_{}", rel.replace('/', "_")));
        std::fs::copy(&path, &patched).unwrap();
        let (ok, text) = tool(
            "patchelf",
            &[
                "--add-rpath",
                "/opt/kpack-test",
                &patched.display().to_string(),
            ],
        );
        assert!(ok, "{rel}: patchelf failed: {text}");
        let bytes = std::fs::read(&patched).unwrap();
        let fat = inspect(&bytes).unwrap();
        assert_eq!(fat.kind, FatBinaryKind::Kpacked, "{rel}");
        assert!(
            fat.wrappers
                .iter()
                .all(|w| w.target == Some(fat.marker.as_ref().unwrap().vaddr))
        );
    }
}

#[test]
fn every_pointer_form_is_rewritten_in_file_and_in_its_relocation() {
    let dir = tempfile::tempdir().unwrap();
    let expect = [
        ("bin/exe_nopie", "in-place"),
        ("bin/libone.so", "rela"),
        ("bin/librdc.so", "rela"),
        ("bin/librelr.so", "relr"),
    ];
    for (rel, form) in expect {
        let input = read_fixture(rel);
        let before = inspect(&input).unwrap();
        let found = match &before.wrappers[0].pointer {
            PointerSource::InPlace(_) => "in-place",
            PointerSource::Rela { .. } => "rela",
            PointerSource::Rel { .. } => "rel",
            PointerSource::Relr { .. } => "relr",
        };
        assert_eq!(found, form, "{rel}");
        let (_, _, out) = rewrite_fixture(rel, dir.path());
        let after = inspect(&out).unwrap();
        let mv = after.marker.unwrap().vaddr;
        for w in &after.wrappers {
            match &w.pointer {
                PointerSource::Rela {
                    r_type,
                    addend,
                    symbol,
                    ..
                } => {
                    assert_eq!(
                        *r_type, R_X86_64_RELATIVE,
                        "{rel}: R_X86_64_64 becomes RELATIVE"
                    );
                    assert_eq!(*addend as u64, mv);
                    assert_eq!(symbol, &None);
                }
                PointerSource::InPlace(v) | PointerSource::Relr { in_file: v, .. } => {
                    assert_eq!(*v, mv, "{rel}")
                }
                PointerSource::Rel { in_file, .. } => assert_eq!(*in_file, mv),
            }
        }
    }
    // The RDC library: two wrappers shared one bundle through R_X86_64_64 against
    // __hip_fatbin; both now resolve to the marker.
    let rdc = inspect(&read_fixture("bin/librdc.so")).unwrap();
    assert_eq!(rdc.wrappers.len(), 2);
}

#[test]
fn every_elf_fixture_is_rewritten_and_verified_or_refused_with_a_reason() {
    let (_, m) = marker();
    for rel in ELF_FIXTURES {
        let input = read_fixture(rel);
        match plan(&input, &m) {
            Ok(rw) => {
                assert!(LINKED_FAT.contains(rel), "{rel} was rewritten");
                verify(&rw.to_vec(&input)).unwrap_or_else(|i| panic!("{rel}: {i:#?}"));
            }
            Err(e) => assert!(!LINKED_FAT.contains(rel), "{rel}: {e}"),
        }
    }
}

#[test]
fn rewriting_a_kpacked_file_is_refused_as_already_kpacked() {
    let input = read_fixture("bin/libone.so");
    let (_, m) = marker();
    let out = plan(&input, &m).unwrap().to_vec(&input);
    assert!(matches!(plan(&out, &m), Err(RewriteError::AlreadyKpacked)));
}

#[test]
fn unsupported_inputs_are_refused_with_their_reason() {
    let (_, m) = marker();
    for (rel, want) in [
        ("bin/k1.o", "relocatable"),
        ("bin/rdc_a.o", "relocatable"),
        ("modern/mk_v3.o", "relocatable"),
        ("bin/libhostonly.so", "no device code"),
        ("modern/mk_gfx1030.co", "e_machine"),
    ] {
        let err = plan(&read_fixture(rel), &m).unwrap_err().to_string();
        assert!(err.to_lowercase().contains(want), "{rel}: {err}");
    }
    // ELF32 and big-endian: flip the class/data bytes of a real file.
    let mut elf32 = read_fixture("bin/libone.so");
    elf32[4] = ELFCLASS32;
    assert!(plan(&elf32, &m).unwrap_err().to_string().contains("ELF32"));
    let mut be = read_fixture("bin/libone.so");
    be[5] = ELFDATA2MSB;
    assert!(
        plan(&be, &m)
            .unwrap_err()
            .to_string()
            .contains("big-endian")
    );
    // A machine the rewrite does not know (RISC-V): its relocation types and page are not
    // modelled, so it is refused, naming the supported ones.
    let mut riscv = read_fixture("bin/libone.so");
    riscv[18..20].copy_from_slice(&EM_RISCV.to_le_bytes());
    let err = plan(&riscv, &m).unwrap_err();
    assert!(
        matches!(err, RewriteError::UnsupportedMachine(EM_RISCV)),
        "{err}"
    );
    assert!(err.to_string().contains("aarch64 (183)"), "{err}");
}

#[test]
fn layout_keeps_segments_congruent_and_preserves_memsz_tails() {
    let dir = tempfile::tempdir().unwrap();
    for (rel, _) in fat_fixtures() {
        let (_, input, out) = rewrite_fixture(rel, dir.path());
        let a = ElfFile::parse(&input).unwrap();
        let b = ElfFile::parse(&out).unwrap();
        // Memory image: every original PT_LOAD byte range is still covered.
        for p in a.program_headers().iter().filter(|p| p.p_type == PT_LOAD) {
            let mut at = p.p_vaddr;
            while at < p.p_vaddr + p.p_memsz {
                let seg = b
                    .load_segment_for_vaddr(at)
                    .unwrap_or_else(|| panic!("{rel}: {at:#x} no longer mapped"));
                // Permissions never grow (a piece without code may lose PF_X).
                assert_eq!(seg.p_flags & !p.p_flags, 0, "{rel}");
                at = seg.p_vaddr + seg.p_memsz;
            }
        }
        for p in b.program_headers().iter().filter(|p| p.p_type == PT_LOAD) {
            assert_eq!(
                p.p_offset % p.p_align.max(1),
                p.p_vaddr % p.p_align.max(1),
                "{rel}"
            );
        }
        // Non-fatbin allocated bytes are unchanged at their addresses.
        let fat = inspect(&input).unwrap().fatbin.unwrap();
        for s in a.section_headers() {
            if s.sh_flags & u64::from(SHF_ALLOC) == 0
                || !s.has_file_data()
                || s.index == fat.section_index
            {
                continue;
            }
            if [
                ".hipFatBinSegment",
                ".rela.dyn",
                ".relr.dyn",
                ".data.rel.ro",
            ]
            .contains(&s.name.as_str())
            {
                continue;
            }
            let o = b.vaddr_to_offset(s.sh_addr).unwrap();
            let new = &out[o as usize..(o + s.sh_size) as usize];
            assert_eq!(new, a.section_data(s).unwrap(), "{rel}: section {}", s.name);
        }
    }
}

/// Found by the `rewrite` fuzz target: a section alignment that is not a power of two made
/// the output fail verification. An input the verifier rejects is now refused up front.
#[test]
fn inputs_the_verifier_rejects_are_refused_before_planning() {
    let (_, m) = marker();
    let mut data = read_fixture("modern/libmodern_two_v3.so");
    let elf = kpack_elf::ElfFile::parse(&data).unwrap();
    let got = elf
        .section_by_name(".got")
        .expect("the fixture has .got")
        .clone();
    let shoff = elf.header().e_shoff as usize + got.index * 64;
    drop(elf);
    // sh_addralign is at +48 in an Elf64_Shdr.
    data[shoff + 48..shoff + 56].copy_from_slice(&0x3008u64.to_le_bytes());
    match plan(&data, &m) {
        Err(RewriteError::MalformedInput { issues }) => {
            assert!(
                issues.iter().any(|i| i.message.contains(".got")),
                "{issues:?}"
            );
        }
        other => panic!("expected MalformedInput, got {:?}", other.map(|_| ())),
    }
}

/// Found by the `rewrite` fuzz target: an executable whose `.bss` spans 4 GiB asked for 4 GiB
/// of zero padding to place the program header table where old kernels look. Refused instead.
#[test]
fn executables_needing_huge_padding_are_refused() {
    let (_, m) = marker();
    let mut data = read_fixture("modern/exe_modern_v3");
    let elf = kpack_elf::ElfFile::parse(&data).unwrap();
    let rw = elf
        .program_headers()
        .iter()
        .find(|p| p.p_type == 1 && p.p_flags == 6)
        .expect("a RW PT_LOAD")
        .clone();
    let at = elf.header().e_phoff as usize + rw.index * 56 + 40;
    drop(elf);
    // p_memsz of the RW segment: 4 GiB of .bss.
    data[at..at + 8].copy_from_slice(&0x1_0000_ffc8u64.to_le_bytes());
    match plan(&data, &m) {
        Err(RewriteError::Layout(msg)) => assert!(msg.contains("pad"), "{msg}"),
        other => panic!(
            "expected a refusal, got {:?}",
            other.map(|r| r.summary.output_len)
        ),
    }
}

/// Executables keep their program header table where kernels before 5.18 compute `AT_PHDR`
/// (the first `PT_LOAD`'s `p_vaddr - p_offset` plus `e_phoff`) without padding the file up
/// to the address of a segment above all others: the new segment fills `.hip_fatbin`'s
/// first freed page, so the file shrinks by the rest of its whole pages. The output
/// verifies, and starts: the kernel maps it, ld.so accepts its program headers and the
/// stand-in HIP runtime reads the marker through the wrapper.
#[test]
#[cfg_attr(
    windows,
    ignore = "needs gcc and Linux's ld.so (the stand-in HIP runtime)"
)]
fn transform_of_a_pie_executable_does_not_pad_the_file_by_its_device_code() {
    let dir = tempfile::tempdir().unwrap();
    let (_, m) = marker();
    for rel in ["bin/exe_pie", "bin/exe_nopie"] {
        let (path, input, out) = rewrite_fixture(rel, dir.path());
        verify(&out).unwrap_or_else(|i| panic!("{rel}: {i:#?}"));
        let page = 4096;
        let fatbin = inspect(&input).unwrap().fatbin.unwrap();
        let whole_pages =
            (fatbin.vaddr + fatbin.size) / page * page - fatbin.vaddr.div_ceil(page) * page;
        assert!(
            whole_pages >= 2 * page,
            "{rel}: the fixture's device code spans pages"
        );
        // One page holds the table and the marker; the marker's section header and name
        // are added.
        let added = page + 64 + ".rocm_kpack_ref\0".len() as u64;
        assert!(
            out.len() as u64 + whole_pages <= input.len() as u64 + added,
            "{rel}: {} bytes in, {} out, {whole_pages} bytes of whole device-code pages",
            input.len(),
            out.len()
        );

        let elf = ElfFile::parse(&out).unwrap();
        let h = elf.header();
        let loads: Vec<_> = elf
            .program_headers()
            .iter()
            .filter(|p| p.p_type == PT_LOAD)
            .collect();
        let at_phdr = loads[0].p_vaddr - loads[0].p_offset + h.e_phoff;
        let phdr = elf
            .program_headers()
            .iter()
            .find(|p| p.p_type == PT_PHDR)
            .unwrap();
        assert_eq!(
            phdr.p_vaddr, at_phdr,
            "{rel}: PT_PHDR is where old kernels look"
        );
        assert_eq!(phdr.p_offset, h.e_phoff, "{rel}");
        // The table is mapped there, from the file, by the segment in the freed pages.
        let table = elf.load_segment_for_vaddr(at_phdr).unwrap();
        assert_eq!(table.p_vaddr, fatbin.vaddr.div_ceil(page) * page, "{rel}");
        assert_eq!(elf.vaddr_to_offset(at_phdr), Some(h.e_phoff), "{rel}");
        assert!(
            elf.vaddr_to_offset(at_phdr + u64::from(h.e_phnum) * 56 - 1)
                .is_some(),
            "{rel}"
        );
        let marker = inspect(&out).unwrap().marker.unwrap();
        assert!(table.contains_vaddr(marker.vaddr), "{rel}");

        kpack_fs::set_mode(&path, 0o755).unwrap();
        let regs = kpack_testkit::standin(None).load(&path, &[], &dir.path().join("run"));
        assert_eq!(regs.len(), 1, "{rel}");
        assert_eq!(regs[0].magic, "HIPK", "{rel}");
        assert!(
            regs[0].bytes.starts_with(&m),
            "{rel}: the wrapper leads to the marker"
        );
    }
}

/// Restores `out` (the transform of the large PIE `input`, whose `copies` wrappers point at
/// bundles `slot` bytes apart) with `input`'s own `.hip_fatbin` bytes, as `kpack restore`
/// does: the result passes `verify`, is of the input's kind, holds those bytes at its
/// `.hip_fatbin`, and each wrapper points at its bundle. Returns the restored file.
fn restore_large_pie(input: &[u8], out: &[u8], copies: usize, slot: u64) -> Vec<u8> {
    use kpack_elf::restore::{Payload, plan as plan_restore};
    let before = inspect(input).unwrap();
    let original = before.fatbin.unwrap();
    let contents = &input[original.offset as usize..(original.offset + original.size) as usize];
    let payload = Payload {
        len: original.size,
        wrapper_bundles: (0..copies as u64).map(|i| i * slot).collect(),
    };
    let restored = plan_restore(out, &payload)
        .unwrap_or_else(|e| panic!("{e}"))
        .rewrite
        .to_vec_with_contents(out, contents);
    verify(&restored).unwrap_or_else(|i| panic!("restored: {i:#?}"));
    let after = inspect(&restored).unwrap();
    assert_eq!(after.kind, before.kind);
    let fatbin = after.fatbin.unwrap();
    assert_eq!(
        &restored[fatbin.offset as usize..(fatbin.offset + fatbin.size) as usize],
        contents
    );
    assert_eq!(after.wrappers.len(), copies);
    for (w, o) in after.wrappers.iter().zip(&payload.wrapper_bundles) {
        assert_eq!(w.target, Some(fatbin.vaddr + o));
    }
    restored
}

/// Links a PIE executable whose `.hip_fatbin` holds `copies` copies of `exe_pie`'s bundle,
/// each aligned to `1 << align_log2` (page-aligned ones start at a page; 16-byte-aligned
/// ones after 300 bytes of `.rodata`, inside one), each registered by its own wrapper (an
/// `R_X86_64_RELATIVE` pointer), and whose `main` prints the first 24 bytes its first
/// wrapper's pointer leads to, in hex. The [`Linker`] says how it is linked. Returns the
/// executable's path and the bundle's slot size.
fn link_large_pie(dir: &Path, copies: usize, align_log2: u32, linker: Linker) -> (PathBuf, u64) {
    link_large_pie_with(dir, copies, align_log2, linker, &[])
}

/// [`link_large_pie`] with `extra` sources linked in too.
fn link_large_pie_with(
    dir: &Path,
    copies: usize,
    align_log2: u32,
    linker: Linker,
    extra: &[PathBuf],
) -> (PathBuf, u64) {
    let fixture = read_fixture("bin/exe_pie");
    let fat = inspect(&fixture).unwrap();
    let section = fat.fatbin.unwrap();
    let bundle = &fixture[section.offset as usize..(section.offset + section.size) as usize];
    let slot = section.size.next_multiple_of(1 << align_log2);
    let bundle_path = dir.join("bundle.bin");
    std::fs::write(&bundle_path, bundle).unwrap();
    let mut asm = String::from(".section .rodata\n.fill 300,1,7\n");
    asm += ".section .hip_fatbin,\"a\",@progbits\n";
    for i in 0..copies {
        asm += &format!(
            ".p2align {align_log2}\nkb{i}:\n.incbin \"{}\"\n",
            bundle_path.display()
        );
    }
    asm += ".section .hipFatBinSegment,\"aw\",@progbits\n.p2align 3\n.globl kpack_wrappers\nkpack_wrappers:\n";
    for i in 0..copies {
        asm += &format!(".long 0x48495046\n.long 1\n.quad kb{i}\n.quad 0\n");
    }
    asm += ".section .note.GNU-stack,\"\",@progbits\n";
    std::fs::write(dir.join("fat.s"), asm).unwrap();
    std::fs::write(
        dir.join("main.c"),
        "#include <stdio.h>\n\
         struct wrapper { unsigned magic, version; const unsigned char *p; void *r; };\n\
         extern const struct wrapper kpack_wrappers[];\n\
         int main(void) {\n\
           for (int i = 0; i < 24; i++) printf(\"%02x\", kpack_wrappers[0].p[i]);\n\
           printf(\"\\n\");\n\
           return 0;\n\
         }\n",
    )
    .unwrap();
    let exe = dir.join("large_pie");
    let script = dir.join("layout.ld");
    let mut args: Vec<String> = ["-O1", "-fPIE", "-pie", "-o"]
        .iter()
        .map(|&a| a.to_owned())
        .collect();
    args.extend([&exe, &dir.join("main.c"), &dir.join("fat.s")].map(|p| p.display().to_string()));
    args.extend(extra.iter().map(|p| p.display().to_string()));
    args.push(format!("-Wl,-T,{}", script.display()));
    match linker {
        Linker::Gnu { rodata_shift } => std::fs::write(
            &script,
            format!("SECTIONS {{ . = . + {rodata_shift:#x}; }} INSERT BEFORE .rodata;\n"),
        )
        .unwrap(),
        Linker::Lld => {
            let bin = kpack_testkit::corpus().join("llvm22root/usr/lib/llvm-22/bin");
            assert!(
                bin.join("ld.lld").exists(),
                "{}/ld.lld is missing: run scripts/setup.sh",
                bin.display()
            );
            std::fs::write(
                &script,
                "SECTIONS { .rodata : { *(.rodata .rodata.*) } .hip_fatbin : { *(.hip_fatbin) } \
                 .eh_frame_hdr : { *(.eh_frame_hdr) } .eh_frame : { KEEP(*(.eh_frame)) } } \
                 INSERT AFTER .text;\n",
            )
            .unwrap();
            args.push(format!("-B{}", bin.display()));
            args.push("-fuse-ld=lld".to_owned());
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, text) = tool("cc", &args);
    assert!(ok, "cc failed: {text}");
    (exe, slot)
}

/// How [`link_large_pie`] links.
#[derive(Clone, Copy)]
enum Linker {
    /// GNU ld, `rodata_shift` bytes of address space (a page multiple) before `.rodata`
    /// giving the `PT_LOAD` holding `.rodata` and `.hip_fatbin` that much more `p_vaddr -
    /// p_offset` than the first one (0: the default layout, one delta for all).
    Gnu { rodata_shift: u64 },
    /// lld 22 (`scripts/setup.sh` puts it in the corpus), `.rodata`, `.hip_fatbin` and
    /// `.eh_frame` after `.text`: their `PT_LOAD` is shifted from the first by the partial
    /// pages of the segments before it, as in Debian's ROCm test executables.
    Lld,
}

/// What `path` prints: the hex of the first 24 bytes its first wrapper leads to.
fn run_printing_first_bytes(path: &Path) -> String {
    kpack_fs::set_mode(path, 0o755).unwrap();
    let (ok, text) = tool(
        "/lib64/ld-linux-x86-64.so.2",
        &["--list", &path.display().to_string()],
    );
    assert!(ok, "{}: ld.so --list: {text}", path.display());
    let (ok, text) = tool(&path.display().to_string(), &[]);
    assert!(ok, "{}: {text}", path.display());
    text.trim().to_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A PIE executable whose device code spans more than [`MAX_PADDING`]: above every segment,
/// its moved program header table would need that much zero padding to stay where kernels
/// before 5.18 look for it (refused before). The new segment (the table, a spare `PT_NULL`
/// entry, the marker) fills `.hip_fatbin`'s first freed page instead, and GNU `strip`,
/// `strip --strip-debug`, `objcopy` and `patchelf` keep it working: the marker keeps its
/// address, the table stays where `PT_PHDR` and the old-kernel rule say, the verifier and
/// readelf find nothing wrong, ld.so loads it and the wrapper leads to the marker. A restore
/// puts the device code back byte for byte, growing the table into the spare entry.
#[test]
#[cfg_attr(
    windows,
    ignore = "needs cc, strip, objcopy, patchelf, readelf and Linux's ld.so"
)]
fn a_large_pie_executable_is_transformed_in_place_and_survives_strip_and_restore() {
    use kpack_elf::rewrite::MAX_PADDING;
    let dir = tempfile::tempdir().unwrap();
    let copies = 4200;
    let (exe, slot) = link_large_pie(dir.path(), copies, 12, Linker::Gnu { rodata_shift: 0 });
    let input = std::fs::read(&exe).unwrap();
    let before = inspect(&input).unwrap();
    let original_fatbin = before.fatbin.clone().unwrap();
    assert!(
        original_fatbin.size > MAX_PADDING,
        "{}",
        original_fatbin.size
    );
    let bundle_magic = hex(b"__CLANG_OFFLOAD_BUNDLE__");
    assert_eq!(run_printing_first_bytes(&exe), bundle_magic);

    let (_, m) = marker();
    let rw = plan(&input, &m).unwrap_or_else(|e| panic!("{e}"));
    // Above every segment the table would have needed about the removed bytes of padding.
    assert!(rw.summary.removed > MAX_PADDING, "{:?}", rw.summary);
    let out = rw.to_vec(&input);
    assert!(
        out.len() as u64 + rw.summary.removed <= input.len() as u64 + 8192,
        "{:?}",
        rw.summary
    );
    verify(&out).unwrap_or_else(|i| panic!("{i:#?}"));
    let kpacked = dir.path().join("kpacked");
    std::fs::write(&kpacked, &out).unwrap();
    assert_eq!(run_printing_first_bytes(&kpacked), hex(&m[..24]));

    let elf = ElfFile::parse(&out).unwrap();
    let marker_vaddr = rw.summary.marker_vaddr;
    let table = elf.load_segment_for_vaddr(marker_vaddr).unwrap();
    assert_eq!(table.p_vaddr, original_fatbin.vaddr, "the first freed page");
    assert_eq!(table.p_offset, original_fatbin.offset);
    assert!(
        elf.program_headers().iter().any(|p| p.p_type == PT_NULL),
        "the spare entry"
    );
    drop(elf);

    assert_edits_keep_the_marker(dir.path(), &kpacked, marker_vaddr, &m, false);

    // The restore: the bundles back, byte for byte.
    let restored = restore_large_pie(&input, &out, copies, slot);
    // The table grew into the spare entry: the restore needed no padding.
    assert!(
        (restored.len() as u64) < out.len() as u64 + original_fatbin.size + 2 * 4096,
        "{} bytes restored",
        restored.len()
    );
    let restored_path = dir.path().join("restored");
    std::fs::write(&restored_path, &restored).unwrap();
    assert_eq!(run_printing_first_bytes(&restored_path), bundle_magic);
}

/// GNU `strip`, `strip --strip-debug`, `objcopy` and `patchelf --add-rpath` of the kpacked
/// executable `kpacked` (see [`link_large_pie`]) leave a file the verifier and readelf find
/// nothing wrong with, whose marker keeps `marker_vaddr` and bytes `m`, every wrapper
/// leading to it, whose program header table is where `PT_PHDR` and kernels before 5.18 say,
/// and which runs, printing the marker's first bytes. With `shifted` (the table's segment
/// follows one whose `p_vaddr - p_offset` differs from the first `PT_LOAD`'s, lld's layout),
/// BFD's re-layout (strip, objcopy) gives the table that segment's `p_vaddr - p_offset`
/// and the old-kernel rule cannot hold: the verifier's complaint about it is the only one
/// allowed there.
fn assert_edits_keep_the_marker(
    dir: &Path,
    kpacked: &Path,
    marker_vaddr: u64,
    m: &[u8],
    shifted: bool,
) {
    assert_these_edits_keep_the_marker(dir, kpacked, marker_vaddr, m, shifted, EDITS);
}

/// The edits a packager applies after a transform: `(name, program, arguments)`.
const EDITS: &[(&str, &str, &[&str])] = &[
    ("strip", "strip", &[]),
    ("strip-debug", "strip", &["--strip-debug"]),
    ("objcopy", "objcopy", &[]),
    ("patchelf", "patchelf", &["--add-rpath", "/opt/kpack-test"]),
];

/// [`assert_edits_keep_the_marker`] with only `edits`.
fn assert_these_edits_keep_the_marker(
    dir: &Path,
    kpacked: &Path,
    marker_vaddr: u64,
    m: &[u8],
    shifted: bool,
    edits: &[(&str, &str, &[&str])],
) {
    for &(name, program, args) in edits {
        let edited = dir.join(name);
        std::fs::copy(kpacked, &edited).unwrap();
        let mut argv = args.to_vec();
        let path = edited.display().to_string();
        argv.push(&path);
        let (ok, text) = tool(program, &argv);
        assert!(ok, "{name}: {text}");
        let bytes = std::fs::read(&edited).unwrap();
        let bfd = program != "patchelf";
        let old_kernel_rule = !(shifted && bfd);
        if let Err(issues) = verify(&bytes) {
            assert!(
                !old_kernel_rule
                    && issues
                        .iter()
                        .all(|i| i.message.contains("kernels before 5.18")),
                "{name}: {issues:#?}"
            );
        }
        assert!(
            readelf(&edited).is_empty(),
            "{name}: {:?}",
            readelf(&edited)
        );
        let fat = inspect(&bytes).unwrap();
        assert_eq!(fat.kind, FatBinaryKind::Kpacked, "{name}");
        let marker = fat.marker.as_ref().unwrap();
        assert_eq!(marker.vaddr, marker_vaddr, "{name}: the marker moved");
        assert_eq!(marker.bytes(&bytes).unwrap(), m, "{name}");
        assert!(
            fat.wrappers.iter().all(|w| w.target == Some(marker_vaddr)),
            "{name}"
        );
        // The table is where PT_PHDR says, and where kernels before 5.18 look.
        let elf = ElfFile::parse(&bytes).unwrap();
        let h = elf.header();
        let phdr = elf
            .program_headers()
            .iter()
            .find(|p| p.p_type == PT_PHDR)
            .unwrap();
        assert_eq!(elf.vaddr_to_offset(phdr.p_vaddr), Some(h.e_phoff), "{name}");
        let first = elf
            .program_headers()
            .iter()
            .find(|p| p.p_type == PT_LOAD)
            .unwrap();
        if old_kernel_rule {
            assert_eq!(
                first.p_vaddr - first.p_offset + h.e_phoff,
                phdr.p_vaddr,
                "{name}"
            );
        }
        assert_eq!(run_printing_first_bytes(&edited), hex(&m[..24]), "{name}");
    }
}

/// `.hip_fatbin` starting inside a page (`V < A`): piece 1 keeps its head as zero-filled
/// memory, the new segment fills the first whole page, and strip, objcopy and patchelf
/// keep the marker and `.rodata` before it.
#[test]
#[cfg_attr(
    windows,
    ignore = "needs cc, strip, objcopy, patchelf, readelf and Linux's ld.so"
)]
fn an_executable_whose_device_code_starts_inside_a_page_survives_strip() {
    let dir = tempfile::tempdir().unwrap();
    let (exe, _) = link_large_pie(dir.path(), 20, 4, Linker::Gnu { rodata_shift: 0 });
    let input = std::fs::read(&exe).unwrap();
    let fatbin = inspect(&input).unwrap().fatbin.unwrap();
    assert_ne!(fatbin.vaddr % 4096, 0, "{:#x}", fatbin.vaddr);
    let (_, m) = marker();
    let rw = plan(&input, &m).unwrap_or_else(|e| panic!("{e}"));
    let out = rw.to_vec(&input);
    verify(&out).unwrap_or_else(|i| panic!("{i:#?}"));
    let elf = ElfFile::parse(&out).unwrap();
    let segment = elf.load_segment_for_vaddr(rw.summary.marker_vaddr).unwrap();
    assert_eq!(segment.p_vaddr, fatbin.vaddr.next_multiple_of(4096));
    drop(elf);
    let kpacked = dir.path().join("kpacked");
    std::fs::write(&kpacked, &out).unwrap();
    assert_eq!(run_printing_first_bytes(&kpacked), hex(&m[..24]));
    assert_edits_keep_the_marker(dir.path(), &kpacked, rw.summary.marker_vaddr, &m, false);
}

/// lld's layout, made by GNU ld: the `PT_LOAD` holding `.rodata` and `.hip_fatbin` has
/// `p_vaddr - p_offset` two pages above the first `PT_LOAD`'s.
#[test]
#[cfg_attr(
    windows,
    ignore = "needs cc, strip, objcopy, patchelf, readelf and Linux's ld.so"
)]
fn an_executable_whose_device_code_segment_is_shifted_from_the_first_is_transformed_in_place() {
    transform_shifted_pie(Linker::Gnu {
        rodata_shift: 0x2000,
    });
}

/// lld's own layout (Debian's ROCm test executables): `.hip_fatbin`'s `PT_LOAD` follows the
/// code's, each shifted by a partial page.
#[test]
#[cfg_attr(
    windows,
    ignore = "needs cc, lld, strip, objcopy, patchelf, readelf and Linux's ld.so"
)]
fn an_lld_linked_executable_is_transformed_in_place() {
    transform_shifted_pie(Linker::Lld);
}

/// A PIE linked by `linker` so that `.hip_fatbin`'s `PT_LOAD` has a larger `p_vaddr -
/// p_offset` than the first: the new segment keeps the first one's, at `.hip_fatbin`'s
/// first whole page in memory and the shift further in the file (zeros before it), so the
/// file is not padded by the device code; strip, objcopy and patchelf keep the marker, and
/// a restore puts the device code back byte for byte.
fn transform_shifted_pie(linker: Linker) {
    let dir = tempfile::tempdir().unwrap();
    let copies = 600;
    let (exe, slot) = link_large_pie(dir.path(), copies, 12, linker);
    let input = std::fs::read(&exe).unwrap();
    let before = inspect(&input).unwrap();
    let original = before.fatbin.clone().unwrap();
    let elf = ElfFile::parse(&input).unwrap();
    let delta = |p: &kpack_elf::ProgramHeader| p.p_vaddr.wrapping_sub(p.p_offset);
    let first = elf
        .program_headers()
        .iter()
        .find(|p| p.p_type == PT_LOAD)
        .unwrap();
    let d_first = delta(first);
    let seg = elf.load_segment_for_vaddr(original.vaddr).unwrap();
    let shift = delta(seg).wrapping_sub(d_first);
    assert!(
        shift > 0 && shift < 1 << 20,
        "the linker's shift: {shift:#x}"
    );
    if let Linker::Gnu { rodata_shift } = linker {
        assert_eq!(shift, rodata_shift);
    }
    drop(elf);
    let bundle_magic = hex(b"__CLANG_OFFLOAD_BUNDLE__");
    assert_eq!(run_printing_first_bytes(&exe), bundle_magic);

    let (_, m) = marker();
    let rw = plan(&input, &m).unwrap_or_else(|e| panic!("{e}"));
    let out = rw.to_vec(&input);
    // Smaller by the device code, but for the new segment's page and the shift's zeros.
    assert!(
        out.len() as u64 + original.size <= input.len() as u64 + shift + 3 * 4096,
        "{:?}",
        rw.summary
    );
    verify(&out).unwrap_or_else(|i| panic!("{i:#?}"));
    let elf = ElfFile::parse(&out).unwrap();
    let segment = elf.load_segment_for_vaddr(rw.summary.marker_vaddr).unwrap();
    let a = original.vaddr.next_multiple_of(4096);
    assert_eq!(segment.p_vaddr, a, "the first freed page");
    assert_eq!(delta(segment), d_first, "the old-kernel AT_PHDR rule");
    assert_eq!(elf.header().e_phoff, segment.p_offset);
    assert!(
        out[(segment.p_offset - shift) as usize..segment.p_offset as usize]
            .iter()
            .all(|&b| b == 0),
        "no device code is left before the segment"
    );
    drop(elf);
    let kpacked = dir.path().join("kpacked");
    std::fs::write(&kpacked, &out).unwrap();
    assert_eq!(run_printing_first_bytes(&kpacked), hex(&m[..24]));
    assert_edits_keep_the_marker(dir.path(), &kpacked, rw.summary.marker_vaddr, &m, true);

    let restored = restore_large_pie(&input, &out, copies, slot);
    let restored_path = dir.path().join("restored");
    std::fs::write(&restored_path, &restored).unwrap();
    assert_eq!(run_printing_first_bytes(&restored_path), bundle_magic);
}

/// Assembly with `functions` one-instruction functions, each in its own section
/// (`.ltext.fN`, as `-ffunction-sections` with the large code model names them): GNU ld
/// keeps each such orphan a section of its own.
fn many_sections_source(dir: &Path, functions: usize) -> PathBuf {
    let mut asm = String::from(".section .note.GNU-stack,\"\",@progbits\n");
    for i in 0..functions {
        asm += &format!(".section .ltext.f{i},\"ax\",@progbits\n.globl kf{i}\nkf{i}:\nret\n");
    }
    let path = dir.join(format!("many{functions}.s"));
    std::fs::write(&path, asm).unwrap();
    path
}

/// `e_shnum`, `e_shstrndx` and section 0's `sh_size` and `sh_link` as stored.
fn numbering(data: &[u8]) -> (u16, u16, u64, u32) {
    let elf = ElfFile::parse(data).unwrap();
    let h = elf.header();
    let first = &elf.section_headers()[0];
    (h.e_shnum, h.e_shstrndx, first.sh_size, first.sh_link)
}

/// A PIE executable with `functions` extra sections (see [`many_sections_source`]) and
/// device code: transformed, it verifies, runs, keeps every section (its name and
/// contents) with `.rocm_kpack_ref` added last, numbered as `expect_kpacked` says
/// (`e_shnum`, `e_shstrndx`, section 0's `sh_size` and `sh_link`); GNU strip and objcopy
/// keep it working; a restore puts the device code back byte for byte, and the section
/// headers back as they were but for `.hip_fatbin`'s place.
fn transform_with_many_sections(
    functions: impl Fn(&Path) -> PathBuf,
    expect_input: impl Fn(usize) -> (u16, u16, u64, u32),
    expect_kpacked: impl Fn(usize) -> (u16, u16, u64, u32),
) {
    let dir = tempfile::tempdir().unwrap();
    let copies = 20;
    let extra = functions(dir.path());
    let (exe, slot) = link_large_pie_with(
        dir.path(),
        copies,
        12,
        Linker::Gnu { rodata_shift: 0 },
        &[extra],
    );
    let input = std::fs::read(&exe).unwrap();
    let input_elf = ElfFile::parse(&input).unwrap();
    let count = input_elf.section_headers().len();
    assert_eq!(numbering(&input), expect_input(count));
    // Symbols of sections numbered from 0xff00 on have their index in `SHT_SYMTAB_SHNDX`.
    assert_eq!(
        input_elf
            .section_headers()
            .iter()
            .any(|s| s.sh_type == SHT_SYMTAB_SHNDX),
        count > usize::from(SHN_LORESERVE)
    );
    let before = inspect(&input).unwrap();
    let original_fatbin = before.fatbin.clone().unwrap();
    let bundle_magic = hex(b"__CLANG_OFFLOAD_BUNDLE__");
    assert_eq!(run_printing_first_bytes(&exe), bundle_magic);

    let (_, m) = marker();
    let rw = plan(&input, &m).unwrap_or_else(|e| panic!("{e}"));
    let out = rw.to_vec(&input);
    verify(&out).unwrap_or_else(|i| panic!("{i:#?}"));
    assert_eq!(numbering(&out), expect_kpacked(count + 1));
    let elf = ElfFile::parse(&out).unwrap();
    let shdrs = elf.section_headers();
    assert_eq!(shdrs.len(), count + 1);
    assert_eq!(shdrs[count].name, ".rocm_kpack_ref");
    for (a, b) in input_elf.section_headers().iter().zip(shdrs) {
        assert_eq!(a.name, b.name);
        // The functions' code keeps its bytes (wrappers, their relocations and the
        // section name table change).
        if a.name.starts_with(".ltext") || a.name == ".text" {
            assert_eq!(
                input_elf.section_data(a).unwrap(),
                elf.section_data(b).unwrap(),
                "{}",
                a.name
            );
        }
    }
    drop(elf);
    let kpacked = dir.path().join("kpacked");
    std::fs::write(&kpacked, &out).unwrap();
    assert!(readelf(&kpacked).is_empty(), "{:?}", readelf(&kpacked));
    assert_eq!(run_printing_first_bytes(&kpacked), hex(&m[..24]));
    // patchelf does not read files with extended section numbering at all (nor the input).
    assert_these_edits_keep_the_marker(
        dir.path(),
        &kpacked,
        rw.summary.marker_vaddr,
        &m,
        false,
        &EDITS[..3],
    );

    let restored = restore_large_pie(&input, &out, copies, slot);
    assert_eq!(numbering(&restored), numbering(&input));
    let restored_elf = ElfFile::parse(&restored).unwrap();
    assert_eq!(restored_elf.section_headers().len(), count);
    for (a, b) in input_elf
        .section_headers()
        .iter()
        .zip(restored_elf.section_headers())
    {
        if a.index != original_fatbin.section_index {
            assert_eq!(
                (&a.name, a.sh_type, a.sh_addr),
                (&b.name, b.sh_type, b.sh_addr)
            );
        }
    }
    let restored_path = dir.path().join("restored");
    std::fs::write(&restored_path, &restored).unwrap();
    assert!(readelf(&restored_path).is_empty());
    assert_eq!(run_printing_first_bytes(&restored_path), bundle_magic);
}

/// More than 65,280 sections (Debian's `librocwmma-tests-validate` executables): `e_shnum`
/// is 0 with the count in section 0's `sh_size`, `e_shstrndx` is `SHN_XINDEX` with the
/// index in its `sh_link`; the transform and the restore keep that numbering, counting the
/// marker's section.
#[test]
#[cfg_attr(windows, ignore = "needs cc and Linux's ld.so")]
fn an_executable_with_extended_section_numbering_is_transformed_and_restored() {
    transform_with_many_sections(
        |dir| many_sections_source(dir, 66_000),
        |count| (0, SHN_XINDEX, count as u64, count as u32 - 1),
        // `.shstrtab` stays where it was, before the marker's section.
        |count| (0, SHN_XINDEX, count as u64, count as u32 - 2),
    );
}

/// 65,279 sections (`e_shnum` holds the count): the marker's section makes 65,280
/// (`SHN_LORESERVE`), so the output switches to extended numbering (`e_shnum` 0, the count
/// in section 0's `sh_size`; `.shstrtab`'s index still fits `e_shstrndx`), and the restore
/// switches back.
#[test]
#[cfg_attr(windows, ignore = "needs cc and Linux's ld.so")]
fn a_transform_crossing_the_section_limit_switches_to_extended_numbering() {
    transform_with_many_sections(
        |dir| {
            // Find how many sections the link adds besides the functions'.
            let probe = many_sections_source(dir, 0);
            let (exe, _) =
                link_large_pie_with(dir, 20, 12, Linker::Gnu { rodata_shift: 0 }, &[probe]);
            let base = ElfFile::parse(&std::fs::read(exe).unwrap())
                .unwrap()
                .section_headers()
                .len();
            many_sections_source(dir, usize::from(SHN_LORESERVE) - 1 - base)
        },
        |count| {
            assert_eq!(count, usize::from(SHN_LORESERVE) - 1);
            (count as u16, count as u16 - 1, 0, 0)
        },
        |count| (0, count as u16 - 2, count as u64, 0),
    );
}

/// Extended segment numbering (`e_phnum` `PN_XNUM`, the count in section 0's `sh_info`)
/// parses but is refused, with its own message: no real file needs it.
#[test]
fn extended_segment_numbering_is_refused() {
    let mut data = read_fixture("bin/exe_pie");
    let elf = ElfFile::parse(&data).unwrap();
    let phnum = elf.program_headers().len() as u32;
    let shoff = elf.header().e_shoff as usize;
    drop(elf);
    data[56..58].copy_from_slice(&PN_XNUM.to_le_bytes());
    data[shoff + 44..shoff + 48].copy_from_slice(&phnum.to_le_bytes());
    assert_eq!(
        ElfFile::parse(&data).unwrap().program_headers().len(),
        phnum as usize
    );
    let (_, m) = marker();
    let err = plan(&data, &m).unwrap_err().to_string();
    assert!(err.contains("extended segment numbering"), "{err}");
}
