//! Which GPUs this machine has, from the amdkfd topology in sysfs: each GPU's topology node,
//! its `gfx_target_version` and its target id. Which device wheel a GPU needs is
//! `kpack-wheel`'s packaging hierarchy; `kpack detect` puts the two together.
//!
//! amdkfd (Linux `drivers/gpu/drm/amd/amdkfd/kfd_topology.c`, `node_show`) writes one
//! `properties` file per topology node under `/sys/class/kfd/kfd/topology/nodes/<n>/`:
//! one `name value` pair per line, values in decimal. CPU nodes have `simd_count 0` and
//! `gfx_target_version 0`; a GPU's `gfx_target_version` is `major*10000 + minor*100 +
//! stepping` (`90010` is gfx90a: the stepping is written in hex in the processor name).
//! `capability` carries `HSA_CAP_SRAM_EDCSUPPORTED` (`0x04000000`, kfd_topology.h) when
//! SRAM ECC is on, which decides `:sramecc±` on the processors that have the feature.
//! XNACK is a per-process mode (`AMDKFD_IOC_SET_XNACK_MODE`), not a node property, so the
//! target is reported without `:xnack` (any), which is also what picks the wheel: features
//! fold into the processor's device wheel.
//!
//! The `properties` format is a few lines of `name value`: read by hand, as no crate reads
//! amdkfd's topology.
//!
//! Depends on `kpack-target` (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

use kpack_target::{TargetError, TargetId};

/// `HSA_CAP_SRAM_EDCSUPPORTED` of kfd_topology.h.
const HSA_CAP_SRAM_EDCSUPPORTED: u64 = 0x0400_0000;

/// Processors with an SRAM ECC mode (LLVM AMDGPUUsage, "Processors" table).
const SRAMECC_PROCESSORS: &[&str] = &["gfx906", "gfx908", "gfx90a", "gfx942", "gfx950"];

/// One GPU found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// The topology node number.
    pub node: u32,
    /// KFD's `gfx_target_version` property (`90402` for gfx942): major, minor and
    /// stepping as decimal digit pairs, the number the target id is derived from.
    pub gfx_target_version: u64,
    /// The target id (`gfx942:sramecc+`).
    pub target: TargetId,
}

/// Why the topology could not be read. Each error names the file at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DetectError {
    /// A directory or `properties` file of the topology could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A property the detection reads is not a decimal number.
    #[error("{}: {name} '{value}' is not a decimal number", path.display())]
    NotDecimal {
        /// The node's `properties` file.
        path: PathBuf,
        /// The property.
        name: String,
        /// Its value as written.
        value: String,
    },
    /// A node's `gfx_target_version` names no valid target id.
    #[error("{}: gfx_target_version {version} gives '{target}': {source}", path.display())]
    Target {
        /// The node's `properties` file.
        path: PathBuf,
        /// The property's value.
        version: u64,
        /// The target id derived from it.
        target: String,
        /// Why it is not one.
        source: TargetError,
    },
}

/// The processor name of a `gfx_target_version`.
pub fn processor_name(gfx_target_version: u64) -> String {
    let (major, minor, stepping) = (
        gfx_target_version / 10_000,
        gfx_target_version / 100 % 100,
        gfx_target_version % 100,
    );
    format!("gfx{major}{minor}{stepping:x}")
}

/// The GPUs of the topology under `sysfs_root` (normally `/sys`), by node number. A
/// machine without amdkfd has none.
pub fn detect(sysfs_root: &Path) -> Result<Vec<Gpu>, DetectError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| DetectError::Io { path, source }
    };
    let nodes = sysfs_root.join("class/kfd/kfd/topology/nodes");
    let entries = match std::fs::read_dir(&nodes) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&nodes)(e)),
    };
    let mut gpus = Vec::new();
    for e in entries {
        let e = e.map_err(io(&nodes))?;
        let Some(node) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let path = e.path().join("properties");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&path)(e)),
        };
        let prop = |name: &str| -> Result<Option<u64>, DetectError> {
            let Some(v) = text.lines().find_map(|l| {
                l.split_once(' ')
                    .filter(|(k, _)| *k == name)
                    .map(|(_, v)| v.trim())
            }) else {
                return Ok(None);
            };
            v.parse().map(Some).map_err(|_| DetectError::NotDecimal {
                path: path.clone(),
                name: name.to_owned(),
                value: v.to_owned(),
            })
        };
        let version = prop("gfx_target_version")?.unwrap_or(0);
        if version == 0 {
            continue;
        }
        let processor = processor_name(version);
        let mut target = processor.clone();
        if SRAMECC_PROCESSORS.contains(&processor.as_str()) {
            let on = prop("capability")?.unwrap_or(0) & HSA_CAP_SRAM_EDCSUPPORTED != 0;
            target.push_str(if on { ":sramecc+" } else { ":sramecc-" });
        }
        let target = TargetId::parse(&target).map_err(|source| DetectError::Target {
            path: path.clone(),
            version,
            target,
            source,
        })?;
        gpus.push(Gpu {
            node,
            gfx_target_version: version,
            target,
        });
    }
    gpus.sort_by_key(|g| g.node);
    Ok(gpus)
}
