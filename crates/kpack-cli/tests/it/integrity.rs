//! Issue 20 through the command line: `kpack extract` of a damaged archive writes the
//! original code object or fails and writes nothing. The same flips as kpack-capi's
//! `tests/it/integrity.rs` (which reads every entry through the libraries), every tenth of them:
//! each run is a process.

use std::path::Path;
use std::process::Command;

use kpack_testkit::flips::{
    ENCODINGS, archive_flips, damage_originals, packed_fixture, stored_entries,
};

/// One in how many flips is extracted.
const EVERY: usize = 10;

#[test]
fn kpack_extract_of_a_damaged_archive_writes_the_original_or_fails_writing_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let want = damage_originals();
    let damaged = tmp.path().join("damaged.kpack");
    let out = tmp.path().join("out.co");
    let extract = |binary: &str, arch: &str| {
        Command::new(env!("CARGO_BIN_EXE_kpack"))
            .arg("extract")
            .args([damaged.as_os_str(), binary.as_ref(), arch.as_ref()])
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap()
    };
    for (label, compression) in ENCODINGS {
        let bytes = std::fs::read(packed_fixture(tmp.path(), label, compression)).unwrap();
        let entries = stored_entries(&bytes);
        let flips = archive_flips(&bytes, 400);
        let (mut runs, mut originals, mut errors) = (0, 0, 0);
        for (k, flip) in flips.iter().enumerate().step_by(EVERY) {
            std::fs::write(&damaged, flip.apply(&bytes)).unwrap();
            // The entry whose bytes the flip hit, else one in turn.
            let e = entries
                .iter()
                .find(|e| e.stored.contains(&flip.at))
                .unwrap_or(&entries[k % entries.len()]);
            let what = format!("{label} {flip:?}: extract {} {}", e.binary, e.arch);
            let run = extract(&e.binary, &e.arch);
            runs += 1;
            if run.status.success() {
                let got = std::fs::read(&out).unwrap();
                assert!(
                    want.get(&(e.binary.clone(), e.arch.clone())) == Some(&got),
                    "{what}: wrote {} bytes that are not the original",
                    got.len()
                );
                originals += 1;
                std::fs::remove_file(&out).unwrap();
            } else {
                assert!(
                    !Path::new(&out).exists(),
                    "{what}: failed, but wrote {}",
                    out.display()
                );
                errors += 1;
            }
        }
        println!(
            "{label}: {} flips, kpack extract of {runs}: {originals} originals, {errors} errors",
            flips.len()
        );
    }
}
