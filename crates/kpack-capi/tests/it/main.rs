//! The kpack-capi integration tests, one module per behaviour, linked into one test binary
//! (one link of the dependency graph instead of one per file).

mod c_program;
mod end_to_end;
mod header;
mod integrity;
