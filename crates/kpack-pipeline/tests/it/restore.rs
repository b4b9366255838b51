//! `restore` end to end: `restore(transform(x))` holds the device code of `x` for every
//! target and wrapper, the host bytes of `x` outside the device-code ranges (see
//! [`assert_same_host`] for exactly which bytes may differ), loads under the stand-in HIP
//! runtime in HIPF mode with the bundles it reads holding the original code objects, and
//! its bundles are listed and unbundled identically by clang-offload-bundler (15 for
//! uncompressed bundles, 22 for CCOB v3).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use kpack_archive::Compression;
use kpack_bundle::BundleFormat;
use kpack_elf::{ElfFile, PointerSource};
use kpack_pipeline::SourceError;
use kpack_pipeline::kpacked::{Outcome, resolve_file};
use kpack_pipeline::restore::{RestoreError, RestoreOptions, RestoreSummary, restore};
use kpack_pipeline::source::{self, DeviceCode, Visitor};
use kpack_target::TargetId;
use kpack_testkit::{
    LINKED_FAT, PLATFORM_FIXTURES, Standin, fixture, foreign_standin, run_llvm22, run_tool,
    sha256_hex, standin,
};

/// `(wrapper, target)` → SHA-256 of the code object the wrapper's bundle holds for it, read
/// by the walk every command uses (streamed: fit for 1.3 GB libraries).
fn code_by_wrapper(path: &Path) -> BTreeMap<(usize, String), String> {
    struct Collect(BTreeMap<(usize, String), String>);
    impl Visitor for Collect {
        fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
            let digest = sha256_hex(code.data);
            for &w in code.wrappers {
                let old = self
                    .0
                    .insert((w, code.target().to_string()), digest.clone());
                assert!(old.is_none(), "two code objects for wrapper {w}");
            }
            Ok(())
        }
    }
    let file = std::fs::File::open(path).unwrap();
    let map = kpack_pipeline::map_file(&file, path).unwrap();
    let mut collect = Collect(BTreeMap::new());
    source::walk_mapped(&map, &mut collect).unwrap();
    collect.0
}

/// The loaded image of `elf` over `range` (file bytes, or the zero fill of a `PT_LOAD`), or
/// `None` where no `PT_LOAD` maps it.
fn image(elf: &ElfFile<'_>, range: Range<u64>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity((range.end - range.start) as usize);
    let mut at = range.start;
    while at < range.end {
        let p = elf
            .program_headers()
            .iter()
            .filter(|p| p.p_type == object::elf::PT_LOAD)
            .find(|p| p.p_vaddr <= at && at < p.p_vaddr + p.p_memsz)?;
        let end = range.end.min(p.p_vaddr + p.p_memsz);
        for a in at..end {
            let rel = a - p.p_vaddr;
            out.push(if rel < p.p_filesz {
                elf.data()[(p.p_offset + rel) as usize]
            } else {
                0
            });
        }
        at = end;
    }
    Some(out)
}

/// `range` less the (sorted, possibly overlapping) `holes`.
fn subtract(range: Range<u64>, holes: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    let mut at = range.start;
    for h in holes {
        if h.end <= at || h.start >= range.end {
            continue;
        }
        if h.start > at {
            out.push(at..h.start);
        }
        at = at.max(h.end);
    }
    if at < range.end {
        out.push(at..range.end);
    }
    out
}

