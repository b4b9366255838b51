//! A fat binary's device code: its CCOB frames, the binary transformed into an install-like
//! tree, its original code objects, and those a kpacked binary's markers lead to.

use std::path::{Path, PathBuf};

use crate::Registration;

/// The zstd frames of every CCOB of `lib`'s `.hip_fatbin`, concatenated into `out`; returns
/// their length (0 for a library of uncompressed bundles). What `zstd -d` of them takes is the floor of any command that must decode
/// the library's device code (the benchmarks' baseline).
///
/// Read bundle by bundle: on Linux a child's `ru_maxrss` starts from this process's peak
/// (the mm `exec` replaces), so this process must stay small for the children's figures to
/// be theirs.
pub fn ccob_frames(lib: &Path, out: &Path) -> u64 {
    use std::io::Write;
    let file = std::fs::File::open(lib).unwrap();
    let map = kpack_pipeline::map_file(&file, lib).unwrap();
    let fat = kpack_elf::inspect(&map).unwrap();
    let section = fat.fatbin.unwrap();
    let mut frames = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let mut total = 0;
    let mut ccob = Vec::new();
    let compressed = fat
        .bundles
        .iter()
        .filter(|b| map[(section.offset + b.offset) as usize..].starts_with(b"CCOB"));
    for b in compressed {
        ccob.resize(b.len as usize, 0);
        kpack_fs::read_exact_at(&file, &mut ccob, section.offset + b.offset).unwrap();
        let header_len = match u16::from_le_bytes([ccob[4], ccob[5]]) {
            2 => 24,
            3 => 32,
            v => panic!("CCOB v{v} in {}", lib.display()),
        };
        frames.write_all(&ccob[header_len..]).unwrap();
        total += (ccob.len() - header_len) as u64;
    }
    frames.flush().unwrap();
    total
}

/// `input` transformed into an install-like tree, `root/lib/<name>` plus `root/.kpack/`, with
/// the default group, kernel name and search path; returns the host binary and the summary.
pub fn transform_into(
    input: &Path,
    root: &Path,
    compression: kpack_archive::Compression,
) -> (PathBuf, kpack_pipeline::transform::TransformSummary) {
    use kpack_pipeline::transform::{Outcome, TransformOptions, transform};
    let output = root.join("lib").join(input.file_name().unwrap());
    std::fs::create_dir_all(output.parent().unwrap()).unwrap();
    let opts = TransformOptions {
        output: output.clone(),
        kpack_dir: root.join(".kpack"),
        group: None,
        kernel_name: None,
        search_paths: Vec::new(),
        compression,
        names: kpack_pipeline::transform::NameRules::for_output(false),
    };
    match transform(input, &opts).unwrap_or_else(|e| panic!("{}: {e}", input.display())) {
        Outcome::Transformed(summary) => (output, summary),
        other => panic!("{}: not transformed: {other:?}", input.display()),
    }
}

/// The original code objects of a fat binary by (wrapper index, target).
pub fn originals(binary: &Path) -> std::collections::BTreeMap<(u64, String), Vec<u8>> {
    let bytes = std::fs::read(binary).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for obj in kpack_pipeline::source::device_code_objects(&bytes).unwrap() {
        let target = obj.bundle_id.target().unwrap().to_string();
        for &w in &obj.wrappers {
            out.insert((w as u64, target.clone()), obj.data.to_vec());
        }
    }
    out
}

/// The code objects a kpacked binary's registrations lead to: for each one, the marker's
/// search paths (relative to the binary's directory, `@GFXARCH@` per target) name the
/// archive, and `kernel_name#reserved1` the entry. Returns them with their wrapper index.
pub fn fetch_through_markers(
    regs: &[Registration],
    binary: &Path,
    objects: &[kpack_pipeline::source::OwnedDeviceCode],
) -> Vec<(u64, String, Vec<u8>)> {
    let dir = binary.parent().unwrap();
    let mut fetched = Vec::new();
    for r in regs {
        let (meta, used) = kpack_hostbin::marker::MarkerMetadata::decode(&r.bytes).unwrap();
        assert_eq!(used, r.bytes.len());
        let key = format!("{}#{}", meta.kernel_name, r.reserved1);
        for obj in objects
            .iter()
            .filter(|o| o.wrappers.contains(&(r.reserved1 as usize)))
        {
            let target = obj.bundle_id.target().unwrap().to_string();
            let archive = meta
                .search_paths
                .iter()
                .map(|p| dir.join(p.replace("@GFXARCH@", &target)))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("no archive for {target} in {:?}", meta.search_paths));
            let archive = kpack_archive::Archive::open(&archive).unwrap();
            let data = archive.get(&key, &target).unwrap().into_owned();
            fetched.push((r.reserved1, target, data));
        }
    }
    fetched
}

/// Checks that every code object fetched through markers ([`fetch_through_markers`]) is byte
/// for byte the original's of the same wrapper and target (`what` names the binary).
pub fn assert_fetched_are_the_originals(
    fetched: &[(u64, String, Vec<u8>)],
    objects: &[kpack_pipeline::source::OwnedDeviceCode],
    what: &str,
) {
    for (wrapper, target, data) in fetched {
        let want = objects
            .iter()
            .find(|o| {
                o.wrappers.contains(&(*wrapper as usize))
                    && o.bundle_id.target().unwrap().to_string() == *target
            })
            .unwrap_or_else(|| panic!("{what}: no original for wrapper {wrapper} {target}"));
        assert_eq!(
            data[..],
            want.data[..],
            "{what}: wrapper {wrapper} {target}"
        );
    }
}
