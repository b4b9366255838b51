//! Compressed (CCOB) bundles: header lies, decompression bounds, hash checks; decoded whole
//! and read entry by entry from the stream, which must agree.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = kpack_bundle::DecodedBundle::decode(data);
    if let Ok(decoded) = &whole {
        let _ = decoded.bundles();
    }
    let Ok(Some(mut stream)) = kpack_bundle::EntryStream::open(data) else {
        return;
    };
    let mut streamed = Vec::new();
    let complete = loop {
        match stream.next_entry() {
            Ok(Some(entry)) => streamed.push(entry),
            Ok(None) => break true,
            Err(_) => break false,
        }
    };
    // A stream read to its end passed the size and hash checks: the whole decode agrees.
    if complete {
        let decoded = whole.expect("a stream that checks out decodes whole");
        let bundle = decoded.bundle().expect("and parses");
        for entry in &streamed {
            assert_eq!(bundle.entries()[entry.index].data, &entry.data[..]);
        }
    }
});
