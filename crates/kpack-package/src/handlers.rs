//! Kernel-database handlers: which files of an install prefix belong to one GPU architecture.
//!
//! A handler looks at a file's path relative to its prefix (`/`-separated) and answers with
//! the architecture the file belongs to, or `None` (the file stays in the generic artifact).
//! Unlike the reference (spec §5.3, §9 B17), targets keep their features and generic
//! processors (`gfx90a-xnack+` is `gfx90a:xnack+`, `gfx9-4-generic` stays whole), per-arch
//! directories are understood, and a name only counts when a whole token is a GPU target
//! (`gfx110` never matches inside `gfx1100`).
//!
//! | handler | files |
//! |---|---|
//! | `rocblas`, `hipblaslt`, `hipsparselt` | under `<name>/[<version>/]library/`: `*_<target>.{co,dat,hsaco}` and `*-<target>.{…}` (Tensile spelling, `Kernels.so-000-gfx90a-xnack+.hsaco`), or anything under `library/<target>/`. Arch-less names (`*_fallback.dat`, `TensileLiteLibrary_lazy_Mapping.dat`, `hipblasltExtOpLibrary.dat`, the multi-arch `hipblasltTransform.hsaco`) stay generic. |
//! | `aotriton` | `aotriton.images/amd-<target or family>/…` (families `amd-gfx11xx`, `amd-gfx110x`, …) and the older `aotriton/kernels/<target>/…` |
//! | `miopen` | `miopen/db/<arch>[<CU count>][…].{db.txt,fdb.txt,kdb,model,…}` where the CU count is glued to the arch (`gfx942130.db.txt`, `gfx90a68.HIP.fdb.txt`): the arch is the longest known processor the name starts with; and CK libraries `libMIOpenCK*_<target>.so*` anywhere |
//! | `composablekernel` | `libdevice_*_<target>[_xnackp\|_xnackm\|_srameccp\|_srameccm…].a` |
//! | `hipkernelprovider` | `engines/arch_content/…/<target>/…` (the first directory below `arch_content` that is a target) |
//! | `hotswap_cache` | `share/rocjitsu/translations/<domain>/v1/<sha256>.{man,obj}` when `<domain>` names a target (`gfx942`, `gfx90a-xnack+`, or a triple ending `--gfx942`); other domains stay generic |
//!
//! A family (`gfx11xx`: `x` stands for any character) is its own artifact; recombine puts it
//! into every group holding an architecture it covers.

use kpack_target::TargetId;

/// A database file's architecture.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DbArch {
    /// The artifact it goes to: the target's processor (`gfx90a`), or a family (`gfx11xx`).
    pub artifact: String,
    /// The full target as found, canonical spelling (`gfx90a:xnack+`), or the family.
    pub target: String,
}

impl DbArch {
    fn of(target: TargetId) -> DbArch {
        DbArch {
            artifact: target.processor().to_owned(),
            target: target.as_str().to_owned(),
        }
    }
}

/// The database handlers `--split-databases` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Handler {
    /// rocBLAS Tensile libraries (`rocblas/library/`, see the module docs).
    Rocblas,
    /// hipBLASLt kernel libraries (`hipblaslt/library/`).
    Hipblaslt,
    /// hipSPARSELt kernel libraries (`hipsparselt/library/`).
    Hipsparselt,
    /// AOTriton kernel images (`aotriton.images/amd-<target>/`).
    Aotriton,
    /// MIOpen databases (`miopen/db/`) and CK libraries.
    Miopen,
    /// Composable Kernel device libraries (`libdevice_*_<target>.a`).
    Composablekernel,
    /// hipKernelProvider engines (`engines/arch_content/`).
    Hipkernelprovider,
    /// rocjitsu hot-swap translations (`share/rocjitsu/translations/`).
    HotswapCache,
}

/// A name given for a database handler that names none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown database handler {name}; expected one of {}",
    Handler::ALL.map(Handler::name).join(", ")
)]
pub struct UnknownHandler {
    /// The name given.
    pub name: String,
}

impl Handler {
    /// Every handler, in the order of the table above.
    pub const ALL: [Handler; 8] = [
        Handler::Rocblas,
        Handler::Hipblaslt,
        Handler::Hipsparselt,
        Handler::Aotriton,
        Handler::Miopen,
        Handler::Composablekernel,
        Handler::Hipkernelprovider,
        Handler::HotswapCache,
    ];

