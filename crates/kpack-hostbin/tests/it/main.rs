//! The kpack-hostbin integration tests, one module per behaviour, linked into one test binary.

mod marker;
