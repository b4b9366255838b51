//! A wheel's RECORD as installers check it: strict about damage, not about style.
//!
//! Every member of the wheel must be listed, and every listed path must be a member. A
//! member listed with a hash (`sha256=`, `sha384=` or `sha512=`, urlsafe base64) must
//! match it, and one listed with a size must have it. An empty hash or size field is
//! accepted, as pip accepts it (real wheels on PyPI list `pkg/LICENSE,,1073`): the zip's
//! CRC-32, which the reader checks on every member, still catches damage, and such members
//! are reported ([`Listed::Unhashed`]) so that a caller can say which ones RECORD does not
//! vouch for. RECORD itself and its signatures (`RECORD.jws`, `RECORD.p7s`) cannot list
//! their own hash and are not checked against their lines.
//!
//! [`Record::check`] is the one check of a member against its line, used by every reader
//! of a wheel (`split-wheel`, and `inspect`, `prune`, `report`, `unbundle` of a `.whl`
//! through [`crate::reader::visit_zip`]).

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use sha2::Digest;
use sha2::digest::DynDigest;

use crate::error::WheelFileError;
use crate::metadata;

/// The most bytes a RECORD may hold: it is read into memory before any other member. The
/// RECORD of a ROCm wheel of 10 GB and 100,000 files is about 15 MB.
pub const MAX_RECORD: u64 = 256 << 20;

/// The hash algorithms RECORD may use (PyPA "Recording installed projects": one of
/// `hashlib.algorithms_guaranteed`, sha256 or stronger).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Sha256,
    Sha384,
    Sha512,
}

impl Algorithm {
    fn parse(name: &str) -> Option<Algorithm> {
        match name {
            "sha256" => Some(Algorithm::Sha256),
            "sha384" => Some(Algorithm::Sha384),
            "sha512" => Some(Algorithm::Sha512),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha384 => "sha384",
            Algorithm::Sha512 => "sha512",
        }
    }
}

/// What RECORD says of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    hash: Option<(Algorithm, Vec<u8>)>,
    size: Option<u64>,
    /// RECORD itself or one of its signatures: listed, never checked.
    unsigned: bool,
}

/// How RECORD vouches for a member once its content checked out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// Listed with a hash, which the content matches.
    Hashed,
    /// Listed with an empty hash field: only the zip's CRC-32 (and the size, when RECORD
    /// gives one) vouch for it.
    Unhashed,
    /// RECORD itself or one of its signatures.
    Unsigned,
}

/// A wheel's RECORD, parsed and checked for form (every hash one of the algorithms, in
/// urlsafe base64; no path listed twice).
#[derive(Debug, Clone)]
pub struct Record {
    /// `<name>.dist-info/RECORD`.
    path: String,
    lines: BTreeMap<String, Line>,
}

/// A member's content being checked against its RECORD line as it is read
/// ([`Record::start`]): SHA-256 always (an output RECORD lists it), and the algorithm the
/// line names when that is another.
pub struct Check<'r> {
    record: &'r Record,
    member: &'r str,
    line: Option<&'r Line>,
    sha256: sha2::Sha256,
    other: Option<Box<dyn DynDigest>>,
}

/// A member whose content checked out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// The content's SHA-256.
    pub sha256: [u8; 32],
    /// How RECORD vouches for it.
    pub listed: Listed,
}

fn entry_error(wheel: &Path, entry: &str, problem: String) -> WheelFileError {
    WheelFileError::Entry {
        wheel: wheel.to_owned(),
        entry: entry.to_owned(),
        problem,
    }
}

impl Record {
    /// Parses `bytes`, the content of `<dist_info>/RECORD` of `wheel`.
    pub fn parse(wheel: &Path, dist_info: &str, bytes: &[u8]) -> Result<Record, WheelFileError> {
        let path = format!("{dist_info}/RECORD");
        let rows = metadata::parse_record(bytes).map_err(|e| entry_error(wheel, &path, e))?;
        let mut lines = BTreeMap::new();
        for row in rows {
            let unsigned = row.path == path
                || row.path == format!("{path}.jws")
                || row.path == format!("{path}.p7s");
            let hash = match row.hash.as_str() {
                _ if unsigned => None,
                "" => None,
                field => Some(parse_hash(field).map_err(|problem| {
                    entry_error(wheel, &row.path, format!("{path}: {problem}"))
                })?),
            };
            let line = Line {
                hash,
                size: row.size.filter(|_| !unsigned),
                unsigned,
            };
            if lines.insert(row.path.clone(), line).is_some() {
                return Err(entry_error(
                    wheel,
                    &path,
                    format!("lists {:?} twice", row.path),
                ));
            }
        }
        Ok(Record { path, lines })
    }

