//! Target ids, bundle ids and code-object headers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(t) = kpack_target::TargetId::parse(text) {
            assert_eq!(kpack_target::TargetId::parse(&t.to_string()).ok(), Some(t.clone()));
            let _ = t.compatible_candidates();
        }
        let _ = kpack_target::TargetId::parse_tensile(text);
        let _ = kpack_target::BundleId::parse(text);
    }
    let _ = kpack_target::code_object_target(data);
});