/// The restored binary holds the original's host bytes. What may differ, and nothing else:
/// * in the loaded image of the original (every `PT_LOAD`, file bytes and zero fill, compared
///   at the same addresses): `.hip_fatbin`'s address range (the device code), each
///   wrapper's 8-byte pointer (its magic, version and `reserved1` are compared), the
///   `r_info`/`r_addend` of each wrapper's relocation entry (`r_info` of a `REL` one), the
///   program header table, and the ELF header's `e_phoff`, `e_shoff`, `e_phnum`, `e_shnum`;
/// * the section headers' file offsets, `.hip_fatbin`'s type, address, size and alignment
///   (it moved into the new segment), and `.shstrtab`'s size (it also names the marker);
/// * what the restore adds above the original's segments (the new `PT_LOAD` with the moved
///   program header table and the bundles; the emptied marker's segment).
///
/// Every non-allocated section (symbols, debug information …) other than `.shstrtab` is
/// compared byte for byte, and every program header other than `PT_LOAD`/`PT_PHDR` must be
/// in the output unchanged.
fn assert_same_host(original: &[u8], restored: &[u8], what: &str) {
    let x = ElfFile::parse(original).unwrap();
    let r = ElfFile::parse(restored).unwrap();
    let fat = kpack_elf::inspect(original).unwrap();
    let fatbin = fat.fatbin.as_ref().unwrap();
    let mut holes: Vec<Range<u64>> = Vec::new();
    holes.push(fatbin.vaddr..fatbin.vaddr + fatbin.size);
    let to_vaddr = |off: u64| x.offset_to_vaddr(off);
    for w in &fat.wrappers {
        holes.push(w.vaddr + 8..w.vaddr + 16);
        // The entry's r_info and r_addend (Rela, 24 bytes) or r_info (Rel, 16 bytes).
        let entry = match &w.pointer {
            PointerSource::Rela {
                section_index,
                entry_index,
                ..
            } => Some((*section_index, *entry_index, 24)),
            PointerSource::Rel {
                section_index,
                entry_index,
                ..
            } => Some((*section_index, *entry_index, 16)),
            PointerSource::InPlace(_) | PointerSource::Relr { .. } => None,
        };
        if let Some((section, index, size)) = entry {
            let at = x.section_headers()[section].sh_addr + index as u64 * size;
            holes.push(at + 8..at + size);
        }
    }
    let h = x.header();
    if let Some(v) = to_vaddr(h.e_phoff) {
        holes.push(v..v + x.program_headers().len() as u64 * 56);
    }
    if let Some(v) = to_vaddr(0) {
        holes.extend([v + 0x20..v + 0x30, v + 0x38..v + 0x3a, v + 0x3c..v + 0x3e]);
    }
    holes.sort_by_key(|r| (r.start, r.end));
    let mut compared = 0u64;
    for p in x
        .program_headers()
        .iter()
        .filter(|p| p.p_type == object::elf::PT_LOAD)
    {
        for piece in subtract(p.p_vaddr..p.p_vaddr + p.p_memsz, &holes) {
            let want = image(&x, piece.clone()).unwrap();
            let got = image(&r, piece.clone())
                .unwrap_or_else(|| panic!("{what}: {piece:x?} is not mapped any more"));
            if want != got {
                let i = want.iter().zip(&got).position(|(a, b)| a != b).unwrap();
                panic!(
                    "{what}: host byte at address {:#x} differs ({:#04x} -> {:#04x})",
                    piece.start + i as u64,
                    want[i],
                    got[i]
                );
            }
            compared += piece.end - piece.start;
        }
    }
    assert!(compared > 0, "{what}");
    let shstrndx = x.shstrndx().unwrap();
    assert_eq!(
        x.section_headers().len(),
        r.section_headers().len(),
        "{what}: the section count (the marker's header is dropped)"
    );
    for (s, t) in x.section_headers().iter().zip(r.section_headers()) {
        assert_eq!(s.name, t.name, "{what}: section [{}]", s.index);
        assert_eq!(s.sh_flags, t.sh_flags, "{what}: {}", s.name);
        if s.index == fatbin.section_index {
            continue;
        }
        assert_eq!(s.sh_type, t.sh_type, "{what}: {}", s.name);
        assert_eq!(s.sh_addr, t.sh_addr, "{what}: {}", s.name);
        if s.index == shstrndx {
            continue;
        }
        assert_eq!(
            (
                s.sh_size,
                s.sh_link,
                s.sh_info,
                s.sh_addralign,
                s.sh_entsize
            ),
            (
                t.sh_size,
                t.sh_link,
                t.sh_info,
                t.sh_addralign,
                t.sh_entsize
            ),
            "{what}: {}",
            s.name
        );
        if s.has_file_data() && s.sh_flags & u64::from(object::elf::SHF_ALLOC) == 0 {
            assert!(
                x.section_data(s).unwrap() == r.section_data(t).unwrap(),
                "{what}: non-allocated section {} differs",
                s.name
            );
        }
    }
    for p in x
        .program_headers()
        .iter()
        .filter(|p| p.p_type != object::elf::PT_LOAD && p.p_type != object::elf::PT_PHDR)
    {
        assert!(
            r.program_headers().iter().any(|q| (
                q.p_type, q.p_flags, q.p_vaddr, q.p_filesz, q.p_memsz, q.p_align
            ) == (
                p.p_type, p.p_flags, p.p_vaddr, p.p_filesz, p.p_memsz, p.p_align
            )),
            "{what}: program header {:#x} at {:#x} is not kept",
            p.p_type,
            p.p_vaddr
        );
    }
}

fn options(output: PathBuf, compress: bool) -> RestoreOptions {
    RestoreOptions {
        output,
        kpack_dirs: Vec::new(),
        targets: Vec::new(),
        compress,
    }
}

