//! `kpack transform`: a fat binary becomes a host-only binary plus one `.kpack` archive per
//! GPU target.
//!
//! 1. Every device code object is keyed `kernel_name#co_index`, `co_index` being the index of
//!    each wrapper whose pointer leads to its bundle (two RDC wrappers sharing a bundle both
//!    get an entry); one archive per target, `{group}_{target}.kpack` (the target id as is,
//!    `:` included: Linux file names), `gfx_arches` = that target.
//! 2. The host rewrite ([`kpack_elf::rewrite`] for ELF, [`kpack_pe::rewrite`] for PE images,
//!    chosen by the file's magic) is planned before anything is written, so a refused input
//!    leaves nothing behind; its output is streamed from the mapped input and checked by the
//!    format's verifier ([`verify_binary`]), with the input's mode.
//! 3. Every output is staged under a temporary name and published together, archives first
//!    and the host binary last ([`kpack_fs::Stage`]): a failure or `kill -9` before publishing
//!    leaves nothing at any final path, and the next run sweeps what a killed one left.
//!
//! Uncompressed code objects are borrowed from the input mapping, never copied; bundles are
//! decoded and compressed on worker threads and streamed into the archives in file order, so
//! memory follows the work in flight and the output is deterministic for any thread count
//! (see [`Plan::write_archives_into`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Component, Path, PathBuf};

use kpack_archive::{ArchiveFileWriter, Compression, KernelCompressor};
use kpack_elf::rewrite::RewriteError;
use kpack_elf::{FatBinaryKind, VerifyIssue};
pub use kpack_fs::NameRules;
use kpack_fs::{OutputNames, Replace, Stage};
use kpack_hostbin::marker::MarkerMetadata;
use kpack_pe::PeRewriteError;

use crate::error::{SourceError, io_error};
use crate::source::{self, BundleSlot};
use kpack_concurrency::ordered;

mod coding;
mod host;

use coding::{CodeBundles, Prepare, PreparedBundle};

pub use host::{HostRewrite, KpackedMarker, kpacked_marker, plan_host, verify_binary};

/// What a file is, for `kpack transform --check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostState {
    /// Has device code kpack can take out.
    Fat,
    /// Already transformed.
    Kpacked,
    /// No device code.
    HostOnly,
    /// A separated debug file (`objcopy --only-keep-debug`): no device code.
    DebugOnly,
    /// A relocatable object (device code is linked later).
    Relocatable,
    /// Neither an ELF file nor a PE image.
    NotElf,
}

/// Classifies `bytes` for `--check`.
pub fn check(bytes: &[u8]) -> Result<HostState, TransformError> {
    if kpack_pe::is_pe(bytes) {
        let fat = kpack_pe::inspect(bytes).map_err(SourceError::from)?;
        return Ok(match fat.kind {
            FatBinaryKind::Fat => HostState::Fat,
            FatBinaryKind::Kpacked => HostState::Kpacked,
            FatBinaryKind::Rdc | FatBinaryKind::HostOnly => HostState::HostOnly,
            FatBinaryKind::DebugOnly => HostState::DebugOnly,
        });
    }
    if !kpack_elf::is_elf(bytes) {
        return Ok(HostState::NotElf);
    }
    let fat = kpack_elf::inspect(bytes).map_err(SourceError::from)?;
    Ok(match fat.kind {
        _ if fat.is_relocatable() => HostState::Relocatable,
        FatBinaryKind::Fat => HostState::Fat,
        FatBinaryKind::Kpacked => HostState::Kpacked,
        FatBinaryKind::Rdc | FatBinaryKind::HostOnly => HostState::HostOnly,
        FatBinaryKind::DebugOnly => HostState::DebugOnly,
    })
}