    /// The name used on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            Handler::Rocblas => "rocblas",
            Handler::Hipblaslt => "hipblaslt",
            Handler::Hipsparselt => "hipsparselt",
            Handler::Aotriton => "aotriton",
            Handler::Miopen => "miopen",
            Handler::Composablekernel => "composablekernel",
            Handler::Hipkernelprovider => "hipkernelprovider",
            Handler::HotswapCache => "hotswap_cache",
        }
    }

    /// The handler called `name`.
    pub fn from_name(name: &str) -> Option<Handler> {
        Handler::ALL.into_iter().find(|h| h.name() == name)
    }

    /// The handler called `name`, or an error listing the handlers there are.
    pub fn parse(name: &str) -> Result<Handler, UnknownHandler> {
        Handler::from_name(name).ok_or_else(|| UnknownHandler {
            name: name.to_owned(),
        })
    }

    /// The architecture of the file at `relpath` (relative to its prefix, `/`-separated), or
    /// `None` when this handler does not claim it.
    pub fn classify(self, relpath: &str) -> Option<DbArch> {
        let parts: Vec<&str> = relpath.split('/').collect();
        match self {
            Handler::Rocblas => tensile(&parts, "rocblas"),
            Handler::Hipblaslt => tensile(&parts, "hipblaslt"),
            Handler::Hipsparselt => tensile(&parts, "hipsparselt"),
            Handler::Aotriton => aotriton(&parts),
            Handler::Miopen => miopen(&parts),
            Handler::Composablekernel => composablekernel(&parts),
            Handler::Hipkernelprovider => hipkernelprovider(&parts),
            Handler::HotswapCache => hotswap_cache(&parts),
        }
    }
}

/// The first of `handlers` that claims `relpath`.
pub fn classify(handlers: &[Handler], relpath: &str) -> Option<DbArch> {
    handlers.iter().find_map(|h| h.classify(relpath))
}

/// A GPU target written in a name, in the Tensile (`gfx90a-xnack+`) or LLVM
/// (`gfx90a:xnack+`) spelling; only `gfx` processors and the portable SPIR-V target
/// (`amdgcnspirv`, without features) count.
pub fn parse_target(s: &str) -> Option<TargetId> {
    let t = TargetId::parse_tensile(s)
        .or_else(|_| TargetId::parse(s))
        .ok()?;
    let spirv = t.is_spirv() && t.features().is_empty();
    (spirv || is_gfx_processor(t.processor())).then_some(t)
}

/// `gfx` + digits + lowercase alphanumerics (`gfx90a`, `gfx1151`), or a generic processor
/// (`gfx9-4-generic`). Processors never contain `x`, which families use as a wildcard.
fn is_gfx_processor(p: &str) -> bool {
    let Some(rest) = p.strip_prefix("gfx") else {
        return false;
    };
    if let Some(groups) = rest.strip_suffix("-generic") {
        return !groups.is_empty()
            && groups
                .split('-')
                .all(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()));
    }
    rest.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && rest
            .bytes()
            .all(|b| (b.is_ascii_digit() || b.is_ascii_lowercase()) && b != b'x')
}

