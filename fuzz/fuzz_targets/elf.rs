//! ELF fat-binary inspection, `ar` archives (read, and rebuilt with each member's data
//! halved: what prune of a static library writes), and the whole walk over any file kpack reads.
#![no_main]

use libfuzzer_sys::fuzz_target;

struct Ignore;
impl kpack_pipeline::source::Visitor for Ignore {}

fuzz_target!(|data: &[u8]| {
    let _ = kpack_elf::inspect(data);
    if let Ok(members) = kpack_ar::members(data) {
        let halved: Vec<_> = members
            .iter()
            .map(|m| Some(m.data[..m.data.len() / 2].to_vec()))
            .collect();
        if let Ok(rebuilt) = kpack_ar::rebuild(data, &halved) {
            let again = kpack_ar::members(&rebuilt).expect("a rebuilt archive reads");
            assert_eq!(again.len(), members.len());
        }
    }
    let _ = kpack_pipeline::source::walk(data, &mut Ignore);
});