/// Why a transform failed. Nothing is left behind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransformError {
    /// Reading the input or writing an output failed, or the device code is malformed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The host rewrite was refused.
    #[error(transparent)]
    Rewrite(#[from] RewriteError),
    /// The PE host rewrite was refused.
    #[error(transparent)]
    PeRewrite(#[from] PeRewriteError),
    /// An archive could not be written.
    #[error(transparent)]
    Archive(#[from] kpack_archive::ArchiveError),
    /// The rewritten binary failed verification.
    #[error("the rewritten binary fails verification:\n{}", .0.iter().map(|i| format!("  {i}")).collect::<Vec<_>>().join("\n"))]
    Verify(Vec<VerifyIssue>),
    /// A wrapper points at no bundle.
    #[error("wrapper {0} points at no bundle of .hip_fatbin")]
    WrapperWithoutBundle(usize),
    /// A bundle no wrapper points at.
    #[error("bundle {0} of .hip_fatbin has no wrapper: its code could never be loaded")]
    BundleWithoutWrapper(usize),
    /// Invalid options.
    #[error("{0}")]
    Options(String),
    /// An output would have a name Windows cannot hold, and it is meant for Windows.
    #[error(transparent)]
    Name(#[from] kpack_fs::NameError),
}

impl From<kpack_elf::ElfError> for TransformError {
    fn from(e: kpack_elf::ElfError) -> Self {
        TransformError::Source(e.into())
    }
}

/// Options of [`transform`].
#[derive(Debug, Clone)]
pub struct TransformOptions {
    /// The host binary to write.
    pub output: PathBuf,
    /// Where the archives go (created if missing).
    pub kpack_dir: PathBuf,
    /// Archive group (default: the output's file name up to its first `.`).
    pub group: Option<String>,
    /// TOC key prefix and marker `kernel_name` (default: the output's file name).
    pub kernel_name: Option<String>,
    /// Marker search paths (default: `kpack_dir` relative to the output's directory,
    /// `REL/{group}_@GFXARCH@.kpack`).
    pub search_paths: Vec<String>,
    /// Compression of the archives.
    pub compression: Compression,
    /// The names the outputs may have: with Windows's, the output's and the archives' names
    /// are checked before anything is written, and archive names spell a target's `:` as `@`
    /// (`kpack_target::file_name_spelling`).
    pub names: NameRules,
}

/// One archive written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WrittenArchive {
    /// The archive's final path.
    pub path: PathBuf,
    /// Its target id.
    pub target: String,
    /// Its entries.
    pub entries: usize,
    /// Its size in bytes.
    pub size: u64,
}

/// What [`transform`] did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TransformSummary {
    /// Size of the input.
    pub input_size: u64,
    /// Size of the host binary written.
    pub output_size: u64,
    /// Bytes of device code removed.
    pub removed: u64,
    /// HIP fat-binary wrappers.
    pub wrappers: usize,
    /// Code objects archived (one per wrapper that leads to each).
    pub code_objects: usize,
    /// The marker's `kernel_name`.
    pub kernel_name: String,
    /// The marker's search paths.
    pub search_paths: Vec<String>,
    /// Virtual address of the marker in the host binary.
    pub marker_vaddr: u64,
    /// The archives written.
    pub archives: Vec<WrittenArchive>,
}

/// The result of [`transform`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The input was transformed.
    Transformed(TransformSummary),
    /// The input is already kpacked; nothing was written.
    AlreadyKpacked,
    /// The input is a separated debug file, which has no device code; nothing was written.
    DebugOnly,
}

/// An [`Outcome`] as `kpack transform --json` reports it: `{"status": "transformed", ...}`
/// with the summary's fields, or `{"status": "already-kpacked", "input": ...}`, or
/// `{"status": "debug-only", "input": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum TransformReport {
    /// The input was transformed.
    Transformed(TransformSummary),
    /// The input was already kpacked.
    AlreadyKpacked {
        /// The input.
        input: String,
    },
    /// The input is a separated debug file.
    DebugOnly {
        /// The input.
        input: String,
    },
}

impl Outcome {
    /// The report of this outcome of transforming `input`.
    pub fn report(self, input: &Path) -> TransformReport {
        match self {
            Outcome::Transformed(s) => TransformReport::Transformed(s),
            Outcome::AlreadyKpacked => TransformReport::AlreadyKpacked {
                input: input.display().to_string(),
            },
            Outcome::DebugOnly => TransformReport::DebugOnly {
                input: input.display().to_string(),
            },
        }
    }
}