fn run_restore(input: &Path, opts: &RestoreOptions) -> RestoreSummary {
    restore(input, opts, &|_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", input.display()))
}

/// `target → SHA-256` of a bundle's device entries, checked against clang-offload-bundler
/// (15 for uncompressed bundles, LLVM 22's for CCOB), which must list exactly the same
/// entries and unbundle the same bytes.
fn bundle_contents(bundle: &[u8], work: &Path, what: &str) -> BTreeMap<String, String> {
    let decoded = kpack_bundle::DecodedBundle::decode(bundle).unwrap();
    let mut out = BTreeMap::new();
    let mut ids = Vec::new();
    for b in decoded.bundles().unwrap() {
        for e in b.entries() {
            ids.push(e.triple.to_owned());
            if !e.is_host() {
                let id = kpack_target::BundleId::parse(e.triple).unwrap();
                out.insert(id.target().unwrap().to_string(), sha256_hex(e.data));
            }
        }
    }
    let file = work.join("witness.bundle");
    std::fs::write(&file, bundle).unwrap();
    let input = format!("--input={}", file.display());
    let ccob = bundle.starts_with(b"CCOB");
    let bundler = |args: &[&str]| {
        if ccob {
            run_llvm22("clang-offload-bundler", args)
        } else {
            run_tool("clang-offload-bundler-15", args)
        }
    };
    let listed = String::from_utf8(bundler(&["--list", "--type=o", &input])).unwrap();
    let mut listed: Vec<&str> = listed.lines().collect();
    listed.sort();
    let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(listed, want, "{what}: clang-offload-bundler --list");
    let device: Vec<&str> = want
        .iter()
        .copied()
        .filter(|t| !t.starts_with("host"))
        .collect();
    let outputs: Vec<String> = (0..device.len())
        .map(|i| work.join(format!("witness.{i}.co")).display().to_string())
        .collect();
    let targets = format!("--targets={}", device.join(","));
    let outs = format!("--outputs={}", outputs.join(","));
    bundler(&["--unbundle", "--type=o", &input, &targets, &outs]);
    for (id, file) in device.iter().zip(&outputs) {
        let target = kpack_target::BundleId::parse(id)
            .unwrap()
            .target()
            .unwrap()
            .to_string();
        assert_eq!(
            sha256_hex(&std::fs::read(file).unwrap()),
            out[&target],
            "{what}: clang-offload-bundler unbundles {id} differently"
        );
    }
    out
}

/// What the stand-in HIP runtime reads through each HIPF wrapper of `binary`, registration
/// by registration: the bundle's `target → SHA-256`; the first `witnessed` bundles are
/// checked against clang-offload-bundler.
fn registered_code(
    s: &Standin,
    binary: &Path,
    work: &Path,
    witnessed: usize,
) -> Vec<BTreeMap<String, String>> {
    let regs = s.load(binary, &[], work);
    assert!(!regs.is_empty(), "{}: registers nothing", binary.display());
    let witness_dir = work.join("witness");
    std::fs::create_dir_all(&witness_dir).unwrap();
    (0..regs.len())
        .map(|n| {
            assert_eq!(regs[n].magic, "HIPF", "{}", binary.display());
            assert_eq!(regs[n].version, 1);
            let bundle = Standin::loaded_bundle(work, n);
            let what = format!("{} registration {n}", binary.display());
            if n < witnessed {
                bundle_contents(&bundle, &witness_dir, &what)
            } else {
                let decoded = kpack_bundle::DecodedBundle::decode(&bundle).unwrap();
                let mut out = BTreeMap::new();
                for b in decoded.bundles().unwrap() {
                    for e in b.entries().iter().filter(|e| !e.is_host()) {
                        let id = kpack_target::BundleId::parse(e.triple).unwrap();
                        out.insert(id.target().unwrap().to_string(), sha256_hex(e.data));
                    }
                }
                out
            }
        })
        .collect()
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs gcc and Linux's ld.so (the stand-in HIP runtime)"
)]
fn restore_of_transform_holds_the_original_device_code_and_host_bytes_and_loads() {
    for rel in LINKED_FAT {
        let original_path = fixture(rel);
        let original = std::fs::read(&original_path).unwrap();
        let original_code = code_by_wrapper(&original_path);
        let work = tempfile::tempdir().unwrap();
        let original_loaded =
            registered_code(standin(None), &original_path, &work.path().join("o"), 0);
        for compress in [false, true] {
            let root = tempfile::tempdir().unwrap();
            let (kpacked, _) =
                kpack_testkit::transform_into(&original_path, root.path(), Compression::zstd());
            let name = original_path.file_name().unwrap();
            let out = root.path().join("restored").join(name);
            std::fs::create_dir_all(out.parent().unwrap()).unwrap();
            let summary = run_restore(&kpacked, &options(out.clone(), compress));
            let what = format!("{rel} (compress {compress})");
            assert_eq!(
                summary.format,
                if compress { "ccob" } else { "uncompressed" }
            );
            assert_eq!(code_by_wrapper(&out), original_code, "{what}: device code");
            let restored = std::fs::read(&out).unwrap();
            kpack_elf::verify(&restored).unwrap();
            assert_same_host(&original, &restored, &what);
            let loaded = registered_code(standin(None), &out, &work.path().join("r"), usize::MAX);
            assert_eq!(
                loaded, original_loaded,
                "{what}: what the HIP runtime reads"
            );
            for b in &kpack_elf::inspect(&restored).unwrap().bundles {
                match (compress, &b.format) {
                    (false, BundleFormat::Uncompressed) => {}
                    (true, BundleFormat::Compressed { version: 3, .. }) => {}
                    (_, f) => panic!("{what}: bundle format {f:?}"),
                }
            }
        }
    }
}

