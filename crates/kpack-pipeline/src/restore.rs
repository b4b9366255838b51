//! `kpack restore`: a kpacked binary becomes a fat binary again, for a HIP runtime without
//! kpack.
//!
//! 1. Each wrapper's marker ([`crate::kpacked::wrapper_markers`]) says where the runtime
//!    looks for its code objects; the targets are those of the archives found there (or in
//!    the directories given), narrowed by `--targets`. A wrapper whose pointer the loader
//!    puts outside the marker (the reference's rewrite of a RELR binary leaves it on the ELF
//!    header) is repaired when the marker holds one record ([`crate::kpacked::sole_marker`]):
//!    that record is the only one it can have meant, and the restored wrapper points at its
//!    bundle like every other; the summary says which wrappers were repaired and why.
//! 2. Per wrapper, every chosen target's code object is looked up as the runtime does
//!    ([`crate::kpacked::Resolver`]), and must come from an archive listing exactly that
//!    target; any miss is an error naming the wrapper, the target and the paths tried, and
//!    nothing is written.
//! 3. Each wrapper's bundle is rebuilt as clang-offload-bundler lays one out: the (empty)
//!    host entry first (under the id the marker records, `host_entry_id`, else the one clang
//!    writes today for the machine: every entry id comes back byte for byte; in a CCOB, only
//!    an id the bundlers that read CCOB accept), then one entry per target in target order, each at the next multiple of 4096 ([`kpack_bundle::BundleBuilder`], each code object copied in as it is decoded), or that bundle as a CCOB v3 (zstd
//!    level 3, as clang) with `compress`. Wrappers whose bundles come out identical (the
//!    `-fgpu-rdc` layout, where several wrappers share one) share one copy. Bundles are
//!    built one at a time into a temporary file at 4096-aligned offsets, and the archives
//!    are closed after each, so memory follows one bundle, not the library or its archives.
//! 4. The host rewrite ([`kpack_elf::restore`]) streams the input and the bundles into the
//!    output, written atomically ([`kpack_fs::write_atomic`]) with the input's mode and
//!    checked before it is published: [`kpack_elf::verify()`], and every wrapper HIPF and
//!    pointing at its bundle. After `kill -9` only temporaries remain beside the output,
//!    which the next restore there sweeps first.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use kpack_bundle::{BundleBuilder, CompressionMethod};
use kpack_elf::restore::{FATBIN_ALIGN, Payload};
use kpack_elf::rewrite::RewriteError;
use kpack_elf::{FatBinaryKind, VerifyIssue, WrapperMagic};
use kpack_target::TargetId;
use sha2::{Digest, Sha256};

use crate::error::{SourceError, io_error};
use crate::kpacked::{MarkerError, Outcome, Resolver, WrapperMarker, sole_marker, wrapper_markers};
use crate::unbundle::TargetFilter;

/// The zstd level of `--compress` (clang-offload-bundler's default).
const CCOB_LEVEL: i32 = 3;

/// Why a restore failed. Nothing is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// Reading the input or writing the output failed, or the input is malformed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The host rewrite was refused.
    #[error(transparent)]
    Rewrite(#[from] RewriteError),
    /// A wrapper's marker cannot be read.
    #[error(transparent)]
    Marker(#[from] MarkerError),
    /// A bundle could not be written.
    #[error(transparent)]
    Bundle(#[from] kpack_bundle::BundleError),
    /// A wrapper's code object for a chosen target is not where the runtime looks.
    #[error(
        "wrapper {wrapper} ({key}), target {target}: {reason}; searched {}",
        show_paths(.tried)
    )]
    Missing {
        /// The wrapper's slot.
        wrapper: usize,
        /// Its TOC key.
        key: String,
        /// The target.
        target: String,
        /// What was found instead.
        reason: String,
        /// The archive paths tried.
        tried: Vec<PathBuf>,
    },
    /// A target named with `--targets` is in no archive found.
    #[error("no archive found for target {target}; searched {}", show_paths(.searched))]
    UnknownTarget {
        /// The target.
        target: String,
        /// The search paths (before `@GFXARCH@` expansion).
        searched: Vec<PathBuf>,
    },
    /// No archive (or no target) found at all.
    #[error("no device code to restore: no archive found; searched {}", show_paths(.searched))]
    NoArchives {
        /// The search paths (before `@GFXARCH@` expansion).
        searched: Vec<PathBuf>,
    },
    /// The restored binary failed verification.
    #[error("the restored binary fails verification:\n{}", .0.iter().map(|i| format!("  {i}")).collect::<Vec<_>>().join("\n"))]
    Verify(Vec<VerifyIssue>),
    /// Invalid options.
    #[error("{0}")]
    Options(String),
}

