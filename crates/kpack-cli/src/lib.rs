//! `kpack`: take AMD GPU device code out of host binaries, pack it per architecture.
//!
//! The command line as a library: [`run`] parses arguments and prints; the work is done by
//! the library crates. The `kpack` binary is [`run`]; the Python package ships this binary as
//! its `kpack` command (docs/python.md), so the two cannot drift apart.
//!
//! Depends on `kpack-archive`, `kpack-artifact`, `kpack-concurrency`, `kpack-detect`,
//! `kpack-fs`, `kpack-inputs`, `kpack-package`, `kpack-pipeline`, `kpack-prune`,
//! `kpack-report`, `kpack-target` and `kpack-wheel` (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

/// `println!` for the commands' output, through [`output::write_line`], which decides in one
/// place what a failed write to stdout does (`println!` would panic).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_line(format_args!($($arg)*))
    };
}

mod cmd;
mod output;

use std::ffi::OsString;
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
    /// Worker threads of every pool (default: one per core). Output is the same bytes
    /// whatever the count.
    #[arg(long, global = true, default_value_t = 0)]
    threads: usize,
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
    /// Turn a kpacked binary back into a fat binary (bundles rebuilt from its archives).
    Restore(cmd::restore::Args),
    /// Check the structure of an ELF file or PE image (as every transform output is checked).
    #[command(visible_alias = "verify-binary")]
    VerifyElf(cmd::verify_elf::Args),
    /// Split build artifacts into a generic artifact and one artifact per GPU architecture.
    Split(cmd::split::Args),
    /// Recombine split shards into per-architecture-group packages.
    Recombine(cmd::recombine::Args),
    /// Rewrite a .kpack archive with another compression (v1 <-> v2), entries unchanged.
    Recompress(cmd::recompress::Args),
    /// Prove split or recombined artifacts complete (and identical to the originals).
    Verify(cmd::verify::Args),
    /// Which packages to install so that a GPU finds its device code (from the .kpm indexes).
    Which(cmd::which::Args),
    /// Split a fat Python wheel into a host wheel and per-GPU device wheels.
    SplitWheel(cmd::split_wheel::Args),
    /// Show this machine's AMD GPUs and the device wheel extra each needs.
    Detect(cmd::detect::Args),
    /// Show where the bytes go (per file, target and kind) as an HTML treemap or JSON.
    Report(cmd::report::Args),
    /// Keep only some GPU targets' device code in fat binaries (they stay fat).
    Prune(cmd::prune::Args),
}

/// Runs `kpack` with the command line `args` (the program name first, as in
/// [`std::env::args_os`]) and returns its exit status: 0 on success, 1 when an input failed,
/// 2 for a usage error. `--help` and `--version` print and return 0. A write to stdout that
/// fails ends the process instead (status 141 for a closed pipe: `output::write_line`).
pub fn run(args: impl IntoIterator<Item = OsString>) -> u8 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // Help and version go to stdout, usage errors to stderr, as clap's `parse` does.
            let _ = err.print();
            return u8::try_from(err.exit_code()).unwrap_or(2);
        }
    };
    kpack_concurrency::threads::set_limit(cli.threads);
    let result = match cli.command {
        Command::Inspect(args) => cmd::inspect::run(args),
        Command::Unbundle(args) => cmd::unbundle::run(args),
        Command::Pack(args) => cmd::pack::run(args),
        Command::List(args) => cmd::list::run(args),
        Command::Extract(args) => cmd::extract::run(args),
        Command::Transform(args) => cmd::transform::run(args),
        Command::Restore(args) => cmd::restore::run(args),
        Command::VerifyElf(args) => cmd::verify_elf::run(args),
        Command::Split(args) => cmd::split::run(args),
        Command::Recombine(args) => cmd::recombine::run(args),
        Command::Recompress(args) => cmd::recompress::run(args),
        Command::Verify(args) => cmd::verify::run(args),
        Command::Which(args) => cmd::which::run(args),
        Command::SplitWheel(args) => cmd::split_wheel::run(args),
        Command::Detect(args) => cmd::detect::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Prune(args) => cmd::prune::run(args),
    };
    let status = match result {
        // The commands end in success or failure, nothing finer.
        Ok(code) if code == ExitCode::SUCCESS => 0,
        Ok(_) => 1,
        Err(err) => {
            output::print_error(err.as_ref());
            1
        }
    };
    // Only a Rust `main` flushes stdout on the way out; the Python `kpack` command is not one.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    status
}
