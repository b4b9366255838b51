//! The kpack-ar integration tests, linked into one test binary.

mod ar;