/// The default group: the output file name up to its first `.` (`librocsparse.so.0.1` →
/// `librocsparse`).
pub fn default_group(output: &Path) -> String {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.split('.').next().unwrap_or_default().to_owned()
}

/// `to` relative to the directory `from`, with `/` and no leading `./`. Both are made
/// absolute and normalised lexically (neither needs to exist yet; symlinks are not resolved).
pub fn relative_path(from: &Path, to: &Path) -> Result<String, TransformError> {
    let abs = |p: &Path| -> Result<PathBuf, TransformError> {
        let a = std::path::absolute(p).map_err(io_error(p))?;
        let mut out = PathBuf::new();
        for c in a.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    out.pop();
                }
                other => out.push(other),
            }
        }
        Ok(out)
    };
    let (from, to) = (abs(from)?, abs(to)?);
    let f: Vec<Component<'_>> = from.components().collect();
    let t: Vec<Component<'_>> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_owned(); f.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    Ok(parts.join("/"))
}

/// Refuses a wrapper that points at no bundle and a bundle no wrapper points at; `wrappers`
/// are `(slot, bundle it leads to)`.
fn check_wrappers(
    wrappers: &[(usize, Option<usize>)],
    bundles: usize,
) -> Result<(), TransformError> {
    if let Some(&(w, _)) = wrappers.iter().find(|(_, b)| b.is_none()) {
        return Err(TransformError::WrapperWithoutBundle(w));
    }
    if let Some(b) = (0..bundles).find(|&b| !wrappers.iter().any(|(_, wb)| *wb == Some(b))) {
        return Err(TransformError::BundleWithoutWrapper(b));
    }
    Ok(())
}

/// A planned transform of one mapped input: the marker, the rewrite, the archive entries.
pub struct Plan<'a> {
    input: &'a [u8],
    rewrite: HostRewrite,
    kernel_name: String,
    search_paths: Vec<String>,
    group: String,
    /// Archive names spell target IDs for Windows.
    windows_names: bool,
    /// The bundles of `.hip_fatbin`, in section order.
    slots: Vec<BundleSlot>,
    /// The input's mapping, when its pages may be dropped once compressed.
    mapping: Option<&'a crate::FileBytes>,
}

