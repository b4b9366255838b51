//! The kpack-package integration tests, one module per behaviour, linked into one test binary.

mod handlers;
