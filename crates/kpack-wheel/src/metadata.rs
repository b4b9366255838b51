//! The text files of a wheel's `.dist-info`: METADATA (read, and the host rewrite of
//! reference spec §2.5), the device METADATA (§3.3), WHEEL (§3.4), RECORD (PyPA "Recording
//! installed projects": CSV, `sha256=` urlsafe base64 without padding, as pip and
//! `installer` verify, not the reference's hex, §2.6), the variant markers and
//! `variant.json` (§4.2), and wheel file names (PEP 427, with the name escaped as the
//! Binary Distribution Format asks: runs of `-_.` → `_`, lower case).

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;

use crate::error::WheelError;
use crate::hierarchy::{BundleKey, Level};

/// Who a wheel is: from its dist-info directory, METADATA and WHEEL.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Identity {
    /// `Name` as METADATA spells it.
    pub name: String,
    /// `Version`, verbatim (a local `+rocm…` kept).
    pub version: String,
    /// The `.dist-info` directory name.
    pub dist_info: String,
    /// Every `Tag:` of WHEEL, in order.
    pub tags: Vec<String>,
    /// WHEEL's `Build:`, if any.
    pub build: Option<String>,
}

/// The values of every `field:` header of an RFC 822 style header block (continuation
/// lines ignored: Name, Version and Tag are single-line).
pub fn header_values<'a>(text: &'a str, field: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case(field)
        {
            out.push(v.trim());
        }
    }
    out
}

fn not_a_wheel(wheel: &Path, problem: impl Into<String>) -> WheelError {
    WheelError::NotAWheel {
        wheel: wheel.to_owned(),
        problem: problem.into(),
    }
}

/// The one top-level `.dist-info` directory among the wheel's file `paths`.
pub fn dist_info_dir<'a>(wheel: &Path, paths: &[&'a str]) -> Result<&'a str, WheelError> {
    let mut dist_infos: Vec<&str> = paths
        .iter()
        .filter_map(|p| p.split_once('/').map(|(top, _)| top))
        .filter(|top| top.ends_with(".dist-info"))
        .collect();
    dist_infos.sort_unstable();
    dist_infos.dedup();
    match dist_infos.as_slice() {
        [one] => Ok(one),
        [] => Err(not_a_wheel(wheel, "no top-level .dist-info directory")),
        many => Err(not_a_wheel(
            wheel,
            format!("more than one .dist-info directory: {}", many.join(", ")),
        )),
    }
}

/// Reads the identity of the wheel whose files are `paths` (reading METADATA and WHEEL
/// with `read`).
pub fn identity(
    wheel: &Path,
    paths: &[&str],
    read: impl Fn(&str) -> Result<String, WheelError>,
) -> Result<Identity, WheelError> {
    let dist_info = dist_info_dir(wheel, paths)?.to_owned();
    let file = |name: &str| -> Result<String, WheelError> {
        let p = format!("{dist_info}/{name}");
        if !paths.contains(&p.as_str()) {
            return Err(not_a_wheel(wheel, format!("no {p}")));
        }
        read(&p)
    };
    let metadata = file("METADATA")?;
    let wheel_text = file("WHEEL")?;
    // Each value goes into output file names and METADATA: one given twice (which would
    // pick one silently) or with characters its specification does not allow (a `/` in
    // a version would put an output outside the output directory) is damage.
    let at_most_one =
        |text: &'_ str, file: &str, field: &str, valid: fn(&str) -> bool| match header_values(
            text, field,
        )
        .as_slice()
        {
            [] => Ok(None),
            [v] if valid(v) => Ok(Some((*v).to_owned())),
            [v] => Err(not_a_wheel(
                wheel,
                format!("{dist_info}/{file}: {field} {v:?} is not a valid {field}"),
            )),
            many => Err(not_a_wheel(
                wheel,
                format!(
                    "{dist_info}/{file}: {} {field} headers, expected one",
                    many.len()
                ),
            )),
        };
    let one = |field: &str, valid: fn(&str) -> bool| {
        at_most_one(&metadata, "METADATA", field, valid)?
            .ok_or_else(|| not_a_wheel(wheel, format!("{dist_info}/METADATA has no {field}")))
    };
    let (name, version) = (one("Name", valid_name)?, one("Version", valid_version)?);
    let stem = dist_info.strip_suffix(".dist-info").unwrap_or(&dist_info);
    let dir_name = stem.split_once('-').map_or(stem, |(n, _)| n);
    if canonical_name(dir_name) != canonical_name(&name) {
        return Err(not_a_wheel(
            wheel,
            format!("{dist_info} is not the .dist-info of {name:?}, the Name in its METADATA"),
        ));
    }
    let tags: Vec<String> = header_values(&wheel_text, "Tag")
        .into_iter()
        .map(str::to_owned)
        .collect();
    if tags.is_empty() {
        return Err(not_a_wheel(wheel, format!("{dist_info}/WHEEL has no Tag")));
    }
    if let Some(bad) = tags.iter().find(|t| {
        let parts: Vec<&str> = t.split('-').collect();
        parts.len() != 3 || !parts.iter().all(|p| valid_tag_part(p))
    }) {
        return Err(not_a_wheel(
            wheel,
            format!("{dist_info}/WHEEL: Tag {bad:?} is not <python>-<abi>-<platform>"),
        ));
    }
    let build = at_most_one(&wheel_text, "WHEEL", "Build", valid_build)?;
    Ok(Identity {
        name,
        version,
        dist_info,
        tags,
        build,
    })
}

