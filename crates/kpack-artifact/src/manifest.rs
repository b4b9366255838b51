//! `artifact_manifest.txt` (spec §5.1): one install prefix per line.

use std::io::Read;
use std::path::Path;

use crate::ArtifactError;

/// The file naming an artifact's prefixes.
pub const MANIFEST: &str = "artifact_manifest.txt";

/// The largest `artifact_manifest.txt` accepted (a few hundred bytes in practice).
pub(crate) const MAX_MANIFEST: u64 = 1 << 20;

/// Reads `dir/artifact_manifest.txt`: lines are trimmed, blank lines skipped. A prefix must
/// be a relative path of normal components (no `..`, no leading `/`), and appear once.
pub fn read(dir: &Path) -> Result<Vec<String>, ArtifactError> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path).map_err(ArtifactError::io(&path))?;
    parse(&text, &path)
}

/// Parses the manifest text read from `path` (see [`read`]).
pub fn parse(text: &str, path: &Path) -> Result<Vec<String>, ArtifactError> {
    let mut prefixes: Vec<String> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let prefix = line.trim();
        if prefix.is_empty() {
            continue;
        }
        let bad = |problem: &str| ArtifactError::Manifest {
            path: path.to_owned(),
            line: n + 1,
            problem: format!("prefix {prefix}: {problem}"),
        };
        if prefix.starts_with('/')
            || prefix
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(bad(
                "expected a relative path of plain components (no '.', '..' or '//')",
            ));
        }
        if prefixes.iter().any(|p| p == prefix) {
            return Err(bad("listed twice"));
        }
        prefixes.push(prefix.to_owned());
    }
    Ok(prefixes)
}

/// Writes the manifest of `dir`, one prefix per line, each ending in `\n`.
pub fn write(dir: &Path, prefixes: &[String]) -> Result<(), ArtifactError> {
    let path = dir.join(MANIFEST);
    let text: String = prefixes.iter().map(|p| format!("{p}\n")).collect();
    std::fs::write(&path, text).map_err(ArtifactError::io(&path))
}

/// Reads a tarball's manifest member (`content`, `size` bytes; bounded) and parses it.
pub(crate) fn read_member(
    content: &mut dyn Read,
    size: u64,
    shown: &Path,
) -> Result<Vec<String>, ArtifactError> {
    if size > MAX_MANIFEST {
        return Err(ArtifactError::invalid(
            shown,
            format!("{size} bytes; a manifest of more than {MAX_MANIFEST} bytes is refused"),
        ));
    }
    let mut text = String::new();
    content
        .take(MAX_MANIFEST)
        .read_to_string(&mut text)
        .map_err(ArtifactError::io(shown))?;
    parse(&text, shown)
}
