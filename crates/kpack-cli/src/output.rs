//! Printing: JSON on request, plain text otherwise, progress bars only on a terminal.

use std::io::IsTerminal;

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
    println!("{text}");
    Ok(())
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
