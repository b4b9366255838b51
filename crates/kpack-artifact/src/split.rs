//! `kpack split`: one build artifact becomes a generic artifact plus one artifact per GPU
//! processor (the map step).
//!
//! For component `C`, per manifest prefix, every entry of the prefix tree (sorted, symlinks
//! not followed) goes to exactly one place:
//! * a directory, a symlink (same link text), or a file that is neither a database file nor
//!   a linked fat binary: copied to `C_generic/<prefix>/…`;
//! * a database file (a [`Handler`] the caller selected claims it, first match wins, before
//!   any other test): copied to `C_<processor>/<prefix>/…` (feature variants such as
//!   `gfx90a-xnack+` go to the processor's artifact under their own name);
//! * a fat shared library or executable: its host rewrite goes to `C_generic/<prefix>/…`
//!   with the marker `kernel_name = <prefix>/<relpath>`, search path
//!   `[../…]/.kpack/<module>_@GFXARCH@.kpack` (relative to the binary's directory, always
//!   `/`), and its code objects to `C_<processor>/<prefix>/.kpack/<module>_<target>.kpack`,
//!   one archive per full target id, keyed `<prefix>/<relpath>#<wrapper index>` (in a split
//!   meant for Windows the target's `:` is spelled `@` in the name: `plan::name_outputs`).
//!   Relocatable objects and `ar` archives keep their device code (it is linked later).
//!
//! The marker, the host rewrite and the generic record depend only on the binary and its
//! place, never on which targets the shard built, so every shard's generic artifact names
//! the same archives and loads any shard's per-arch artifacts.
//!
//! **Modules.** A fat binary's module is its file name up to the first `.`, without a `lib`
//! prefix (`librocblas.so.5.2` → `rocblas`, executable `foo` → `foo`). Install prefixes are
//! overlaid into one tree, so when two fat binaries of one artifact share a module name,
//! none of them keeps it: each is named after its relative path instead, `/` written `_`
//! (`bin/demo` → `bin_demo`, `lib/libdemo.so.1` → `lib_libdemo.so.1`), whatever the order
//! they are found in; if even those collide, the split fails.
//!
//! The input is an artifact directory or a tarball of one (`.tar.zst`, `.tar.xz`, `.tar`;
//! streamed, see [`tar`]); either gives the same bytes. With
//! [`OutputFormat::TarZst`](tarball::OutputFormat::TarZst) each artifact is written as a
//! reproducible `<name>.tar.zst`, the artifacts packed in parallel.
//!
//! Inputs are only read. Output files are always new files (a hard link in the input is
//! never written through). Work is spread over the cores per artifact (`split --batch`),
//! per file (a fat binary of a tarball on a worker while the stream reads on) and per
//! bundle inside a fat binary, all within the process-wide memory gates
//! ([`kpack_concurrency::ordered::IN_FLIGHT`], the decoding gate); the output is identical
//! whatever the thread count. Everything is staged and
//! published together at the end (see the [crate] docs).

mod plan;
mod tar;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::tarball;
use crate::{ArtifactError, TreeEntry, manifest};
use plan::{
    Class, Done, Item, classify, copied, copy_destination, create_tree, finish, name_outputs,
    split_fat,
};
pub use plan::{Progress, SplitOptions, SplitSummary, WrittenArtifact, module_name, module_names};

/// Splits the artifact `input` (a directory or a tarball) into `out` (created if missing)
/// as component `component`.
pub fn split(
    input: &Path,
    out: &Path,
    component: &str,
    opts: &SplitOptions,
    progress: Progress<'_>,
) -> Result<SplitSummary, ArtifactError> {
    check_component(component)?;
    // Staging first: its sweep completes what a run killed while publishing began.
    let (stage, root) = crate::stage_output(out)?;
    refuse_existing(out, component)?;
    let summary = split_into(input, out, &root, component, opts, progress)?;
    tarball::sync_packed(&root, kpack_concurrency::threads::count(opts.threads))?;
    stage.publish()?;
    Ok(summary)
}