/// A family spelling: `gfx` + digits + one or more trailing `x` (`gfx11xx`, `gfx110x`).
pub fn parse_family(s: &str) -> Option<&str> {
    let rest = s.strip_prefix("gfx")?;
    let digits = rest.trim_end_matches('x');
    (digits.len() < rest.len() && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then_some(s)
}

/// True when the processor `processor` belongs to `family` (`gfx1100` in `gfx11xx`).
pub fn family_covers(family: &str, processor: &str) -> bool {
    family.len() == processor.len()
        && family
            .bytes()
            .zip(processor.bytes())
            .all(|(f, p)| f == b'x' || f == p)
}

/// The target that ends `stem` as a whole `_`/`-`-separated token (Tensile file names put it
/// last: `…_gfx90a-xnack+`, `Kernels.so-000-gfx942`).
fn trailing_target(stem: &str) -> Option<TargetId> {
    let mut from = stem.len();
    while let Some(at) = stem[..from].rfind("gfx") {
        let boundary = at == 0 || matches!(stem.as_bytes()[at - 1], b'_' | b'-');
        if boundary {
            if let Some(t) = parse_target(&stem[at..]) {
                return Some(t);
            }
        }
        from = at;
    }
    None
}

fn tensile(parts: &[&str], name: &str) -> Option<DbArch> {
    // `<name>/library/…` (TheRock) or `<name>/<version>/library/…` (Debian: rocblas/5/library),
    // wherever `<name>` occurs: verify sees `<prefix>/<relpath>`, and a staging prefix may
    // start with the same name (`hipsparselt/stage/lib/hipsparselt/library/…`).
    let lib = (0..parts.len())
        .filter(|&at| parts[at] == name)
        .find_map(|at| (at + 1..=at + 2).find(|&i| parts.get(i) == Some(&"library")))?;
    let below = &parts[lib + 1..];
    match below {
        [] => None,
        [file] => {
            let (stem, ext) = file.rsplit_once('.')?;
            if !matches!(ext, "co" | "dat" | "hsaco") {
                return None;
            }
            trailing_target(stem).map(DbArch::of)
        }
        [dir, ..] => parse_target(dir).map(DbArch::of),
    }
}

fn aotriton(parts: &[&str]) -> Option<DbArch> {
    if let Some(at) = parts.iter().position(|p| *p == "aotriton.images") {
        let dir = parts.get(at + 1).filter(|_| at + 2 < parts.len())?;
        let arch = dir.strip_prefix("amd-")?;
        if let Some(family) = parse_family(arch) {
            return Some(DbArch {
                artifact: family.to_owned(),
                target: family.to_owned(),
            });
        }
        return parse_target(arch).map(DbArch::of);
    }
    let at = parts
        .windows(2)
        .position(|w| w[0] == "aotriton" && w[1] == "kernels")?;
    let next = parts.get(at + 2)?;
    // A file directly under kernels/ is named for its arch (`gfx942.aks2`).
    let token = if at + 3 == parts.len() {
        next.split('.').next().unwrap_or_default()
    } else {
        next
    };
    parse_target(token).map(DbArch::of)
}

/// Known processors, longest first (from the code-object machine table).
fn known_processors() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = (0..=u8::MAX)
        .filter_map(kpack_target::processor_for_mach)
        .filter(|p| !p.ends_with("-generic"))
        .collect();
    all.sort_by_key(|p| std::cmp::Reverse(p.len()));
    all
}

fn miopen(parts: &[&str]) -> Option<DbArch> {
    let file = parts.last()?;
    if let Some(stem) = file.strip_prefix("libMIOpenCK") {
        let stem = stem.split(".so").next()?;
        let (_, arch) = stem.rsplit_once('_')?;
        return parse_target(arch).map(DbArch::of);
    }
    let in_db = parts.len() >= 3
        && parts[..parts.len() - 1]
            .windows(2)
            .any(|w| w[0] == "miopen" && w[1] == "db");
    let db_file = [".txt", ".kdb", ".model", ".db", ".udb"]
        .iter()
        .any(|ext| file.ends_with(ext));
    if !in_db || !db_file {
        return None;
    }
    let processor = known_processors()
        .into_iter()
        .find(|p| file.starts_with(p))?;
    Some(DbArch {
        artifact: processor.to_owned(),
        target: processor.to_owned(),
    })
}

fn composablekernel(parts: &[&str]) -> Option<DbArch> {
    let stem = parts
        .last()?
        .strip_prefix("libdevice_")?
        .strip_suffix(".a")?;
    let tokens: Vec<&str> = stem.split('_').collect();
    let at = tokens.iter().position(|t| parse_target(t).is_some())?;
    let mut target = tokens[at].to_owned();
    for t in &tokens[at + 1..] {
        let (name, sign) = t.split_at(t.len().checked_sub(1)?);
        let sign = match sign {
            "p" => '+',
            "m" => '-',
            _ => return None,
        };
        if !matches!(name, "xnack" | "sramecc") {
            return None;
        }
        target.push(':');
        target.push_str(name);
        target.push(sign);
    }
    parse_target(&target).map(DbArch::of)
}

fn hipkernelprovider(parts: &[&str]) -> Option<DbArch> {
    let at = parts
        .windows(2)
        .position(|w| w[0] == "engines" && w[1] == "arch_content")?;
    let dirs = &parts[at + 2..parts.len() - 1];
    dirs.iter().find_map(|d| parse_target(d)).map(DbArch::of)
}

fn hotswap_cache(parts: &[&str]) -> Option<DbArch> {
    let at = parts
        .windows(3)
        .position(|w| w == ["share", "rocjitsu", "translations"])?;
    let [domain, "v1", file] = parts.get(at + 3..)? else {
        return None;
    };
    if !(file.ends_with(".man") || file.ends_with(".obj")) {
        return None;
    }
    let token = domain.rsplit_once("--").map_or(*domain, |(_, t)| t);
    parse_target(token).map(DbArch::of)
}
