//! The `kpack` binary: [`kpack_cli::run`] with the process's arguments.

use std::process::ExitCode;

/// The exit status of a `kpack` whose reader went away (`kpack inspect … | head`): what a Unix
/// shell reports for a process ended by SIGPIPE (128 + 13).
const CLOSED_PIPE_STATUS: i32 = 128 + 13;

/// Lets a closed pipe (`kpack inspect … | head`) end the process quietly, as it does for
/// every Unix filter; Rust ignores SIGPIPE by default, which turns it into a print panic.
/// Unix only: Windows has no signals for pipes (see [`end_quietly_on_a_closed_stdout`]).
fn restore_default_sigpipe() {
    #[cfg(unix)]
    #[allow(unsafe_code)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Where SIGPIPE does not end the process (Windows, where a write to a closed pipe fails with
/// `ERROR_NO_DATA`), printing to a closed stdout is an error, and `println!`, which every
/// command prints with, panics on it: this hook ends the process there instead, silently and
/// with [`CLOSED_PIPE_STATUS`], as SIGPIPE would. One hook for every command's output, so
/// none has to handle it; any other panic is reported as before.
fn end_quietly_on_a_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied());
        if message.is_some_and(is_closed_stdout) {
            std::process::exit(CLOSED_PIPE_STATUS);
        }
        report(info)
    }));
}

/// Whether `message` is std's panic on a print to stdout that failed because the pipe's
/// reader is gone: `failed printing to stdout: … (os error N)`, N one of
/// [`CLOSED_PIPE_ERRORS`].
fn is_closed_stdout(message: &str) -> bool {
    let Some(error) = message.strip_prefix("failed printing to stdout: ") else {
        return false;
    };
    error
        .rsplit_once("(os error ")
        .and_then(|(_, code)| code.strip_suffix(')')?.parse::<i32>().ok())
        .is_some_and(|code| CLOSED_PIPE_ERRORS.contains(&code))
}

/// What a write to a pipe whose reader is gone fails with: `EPIPE`; on Windows
/// `ERROR_BROKEN_PIPE` (109), `ERROR_NO_DATA` (232, Windows' own) and
/// `ERROR_PIPE_NOT_CONNECTED` (233, wine's).
#[cfg(unix)]
const CLOSED_PIPE_ERRORS: &[i32] = &[libc::EPIPE];
#[cfg(windows)]
const CLOSED_PIPE_ERRORS: &[i32] = &[109, 232, 233];

fn main() -> ExitCode {
    restore_default_sigpipe();
    end_quietly_on_a_closed_stdout();
    ExitCode::from(kpack_cli::run(std::env::args_os()))
}

#[cfg(test)]
mod tests {
    use super::is_closed_stdout;

    #[test]
    fn only_a_print_to_a_closed_stdout_is_taken_for_a_closed_pipe() {
        // EPIPE; on Windows ERROR_NO_DATA, what a write to a closed pipe fails with.
        let closed = std::io::Error::from_raw_os_error(if cfg!(windows) { 232 } else { 32 });
        // ENOSPC; on Windows ERROR_DISK_FULL.
        let full = std::io::Error::from_raw_os_error(if cfg!(windows) { 112 } else { 28 });
        assert!(is_closed_stdout(&format!(
            "failed printing to stdout: {closed}"
        )));
        assert!(!is_closed_stdout(&format!(
            "failed printing to stderr: {closed}"
        )));
        assert!(!is_closed_stdout(&format!(
            "failed printing to stdout: {full}"
        )));
        assert!(!is_closed_stdout("index out of bounds (os error 32)"));
    }
}
