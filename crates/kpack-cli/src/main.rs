//! The `kpack` binary: [`kpack_cli::run`] with the process's arguments.

use std::process::ExitCode;

/// Lets a closed pipe (`kpack inspect … | head`) end the process quietly, as it does for
/// every Unix filter; Rust ignores SIGPIPE by default, which turns it into a print panic.
/// Unix only: Windows has no signals for pipes (a write to a closed one fails with
/// `ERROR_NO_DATA`, the same as the ignored SIGPIPE's `EPIPE` here).
fn restore_default_sigpipe() {
    #[cfg(unix)]
    #[allow(unsafe_code)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    restore_default_sigpipe();
    ExitCode::from(kpack_cli::run(std::env::args_os()))
}
