//! The `.dist-info` text a split writes (reference spec): the `device-<target>` extras of
//! the host METADATA (§2.5), the device wheels' METADATA (§3.3) and WHEEL (§3.4), the
//! variant markers and `variant.json` (§4.2).

use std::collections::BTreeMap;

use kpack_wheelfile::metadata::Identity;

use crate::hierarchy::{BundleKey, Level};

/// One device wheel of a split, as METADATA needs it.
#[derive(Debug, Clone)]
pub struct DeviceDist {
    /// The target, sub-family or family the wheel is for (its `device-<key>` extra).
    pub key: BundleKey,
    /// Its distribution name (`<prefix>-<key>`).
    pub dist: String,
    /// The targets it serves ([`BundleKey::served_targets`]).
    pub serves: Vec<BundleKey>,
}

/// The targets that get a `device-<target>` extra: every target-level and portable wheel's,
/// in the order given, then every other target a sub-family or family wheel serves, then
/// every other target the portable SPIR-V wheel serves. The reference gives extras only to
/// target-level wheels, so `pip install 'pkg[device-gfx1100]'` installed nothing from a
/// wheel whose code is all `gfx11-generic`, though that wheel serves gfx1100.
pub fn extra_targets(devices: &[DeviceDist]) -> Vec<BundleKey> {
    let own = |l: Level| matches!(l, Level::Target | Level::Portable);
    let mut targets: Vec<BundleKey> = devices
        .iter()
        .filter(|d| own(d.key.level()))
        .map(|d| d.key.clone())
        .collect();
    let families = devices.iter().filter(|d| !own(d.key.level()));
    let portable = devices.iter().filter(|d| d.key.level() == Level::Portable);
    for d in families.chain(portable) {
        for t in &d.serves {
            if !targets.contains(t) {
                targets.push(t.clone());
            }
        }
    }
    targets
}

/// The block inserted into the host METADATA (§2.5, without the reference's unconditional
/// `Requires-Dist: rocm-bootstrap`: nothing in a kpack host wheel imports it, and `kpack
/// detect` tells a user which extra to install). A `device-<target>` extra for every target
/// a device wheel serves ([`extra_targets`]), each requiring the wheels of its chain that
/// exist, or, when none does, the portable SPIR-V wheel.
pub fn host_extras_block(version: &str, devices: &[DeviceDist]) -> String {
    let by_key: BTreeMap<&BundleKey, &str> =
        devices.iter().map(|d| (&d.key, d.dist.as_str())).collect();
    let mut block = String::new();
    for target in extra_targets(devices) {
        let extra = target.extra();
        block.push_str(&format!("Provides-Extra: {extra}\n"));
        let mut dists: Vec<&str> = target
            .chain()
            .iter()
            .filter_map(|k| by_key.get(k).copied())
            .collect();
        if dists.is_empty() {
            dists = devices
                .iter()
                .filter(|d| d.key.level() == Level::Portable && d.serves.contains(&target))
                .map(|d| d.dist.as_str())
                .collect();
        }
        for dist in dists {
            block.push_str(&format!(
                "Requires-Dist: {dist} == {version}; extra == \"{extra}\"\n"
            ));
        }
    }
    block.push_str("Provides-Extra: device-all\n");
    let mut all: Vec<&str> = devices.iter().map(|d| d.dist.as_str()).collect();
    all.sort();
    for dist in all {
        block.push_str(&format!(
            "Requires-Dist: {dist} == {version}; extra == \"device-all\"\n"
        ));
    }
    block
}

/// The METADATA of the device wheel `dev` (§3.3).
pub fn device_metadata(
    host: &Identity,
    dev: &DeviceDist,
    emitted: &[DeviceDist],
    requires: &[String],
) -> String {
    let v = &host.version;
    let mut text = format!(
        "Metadata-Version: 2.1\nName: {}\nVersion: {v}\nSummary: AMD device kernels ({}) for {}\nRequires-Dist: {} == {v}\n",
        dev.dist,
        dev.key.display_name(),
        host.name,
        host.name
    );
    let target = dev.key.level() == Level::Target;
    for r in requires {
        if r.contains("@GFXARCH@") {
            // Per-arch companions exist for targets only (rocm-systems#5555).
            if target {
                text.push_str(&format!(
                    "Requires-Dist: {}\n",
                    r.replace("@GFXARCH@", dev.key.as_str())
                ));
            }
        } else {
            text.push_str(&format!("Requires-Dist: {r}\n"));
        }
    }
    if target {
        for parent in dev.key.chain().iter().skip(1) {
            if let Some(p) = emitted.iter().find(|d| &d.key == parent) {
                text.push_str(&format!("Requires-Dist: {} == {v}\n", p.dist));
            }
        }
    }
    text
}

/// The WHEEL of a device wheel: the host's tags and build.
pub fn device_wheel_file(host: &Identity) -> String {
    let mut text = format!(
        "Wheel-Version: 1.0\nGenerator: kpack {}\nRoot-Is-Purelib: false\n",
        env!("CARGO_PKG_VERSION")
    );
    if let Some(b) = &host.build {
        text.push_str(&format!("Build: {b}\n"));
    }
    for t in &host.tags {
        text.push_str(&format!("Tag: {t}\n"));
    }
    text
}

/// The variant wheel's METADATA (§4.2): after each `Requires-Dist: … ; extra ==
/// "device-<t>"` line (not `device-all`) the same requirement under the marker
/// `"amd :: gfx_arch :: <t>" in variant_properties`.
pub fn add_variant_markers(metadata: &str) -> String {
    let mut out = String::with_capacity(metadata.len() * 2);
    let mut in_headers = true;
    for line in metadata.split_inclusive('\n') {
        out.push_str(line);
        let bare = line.trim_end_matches(['\r', '\n']);
        if bare.is_empty() {
            in_headers = false;
        }
        if !in_headers {
            continue;
        }
        let Some(rest) = bare.strip_prefix("Requires-Dist: ") else {
            continue;
        };
        let Some((req, marker)) = rest.split_once("; extra == \"") else {
            continue;
        };
        let Some(target) = marker
            .strip_suffix('"')
            .and_then(|e| e.strip_prefix("device-"))
        else {
            continue;
        };
        if target == "all" || !req.contains(" == ") {
            continue;
        }
        out.push_str(&format!(
            "Requires-Dist: {req}; \"amd :: gfx_arch :: {target}\" in variant_properties\n"
        ));
    }
    out
}

/// `variant.json` (§4.2) for the target keys of a split.
pub fn variant_json(targets: &[&str]) -> String {
    let mut sorted: Vec<&str> = targets.to_vec();
    sorted.sort();
    let variants: serde_json::Map<String, serde_json::Value> = sorted
        .iter()
        .map(|t| {
            (
                (*t).to_owned(),
                serde_json::json!({ "amd": { "gfx_arch": [t] } }),
            )
        })
        .collect();
    let doc = serde_json::json!({
        "providers": {
            "amd": {
                "install-time": true,
                "plugin-api": "amd_variant_provider.plugin:AMDVariantPlugin",
                "requires": ["amd-variant-provider >= 1.0"],
            }
        },
        "default-priorities": {
            "namespace": ["amd"],
            "property": { "amd": { "gfx_arch": sorted } },
        },
        "variants": variants,
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("JSON of plain values");
    text.push('\n');
    text
}
