//! `kpack detect`: this machine's AMD GPUs and the device wheel extra each needs.

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_wheel::BundleKey;

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

/// One GPU `kpack_detect` found, with the device wheels the packaging hierarchy gives it.
#[derive(serde::Serialize)]
struct Gpu {
    node: u32,
    gfx_target_version: u64,
    target: String,
    /// Its device wheels, nearest first: target, sub-family, family.
    chain: Vec<BundleKey>,
    /// The portable SPIR-V wheel the extra installs instead when a package has no wheel of
    /// the chain; absent for a processor outside the packaging hierarchy.
    #[serde(skip_serializing_if = "Option::is_none")]
    fallback: Option<BundleKey>,
    /// The host wheel's extra that installs them (`device-gfx1100`).
    extra: String,
}

impl Gpu {
    fn of(gpu: kpack_detect::Gpu) -> Result<Gpu, Error> {
        let key = BundleKey::of_target(&gpu.target)?;
        Ok(Gpu {
            node: gpu.node,
            gfx_target_version: gpu.gfx_target_version,
            target: gpu.target.to_string(),
            chain: key.chain(),
            fallback: key.portable_fallback(),
            extra: key.extra(),
        })
    }
}

#[derive(serde::Serialize)]
struct Report<'a> {
    gpus: &'a [Gpu],
    /// The extras to install, each once, in node order.
    extras: Vec<&'a str>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let gpus = kpack_detect::detect(&args.sysfs_root)?
        .into_iter()
        .map(Gpu::of)
        .collect::<Result<Vec<_>, _>>()?;
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
        outln!(
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
        outln!(
            "GPU node {}: {} (device wheels: {}{fallback})",
            g.node,
            g.target,
            chain.join(" -> ")
        );
    }
    outln!("pip install '{}[{}]'", args.package, extras.join(","));
    Ok(ExitCode::SUCCESS)
}
