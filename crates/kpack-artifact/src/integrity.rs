//! What `kpack verify` reports: each problem as a typed [`Failure`], and the fsck-style check
//! of one archive ([`check_archive`]): every entry read through the digest-checked path, every
//! damaged one reported, not only the first.

use std::fmt;
use std::path::{Path, PathBuf};

use kpack_archive::{Archive, ArchiveError, MetadataError};

/// One problem `kpack verify` found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Failure {
    /// An archive entry whose code object does not decode, or does not match its digest.
    Entry {
        /// The archive.
        file: PathBuf,
        /// The TOC binary key (`kernel_name#co_index`).
        binary: String,
        /// The architecture, as the archive spells it.
        arch: String,
        /// Where the entry's stored bytes start in the file (known for archives with
        /// digests).
        offset: Option<u64>,
        /// What was read, and what was expected.
        problem: String,
    },
    /// An archive, `.kpm` index or HIPK marker that does not read: damaged (its digest does
    /// not match) or malformed.
    File {
        /// The file.
        file: PathBuf,
        /// What it is: `archive`, `index` or `marker`.
        what: &'static str,
        /// The byte offset the problem is at, when known.
        offset: Option<u64>,
        /// Whether a digest proved the file damaged (rather than malformed).
        damaged: bool,
        /// What is wrong, and what was expected.
        problem: String,
    },
    /// Any other check: the layout of artifacts and packages, markers that resolve to no
    /// entry, indexes that disagree with the archives present, identity with the originals.
    Check {
        /// The file it is about, and what was expected.
        problem: String,
    },
}

impl Failure {
    /// A [`Failure::Check`].
    pub fn check(problem: impl Into<String>) -> Self {
        Failure::Check {
            problem: problem.into(),
        }
    }

    /// A `.kpm` index at `file` that does not decode.
    pub fn index(file: &Path, e: &MetadataError) -> Self {
        Failure::File {
            file: file.to_owned(),
            what: "index",
            offset: e.offset(),
            damaged: matches!(e, MetadataError::Damaged { .. }),
            problem: e.to_string(),
        }
    }

    /// The marker of the host binary `file`, starting at byte `at`, that does not decode
    /// (the offset is the error's, within the marker, when it names one).
    pub fn marker(file: &Path, at: u64, e: &MetadataError) -> Self {
        Failure::File {
            file: file.to_owned(),
            what: "marker",
            offset: Some(at + e.offset().unwrap_or(0)),
            damaged: false,
            problem: format!("HIPK metadata at byte {at}: {e}"),
        }
    }

    /// The archive at `file` that does not open.
    pub fn archive(file: &Path, e: &ArchiveError) -> Self {
        let (offset, damaged) = match e.inner() {
            ArchiveError::Damaged { offset, .. } => (Some(*offset), true),
            ArchiveError::TocParse { source } => (Some(source.offset as u64), false),
            _ => (None, false),
        };
        Failure::File {
            file: file.to_owned(),
            what: "archive",
            offset,
            damaged,
            problem: e.inner().to_string(),
        }
    }

    /// The file the failure is about, when it is typed.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Failure::Entry { file, .. } | Failure::File { file, .. } => Some(file),
            Failure::Check { .. } => None,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |offset: &Option<u64>| offset.map(|o| format!(" at byte {o}")).unwrap_or_default();
        match self {
            Failure::Entry {
                file,
                binary,
                arch,
                offset,
                problem,
            } => write!(
                f,
                "{}: entry {binary} for {arch}{}: {problem}",
                file.display(),
                at(offset)
            ),
            Failure::File {
                file,
                what,
                offset,
                problem,
                ..
            } => write!(f, "{}: {what}{}: {problem}", file.display(), at(offset)),
            Failure::Check { problem } => f.write_str(problem),
        }
    }
}

/// Serializes `failures` each with the line `kpack verify` prints for it (`message`), so that
/// a JSON consumer can show any of them without knowing every kind.
pub(crate) fn with_messages<S: serde::Serializer>(
    failures: &[Failure],
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct Shown<'a> {
        #[serde(flatten)]
        failure: &'a Failure,
        message: String,
    }
    s.collect_seq(failures.iter().map(|failure| Shown {
        failure,
        message: failure.to_string(),
    }))
}

/// What [`check_archive`] found.
#[derive(Debug, Default)]
pub struct ArchiveCheck {
    /// Entries read and checked.
    pub entries: usize,
    /// Each entry that read and checked: binary key, arch, and the code object's SHA-256
    /// when asked for.
    pub read: Vec<(String, String, Option<[u8; 32]>)>,
    /// Each entry that does not read.
    pub failures: Vec<Failure>,
}

/// Reads every entry of `x` (shown as `file`) through [`Archive::get_in_pieces`], which
/// checks its digest (a large code object never held whole), and reports each that fails;
/// with `sha256`, gives each code object's SHA-256.
pub fn check_archive(x: &Archive, file: &Path, sha256: bool) -> ArchiveCheck {
    use sha2::Digest as _;
    let mut out = ArchiveCheck::default();
    for (binary, arch, _) in x.entries() {
        out.entries += 1;
        let mut sha = sha256.then(sha2::Sha256::new);
        let read = x.get_in_pieces(binary, arch, &mut |piece| {
            if let Some(sha) = &mut sha {
                sha.update(piece);
            }
        });
        match read {
            Ok(_) => out.read.push((
                binary.to_owned(),
                arch.to_owned(),
                sha.map(|sha| sha.finalize().into()),
            )),
            Err(e) => {
                let (offset, problem) = match e.inner() {
                    ArchiveError::Damaged {
                        offset, problem, ..
                    } => (Some(*offset), format!("{problem}; the archive is damaged")),
                    inner => (None, inner.to_string()),
                };
                out.failures.push(Failure::Entry {
                    file: file.to_owned(),
                    binary: binary.to_owned(),
                    arch: arch.to_owned(),
                    offset,
                    problem,
                });
            }
        }
    }
    out
}