fn show_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "no path".to_owned();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Options of [`restore`].
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// The fat binary to write.
    pub output: PathBuf,
    /// Directories searched instead of the markers' search paths (for the same file names).
    pub kpack_dirs: Vec<PathBuf>,
    /// Targets to restore (a bare processor selects every variant); empty: every target
    /// found.
    pub targets: Vec<TargetId>,
    /// Write CCOB v3 (zstd) bundles instead of uncompressed ones.
    pub compress: bool,
}

/// What [`restore`] did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RestoreSummary {
    /// Size of the input.
    pub input_size: u64,
    /// Size of the fat binary written.
    pub output_size: u64,
    /// HIP fat-binary wrappers restored.
    pub wrappers: usize,
    /// Bundles written (wrappers sharing identical bundles share one).
    pub bundles: usize,
    /// `uncompressed` or `ccob`.
    pub format: &'static str,
    /// Bytes of `.hip_fatbin`.
    pub fatbin_size: u64,
    /// The targets restored.
    pub targets: Vec<String>,
    /// The archives the code objects came from.
    pub archives: Vec<PathBuf>,
    /// The wrappers whose pointer the loader put outside the marker, each with where it
    /// landed and why (absent when none was).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<String>,
}

/// Restores the kpacked binary `input` per `opts`; `progress(done, total)` is called as
/// wrappers' bundles are built.
pub fn restore(
    input: &Path,
    opts: &RestoreOptions,
    progress: &dyn Fn(usize, usize),
) -> Result<RestoreSummary, RestoreError> {
    if opts.output.file_name().is_none() {
        return Err(RestoreError::Options(
            "the output path has no file name".into(),
        ));
    }
    let file = File::open(input).map_err(io_error(input))?;
    let mode = file.metadata().map_err(io_error(input))?.permissions();
    let map = crate::map_file(&file, input)?;
    let fat = kpack_elf::inspect(&map).map_err(SourceError::from)?;
    if fat.kind != FatBinaryKind::Kpacked {
        return Err(RewriteError::NotKpacked.into());
    }
    let (markers, repaired) = intended_markers(&map, &fat)?;
    let mut resolver = Resolver::new(input, &opts.kpack_dirs, &markers)?;
    let targets = choose_targets(&resolver, &markers, &opts.targets)?;

    // What killed runs left beside the output goes first.
    let out_dir = kpack_fs::parent_dir(&opts.output);
    kpack_fs::sweep(out_dir).map_err(io_error(out_dir))?;
    let mut payload_file = kpack_fs::temp_file_beside(&opts.output)
        .map_err(io_error(kpack_fs::parent_dir(&opts.output)))?;
    let tmp_path = payload_file.path().to_owned();
    let built = build_bundles(
        &mut resolver,
        &markers,
        &targets,
        crate::source::host_bundle_id(fat.machine),
        opts.compress,
        &mut BufWriter::new(payload_file.as_file_mut()),
        progress,
    )?;
    kpack_fs::fault_point("restore-bundles-written");
    let layout = kpack_elf::restore::plan(&map, &built.payload)?;
    let payload = payload_file.as_file_mut();
    payload
        .seek(SeekFrom::Start(0))
        .map_err(io_error(&tmp_path))?;
    let wrapper_bundles = &built.payload.wrapper_bundles;
    kpack_fs::write_atomic(
        &opts.output,
        |out| {
            let mut w = BufWriter::with_capacity(1 << 20, &mut *out);
            layout
                .rewrite
                .write_with_contents(&map, payload, &mut w)
                .map_err(io_error(&opts.output))?;
            w.flush().map_err(io_error(&opts.output))?;
            drop(w);
            out.sync_all().map_err(io_error(&opts.output))?;
            let written = crate::map_file(out, &opts.output)?;
            check_output(&written, layout.fatbin_vaddr, wrapper_bundles)?;
            // Unmapped first, as in `write_host`: a mapped file's attributes are not changed
            // on Windows.
            drop(written);
            out.set_permissions(mode).map_err(io_error(&opts.output))?;
            Ok::<(), RestoreError>(())
        },
        |path, e| {
            SourceError::Io {
                path: path.to_owned(),
                source: e,
            }
            .into()
        },
    )?;
    Ok(RestoreSummary {
        input_size: map.len() as u64,
        output_size: layout.rewrite.summary.output_len,
        wrappers: markers.len(),
        bundles: built.bundles,
        format: if opts.compress {
            "ccob"
        } else {
            "uncompressed"
        },
        fatbin_size: built.payload.len,
        targets: targets.into_iter().map(|(_, t)| t).collect(),
        archives: built.archives,
        repaired,
    })
}