/// Plans the transform of `input` (the mapped file); nothing is written.
pub fn plan<'a>(input: &'a [u8], opts: &TransformOptions) -> Result<Plan<'a>, TransformError> {
    let out_name = opts
        .output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| TransformError::Options("the output path has no file name".into()))?;
    let group = opts
        .group
        .clone()
        .unwrap_or_else(|| default_group(&opts.output));
    if group.is_empty() || group.contains('/') {
        return Err(TransformError::Options(if group.is_empty() {
            "the group name is empty".to_owned()
        } else {
            format!("invalid group name {group}: it must not contain '/'")
        }));
    }
    // The archives' targets are spelled for the system (`file_name_spelling`), so only the
    // group can make their names ones Windows cannot hold.
    OutputNames::new(kpack_fs::parent_dir(&opts.output), opts.names).check(&out_name)?;
    let archive_name = format!("{group}_@GFXARCH@.kpack");
    OutputNames::new(&opts.kpack_dir, opts.names).check(&archive_name)?;
    let kernel_name = opts.kernel_name.clone().unwrap_or(out_name);
    let search_paths = if opts.search_paths.is_empty() {
        let out_dir = match opts.output.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let rel = relative_path(&out_dir, &opts.kpack_dir)?;
        vec![if rel.is_empty() {
            archive_name
        } else {
            format!("{rel}/{archive_name}")
        }]
    } else {
        opts.search_paths.clone()
    };
    let marker = |host_entry_id: Option<String>| {
        MarkerMetadata {
            kernel_name: kernel_name.clone(),
            search_paths: search_paths.clone(),
            host_entry_id,
        }
        .encode()
        .map_err(|e| TransformError::Options(format!("marker metadata: {e}")))
    };
    let (rewrite, slots) = if kpack_pe::is_pe(input) {
        // The runtime resolves the name with `/` on Windows too.
        if kernel_name.contains('\\') {
            return Err(TransformError::Options(format!(
                "kernel name {kernel_name}: use `/` as the path separator, also for Windows binaries"
            )));
        }
        let rewrite = plan_host(input, &marker(None)?)?;
        let fat = kpack_pe::inspect(input).map_err(SourceError::from)?;
        let wrappers: Vec<_> = fat.wrappers.iter().map(|w| (w.index, w.bundle)).collect();
        check_wrappers(&wrappers, fat.bundles.len())?;
        (rewrite, source::pe_bundle_slots(&fat))
    } else {
        // What `restore` needs to give the host entry its id back (PE images are not
        // restored); the rewrite's refusals come first, as for every input.
        let fat = kpack_elf::inspect(input);
        let host_entry_id = fat.as_ref().ok().and_then(|fat| {
            source::host_entry_to_record(input, &source::bundle_slots(fat), fat.machine)
        });
        let rewrite = plan_host(input, &marker(host_entry_id)?)?;
        let fat = fat?;
        let wrappers: Vec<_> = fat.wrappers.iter().map(|w| (w.index, w.bundle)).collect();
        check_wrappers(&wrappers, fat.bundles.len())?;
        (rewrite, source::bundle_slots(&fat))
    };
    Ok(Plan {
        input,
        rewrite,
        kernel_name,
        search_paths,
        group,
        windows_names: opts.names.windows(),
        slots,
        mapping: None,
    })
}

impl<'a> Plan<'a> {
    /// Lets [`Plan::write_archives`] drop the pages of each bundle from `mapping` (the
    /// mapping `input` was borrowed from) once its code objects are written, and
    /// [`Plan::write_host`] every page once the host binary is copied; see
    /// [`crate::FileBytes::release`].
    pub fn releasing(mut self, mapping: &'a crate::FileBytes) -> Self {
        self.mapping = Some(mapping);
        self
    }

    /// The number of wrappers the host binary has (each now points at the marker).
    pub fn wrappers(&self) -> usize {
        self.rewrite.summary().wrappers
    }

    /// The archive path for `target`.
    pub fn archive_path(&self, dir: &Path, target: &str) -> PathBuf {
        let target = kpack_target::file_name_spelling(target, self.windows_names);
        dir.join(format!("{}_{target}.kpack", self.group))
    }

    /// Writes one archive per target into `dir`.
    pub fn write_archives(
        &self,
        dir: &Path,
        compression: Compression,
    ) -> Result<Vec<WrittenArchive>, TransformError> {
        self.write_archives_into(|_| dir.to_owned(), compression)
    }

