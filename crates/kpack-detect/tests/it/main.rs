//! GPU detection over the amdkfd topology trees of `fixtures/kfd/`, and over trees written
//! here for what a driver should never write.

use std::path::Path;

use kpack_detect::{DetectError, detect, processor_name};
use kpack_testkit::fixture;

/// (node, gfx_target_version, target id) of each GPU found under `root`.
fn found(root: &Path) -> Vec<(u32, u64, String)> {
    detect(root)
        .unwrap()
        .into_iter()
        .map(|g| (g.node, g.gfx_target_version, g.target.to_string()))
        .collect()
}

#[test]
fn every_gpu_node_is_found_by_node_number_and_cpu_nodes_are_skipped() {
    assert_eq!(
        found(&fixture("kfd/rdna")),
        [
            (1, 110000, "gfx1100".to_owned()),
            (2, 100300, "gfx1030".to_owned()),
            (3, 110000, "gfx1100".to_owned()),
        ]
    );
}

#[test]
fn sram_ecc_is_read_from_the_capability_bits_on_processors_that_have_it() {
    assert_eq!(
        found(&fixture("kfd/mi300x")),
        [(1, 90402, "gfx942:sramecc+".to_owned())]
    );
}

#[test]
fn a_machine_without_gpus_or_without_amdkfd_has_none() {
    assert_eq!(found(&fixture("kfd/cpu-only")), []);
    assert_eq!(found(&fixture("kfd/no-such-tree")), []);
}

#[test]
fn the_stepping_is_written_in_hex_in_the_processor_name() {
    assert_eq!(processor_name(90010), "gfx90a");
    assert_eq!(processor_name(110501), "gfx1151");
}

/// A topology of one node whose `properties` are `text`.
fn one_node(text: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let node = root.path().join("class/kfd/kfd/topology/nodes/4");
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(node.join("properties"), text).unwrap();
    root
}

#[test]
fn a_property_that_is_not_a_decimal_number_is_an_error_naming_the_file() {
    let root = one_node("simd_count 4\ngfx_target_version 0x1100\n");
    let err = detect(root.path()).unwrap_err();
    assert!(matches!(err, DetectError::NotDecimal { .. }), "{err}");
    // Joined as detect joins a node's directory and file, so that the path is spelled the
    // same with Windows' separator too.
    let properties = root
        .path()
        .join("class/kfd/kfd/topology/nodes")
        .join("4")
        .join("properties");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: gfx_target_version '0x1100' is not a decimal number",
            properties.display()
        )
    );
}
