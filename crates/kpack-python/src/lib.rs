//! `kpack._native`: the Python package's native module. It only translates: Python arguments
//! into the library crates' options, their results into the JSON `kpack … --json` prints
//! (the same `Serialize` types, so the two cannot differ; the Python side parses it), and
//! their errors into the exceptions of `kpack._errors`, with the message `kpack` prints.
//!
//! The `kpack` command of the wheel is not here: it is the `kpack` binary itself, built
//! beside this module and shipped in the wheel's scripts (docs/python.md), so this crate
//! depends on the library crates and not on `kpack-cli`.
//!
//! Long calls release the GIL, so other Python threads run meanwhile.
//!
//! Depends on `kpack-archive`, `kpack-artifact`, `kpack-concurrency`,
//! `kpack-inputs`, `kpack-package`, `kpack-pipeline`, `kpack-prune`, `kpack-target`,
//! `kpack-wheel` and `kpack-wheelfile` (the layering: docs/CONTRIBUTING.md).

// PyO3's macros expand to `unsafe` blocks (FFI glue); this crate writes none of its own.
#![allow(unsafe_code)]

use std::path::PathBuf;

use kpack_archive::{ArchiveError, Compression, ErrorKind};
use kpack_artifact::ArtifactError;
use kpack_artifact::recombine::{PackagingConfig, RecombineOptions};
use kpack_artifact::split::SplitOptions;
use kpack_artifact::verify::VerifyOptions;
use kpack_package::handlers::Handler;
use kpack_pipeline::SourceError;
use kpack_pipeline::restore::{RestoreError, RestoreOptions};
use kpack_pipeline::transform::{TransformError, TransformOptions};
use kpack_prune::{PruneError, PruneTreeError, Selection};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The exception classes of `kpack._errors`, by what went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// A file could not be read or written (a missing input, a permission).
    Input,
    /// An input is malformed (ELF, `ar`, offload bundle, CCOB, code object).
    Format,
    /// A `.kpack` archive is malformed or lacks the entry asked for.
    Archive,
    /// A `.kpack` archive is damaged: what was read does not match its digest.
    Integrity,
    /// A fat binary cannot be transformed.
    Transform,
    /// A build artifact, its manifest or the packaging configuration is wrong.
    Artifact,
    /// An argument is invalid.
    Usage,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Input => "InputError",
            Class::Format => "FormatError",
            Class::Archive => "ArchiveError",
            Class::Integrity => "IntegrityError",
            Class::Transform => "TransformError",
            Class::Artifact => "ArtifactError",
            Class::Usage => "UsageError",
        }
    }

    // Each error is classed by the deepest cause kpack knows: a missing file is an
    // InputError whichever command met it, a corrupt bundle a FormatError.
    fn of_source(e: &SourceError) -> Class {
        match e {
            SourceError::Io { .. } => Class::Input,
            SourceError::Archive(a) => Class::of_archive(a),
            SourceError::InInput { source, .. } => Class::of_source(source),
            _ => Class::Format,
        }
    }

    fn of_archive(e: &ArchiveError) -> Class {
        match e.kind() {
            ErrorKind::FileNotFound | ErrorKind::Io => Class::Input,
            ErrorKind::InvalidArgument => Class::Usage,
            ErrorKind::IntegrityCheckFailed => Class::Integrity,
            _ => Class::Archive,
        }
    }

    fn of_transform(e: &TransformError) -> Class {
        match e {
            TransformError::Source(s) => Class::of_source(s),
            TransformError::Archive(a) => Class::of_archive(a),
            TransformError::Options(_) => Class::Usage,
            _ => Class::Transform,
        }
    }

    fn of_restore(e: &RestoreError) -> Class {
        match e {
            RestoreError::Source(s) => Class::of_source(s),
            RestoreError::Marker(_) | RestoreError::Bundle(_) => Class::Format,
            RestoreError::Missing { .. }
            | RestoreError::UnknownTarget { .. }
            | RestoreError::NoArchives { .. } => Class::Archive,
            RestoreError::Options(_) => Class::Usage,
            _ => Class::Transform,
        }
    }

    fn of_wheel(e: &kpack_wheel::WheelError) -> Class {
        use kpack_wheel::WheelError;
        use kpack_wheelfile::WheelFileError;
        match e {
            WheelError::File(WheelFileError::Io { .. } | WheelFileError::Zip { .. }) => {
                Class::Input
            }
            WheelError::Transform { source, .. } => Class::of_transform(source),
            WheelError::Artifact(a) => Class::of_artifact(a),
            WheelError::Usage(_) => Class::Usage,
            _ => Class::Format,
        }
    }

    fn of_prune(e: &PruneError) -> Class {
        match e {
            PruneError::Source(s) => Class::of_source(s),
            PruneError::Empty { .. } | PruneError::NotPresent { .. } => Class::Usage,
            _ => Class::Transform,
        }
    }

    fn of_artifact(e: &ArtifactError) -> Class {
        match e {
            ArtifactError::Io { .. } => Class::Input,
            ArtifactError::Transform { source, .. } => Class::of_transform(source),
            ArtifactError::Source { source, .. } => Class::of_source(source),
            ArtifactError::Archive { source, .. } => Class::of_archive(source),
            ArtifactError::Usage(_) => Class::Usage,
            _ => Class::Artifact,
        }
    }
}

