//! Wheel zips: entry-name checks, duplicate detection, bounded decompression, and the
//! RECORD (rows and hash fields) / METADATA readers on whatever text the bytes hold.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = kpack_wheelfile::Limits {
        max_unpacked: 1 << 24,
    };
    let wheel = Path::new("fuzz.whl");
    if let Ok(files) = kpack_wheelfile::reader::read_zip(wheel, std::io::Cursor::new(data), &limits, None) {
        assert!(files.iter().map(|f| f.size).sum::<u64>() <= limits.max_unpacked);
    }
    let _ = kpack_wheelfile::metadata::parse_record(data);
    let _ = kpack_wheelfile::record::Record::parse(wheel, "fuzz-1.0.dist-info", data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = kpack_wheelfile::metadata::header_values(text, "Name");
        let block = kpack_wheelfile::metadata::insert_headers(text, "Provides-Extra: device-all\n");
        assert!(block.len() >= text.len());
        let _ = kpack_wheel::dist_info::add_variant_markers(text);
    }
});
