//! The kpack-capi integration tests, one module per behaviour, linked into one test binary
//! (one link of the dependency graph instead of one per file). The tests of the installed
//! library (a C program built against it, the HIP runtime's stand-in loading through it) are
//! `kpack-capi-install`'s, whose program installs it.

mod header;
mod integrity;
