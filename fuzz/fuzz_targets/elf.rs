//! ELF fat-binary inspection, `ar` archives, and the whole walk over any file kpack reads.
#![no_main]

use libfuzzer_sys::fuzz_target;

struct Ignore;
impl kpack_pipeline::source::Visitor for Ignore {}

fuzz_target!(|data: &[u8]| {
    let _ = kpack_elf::inspect(data);
    let _ = kpack_elf::ar::members(data);
    let _ = kpack_pipeline::source::walk(data, &mut Ignore);
});