#[test]
fn restore_is_deterministic_keeps_the_mode_and_its_output_transforms_again() {
    let root = tempfile::tempdir().unwrap();
    let (kpacked, _) =
        kpack_testkit::transform_into(&fixture("bin/exe_pie"), root.path(), Compression::zstd());
    let a = root.path().join("a/exe_pie");
    let b = root.path().join("b/exe_pie");
    for out in [&a, &b] {
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        run_restore(&kpacked, &options(out.clone(), true));
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_eq!(
        kpack_fs::mode(&std::fs::metadata(&a).unwrap()) & 0o777,
        kpack_fs::mode(&std::fs::metadata(&kpacked).unwrap()) & 0o777
    );
    // The restored binary is an ordinary fat binary: it transforms again, and restores again
    // to the same device code.
    let again = tempfile::tempdir().unwrap();
    let (kpacked2, _) = kpack_testkit::transform_into(&a, again.path(), Compression::None);
    let c = again.path().join("c/exe_pie");
    std::fs::create_dir_all(c.parent().unwrap()).unwrap();
    run_restore(&kpacked2, &options(c.clone(), false));
    assert_eq!(
        code_by_wrapper(&c),
        code_by_wrapper(&fixture("bin/exe_pie"))
    );
}

#[test]
fn targets_select_what_is_restored_and_kpack_dirs_replace_the_search_paths() {
    let root = tempfile::tempdir().unwrap();
    let (kpacked, _) =
        kpack_testkit::transform_into(&fixture("bin/libtwo.so"), root.path(), Compression::zstd());
    // The binary alone in another directory: its search path leads nowhere, --kpack-dir
    // finds the archives.
    let moved = root.path().join("elsewhere/libtwo.so");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::copy(&kpacked, &moved).unwrap();
    let out = root.path().join("out/libtwo.so");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let mut opts = options(out.clone(), false);
    opts.kpack_dirs = vec![root.path().join(".kpack")];
    opts.targets = vec![
        TargetId::parse("gfx90a").unwrap(),
        TargetId::parse("gfx1030").unwrap(),
    ];
    let summary = run_restore(&moved, &opts);
    assert_eq!(
        summary.targets,
        ["gfx1030", "gfx90a:xnack+", "gfx90a:xnack-"]
    );
    let want: BTreeMap<(usize, String), String> = code_by_wrapper(&fixture("bin/libtwo.so"))
        .into_iter()
        .filter(|((_, t), _)| t == "gfx1030" || t.starts_with("gfx90a"))
        .collect();
    assert_eq!(code_by_wrapper(&out), want);
}

/// A tree with `rel` transformed into it, the archive of `target` removed.
fn transformed(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let (kpacked, _) =
        kpack_testkit::transform_into(&fixture(rel), root.path(), Compression::zstd());
    (root, kpacked)
}

#[test]
fn a_missing_archive_or_entry_is_an_error_naming_wrapper_target_and_paths_and_writes_nothing() {
    let (root, kpacked) = transformed("bin/libtwo.so");
    let kpack_dir = root.path().join(".kpack");
    let out = root.path().join("out.so");

    // An archive removed: named with --targets, the target is in no archive.
    std::fs::remove_file(kpack_dir.join("libtwo_gfx906.kpack")).unwrap();
    let mut opts = options(out.clone(), false);
    opts.targets = vec![TargetId::parse("gfx906").unwrap()];
    let err = restore(&kpacked, &opts, &|_, _| {}).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RestoreError::UnknownTarget { .. }), "{msg}");
    assert!(
        msg.contains("gfx906") && msg.contains("libtwo_@GFXARCH@.kpack"),
        "{msg}"
    );
    assert!(!out.exists());

    // An archive that lists the target but lacks the kernel (another library's archive in
    // its place): the wrapper, target, archive and paths are named.
    let (other_root, _) = transformed("bin/libone.so");
    std::fs::copy(
        other_root.path().join(".kpack/libone_gfx908.kpack"),
        kpack_dir.join("libtwo_gfx908.kpack"),
    )
    .unwrap();
    let err = restore(&kpacked, &options(out.clone(), false), &|_, _| {}).unwrap_err();
    let msg = err.to_string();
    match &err {
        RestoreError::Missing {
            wrapper,
            target,
            tried,
            ..
        } => {
            assert_eq!((*wrapper, target.as_str()), (0, "gfx908"), "{msg}");
            assert!(
                tried.contains(
                    &std::fs::canonicalize(&kpack_dir)
                        .unwrap()
                        .join("libtwo_gfx908.kpack")
                ),
                "{msg}"
            );
        }
        other => panic!("{other}"),
    }
    assert!(
        msg.contains("wrapper 0 (libtwo.so#0), target gfx908")
            && msg.contains("libtwo_gfx908.kpack lacks the kernel libtwo.so#0;"),
        "{msg}"
    );
    assert!(!out.exists());
    assert!(
        std::fs::read_dir(root.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".kpack-tmp")),
        "a temporary file is left"
    );

    // No archive at all.
    std::fs::remove_dir_all(&kpack_dir).unwrap();
    let err = restore(&kpacked, &options(out.clone(), false), &|_, _| {}).unwrap_err();
    assert!(matches!(err, RestoreError::NoArchives { .. }), "{err}");
    assert!(!out.exists());
}