/// Splits every artifact in `parent` (sub-directories holding an `artifact_manifest.txt`
/// and tarballs, sorted by name; `<component>_<suffix>`, those ending `_generic` skipped)
/// into `out`. All or nothing: one failure leaves no output.
pub fn split_batch(
    parent: &Path,
    out: &Path,
    opts: &SplitOptions,
    progress: Progress<'_>,
) -> Result<Vec<SplitSummary>, ArtifactError> {
    // Staging first: its sweep completes what a run killed while publishing began.
    let (stage, root) = crate::stage_output(out)?;
    let mut jobs: Vec<(String, PathBuf)> = Vec::new();
    for (name, dir) in tarball::artifacts_in(parent)? {
        let Some((component, suffix)) = crate::split_artifact_name(&name) else {
            return Err(ArtifactError::invalid(
                dir,
                "artifact name is not <component>_<suffix>",
            ));
        };
        if suffix == "generic" {
            continue;
        }
        if let Some((_, other)) = jobs.iter().find(|(c, _)| c == component) {
            return Err(ArtifactError::invalid(
                dir,
                format!(
                    "component {component} also comes from {}; split them into separate outputs",
                    other.display()
                ),
            ));
        }
        check_component(component)?;
        refuse_existing(out, component)?;
        jobs.push((component.to_owned(), dir));
    }
    // The artifacts on the workers, each writing only its own component's outputs; the
    // work inside each (bundles decoded, code objects coded) reserves from the process-wide
    // memory gates, so artifacts at once share one budget.
    let threads = kpack_concurrency::threads::count(opts.threads);
    // Progress over every artifact: each one's (done, total), summed.
    let counts = Mutex::new(vec![(0u64, 0u64); jobs.len()]);
    let summaries = kpack_concurrency::threads::map(&jobs, threads, |j, (component, dir)| {
        let artifact_progress = |done: u64, total: u64| {
            let mut counts = counts.lock().unwrap_or_else(PoisonError::into_inner);
            counts[j] = (done, total);
            let (done, total) = counts
                .iter()
                .fold((0, 0), |(d, t), &(done, total)| (d + done, t + total));
            progress(done, total);
        };
        let summary = split_into(dir, out, &root, component, opts, &artifact_progress)?;
        Ok::<_, ArtifactError>(summary)
    })?;
    tarball::sync_packed(&root, threads)?;
    stage.publish()?;
    Ok(summaries)
}

fn check_component(component: &str) -> Result<(), ArtifactError> {
    if component.is_empty() || component.contains('/') || component.starts_with('.') {
        return Err(ArtifactError::Usage(if component.is_empty() {
            "the component name is empty".to_owned()
        } else {
            format!("invalid component name {component}: it must not contain '/' or start with '.'")
        }));
    }
    Ok(())
}

fn refuse_existing(out: &Path, component: &str) -> Result<(), ArtifactError> {
    if let Some(generic) = tarball::existing(out, &format!("{component}_generic")) {
        return Err(ArtifactError::invalid(
            generic,
            "already exists; refusing to overwrite an artifact",
        ));
    }
    Ok(())
}
fn split_into(
    input: &Path,
    out: &Path,
    stage: &Path,
    component: &str,
    opts: &SplitOptions,
    progress: Progress<'_>,
) -> Result<SplitSummary, ArtifactError> {
    if tarball::is_tarball(input) {
        return tar::split_tar_into(input, out, stage, component, opts, progress);
    }
    let prefixes: Vec<String> = manifest::read(input)?
        .into_iter()
        .filter(|p| input.join(p).is_dir())
        .collect();
    let mut entries: Vec<(String, String, TreeEntry)> = Vec::new();
    for prefix in &prefixes {
        for (rel, entry) in crate::walk_tree(&input.join(prefix))? {
            entries.push((prefix.clone(), rel, entry));
        }
    }
    let threads = kpack_concurrency::threads::count(opts.threads);
    let classes = kpack_concurrency::threads::map(&entries, threads, |_, (prefix, rel, entry)| {
        classify(&input.join(prefix).join(rel), rel, entry, &opts.handlers)
    })?;
    let items: Vec<Item> = entries
        .into_iter()
        .zip(classes)
        .map(|((prefix, rel, _), class)| Item {
            prefix,
            rel,
            class,
            mode: None,
        })
        .collect();
    let (modules, names) = name_outputs(out, component, &items, opts)?;
    create_tree(stage, component, &prefixes, &items, opts.output)?;
    let total = items.len() as u64;
    let done_count = AtomicU64::new(0);
    let results = kpack_concurrency::threads::map(&items, threads, |i, item| {
        let from = input.join(&item.prefix).join(&item.rel);
        let r = match &item.class {
            Class::Dir | Class::Symlink(_) => Ok(Done::default()),
            Class::Plain | Class::Db(_) => {
                let to = copy_destination(stage, component, item).expect("a copied class");
                crate::copy_file(&from, &to).map(|bytes| copied(&item.class, bytes))
            }
            Class::Fat => split_fat(
                &from,
                stage,
                component,
                item,
                &modules[&i],
                opts.compression,
                names,
            ),
        };
        progress(done_count.fetch_add(1, Ordering::Relaxed) + 1, total);
        r
    })?;
    finish(input, stage, component, opts, &prefixes, &items, results)
}
