//! The kpack-target integration tests, one module per behaviour, linked into one test binary
//! (one link of the dependency graph instead of one per file).

mod bundle_id;
mod code_object;
mod target_id;