/// Each wrapper's marker, a misdirected wrapper's being the marker's only record; and, for
/// each wrapper so repaired, what was wrong (the wrapper, where its pointer landed, why).
fn intended_markers(
    bytes: &[u8],
    fat: &kpack_elf::FatBinary,
) -> Result<(Vec<WrapperMarker>, Vec<String>), MarkerError> {
    let sole = sole_marker(bytes, fat);
    let mut repaired = Vec::new();
    let markers = wrapper_markers(bytes, fat)
        .into_iter()
        .map(|found| match (found, &sole) {
            (Err(e), Some(metadata)) if e.misdirected => {
                let w = &fat.wrappers[e.wrapper];
                let co_index = u32::try_from(w.reserved1).map_err(|_| MarkerError {
                    problem: format!("reserved1 {:#x} is not a u32", w.reserved1),
                    misdirected: false,
                    ..e.clone()
                })?;
                repaired.push(e.to_string());
                Ok(WrapperMarker {
                    wrapper: e.wrapper,
                    co_index,
                    metadata: metadata.clone(),
                })
            }
            (found, _) => found,
        })
        .collect::<Result<_, _>>()?;
    Ok((markers, repaired))
}

/// The targets to restore, `(canonical, archive spelling)` sorted by canonical spelling:
/// every target of the archives found, narrowed by `wanted`, each of which must select one.
fn choose_targets(
    resolver: &Resolver,
    markers: &[WrapperMarker],
    wanted: &[TargetId],
) -> Result<Vec<(String, String)>, RestoreError> {
    let archives = resolver.archives(markers);
    let searched = resolver.patterns(markers);
    if let Some(broken) = archives.iter().find(|a| a.error.is_some()) {
        return Err(RestoreError::Options(format!(
            "{}: {}",
            broken.path.display(),
            broken.error.as_deref().unwrap_or_default()
        )));
    }
    let available = Resolver::targets(&archives);
    let parsed: Vec<(String, String, TargetId)> = available
        .into_iter()
        .filter_map(|(c, t)| TargetId::parse(&t).ok().map(|id| (c, t, id)))
        .collect();
    for w in wanted {
        let one = TargetFilter::new(vec![w.clone()]);
        if !parsed.iter().any(|(_, _, id)| one.selects(id)) {
            return Err(RestoreError::UnknownTarget {
                target: w.to_string(),
                searched,
            });
        }
    }
    let filter = TargetFilter::new(wanted.to_vec());
    let chosen: Vec<(String, String)> = parsed
        .into_iter()
        .filter(|(_, _, id)| filter.selects(id))
        .map(|(c, t, _)| (c, t))
        .collect();
    if chosen.is_empty() {
        return Err(RestoreError::NoArchives { searched });
    }
    Ok(chosen)
}

/// The bundles written into the payload.
struct Built {
    payload: Payload,
    bundles: usize,
    archives: Vec<PathBuf>,
}

