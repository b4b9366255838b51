//! The kpack-pipeline integration tests, one module per behaviour, linked into one test binary
//! (one link of the dependency graph instead of one per file).

mod pe;
mod platforms;
mod realworld;
mod restore;
mod transform;
mod unbundle_witness;
