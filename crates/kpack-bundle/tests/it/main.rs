//! The kpack-bundle integration tests, one module per behaviour, linked into one test binary
//! (one link of the dependency graph instead of one per file).

mod common;

mod malformed;
mod real_fixtures;
mod writers;