/// The exception `kpack._errors.<class>(message)`.
fn exception(py: Python<'_>, class: Class, message: String) -> PyErr {
    let raised = py
        .import("kpack._errors")
        .and_then(|m| m.getattr(class.name()))
        .and_then(|c| c.call1((message,)));
    match raised {
        Ok(value) => PyErr::from_value(value),
        Err(err) => err,
    }
}

/// `err` as the exception of `class`, with the message `kpack` prints for it.
fn raise(class: Class, err: &(dyn std::error::Error + 'static)) -> PyErr {
    Python::attach(|py| exception(py, class, kpack_pipeline::error::error_message(err)))
}

fn usage(message: String) -> PyErr {
    Python::attach(|py| exception(py, Class::Usage, message))
}

fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// `--compression none|zstd|unified` and `--level N`, read as the command line reads them
/// (no level: the scheme's default).
fn compression(scheme: &str, level: Option<i32>) -> PyResult<Compression> {
    Compression::from_args(scheme, level).map_err(|e| usage(e.to_string()))
}

/// `kpack inspect --json PATHS`: the JSON array, as a string. With `raise_errors`, the first
/// file that cannot be inspected raises instead of having an `error` entry.
#[pyfunction]
fn inspect(py: Python<'_>, paths: Vec<PathBuf>, raise_errors: bool) -> PyResult<String> {
    let inspections = py.detach(|| {
        let files = kpack_pipeline::expand_inputs(&paths)?;
        let mut inspections = Vec::new();
        for f in &files {
            kpack_inputs::inspect(f, paths.contains(f), &mut |i| inspections.push(i));
        }
        Ok::<_, SourceError>(inspections)
    });
    let inspections = inspections.map_err(|e| raise(Class::of_source(&e), &e))?;
    if raise_errors {
        if let Some(Err(e)) = inspections.iter().map(|i| &i.result).find(|r| r.is_err()) {
            return Err(raise(Class::of_source(e), e));
        }
    }
    to_json(&inspections)
}

/// `kpack split INPUT -o OUTPUT (--component C | --batch) ... --json`: the JSON array of
/// summaries, as a string.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // the command's options, one keyword each
fn split(
    py: Python<'_>,
    input: PathBuf,
    output: PathBuf,
    component: Option<String>,
    batch: bool,
    split_databases: Vec<String>,
    compression: &str,
    level: Option<i32>,
    threads: usize,
    output_format: &str,
) -> PyResult<String> {
    let handlers = split_databases
        .iter()
        .map(|h| Handler::parse(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| usage(e.to_string()))?;
    let opts = SplitOptions {
        handlers,
        compression: self::compression(compression, level)?,
        threads,
        output: self::output_format(output_format)?,
        ..SplitOptions::default()
    };
    let no_progress = |_: u64, _: u64| {};
    let summaries = match (component, batch) {
        (Some(c), false) => py.detach(|| {
            kpack_artifact::split::split(&input, &output, &c, &opts, &no_progress).map(|s| vec![s])
        }),
        (None, true) => {
            py.detach(|| kpack_artifact::split::split_batch(&input, &output, &opts, &no_progress))
        }
        (Some(_), true) => return Err(usage("component and batch exclude each other".into())),
        (None, false) => return Err(usage("give a component, or batch=True".into())),
    };
    let summaries = summaries.map_err(|e| raise(Class::of_artifact(&e), &e))?;
    to_json(&summaries)
}

/// `--output-format dir|tar.zst`.
fn output_format(name: &str) -> PyResult<kpack_artifact::tarball::OutputFormat> {
    use kpack_artifact::tarball::OutputFormat;
    match name {
        "dir" => Ok(OutputFormat::Dir),
        "tar.zst" => Ok(OutputFormat::TarZst),
        _ => Err(usage(format!(
            "unknown output format {name:?}; expected \"dir\" or \"tar.zst\""
        ))),
    }
}

/// `kpack recombine --shards SHARDS --config CONFIG -o OUTPUT [--component C]
/// [--group-archives] [--compression S --level N] --json`: the JSON summary, as a string.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // the command's options, one keyword each
fn recombine(
    py: Python<'_>,
    shards: PathBuf,
    config: PathBuf,
    output: PathBuf,
    component: Option<String>,
    threads: usize,
    output_format: &str,
    group_archives: bool,
    compression: &str,
    level: Option<i32>,
) -> PyResult<String> {
    let output_format = self::output_format(output_format)?;
    let compression = self::compression(compression, level)?;
    let summary = py.detach(|| {
        let config = PackagingConfig::load(&config)?;
        let opts = RecombineOptions {
            component,
            threads,
            output: output_format,
            group_archives: RecombineOptions::group_archives_for(group_archives, compression),
        };
        kpack_artifact::recombine::recombine(&shards, &config, &output, &opts)
    });
    let summary = summary.map_err(|e| raise(Class::of_artifact(&e), &e))?;
    to_json(&summary)
}

/// `kpack verify ARTIFACTS [--original ORIGINAL] --json`: the JSON report, as a string (the
/// Python side raises when it lists failures).
#[pyfunction]
fn verify(
    py: Python<'_>,
    artifacts: PathBuf,
    original: Option<PathBuf>,
    threads: usize,
) -> PyResult<String> {
    let opts = VerifyOptions { original, threads };
    let report = py.detach(|| kpack_artifact::verify::verify(&artifacts, &opts));
    let report = report.map_err(|e| raise(Class::of_artifact(&e), &e))?;
    to_json(&report)
}

/// `kpack transform INPUT -o OUTPUT --kpack-dir DIR ... --json`: the JSON report, as a
/// string.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // the command's options, one keyword each
fn transform(
    py: Python<'_>,
    input: PathBuf,
    output: PathBuf,
    kpack_dir: PathBuf,
    name: Option<String>,
    kernel_name: Option<String>,
    search_paths: Vec<String>,
    compression: &str,
    level: Option<i32>,
) -> PyResult<String> {
    let opts = TransformOptions {
        output,
        kpack_dir,
        group: name,
        kernel_name,
        search_paths,
        compression: self::compression(compression, level)?,
        names: kpack_pipeline::transform::NameRules::for_output(false),
    };
    let outcome = py.detach(|| kpack_pipeline::transform::transform(&input, &opts));
    // As `kpack transform` prints it: the input, then the error.
    let outcome = outcome.map_err(|e| {
        let message = format!("{}: {e}", input.display());
        Python::attach(|py| exception(py, Class::of_transform(&e), message))
    })?;
    to_json(&outcome.report(&input))
}

/// `kpack prune PATHS -o OUTPUT (--keep T... | --drop T...) [--allow-empty] --json`: the JSON
/// report, as a string.
#[pyfunction]
fn prune(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    output: PathBuf,
    keep: Vec<String>,
    drop: Vec<String>,
    allow_empty: bool,
) -> PyResult<String> {
    let parse = |names: Vec<String>| -> PyResult<Vec<_>> {
        names
            .iter()
            .map(|n| kpack_prune::parse_target_name(n).map_err(|e| usage(e.to_string())))
            .collect()
    };
    let selection = match (keep.is_empty(), drop.is_empty()) {
        (false, true) => Selection::Keep(parse(keep)?),
        (true, false) => Selection::Drop(parse(drop)?),
        _ => {
            return Err(usage(
                "give targets to keep or to drop, not both".to_owned(),
            ));
        }
    };
    let report = py.detach(|| kpack_prune::prune(&paths, &output, &selection, allow_empty));
    let report = report.map_err(|e| {
        let class = match &e {
            PruneTreeError::Io { .. } => Class::Input,
            PruneTreeError::File { source, .. } | PruneTreeError::Prune(source) => {
                Class::of_prune(source)
            }
            _ => Class::Transform,
        };
        raise(class, &e)
    })?;
    to_json(&report)
}

/// `kpack restore INPUT -o OUTPUT ... --json`: the JSON summary, as a string.
#[pyfunction]
fn restore(
    py: Python<'_>,
    input: PathBuf,
    output: PathBuf,
    kpack_dirs: Vec<PathBuf>,
    targets: Vec<String>,
    compress: bool,
) -> PyResult<String> {
    let targets = targets
        .iter()
        .map(|t| kpack_target::TargetId::parse(t).map_err(|e| usage(format!("target {t}: {e}"))))
        .collect::<PyResult<Vec<_>>>()?;
    let opts = RestoreOptions {
        output,
        kpack_dirs,
        targets,
        compress,
    };
    let summary = py.detach(|| kpack_pipeline::restore::restore(&input, &opts, &|_, _| {}));
    // As `kpack restore` prints it: the input, then the error.
    let summary = summary.map_err(|e| {
        let message = format!("{}: {e}", input.display());
        Python::attach(|py| exception(py, Class::of_restore(&e), message))
    })?;
    to_json(&summary)
}

/// The process-wide worker limit for one call whose library takes no thread count (0: one
/// per core), as `kpack --threads N` sets it for a run; back to the default afterwards.
struct ThreadLimit;

impl ThreadLimit {
    fn set(threads: usize) -> ThreadLimit {
        kpack_concurrency::threads::set_limit(threads);
        ThreadLimit
    }
}

impl Drop for ThreadLimit {
    fn drop(&mut self) {
        kpack_concurrency::threads::set_limit(0);
    }
}

/// `kpack --threads N split-wheel WHEEL -o OUTPUT ... --json`: the JSON summary, as a string.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // the command's options, one keyword each
fn split_wheel(
    py: Python<'_>,
    wheel: PathBuf,
    output: PathBuf,
    device_package_prefix: Option<String>,
    overlay_root: Option<String>,
    device_requires_dist: Vec<String>,
    split_databases: Vec<String>,
    output_format: &str,
    variants: bool,
    variant_label: String,
    compression: &str,
    level: Option<i32>,
    multi_target_archives: bool,
    threads: usize,
) -> PyResult<String> {
    let mut opts = kpack_wheel::SplitOptions::new(output);
    opts.device_package_prefix = device_package_prefix;
    opts.overlay_root = overlay_root;
    opts.device_requires_dist = device_requires_dist;
    opts.handlers = split_databases
        .iter()
        .map(|h| Handler::parse(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| usage(e.to_string()))?;
    opts.output_format = match output_format {
        "wheel" => kpack_wheel::OutputFormat::Wheel,
        "directory" => kpack_wheel::OutputFormat::Directory,
        _ => {
            return Err(usage(format!(
                "unknown output format {output_format:?}; expected \"wheel\" or \"directory\""
            )));
        }
    };
    opts.variants = variants;
    opts.variant_label = variant_label;
    opts.compression = self::compression(compression, level)?;
    opts.multi_target_archives = multi_target_archives;
    let summary = py.detach(|| {
        let _limit = ThreadLimit::set(threads);
        kpack_wheel::split_wheel(&wheel, &opts)
    });
    let summary = summary.map_err(|e| raise(Class::of_wheel(&e), &e))?;
    to_json(&summary)
}

/// A `.kpack` archive open for reading (memory-mapped; opening reads only its table of
/// contents). Use it as a context manager, or call `close()`; every use after closing raises
/// ValueError.
#[pyclass(module = "kpack", name = "Archive")]
struct Archive {
    path: PathBuf,
    /// `None` once closed.
    inner: Option<kpack_archive::Archive>,
}

impl Archive {
    fn open(&self) -> PyResult<&kpack_archive::Archive> {
        self.inner.as_ref().ok_or_else(|| {
            PyValueError::new_err(format!("{}: the archive is closed", self.path.display()))
        })
    }
}

fn archive_error(e: ArchiveError) -> PyErr {
    raise(Class::of_archive(&e), &e)
}

#[pymethods]
impl Archive {
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py
            .detach(|| kpack_archive::Archive::open(&path))
            .map_err(archive_error)?;
        Ok(Archive {
            path,
            inner: Some(inner),
        })
    }

    /// The archive's path, as given.
    #[getter]
    fn path(&self) -> String {
        self.path.display().to_string()
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_none()
    }

    /// The archive group (`group_name` in the table of contents).
    #[getter]
    fn group_name(&self) -> PyResult<String> {
        Ok(self.open()?.group_name().to_owned())
    }

    /// The architecture family (`gfx_arch_family`), e.g. `gfx900X`.
    #[getter]
    fn gfx_arch_family(&self) -> PyResult<String> {
        Ok(self.open()?.gfx_arch_family().to_owned())
    }

    /// The architectures the archive is for (`gfx_arches`), in the archive's order.
    #[getter]
    fn architectures(&self) -> PyResult<Vec<String>> {
        Ok(self.open()?.gfx_arches().to_vec())
    }

    /// `none` or `zstd-per-kernel`.
    #[getter]
    fn compression_scheme(&self) -> PyResult<&'static str> {
        Ok(self.open()?.compression_scheme().name())
    }

    /// The binary keys (`<file name>#<wrapper index>`), in table-of-contents order.
    #[getter]
    fn binaries(&self) -> PyResult<Vec<String>> {
        Ok(self.open()?.binaries().map(str::to_owned).collect())
    }

    /// `(binary, arch, size)` of every entry, in table-of-contents order.
    #[getter]
    fn entries(&self) -> PyResult<Vec<(String, String, u64)>> {
        Ok(self
            .open()?
            .entries()
            .map(|(b, a, info)| (b.to_owned(), a.to_owned(), info.original_size))
            .collect())
    }

    /// Whether `(binary, arch)` has a code object.
    fn __contains__(&self, key: (String, String)) -> PyResult<bool> {
        Ok(self.open()?.contains(&key.0, &key.1))
    }

    /// The number of entries.
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.open()?.entries().count())
    }

    /// The code object of `binary` for `arch`, decompressed. Raises ArchiveError when the
    /// archive has no such entry or its data is corrupt.
    fn get<'py>(&self, py: Python<'py>, binary: &str, arch: &str) -> PyResult<Bound<'py, PyBytes>> {
        let archive = self.open()?;
        let data = py
            .detach(|| archive.get(binary, arch))
            .map_err(archive_error)?;
        Ok(PyBytes::new(py, &data))
    }

    /// Checks the archive's structure, then reads every entry, checking each against its
    /// digest; raises ArchiveError (IntegrityError for damage) at the first problem.
    fn validate(&self, py: Python<'_>) -> PyResult<()> {
        let archive = self.open()?;
        py.detach(|| {
            archive.validate()?;
            archive
                .entries()
                .try_for_each(|(binary, arch, _)| archive.get(binary, arch).map(drop))
        })
        .map_err(archive_error)
    }

    /// Unmaps the archive. Closing twice is harmless.
    fn close(&mut self) {
        self.inner = None;
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyResult<PyRef<'_, Self>> {
        slf.open()?;
        Ok(slf)
    }

    fn __exit__(&mut self, _type: Py<PyAny>, _value: Py<PyAny>, _traceback: Py<PyAny>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.inner.is_some() { "" } else { ", closed" };
        format!(
            "kpack.Archive({:?}{state})",
            self.path.display().to_string()
        )
    }
}

/// The native half of the `kpack` package; use `kpack`, not this module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(inspect, m)?)?;
    m.add_function(wrap_pyfunction!(split, m)?)?;
    m.add_function(wrap_pyfunction!(recombine, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(transform, m)?)?;
    m.add_function(wrap_pyfunction!(restore, m)?)?;
    m.add_function(wrap_pyfunction!(split_wheel, m)?)?;
    m.add_function(wrap_pyfunction!(prune, m)?)?;
    m.add_class::<Archive>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
