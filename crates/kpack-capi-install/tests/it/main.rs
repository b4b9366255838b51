//! The installer's integration tests, one module per behaviour, linked into one test binary:
//! librocm_kpack installed with `install-rocm-kpack`, then used as a C program and as the HIP
//! runtime use it.

// The end-to-end test calls the C ABI as C does (raw pointers); each block says why it is sound.
#![allow(unsafe_code)]

mod c_program;
mod end_to_end;
