//! The kpack-pe integration tests, one module per behaviour, linked into one test binary
//! (one link of the dependency graph instead of one per file).

mod malformed;
mod pe_fixtures;
