//! The `kpack` binary: [`kpack_cli::run`] with the process's arguments.

use std::process::ExitCode;

/// Lets a closed pipe (`kpack inspect … | head`) end the process quietly, as it does for
/// every Unix filter; Rust ignores SIGPIPE by default, which turns it into a failed write.
/// Unix only: Windows has no signals for pipes; there (and wherever the signal is ignored)
/// the commands' one output writer ends the process the same way on the failed write.
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
