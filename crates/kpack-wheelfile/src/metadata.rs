//! The text files of a wheel's `.dist-info`: METADATA and WHEEL (read: a wheel's identity;
//! headers inserted, every other byte kept), RECORD (PyPA "Recording installed projects":
//! CSV, `sha256=` urlsafe base64 without padding, as pip and `installer` verify, not the
//! reference's hex, §2.6), and wheel file names (PEP 427, with the name escaped as the
//! Binary Distribution Format asks: runs of `-_.` → `_`, lower case).

use std::path::Path;

use base64::Engine;

use crate::error::WheelFileError;

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

fn not_a_wheel(wheel: &Path, problem: impl Into<String>) -> WheelFileError {
    WheelFileError::NotAWheel {
        wheel: wheel.to_owned(),
        problem: problem.into(),
    }
}

/// The one top-level `.dist-info` directory among the wheel's file `paths`.
pub fn dist_info_dir<'a>(wheel: &Path, paths: &[&'a str]) -> Result<&'a str, WheelFileError> {
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
    read: impl Fn(&str) -> Result<String, WheelFileError>,
) -> Result<Identity, WheelFileError> {
    let dist_info = dist_info_dir(wheel, paths)?.to_owned();
    let file = |name: &str| -> Result<String, WheelFileError> {
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