    /// Like [`Plan::write_archives`], with the archive of each target in `dir_for(target)`;
    /// the archives are listed by target.
    ///
    /// Memory is bounded by the work in flight, not by the library: worker threads decode
    /// bundles (a CCOB decompressed one at a time per worker, within
    /// [`ordered::IN_FLIGHT`], the process's bytes in flight) and compress their code objects; this
    /// thread appends them, in file order, to archives streamed to their files
    /// ([`ArchiveFileWriter`]), which keep only their TOCs. `unified` codes on this thread
    /// (its frames depend on the frames before), so this thread walks the bundles itself, one
    /// at a time, and each code object is coded as soon as it is met: a worker would hand
    /// over a copy of every code object of its bundle, twice the bundle's bytes alive at
    /// once. A CCOB read as a stream ([`source::STREAM_ABOVE`]) is coded on this thread the
    /// same way, whatever the compression, so that only a part of it is held at a time (a code
    /// object larger than a part, with `zstd`, not even that: coded as it is decoded). The
    /// output is the same for any thread count. On failure no archive of this run is left
    /// behind.
    pub fn write_archives_into(
        &self,
        dir_for: impl Fn(&str) -> PathBuf,
        compression: Compression,
    ) -> Result<Vec<WrittenArchive>, TransformError> {
        let mut writers: BTreeMap<String, ArchiveFileWriter<'a>> = BTreeMap::new();
        let create = |target: &str| {
            let dir = dir_for(target);
            std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
            let path = self.archive_path(&dir, target);
            Ok::<_, SourceError>(ArchiveFileWriter::create(
                path,
                self.group.as_str(),
                target,
                compression,
            )?)
        };
        let release = |i: usize| {
            if let Some(map) = self.mapping {
                map.release(&self.input[self.slots[i].range.clone()]);
            }
        };
        // Codes bundle `i` on this thread as it is walked (read as a stream when large),
        // each archive's share of it (or of a part of it) one group.
        let code_walked = |i: usize,
                           writers: &mut BTreeMap<String, ArchiveFileWriter<'a>>|
         -> Result<(), TransformError> {
            let mut visitor = CodeBundles {
                kernel_name: &self.kernel_name,
                writers,
                create: &create,
            };
            source::walk_bundle(
                self.input,
                &self.slots[i],
                0,
                None,
                self.mapping,
                &mut visitor,
            )?;
            release(i);
            Ok(())
        };
        if let Compression::Unified { .. } = compression {
            for i in 0..self.slots.len() {
                code_walked(i, &mut writers)?;
            }
        } else {
            let threads = kpack_concurrency::threads::count(0);
            ordered::for_each_ordered(
                self.slots.len(),
                threads,
                &ordered::IN_FLIGHT,
                |i| self.slots[i].decode_cost(self.input),
                || KernelCompressor::new(compression),
                |compressor, i| {
                    if self.slots[i].streams(self.input) {
                        // Decoded in the sink, under this item's whole reservation.
                        return Ok((None, self.slots[i].decode_cost(self.input)));
                    }
                    let prepared = self.prepare_bundle(i, compressor)?;
                    let held = prepared.iter().map(|(_, _, k)| k.stored_len() as u64).sum();
                    Ok((Some(prepared), held))
                },
                |i, prepared| {
                    let Some(prepared) = prepared else {
                        // A bundle read as a stream is coded here, part by part as it is
                        // read: prepared on a worker, all its code objects would be held.
                        return code_walked(i, &mut writers);
                    };
                    for (target, keys, kernel) in prepared {
                        let writer = match writers.get_mut(&target) {
                            Some(w) => w,
                            None => writers.entry(target.clone()).or_insert(create(&target)?),
                        };
                        writer.add_prepared_under(&keys, &target, kernel, &[])?;
                    }
                    release(i);
                    Ok::<(), TransformError>(())
                },
            )?;
        }
        let mut written = Vec::with_capacity(writers.len());
        let result = (|| {
            for (target, writer) in writers {
                let path = writer.path().to_owned();
                let entries = writer.entry_count();
                let size = writer.finish()?;
                written.push(WrittenArchive {
                    path,
                    target,
                    entries,
                    size,
                });
            }
            Ok(())
        })();
        match result {
            Ok(()) => Ok(written),
            Err(e) => {
                for a in &written {
                    let _ = std::fs::remove_file(&a.path);
                }
                Err(e)
            }
        }
    }

