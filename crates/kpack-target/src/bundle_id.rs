use std::fmt;
use std::str::FromStr;

use crate::{TargetError, TargetId};

/// The offload kind, the first component of a bundle ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OffloadKind {
    /// `host`: the host object.
    Host,
    /// `hip`.
    Hip,
    /// `hipv4`: HIP code objects of code-object ABI v4 and later.
    HipV4,
    /// `openmp`.
    OpenMp,
    /// Any other kind, kept as spelled.
    Other(String),
}

impl OffloadKind {
    fn from_component(s: &str) -> OffloadKind {
        match s {
            "host" => OffloadKind::Host,
            "hip" => OffloadKind::Hip,
            "hipv4" => OffloadKind::HipV4,
            "openmp" => OffloadKind::OpenMp,
            other => OffloadKind::Other(other.to_owned()),
        }
    }

    /// The spelling used in bundle IDs (`host`, `hip`, `hipv4`, `openmp`, ...).
    pub fn as_str(&self) -> &str {
        match self {
            OffloadKind::Host => "host",
            OffloadKind::Hip => "hip",
            OffloadKind::HipV4 => "hipv4",
            OffloadKind::OpenMp => "openmp",
            OffloadKind::Other(s) => s,
        }
    }
}

impl fmt::Display for OffloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A clang offload bundle entry ID:
/// `<kind>-<arch>-<vendor>-<os>[-<env>][-<target-id>]`.
///
/// Seen in real files: `host-x86_64-unknown-linux` (ROCm 5),
/// `host-x86_64-unknown-linux-gnu-`, `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`
/// (empty environment), `hip-amdgcn-amd-amdhsa-gfx1030` (object-file section
/// names: no environment at all) and `...-amdhsa-unknown-gfx942:...`
/// (environment printed). [`Display`](fmt::Display) reproduces the input.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleId {
    original: String,
    kind: OffloadKind,
    triple: String,
    arch_len: usize,
    environment: Option<String>,
    target: Option<TargetId>,
}

impl BundleId {
    /// Parses a bundle ID strictly.
    ///
    /// `kind`, `arch`, `vendor` and `os` are non-empty runs of
    /// `[A-Za-z0-9_.]`. What follows `os` is, in this order of preference:
    /// nothing; a target ID directly (when it starts with `gfx`, the
    /// section-name form); or an environment (possibly empty) optionally
    /// followed by `-` and a target ID. For valid IDs the target is exactly
    /// the text after the last `--` whenever there is one, as upstream's
    /// `extract_architecture_from_target` assumes. Host entries must not
    /// carry a target.
    pub fn parse(s: &str) -> Result<BundleId, TargetError> {
        // LLVM 18 and 19 wrote the host entry's id twice over
        // ("host-x86_64-unknown-linux-gnu-host-x86_64-unknown-linux-gnu-"); LLVM's own
        // readers accept that, so it reads as the single id, keeping the original spelling.
        let (first, second) = s.as_bytes().split_at(s.len() / 2);
        if s.starts_with("host-") && first == second {
            // Equal halves of valid UTF-8 split at a character boundary.
            let mut id = BundleId::parse(&s[..first.len()])?;
            id.original = s.to_owned();
            return Ok(id);
        }
        let bytes = s.as_bytes();
        let err = |offset: usize, expected: &'static str| TargetError::BundleId {
            input: s.to_owned(),
            offset,
            expected,
        };

        let mut ends = [0usize; 4];
        const WHAT: [(&str, &str); 4] = [
            ("an offload kind", "'-' after the offload kind"),
            ("a triple architecture", "'-' after the triple architecture"),
            ("a triple vendor", "'-' after the triple vendor"),
            ("a triple OS", "'-' after the triple OS, or the end"),
        ];
        let mut pos = 0;
        for (i, (component, separator)) in WHAT.iter().enumerate() {
            let end = component_end(bytes, pos);
            if end == pos {
                return Err(err(pos, component));
            }
            let at_end = end == bytes.len();
            if (at_end && i < 3) || (!at_end && bytes[end] != b'-') {
                return Err(err(end, separator));
            }
            ends[i] = end;
            pos = end + 1;
        }
        let kind = OffloadKind::from_component(&s[..ends[0]]);
        let os_end = ends[3];

        let (env_end, target_start) = if os_end == bytes.len() {
            (os_end, None)
        } else if s[pos..].starts_with("gfx") {
            (os_end, Some(pos))
        } else {
            let env_end = component_end(bytes, pos);
            if env_end == bytes.len() {
                (env_end, None)
            } else if bytes[env_end] != b'-' {
                return Err(err(env_end, "'-' after the triple environment, or the end"));
            } else if env_end + 1 == bytes.len() {
                (env_end, None)
            } else {
                (env_end, Some(env_end + 1))
            }
        };
        let environment = (env_end > pos).then(|| s[pos..env_end].to_owned());

        let target = match target_start {
            None => None,
            Some(offset) if kind == OffloadKind::Host => {
                let input = s.to_owned();
                return Err(TargetError::HostWithTarget { input, offset });
            }
            Some(offset) => Some(TargetId::parse(&s[offset..]).map_err(|source| {
                let input = s.to_owned();
                let source = Box::new(source);
                TargetError::BundleTarget {
                    input,
                    offset,
                    source,
                }
            })?),
        };

        let triple_end = if environment.is_some() {
            env_end
        } else {
            os_end
        };
        let arch_start = ends[0] + 1;
        Ok(BundleId {
            original: s.to_owned(),
            kind,
            triple: s[arch_start..triple_end].to_owned(),
            arch_len: ends[1] - arch_start,
            environment,
            target,
        })
    }

    /// The offload kind.
    pub fn kind(&self) -> &OffloadKind {
        &self.kind
    }

    /// `arch-vendor-os`, plus `-env` when the environment is non-empty:
    /// `amdgcn-amd-amdhsa`, `x86_64-unknown-linux-gnu`.
    pub fn triple(&self) -> &str {
        &self.triple
    }

    /// The triple's architecture, e.g. `amdgcn` or `x86_64`.
    pub fn arch(&self) -> &str {
        &self.triple[..self.arch_len]
    }

    /// The triple's environment when present and non-empty (`gnu`, `unknown`).
    pub fn environment(&self) -> Option<&str> {
        self.environment.as_deref()
    }

    /// The device target ID; `None` for host entries.
    pub fn target(&self) -> Option<&TargetId> {
        self.target.as_ref()
    }

    /// True for the host entry of a bundle.
    pub fn is_host(&self) -> bool {
        self.kind == OffloadKind::Host
    }

    /// The ID exactly as parsed.
    pub fn as_str(&self) -> &str {
        &self.original
    }
}

/// End of the run of triple-component bytes starting at `start`.
fn component_end(bytes: &[u8], start: usize) -> usize {
    start
        + bytes[start.min(bytes.len())..]
            .iter()
            .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
            .count()
}

impl fmt::Display for BundleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}

impl FromStr for BundleId {
    type Err = TargetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BundleId::parse(s)
    }
}