#[test]
fn a_fat_binary_is_not_restored() {
    let out = tempfile::tempdir().unwrap();
    let err = restore(
        &fixture("bin/libone.so"),
        &options(out.path().join("x.so"), false),
        &|_, _| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("not kpacked"), "{err}");
}

#[test]
fn resolve_says_where_each_code_object_is_and_why_one_is_missing() {
    let (root, kpacked) = transformed("bin/libtwo.so");
    let kpack_dir = std::fs::canonicalize(root.path().join(".kpack")).unwrap();
    // libtwo's archive for `target`, its name spelled for this system (`@` for `:` on Windows).
    let archive = |target: &str| {
        let spelled = kpack_target::file_name_spelling(target, cfg!(windows));
        kpack_dir.join(format!("libtwo_{spelled}.kpack"))
    };
    let report = resolve_file(&kpacked, &[]).unwrap().unwrap();
    assert_eq!(report.patterns, [kpack_dir.join("libtwo_@GFXARCH@.kpack")]);
    assert_eq!(report.archives.len(), 6);
    assert_eq!(report.wrappers.len(), 2);
    for w in &report.wrappers {
        assert_eq!(
            w.key.as_deref(),
            Some(format!("libtwo.so#{}", w.wrapper).as_str())
        );
        assert_eq!(w.targets.len(), 6);
        for t in &w.targets {
            assert_eq!(
                t.outcome,
                Outcome::Found {
                    archive: archive(&t.target),
                    arch: t.target.clone()
                }
            );
        }
    }
    // Asked for a GPU whose archive is gone: no archive at the paths tried.
    std::fs::remove_file(kpack_dir.join("libtwo_gfx1030.kpack")).unwrap();
    let report = resolve_file(&kpacked, &["gfx1030".to_owned()])
        .unwrap()
        .unwrap();
    let t = &report.wrappers[0].targets[0];
    assert_eq!(t.outcome, Outcome::NoArchive);
    assert_eq!(t.tried, [kpack_dir.join("libtwo_gfx1030.kpack")]);
    // The runtime falls back from gfx90a:xnack-:sramecc+ to gfx90a:xnack- (feature subsets).
    let report = resolve_file(&kpacked, &["gfx90a:sramecc+:xnack-".to_owned()])
        .unwrap()
        .unwrap();
    let t = &report.wrappers[1].targets[0];
    assert_eq!(
        t.outcome,
        Outcome::Found {
            archive: archive("gfx90a:xnack-"),
            arch: "gfx90a:xnack-".to_owned()
        }
    );
    // Entry missing: another library's archive for the target.
    let (other, _) = transformed("bin/libone.so");
    std::fs::copy(
        other.path().join(".kpack/libone_gfx908.kpack"),
        kpack_dir.join("libtwo_gfx908.kpack"),
    )
    .unwrap();
    let report = resolve_file(&kpacked, &["gfx908".to_owned()])
        .unwrap()
        .unwrap();
    assert_eq!(
        report.wrappers[0].targets[0].outcome,
        Outcome::NoKernel {
            archive: kpack_dir.join("libtwo_gfx908.kpack"),
            key: "libtwo.so#0".to_owned()
        }
    );
    // A target no archive lists.
    let report = resolve_file(&kpacked, &["gfx1100".to_owned()])
        .unwrap()
        .unwrap();
    assert_eq!(report.wrappers[0].targets[0].outcome, Outcome::NoArchive);
    // A fat binary has nothing to resolve.
    assert!(
        resolve_file(&fixture("bin/libtwo.so"), &[])
            .unwrap()
            .is_none()
    );
}