    fn prepare_bundle(
        &self,
        i: usize,
        compressor: &mut KernelCompressor,
    ) -> Result<PreparedBundle<'a>, TransformError> {
        let mut prepare = Prepare {
            input: self.input,
            kernel_name: &self.kernel_name,
            compressor,
            out: Vec::new(),
        };
        source::walk_bundle(
            self.input,
            &self.slots[i],
            0,
            None,
            self.mapping,
            &mut prepare,
        )?;
        Ok(prepare.out)
    }

    /// Streams the rewritten host binary into the new file `path`, verifies it and gives it
    /// `mode`. `path` is a staged path (see [`transform`]): on failure the caller's stage
    /// removes what was written.
    pub fn write_host(
        &self,
        path: &Path,
        mode: Option<std::fs::Permissions>,
    ) -> Result<(), TransformError> {
        let map = crate::write_rewrite(path, |out| self.rewrite.write_to(self.input, out))?;
        if let Some(mapping) = self.mapping {
            // The copy read every host byte of the input: its pages (65 MB of a rocWMMA test
            // with 65,000 sections) would stay resident through the archives' writing.
            mapping.release(self.input);
        }
        verify_binary(&map)
            .refusals()
            .map_err(TransformError::Verify)?;
        // Unmapped first: Windows (wine at least) refuses a mapped file's attributes to be
        // changed, a sharing violation.
        drop(map);
        if let Some(mode) = mode {
            std::fs::set_permissions(path, mode).map_err(io_error(path))?;
        }
        Ok(())
    }

    fn summary(&self, archives: Vec<WrittenArchive>) -> TransformSummary {
        let s = self.rewrite.summary();
        TransformSummary {
            code_objects: archives.iter().map(|a| a.entries).sum(),
            input_size: s.input_len,
            output_size: s.output_len,
            removed: s.removed,
            wrappers: s.wrappers,
            kernel_name: self.kernel_name.clone(),
            search_paths: self.search_paths.clone(),
            marker_vaddr: s.marker_vaddr,
            archives,
        }
    }
}

/// Transforms `input` per `opts`. An already kpacked input is reported, not an error.
pub fn transform(input: &Path, opts: &TransformOptions) -> Result<Outcome, TransformError> {
    let file = File::open(input).map_err(io_error(input))?;
    let mode = file.metadata().map_err(io_error(input))?.permissions();
    let map = crate::map_file(&file, input)?;
    let plan = match plan(&map, opts).map(|p| p.releasing(&map)) {
        Err(
            TransformError::Rewrite(RewriteError::AlreadyKpacked)
            | TransformError::PeRewrite(PeRewriteError::AlreadyKpacked),
        ) => {
            return Ok(Outcome::AlreadyKpacked);
        }
        // Like an already kpacked input, a debug file is what it should be: nothing to do.
        Err(TransformError::Rewrite(RewriteError::DebugOnly)) => return Ok(Outcome::DebugOnly),
        other => other?,
    };
    let archives = write_outputs(&plan, opts, mode)?;
    Ok(Outcome::Transformed(plan.summary(archives)))
}

/// Writes every output of one transform into a [`Stage`] and publishes them together: the
/// archives first, then the host binary, whose marker names them. A failure, or a kill before
/// publishing, leaves nothing at any final path; a kill during the few renames of publishing
/// can leave only complete archives that no new host binary refers to yet, which the next
/// transform to the same paths replaces (see [`Stage`]). Stale temporaries of killed runs in
/// both directories are swept first.
fn write_outputs(
    plan: &Plan<'_>,
    opts: &TransformOptions,
    mode: std::fs::Permissions,
) -> Result<Vec<WrittenArchive>, TransformError> {
    let staged = SourceError::from;
    // The archives' directory as `add` sees it (the parent of an archive path).
    let kpack_dir = if opts.kpack_dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        opts.kpack_dir.as_path()
    };
    let mut stage = Stage::new();
    let staged_kpack_dir = stage.dir_in(kpack_dir).map_err(staged)?;
    // Which targets there are is known once the bundles are decoded, so the archives are
    // written first and then registered (`add` only names a staged path).
    let mut archives = plan.write_archives(&staged_kpack_dir, opts.compression)?;
    for a in &archives {
        stage
            .add(&plan.archive_path(kpack_dir, &a.target), Replace::Allowed)
            .map_err(staged)?;
    }
    let host = stage.add(&opts.output, Replace::Allowed).map_err(staged)?;
    plan.write_host(&host, Some(mode))?;
    kpack_fs::fault_point("transform-host-written");
    stage.publish().map_err(staged)?;
    for a in &mut archives {
        a.path = plan.archive_path(&opts.kpack_dir, &a.target);
    }
    Ok(archives)
}
