//! Archives for the runtime tests, built from the repo's real code objects.
#![allow(dead_code, unused_imports)] // each test binary uses a subset

use std::path::Path;

use kpack_archive::{ArchiveWriter, Compression};
use kpack_hostbin::marker::MarkerMetadata;

pub use kpack_testkit::{fixture, read_fixture};

/// Real code objects: (target, bytes).
pub fn gfx1030() -> Vec<u8> {
    read_fixture("modern/mk_gfx1030.co")
}

pub fn gfx90a_xnackp() -> Vec<u8> {
    read_fixture("modern/mk_gfx90a_xnackp.co")
}

/// The gfx942:sramecc+:xnack- entry of a real CCOB v3 bundle.
pub fn gfx942() -> Vec<u8> {
    let ccob = read_fixture("modern/mk_genco_v3.hsaco");
    let decoded = kpack_bundle::DecodedBundle::decode(&ccob).unwrap();
    let bundle = decoded.bundle().unwrap();
    let entry = bundle
        .entries()
        .iter()
        .find(|e| e.triple.ends_with("--gfx942:sramecc+:xnack-"))
        .unwrap();
    entry.data.to_vec()
}

/// Writes an archive of `(binary key, arch, bytes)` entries; `arches` overrides `gfx_arches`.
pub fn write_archive(
    path: &Path,
    compression: Compression,
    entries: &[(&str, &str, &[u8])],
    arches: Option<&[&str]>,
) {
    let mut w = ArchiveWriter::new("test", "test", compression);
    for (key, arch, data) in entries {
        w.add(key, arch, data.to_vec(), &[]).unwrap();
    }
    if let Some(arches) = arches {
        w.set_gfx_arches(arches.iter().map(|s| s.to_string()).collect())
            .unwrap();
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    w.write_file(path).unwrap();
}

pub fn meta(kernel_name: &str, paths: &[&str]) -> MarkerMetadata {
    MarkerMetadata {
        kernel_name: kernel_name.to_owned(),
        search_paths: paths.iter().map(|s| s.to_string()).collect(),
        host_entry_id: None,
    }
}
