//! The host rewrite on arbitrary bytes: never panics, and any output it produces passes the
//! structural verifier, whether it kpacks the file (`transform`) or moves or replaces the
//! `.hip_fatbin` contents (`prune`, here with the section's own bytes and bundles).
#![no_main]

use kpack_elf::rewrite::{FatbinEdit, plan_edit};
use libfuzzer_sys::fuzz_target;

fn check(data: &[u8], edit: &FatbinEdit<'_>, contents: &[u8]) {
    if let Ok(rewrite) = plan_edit(data, edit) {
        let out = rewrite.to_vec_with_contents(data, contents);
        if let Err(issues) = kpack_elf::verify(&out) {
            panic!("rewrite output fails verification: {issues:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let marker = kpack_hostbin::marker::MarkerMetadata {
        kernel_name: "lib/libfuzz.so".into(),
        search_paths: vec!["../.kpack/fuzz_@GFXARCH@.kpack".into()],
        host_entry_id: None,
    }
    .encode()
    .expect("the marker encodes");
    check(data, &FatbinEdit::Kpack { marker: &marker }, &[]);
    let Ok(fat) = kpack_elf::inspect(data) else {
        return;
    };
    let Some(section) = fat.fatbin.as_ref().filter(|s| !s.nobits) else {
        return;
    };
    let Some(contents) = usize::try_from(section.offset)
        .ok()
        .zip(usize::try_from(section.size).ok())
        .and_then(|(o, n)| data.get(o..o.checked_add(n)?))
    else {
        return;
    };
    let bundle_offsets: Vec<u64> = fat
        .wrappers
        .iter()
        .map(|w| w.bundle.map_or(0, |b| fat.bundles[b].offset))
        .collect();
    let contents_len = contents.len() as u64;
    for edit in [
        FatbinEdit::Move {
            contents_len,
            bundle_offsets: bundle_offsets.clone(),
        },
        FatbinEdit::Replace {
            contents_len,
            bundle_offsets,
        },
    ] {
        check(data, &edit, contents);
    }
});
