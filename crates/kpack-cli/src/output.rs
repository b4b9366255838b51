//! Printing: JSON on request, plain text otherwise, progress bars only on a terminal.

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

/// Any error a command reports; printed with its chain of causes.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Prints `err` and its causes to stderr.
pub fn print_error(err: &(dyn std::error::Error + 'static)) {
    eprintln!(
        "kpack: error: {}",
        kpack_pipeline::error::error_message(err)
    );
}

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(value)?;
    outln!("{text}");
    Ok(())
}

/// Prints a line on stdout: what [`outln!`] expands to, and so every command's output.
///
/// A write that fails ends the process here, the one place that decides how: a closed pipe
/// (`kpack inspect … | head`) quietly, with [`CLOSED_PIPE_STATUS`], as SIGPIPE ends it on
/// Unix (where it is not ignored, the signal comes first); any other failure (a full disk
/// under a redirect) with an error naming standard output and status 1. Ending here rather
/// than returning the error lets every command print as it goes: what it has published is
/// whole (outputs are staged and renamed), and what it had staged the next run sweeps.
pub fn write_line(args: std::fmt::Arguments) {
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
    {
        if is_closed_pipe(&err) {
            std::process::exit(CLOSED_PIPE_STATUS);
        }
        eprintln!("kpack: error: cannot write to standard output: {err}");
        std::process::exit(1);
    }
}

/// The exit status of a `kpack` whose reader went away: what a Unix shell reports for a
/// process ended by SIGPIPE (128 + 13).
pub const CLOSED_PIPE_STATUS: i32 = 128 + 13;

/// Whether `err` is a write to a pipe whose reader is gone: `EPIPE`; on Windows
/// `ERROR_BROKEN_PIPE` (109) and `ERROR_NO_DATA` (232, Windows' own), which std takes for
/// [`std::io::ErrorKind::BrokenPipe`], and `ERROR_PIPE_NOT_CONNECTED` (233, wine's), which
/// it does not.
fn is_closed_pipe(err: &std::io::Error) -> bool {
    const ERROR_PIPE_NOT_CONNECTED: i32 = 233;
    err.kind() == std::io::ErrorKind::BrokenPipe
        || (cfg!(windows) && err.raw_os_error() == Some(ERROR_PIPE_NOT_CONNECTED))
}

/// A progress bar drawn on stderr when it is a terminal and not under CI; hidden otherwise.
pub fn progress(len: u64, what: &str) -> ProgressBar {
    let visible = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
    if !visible {
        return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}")
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_owned());
    bar
}

/// Thousands separators for byte counts in human output.
pub use kpack_report::html::grouped;

#[cfg(test)]
mod tests {
    use super::is_closed_pipe;

    #[test]
    fn only_a_write_to_a_pipe_without_reader_is_taken_for_a_closed_pipe() {
        // EPIPE; on Windows ERROR_NO_DATA and wine's ERROR_PIPE_NOT_CONNECTED.
        let closed: &[i32] = if cfg!(windows) {
            &[109, 232, 233]
        } else {
            &[32]
        };
        for &code in closed {
            assert!(is_closed_pipe(&std::io::Error::from_raw_os_error(code)));
        }
        // ENOSPC; on Windows ERROR_DISK_FULL.
        let full = std::io::Error::from_raw_os_error(if cfg!(windows) { 112 } else { 28 });
        assert!(!is_closed_pipe(&full));
    }
}
