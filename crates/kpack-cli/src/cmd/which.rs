//! `kpack which GPU PATH... [--json]`: which packages to install so that a GPU finds its
//! device code, from the `.kpm` indexes `recombine` puts into generic packages.

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_package::index::{self, Resolution};
use kpack_target::TargetId;
use serde::Serialize;

use crate::output::{self, Error};

#[derive(clap::Args)]
pub struct Args {
    /// The GPU: a target (`gfx1030`, `gfx90a:xnack+`) or the ISA name the HIP runtime reports
    /// (`amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`).
    #[arg(value_parser = parse_gpu)]
    gpu: TargetId,
    /// Install trees, recombined artifact directories or `.kpm` files; directories are
    /// searched for `.kpack/*.kpm`.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_gpu(s: &str) -> Result<TargetId, String> {
    index::parse_gpu(s).map_err(|e| e.to_string())
}

#[derive(Serialize)]
struct Report<'a> {
    gpu: String,
    /// One per index found: what it says of the GPU.
    modules: &'a [Resolution],
    /// The packages to install (those providing an archive not present next to its index).
    install: Vec<String>,
    /// Modules no package provides for the GPU, as `<component>/<module>`.
    unavailable: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let mut modules = Vec::new();
    for path in &args.paths {
        for found in index::find_indexes(path)? {
            let kpm = index::read(&found)?;
            modules.push(index::resolve(&found, &kpm, &args.gpu));
        }
    }
    if modules.is_empty() {
        return Err(format!(
            "no .kpm index under {} (recombine writes one per module into each generic package)",
            args.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
        .into());
    }
    let mut install: Vec<String> = modules
        .iter()
        .filter(|m| !m.installed)
        .filter_map(|m| m.package.clone())
        .collect();
    install.sort();
    install.dedup();
    let unavailable: Vec<String> = modules
        .iter()
        .filter(|m| m.target.is_none())
        .map(|m| format!("{}/{}", m.component, m.module))
        .collect();
    let report = Report {
        gpu: args.gpu.to_string(),
        modules: &modules,
        install,
        unavailable,
    };
    if args.json {
        output::print_json(&report)?;
    } else {
        outln!("{}:", report.gpu);
        for m in &modules {
            let what = match (&m.target, &m.file) {
                (Some(target), Some(file)) => format!(
                    "{}{target} in {} ({file}), {}",
                    if target == kpack_target::SPIRV {
                        "no native code; portable SPIR-V "
                    } else {
                        ""
                    },
                    m.package.as_deref().unwrap_or("an unnamed package"),
                    if m.installed {
                        "installed"
                    } else {
                        "not installed"
                    }
                ),
                _ => format!(
                    "no package provides it (built for {})",
                    m.available.join(", ")
                ),
            };
            outln!("  {} {}: {what}", m.component, m.module);
        }
        if report.install.is_empty() {
            outln!("nothing to install");
        } else {
            outln!("install: {}", report.install.join(" "));
        }
    }
    Ok(if report.unavailable.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