/// A distribution name (PEP 508: letters, digits, `-_.`, starting and ending with a letter
/// or digit).
fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(inner)
}

/// The characters of a PEP 440 version, normalized or not (`1.0`, `2.10.0+rocm7.1`,
/// `1!2.0.post1`, `1.0-rc1`).
fn valid_version(version: &str) -> bool {
    !version.is_empty()
        && version
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'+' | b'!' | b'-' | b'_'))
}

/// A build tag (PEP 427: starts with a digit; it goes into file names, so no `-`).
fn valid_build(build: &str) -> bool {
    build.as_bytes().first().is_some_and(u8::is_ascii_digit)
        && build
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// One part of a compatibility tag (`cp312`, `none`, `manylinux_2_28_x86_64`).
fn valid_tag_part(part: &str) -> bool {
    !part.is_empty()
        && part
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.'))
}

/// A distribution name as installers compare them (PEP 503: runs of `-_.` → `-`, lower
/// case).
fn canonical_name(name: &str) -> String {
    escape_name(name).replace('_', "-")
}

/// A distribution name as a wheel file name spells it: runs of `-_.` → `_`, lower case.
pub fn escape_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('_');
            }
            in_run = true;
        } else {
            out.push(c.to_ascii_lowercase());
            in_run = false;
        }
    }
    out
}

impl Identity {
    /// `<build->python-abi-platform` of this wheel's file name: each part the `.`-joined
    /// set of the WHEEL tags' values, in order of first appearance.
    pub fn tag_part(&self) -> String {
        let mut parts: [Vec<&str>; 3] = Default::default();
        for t in &self.tags {
            for (i, p) in t.split('-').enumerate() {
                if !parts[i].contains(&p) {
                    parts[i].push(p);
                }
            }
        }
        let tags = parts.map(|p| p.join(".")).join("-");
        match &self.build {
            Some(b) => format!("{b}-{tags}"),
            None => tags,
        }
    }

    /// The file name stem of a wheel of `dist` with this version and tags.
    pub fn stem_for(&self, dist: &str, tag_part: &str) -> String {
        format!(
            "{}-{}-{tag_part}",
            escape_name(dist),
            self.version.replace('-', "_")
        )
    }
}

/// One RECORD row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRow {
    /// `/`-separated path of the file inside the wheel, as RECORD lists it.
    pub path: String,
    /// `algorithm=digest`, or empty (RECORD itself, signatures).
    pub hash: String,
    /// Size in bytes, or `None` where RECORD leaves it empty (RECORD itself, signatures).
    pub size: Option<u64>,
}

/// Parses RECORD (CSV with 3 columns).
pub fn parse_record(bytes: &[u8]) -> Result<Vec<RecordRow>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut rows = Vec::new();
    for (n, rec) in reader.records().enumerate() {
        let rec = rec.map_err(|e| format!("line {}: {e}", n + 1))?;
        if rec.len() == 1 && rec[0].is_empty() {
            continue;
        }
        if rec.len() != 3 {
            return Err(format!(
                "line {}: {} columns, expected path,hash,size",
                n + 1,
                rec.len()
            ));
        }
        let size = match &rec[2] {
            "" => None,
            s => Some(
                s.parse()
                    .map_err(|_| format!("line {}: size {s:?} is not a number", n + 1))?,
            ),
        };
        rows.push(RecordRow {
            path: rec[0].to_owned(),
            hash: rec[1].to_owned(),
            size,
        });
    }
    Ok(rows)
}

/// The RECORD hash of a SHA-256 digest.
pub fn record_hash(sha256: &[u8; 32]) -> String {
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha256)
    )
}

/// RECORD text for `files` (path, sha256, size) plus its own row `<dist_info>/RECORD,,`.
pub fn write_record(dist_info: &str, files: &[(String, [u8; 32], u64)]) -> Vec<u8> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    for (path, digest, size) in files {
        w.write_record([path.as_str(), &record_hash(digest), &size.to_string()])
            .expect("writing to memory");
    }
    w.write_record([format!("{dist_info}/RECORD").as_str(), "", ""])
        .expect("writing to memory");
    w.into_inner().expect("writing to memory")
}

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
        let extra = format!("device-{target}");
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

/// `metadata` with `block` inserted at the end of its header section (before the first
/// blank line), everything else byte for byte.
pub fn insert_headers(metadata: &str, block: &str) -> String {
    let mut at = None;
    let mut pos = 0;
    for line in metadata.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']).is_empty() {
            at = Some(pos);
            break;
        }
        pos += line.len();
    }
    match at {
        Some(at) => format!("{}{block}{}", &metadata[..at], &metadata[at..]),
        None if metadata.is_empty() || metadata.ends_with('\n') => format!("{metadata}{block}"),
        None => format!("{metadata}\n{block}"),
    }
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