/// The round trip on a real library: transformed (zstd archives), restored in its own
/// bundle format, every wrapper's code object per target and the host bytes as in the
/// original, the first bundle witnessed by clang-offload-bundler; with `load`, loaded by the
/// stand-in, which reads the same bundles as from the original.
fn realworld_round_trip(lib: &Path, compress: bool, load: bool) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (kpacked, _) = kpack_testkit::transform_into(lib, dir.path(), Compression::zstd());
    let out = dir.path().join("restored").join(lib.file_name().unwrap());
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let summary = run_restore(&kpacked, &options(out.clone(), compress));
    let what = lib.display().to_string();
    let original_code = code_by_wrapper(lib);
    assert_eq!(code_by_wrapper(&out), original_code, "{what}: device code");
    let targets: std::collections::BTreeSet<&String> =
        original_code.keys().map(|(_, t)| t).collect();
    assert_eq!(summary.targets.len(), targets.len(), "{what}");
    let map = |p: &Path| kpack_pipeline::map_file(&std::fs::File::open(p).unwrap(), p).unwrap();
    let (original, restored) = (map(lib), map(&out));
    kpack_elf::verify(&restored).unwrap();
    assert_same_host(&original, &restored, &what);
    let fat = kpack_elf::inspect(&restored).unwrap();
    let first = &fat.bundles[0];
    let start = (fat.fatbin.as_ref().unwrap().offset + first.offset) as usize;
    let witnessed = bundle_contents(
        &restored[start..start + first.len as usize],
        dir.path(),
        &what,
    );
    let w = fat.wrappers.iter().find(|w| w.bundle == Some(0)).unwrap();
    for (target, digest) in &witnessed {
        assert_eq!(&original_code[&(w.index, target.clone())], digest, "{what}");
    }
    drop((original, restored));
    if load {
        let work = dir.path().join("standin");
        let before = registered_code(standin(None), lib, &work.join("o"), 0);
        let after = registered_code(standin(None), &out, &work.join("r"), 0);
        assert_eq!(after, before, "{what}: what the HIP runtime reads");
    }
}

#[test]
#[ignore = "real-world"]
fn librocsparse_restores_to_its_uncompressed_bundles_and_host_bytes_and_loads() {
    realworld_round_trip(&kpack_testkit::librocsparse(), false, true);
}

/// Its ROCm 7.2.4 dependencies are not installed, so it is not loaded.
#[test]
#[ignore = "real-world"]
fn librocblas_7_2_4_restores_to_ccob_v3_bundles_and_its_host_bytes() {
    let lib = kpack_testkit::corpus()
        .join("x/librocblas5_7.2.4-1~exp1/usr/lib/x86_64-linux-gnu/librocblas.so.5.2");
    assert!(
        lib.exists(),
        "{} is missing: run scripts/setup.sh",
        lib.display()
    );
    realworld_round_trip(&lib, true, false);
}

/// `original` transformed (zstd archives) into a new directory, then restored (CCOB bundles
/// with `compress`) into its `restored/`: the directory and the restored binary.
fn round_trip(original: &Path, compress: bool) -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let (kpacked, _) = kpack_testkit::transform_into(original, root.path(), Compression::zstd());
    let out = root
        .path()
        .join("restored")
        .join(original.file_name().unwrap());
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    run_restore(&kpacked, &options(out.clone(), compress));
    (root, out)
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs aarch64-linux-gnu-gcc, powerpc64le-linux-gnu-gcc and qemu-user (the stand-in HIP runtime)"
)]
fn aarch64_and_ppc64le_libraries_restore_and_load_under_qemu() {
    for (rel, machine) in PLATFORM_FIXTURES {
        let original_path = fixture(rel);
        let (root, out) = round_trip(&original_path, false);
        assert_eq!(
            code_by_wrapper(&out),
            code_by_wrapper(&original_path),
            "{rel}"
        );
        let restored = std::fs::read(&out).unwrap();
        kpack_elf::verify(&restored).unwrap();
        assert_same_host(&std::fs::read(&original_path).unwrap(), &restored, rel);
        let s = foreign_standin(machine);
        let work = root.path().join("standin");
        let before = registered_code(s, &original_path, &work.join("o"), 0);
        let after = registered_code(s, &out, &work.join("r"), 0);
        assert_eq!(after, before, "{rel}: what the HIP runtime reads");
    }
}