    /// Checks that RECORD lists exactly the wheel's `members`: one it does not list is
    /// unvouched for, one it lists that is missing was lost.
    pub fn check_listing<'a>(
        &self,
        wheel: &Path,
        members: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), WheelFileError> {
        let mut unseen: std::collections::BTreeSet<&str> =
            self.lines.keys().map(String::as_str).collect();
        for m in members {
            if !unseen.remove(m) {
                return Err(entry_error(
                    wheel,
                    m,
                    format!("not listed in {}", self.path),
                ));
            }
        }
        match unseen.first() {
            Some(missing) => Err(entry_error(
                wheel,
                missing,
                format!("listed in {} but not in the wheel", self.path),
            )),
            None => Ok(()),
        }
    }

    /// Starts checking the content of `member`: feed it to [`Check::update`], then
    /// [`Check::finish`].
    pub fn start<'r>(&'r self, member: &'r str) -> Check<'r> {
        let line = self.lines.get(member);
        let other: Option<Box<dyn DynDigest>> = match line.and_then(|l| l.hash.as_ref()) {
            Some((Algorithm::Sha384, _)) => Some(Box::new(sha2::Sha384::new())),
            Some((Algorithm::Sha512, _)) => Some(Box::new(sha2::Sha512::new())),
            Some((Algorithm::Sha256, _)) | None => None,
        };
        Check {
            record: self,
            member,
            line,
            sha256: sha2::Sha256::new(),
            other,
        }
    }
}

impl Check<'_> {
    /// Feeds the next bytes of the content.
    pub fn update(&mut self, bytes: &[u8]) {
        Digest::update(&mut self.sha256, bytes);
        if let Some(d) = &mut self.other {
            d.update(bytes);
        }
    }

    /// Checks the content fed, `size` bytes, against the member's line: it must be listed,
    /// a hash given must match, a size given must be the content's.
    pub fn finish(self, wheel: &Path, size: u64) -> Result<Checked, WheelFileError> {
        let (record, member) = (&self.record.path, self.member);
        let sha256: [u8; 32] = self.sha256.finalize().into();
        let checked = |listed| Ok(Checked { sha256, listed });
        let Some(line) = self.line else {
            return Err(entry_error(
                wheel,
                member,
                format!("not listed in {record}"),
            ));
        };
        if line.unsigned {
            return checked(Listed::Unsigned);
        }
        if let Some(want) = line.size
            && want != size
        {
            return Err(entry_error(
                wheel,
                member,
                format!("{size} bytes, but {record} says {want}"),
            ));
        }
        let Some((algo, want)) = &line.hash else {
            return checked(Listed::Unhashed);
        };
        let got = match self.other {
            Some(d) => d.finalize(),
            None => Box::from(sha256.as_slice()),
        };
        if want.as_slice() != &*got {
            let b64 = |d: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(d);
            let algo = algo.name();
            return Err(entry_error(
                wheel,
                member,
                format!(
                    "content does not match its {algo} hash in {record}: expected {algo}={}, the content is {algo}={}",
                    b64(want),
                    b64(&got)
                ),
            ));
        }
        checked(Listed::Hashed)
    }
}

/// `<algorithm>=<urlsafe base64 digest>` (padding tolerated, as pip tolerates it).
fn parse_hash(field: &str) -> Result<(Algorithm, Vec<u8>), String> {
    let Some((name, digest)) = field.split_once('=') else {
        return Err(format!(
            "hash {field:?} is not <algorithm>=<urlsafe base64 digest>"
        ));
    };
    let algo = Algorithm::parse(name)
        .ok_or_else(|| format!("unsupported hash algorithm {name:?} (sha256, sha384, sha512)"))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(digest.trim_end_matches('='))
        .map_err(|_| format!("hash {digest:?} is not urlsafe base64"))?;
    Ok((algo, bytes))
}
