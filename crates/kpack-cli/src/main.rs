//! `kpack`: take AMD GPU device code out of host binaries, pack it per architecture.
//!
//! This binary only parses arguments and prints; the work is done by the library crates.

mod cmd;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kpack",
    version,
    about = "ROCm kernel packing: split, pack and inspect GPU device code"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe fat binaries, bundles, code objects and .kpack archives (directories recursively).
    Inspect(cmd::inspect::Args),
    /// Write every device code object of the inputs into a directory.
    Unbundle(cmd::unbundle::Args),
    /// Pack the device code of fat binaries and code objects into one .kpack archive.
    Pack(cmd::pack::Args),
    /// List the entries of a .kpack archive.
    List(cmd::list::Args),
    /// Extract one code object from a .kpack archive.
    Extract(cmd::extract::Args),
    /// Turn a fat binary into a host-only binary plus one .kpack archive per GPU target.
    Transform(cmd::transform::Args),
    /// Check the structure of an ELF file (as every transform output is checked).
    VerifyElf(cmd::verify_elf::Args),
    /// Split build artifacts into a generic artifact and one artifact per GPU architecture.
    Split(cmd::split::Args),
    /// Recombine split shards into per-architecture-group packages.
    Recombine(cmd::recombine::Args),
    /// Prove split or recombined artifacts complete (and identical to the originals).
    Verify(cmd::verify::Args),
    /// Show where the bytes go (per file, target and kind) as an HTML treemap or JSON.
    Report(cmd::report::Args),
}

/// Lets a closed pipe (`kpack inspect … | head`) end the process quietly, as it does for
/// every Unix filter; Rust ignores SIGPIPE by default, which turns it into a print panic.
fn restore_default_sigpipe() {
    #[allow(unsafe_code)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    restore_default_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(args) => cmd::inspect::run(args),
        Command::Unbundle(args) => cmd::unbundle::run(args),
        Command::Pack(args) => cmd::pack::run(args),
        Command::List(args) => cmd::list::run(args),
        Command::Extract(args) => cmd::extract::run(args),
        Command::Transform(args) => cmd::transform::run(args),
        Command::VerifyElf(args) => cmd::verify_elf::run(args),
        Command::Split(args) => cmd::split::run(args),
        Command::Recombine(args) => cmd::recombine::run(args),
        Command::Verify(args) => cmd::verify::run(args),
        Command::Report(args) => cmd::report::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            output::print_error(err.as_ref());
            ExitCode::FAILURE
        }
    }
}
