//! The kpack-elf integration tests, one module per behaviour, linked into one test binary
//! (one link of the dependency graph instead of one per file).

mod ar_members;
mod debug_files;
mod elf_parse;
mod inspect_fixtures;
mod malformed;
mod platforms;
mod refmade;
mod rewrite;
mod shrink;
