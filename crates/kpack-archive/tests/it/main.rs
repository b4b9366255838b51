//! The kpack-archive integration tests, one module per behaviour, linked into one test binary
//! (one link of the dependency graph instead of one per file).

mod common;

mod concurrency;
mod kpm;
mod malformed;
mod unified;
mod vectors;
mod writer;