/// Builds each wrapper's bundle and appends it to `out` (identical bundles once), at
/// offsets aligned to [`FATBIN_ALIGN`].
fn build_bundles(
    resolver: &mut Resolver,
    markers: &[WrapperMarker],
    targets: &[(String, String)],
    default_host_id: &str,
    compress: bool,
    out: &mut impl Write,
    progress: &dyn Fn(usize, usize),
) -> Result<Built, RestoreError> {
    let mut written: HashMap<[u8; 32], u64> = HashMap::new();
    let mut archives: Vec<PathBuf> = Vec::new();
    let mut wrapper_bundles = Vec::with_capacity(markers.len());
    let mut len = 0u64;
    let write_error = |e: std::io::Error| SourceError::Io {
        path: PathBuf::from("(temporary bundle file)"),
        source: e,
    };
    for m in markers {
        let host_id = match m.metadata.host_entry_id.as_deref() {
            Some(id) if !compress || read_by_ccob_bundlers(id) => id,
            _ => default_host_id,
        };
        let ids: Vec<String> = std::iter::once(host_id.to_owned())
            .chain(targets.iter().map(|(_, t)| crate::source::hip_bundle_id(t)))
            .collect();
        let mut builder = BundleBuilder::new(
            &ids.iter().map(String::as_str).collect::<Vec<_>>(),
            FATBIN_ALIGN,
        );
        builder.push(&[]);
        for (canonical, target) in targets {
            let (resolution, pushed) = resolver.lookup(m, target, |bytes| builder.push(bytes));
            let key = kpack_archive::binary_key(&m.metadata.kernel_name, m.co_index);
            let missing = |reason: String| RestoreError::Missing {
                wrapper: m.wrapper,
                key: key.clone(),
                target: target.clone(),
                reason,
                tried: resolution.tried.clone(),
            };
            match (&resolution.outcome, pushed) {
                (Outcome::Found { archive, arch }, Some(())) => {
                    if kpack_runtime::target::canonical(arch) != *canonical {
                        return Err(missing(format!(
                            "no archive holds it for exactly this target (the runtime would \
                             fall back to {arch} in {})",
                            archive.display()
                        )));
                    }
                    if !archives.contains(archive) {
                        archives.push(archive.clone());
                    }
                }
                (outcome, _) => return Err(missing(outcome.to_string())),
            }
        }
        let plain = builder.finish();
        let bundle = if compress {
            kpack_bundle::write_compressed(&plain, 3, CompressionMethod::Zstd, CCOB_LEVEL)?
        } else {
            plain
        };
        let digest: [u8; 32] = Sha256::digest(&bundle).into();
        let offset = match written.get(&digest) {
            Some(&at) => at,
            None => {
                let at = len.next_multiple_of(FATBIN_ALIGN);
                out.write_all(&vec![0; (at - len) as usize])
                    .map_err(write_error)?;
                out.write_all(&bundle).map_err(write_error)?;
                len = at + bundle.len() as u64;
                written.insert(digest, at);
                at
            }
        };
        wrapper_bundles.push(offset);
        resolver.close_archives();
        progress(wrapper_bundles.len(), markers.len());
    }
    out.flush().map_err(write_error)?;
    Ok(Built {
        payload: Payload {
            len,
            wrapper_bundles,
        },
        bundles: written.len(),
        archives,
    })
}

/// Whether the bundlers that read CCOB (LLVM 17 on) accept `id` as a bundle entry id: five
/// or six `-`-separated parts (their `checkOffloadBundleID`). clang 15's host entry id
/// `host-x86_64-unknown-linux` has four: clang 15 never wrote CCOB, and a CCOB holding it is
/// one no bundler reads.
fn read_by_ccob_bundlers(id: &str) -> bool {
    (5..=6).contains(&id.splitn(6, '-').count())
}

/// The written output is a verified ELF file whose wrappers are all HIPF and each point at
/// its bundle.
fn check_output(bytes: &[u8], fatbin_vaddr: u64, bundles: &[u64]) -> Result<(), RestoreError> {
    kpack_elf::verify(bytes).map_err(RestoreError::Verify)?;
    let fat = kpack_elf::inspect(bytes).map_err(SourceError::from)?;
    let mut issues = Vec::new();
    if fat.kind != FatBinaryKind::Fat {
        issues.push(VerifyIssue {
            offset: None,
            message: "the output is not a fat binary".into(),
        });
    }
    for (w, &at) in fat.wrappers.iter().zip(bundles) {
        if w.magic != WrapperMagic::Hipf || w.target != Some(fatbin_vaddr + at) {
            issues.push(VerifyIssue {
                offset: Some(w.offset),
                message: format!(
                    "wrapper {}: expected HIPF pointing at load base + {:#x}, found {} pointing at {}",
                    w.index,
                    fatbin_vaddr + at,
                    w.magic,
                    w.target.map_or_else(
                        || "an address the loader cannot compute".to_owned(),
                        |t| format!("load base + {t:#x}")
                    )
                ),
            });
        }
    }
    if issues.is_empty() {
        Ok(())
    } else {
        Err(RestoreError::Verify(issues))
    }
}