/// The host-byte comparison is not vacuous: one changed byte of `.text` or of a
/// non-allocated section fails it.
#[test]
fn the_host_comparison_catches_a_changed_host_byte() {
    let original_path = fixture("bin/libone.so");
    let original = std::fs::read(&original_path).unwrap();
    let root = tempfile::tempdir().unwrap();
    let (kpacked, _) =
        kpack_testkit::transform_into(&original_path, root.path(), Compression::zstd());
    let out = root.path().join("r.so");
    run_restore(&kpacked, &options(out.clone(), false));
    let restored = std::fs::read(&out).unwrap();
    assert_same_host(&original, &restored, "unchanged");
    let elf = ElfFile::parse(&restored).unwrap();
    for name in [".text", ".comment"] {
        let s = elf.section_by_name(name).unwrap();
        let mut changed = restored.clone();
        changed[s.sh_offset as usize + 1] ^= 0xff;
        let caught = std::panic::catch_unwind(|| assert_same_host(&original, &changed, name));
        assert!(caught.is_err(), "a changed byte of {name} went unnoticed");
    }
}

/// The entry ids of each wrapper's bundle, in wrapper order, each bundle's in its order.
pub(crate) fn entry_ids(path: &Path) -> Vec<Vec<String>> {
    let data = std::fs::read(path).unwrap();
    let fat = kpack_elf::inspect(&data).unwrap();
    let fatbin = fat.fatbin.as_ref().unwrap();
    fat.wrappers
        .iter()
        .map(|w| {
            let b = &fat.bundles[w.bundle.unwrap()];
            let bytes = &data[(fatbin.offset + b.offset) as usize..][..b.len as usize];
            let decoded = kpack_bundle::DecodedBundle::decode(bytes).unwrap();
            let bundles = decoded.bundles().unwrap();
            bundles
                .iter()
                .flat_map(|b| b.entries().iter().map(|e| e.triple.to_owned()))
                .collect()
        })
        .collect()
}

/// Every linked fat fixture: ELF ones of `fixtures/bin` and `fixtures/modern`, and the
/// SPIR-V ones.
fn every_linked_fixture() -> Vec<&'static str> {
    let spirv = ["spirv/libspirv_v3.so", "spirv/libspirv_nocompress.so"];
    LINKED_FAT.iter().copied().chain(spirv).collect()
}

/// Every entry of every bundle keeps its id byte for byte. The host entry's says which
/// clang-offload-bundler wrote the bundle (clang 15: `host-x86_64-unknown-linux`, clang 22:
/// `host-x86_64-unknown-linux-gnu-`), which the marker records when it is not clang 22's;
/// the SPIR-V one (`hipv4-spirv64-amd-amdhsa--`) is the spelling a HIP runtime looks SPIR-V
/// up by. The host entry comes first, the device entries in target order.
#[test]
fn restore_keeps_every_bundle_entry_id_byte_for_byte_the_host_and_spirv_ones_included() {
    let mut older_bundler = 0;
    for rel in every_linked_fixture() {
        let original = fixture(rel);
        let (_root, out) = round_trip(&original, rel.ends_with("_v3.so"));
        let (want, got) = (entry_ids(&original), entry_ids(&out));
        let sorted = |ids: &[Vec<String>]| -> Vec<Vec<String>> {
            ids.iter()
                .map(|b| {
                    let mut b = b.clone();
                    b[1..].sort();
                    b
                })
                .collect()
        };
        assert_eq!(sorted(&got), sorted(&want), "{rel}");
        assert!(
            want.iter().all(|b| b[0].starts_with("host-")),
            "{rel}: {want:?}"
        );
        older_bundler += usize::from(want[0][0] != "host-x86_64-unknown-linux-gnu-");
        if rel.starts_with("spirv/") {
            assert!(
                want.iter()
                    .all(|b| b.contains(&"hipv4-spirv64-amd-amdhsa--amdgcnspirv".to_owned())),
                "{rel}: {want:?}"
            );
        }
    }
    assert!(
        older_bundler > 0,
        "no fixture has an older bundler's host entry id"
    );
}

