//! The kpack-artifact integration tests, one module per behaviour, linked into one test binary
//! (one link of the dependency graph instead of one per file).

mod artifact_realworld;
mod pe;
mod recombine;
mod refmade;
mod split;
mod tarball;
mod windows_names;
