//! `kpack detect`: this machine's AMD GPUs and the device wheel extra each needs.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// The sysfs mount to read the amdkfd topology from.
    #[arg(long, default_value = "/sys")]
    sysfs_root: PathBuf,
    /// The host package to name in the pip command.
    #[arg(long, default_value = "<package>")]
    package: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct Report<'a> {
    gpus: &'a [kpack_wheel::Gpu],
    /// The extras to install, each once, in node order.
    extras: Vec<&'a str>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let gpus = kpack_wheel::detect(&args.sysfs_root)?;
    let mut extras: Vec<&str> = Vec::new();
    for g in &gpus {
        if !extras.contains(&g.extra.as_str()) {
            extras.push(&g.extra);
        }
    }
    if args.json {
        output::print_json(&Report {
            gpus: &gpus,
            extras,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    if gpus.is_empty() {
        println!(
            "no AMD GPU found (no amdkfd topology node with a gfx target under {})",
            args.sysfs_root.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for g in &gpus {
        let chain: Vec<&str> = g.chain.iter().map(|k| k.as_str()).collect();
        let fallback = g.fallback.as_ref().map_or(String::new(), |k| {
            format!("; without them the portable SPIR-V wheel {k}")
        });
        println!(
            "GPU node {}: {} (device wheels: {}{fallback})",
            g.node,
            g.target,
            chain.join(" -> ")
        );
    }
    println!("pip install '{}[{}]'", args.package, extras.join(","));
    Ok(ExitCode::SUCCESS)
}