/// A binary kpacked without the record (by the reference, or by kpack before it) restores
/// with the host entry id clang writes today: its marker rewritten without `host_entry_id`
/// (the same record otherwise, zero-filled after it, as section padding is).
#[test]
fn a_marker_without_the_host_entry_id_restores_with_todays_spelling() {
    use kpack_hostbin::marker::MarkerMetadata;
    let original = fixture("bin/libtwo.so");
    assert_eq!(entry_ids(&original)[0][0], "host-x86_64-unknown-linux");
    let root = tempfile::tempdir().unwrap();
    let (kpacked, _) = kpack_testkit::transform_into(&original, root.path(), Compression::zstd());
    let mut bytes = std::fs::read(&kpacked).unwrap();
    let marker = kpack_elf::inspect(&bytes).unwrap().marker.unwrap();
    let section = marker.offset as usize..(marker.offset + marker.size) as usize;
    let (mut metadata, _) = MarkerMetadata::decode(&bytes[section.clone()]).unwrap();
    assert_eq!(
        metadata.host_entry_id.as_deref(),
        Some("host-x86_64-unknown-linux")
    );
    metadata.host_entry_id = None;
    let unrecorded = metadata.encode().unwrap();
    bytes[section.clone()].fill(0);
    bytes[section.start..][..unrecorded.len()].copy_from_slice(&unrecorded);
    std::fs::write(&kpacked, &bytes).unwrap();
    let out = root.path().join("restored.so");
    run_restore(&kpacked, &options(out.clone(), false));
    let ids = entry_ids(&out);
    assert!(
        ids.iter().all(|b| b[0] == "host-x86_64-unknown-linux-gnu-"),
        "{ids:?}"
    );
}

/// What the reference rewrote restores: the device code of the fixture it was made from,
/// for every wrapper and target, and the restored binary transforms into a valid kpacked one
/// whose every code object the runtime finds; `librelr.so`, whose pointer the loader puts on
/// the ELF header, is repaired (and said to be).
#[test]
#[cfg_attr(
    windows,
    ignore = "the reference-made fixtures name their archives with `:`, which a Windows file name cannot hold"
)]
fn every_reference_made_library_restores_the_relr_one_repaired() {
    use kpack_testkit::refmade::{REFMADE_LIBRARIES, REFMADE_MISDIRECTED, refmade_library};
    for (name, made_from) in REFMADE_LIBRARIES {
        let work = tempfile::tempdir().unwrap();
        let out = work.path().join(name);
        let summary = run_restore(&refmade_library(name), &options(out.clone(), false));
        kpack_elf::verify(&std::fs::read(&out).unwrap())
            .unwrap_or_else(|i| panic!("{name}: {i:#?}"));
        assert_eq!(
            code_by_wrapper(&out),
            code_by_wrapper(&fixture(made_from)),
            "{name}: device code"
        );
        let again = tempfile::tempdir().unwrap();
        let (kpacked, _) = kpack_testkit::transform_into(&out, again.path(), Compression::zstd());
        kpack_elf::verify(&std::fs::read(&kpacked).unwrap())
            .unwrap_or_else(|i| panic!("{name} restored and transformed: {i:#?}"));
        let report = resolve_file(&kpacked, &[]).unwrap().unwrap();
        for wr in &report.wrappers {
            assert!(
                wr.targets
                    .iter()
                    .all(|t| matches!(t.outcome, Outcome::Found { .. })),
                "{name}: {wr:?}"
            );
        }
        if name != REFMADE_MISDIRECTED {
            assert!(
                summary.repaired.is_empty(),
                "{name}: {:?}",
                summary.repaired
            );
            continue;
        }
        let input = std::fs::read(refmade_library(name)).unwrap();
        let w = &kpack_elf::inspect(&input).unwrap().wrappers[0];
        assert_eq!(summary.repaired.len(), 1, "{:?}", summary.repaired);
        let repaired = &summary.repaired[0];
        assert!(
            repaired.starts_with(&format!(
                "wrapper 0 at file offset {:#x}: at run time its pointer lands at load base + 0x0, the ELF header",
                w.offset
            )) && repaired.contains("under RELR"),
            "{repaired}"
        );
        kpack_testkit::assert_no_debug_formatting(repaired);
    }
}

/// A binary transformed for Windows names its archives with a target's `:` spelled `@`; a
/// restore here finds them by that spelling (the Linux runtime looks for `:` only).
#[test]
fn a_binary_transformed_for_windows_restores_here_through_the_at_spelling_of_its_archives() {
    use kpack_pipeline::transform::{NameRules, TransformOptions, transform};
    let root = tempfile::tempdir().unwrap();
    let original = fixture("bin/libone.so");
    let opts = TransformOptions {
        output: root.path().join("lib/libone.so"),
        kpack_dir: root.path().join("lib/.kpack"),
        group: None,
        kernel_name: None,
        search_paths: Vec::new(),
        compression: Compression::zstd(),
        names: NameRules::for_output(true),
    };
    transform(&original, &opts).unwrap();
    let names = kpack_testkit::listing(&opts.kpack_dir);
    assert!(
        names.contains(&"libone_gfx90a@xnack+.kpack".to_owned()),
        "{names:?}"
    );
    assert!(names.iter().all(|n| !n.contains(':')), "{names:?}");
    let out = root.path().join("restored.so");
    run_restore(&opts.output, &options(out.clone(), false));
    assert_eq!(code_by_wrapper(&out), code_by_wrapper(&original));
}
