//! Check 8: with the original artifacts, strict identity.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use kpack_hostbin::marker::MarkerMetadata;
use kpack_pipeline::SourceError;
use kpack_pipeline::source::{self, CodePieces, DeviceCode, Visitor};
use kpack_pipeline::transform::{self, HostState};

use super::files::map;
use super::host::{self, HostChange};
use super::listing::{as_member, each_spooled_member, list_artifact, tarball_stem};
use super::{Ctx, VerifyReport, digest};
use crate::{ArtifactError, TreeEntry, manifest};

/// A writer that digests what is written to it, and counts it.
struct Digesting {
    sha: sha2::Sha256,
    len: u64,
}

impl Write for Digesting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(&mut self.sha, buf);
        self.len += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Recover<'c> {
    ctx: &'c Ctx,
    rel: &'c str,
    out_bin: &'c str,
    meta: &'c MarkerMetadata,
    checked: usize,
    failures: Vec<String>,
}

impl Visitor for Recover<'_> {
    fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
        self.recovered(&code.target().to_string(), code.wrappers, digest(code.data));
        Ok(())
    }

    /// A code object too large to hold (of a bundle read as a stream) is hashed as it is
    /// decoded.
    fn code_pieces<'s>(
        &'s mut self,
        code: &DeviceCode<'_>,
        _len: u64,
    ) -> Result<Option<Box<dyn CodePieces + 's>>, SourceError> {
        Ok(Some(Box::new(RecoverInPieces {
            target: code.target().to_string(),
            wrappers: code.wrappers.to_vec(),
            sha: sha2::Sha256::default(),
            recover: self,
        })))
    }
}

/// A code object of the original hashed as its pieces come ([`Recover::code_pieces`]).
struct RecoverInPieces<'r, 'c> {
    target: String,
    wrappers: Vec<usize>,
    sha: sha2::Sha256,
    recover: &'r mut Recover<'c>,
}

impl CodePieces for RecoverInPieces<'_, '_> {
    fn piece(&mut self, bytes: &[u8]) -> Result<(), SourceError> {
        sha2::Digest::update(&mut self.sha, bytes);
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), SourceError> {
        let want = sha2::Digest::finalize(self.sha).into();
        self.recover.recovered(&self.target, &self.wrappers, want);
        Ok(())
    }
}

impl Recover<'_> {
    /// Checks that the code object of `target` whose SHA-256 is `want`, in the bundle
    /// `wrappers` lead to, is in an archive the marker leads to under each wrapper's key.
    fn recovered(&mut self, target: &str, wrappers: &[usize], want: super::Digest) {
        let target = target.to_owned();
        let mut archives = Vec::new();
        for search in &self.meta.search_paths {
            if let Ok(found) = self.ctx.resolve(self.out_bin, search) {
                archives.extend(
                    found
                        .into_iter()
                        .filter(|(t, _, _, _)| *t == target)
                        .map(|(_, _, file, a)| (file, a)),
                );
            }
        }
        for &w in wrappers {
            let key = kpack_archive::binary_key(&self.meta.kernel_name, w as u32);
            let recovered = archives.iter().any(|(path, a)| {
                self.ctx.archive(*a, path).is_some_and(|x| {
                    x.entries.get(&(key.clone(), target.clone())) == Some(&Some(want))
                })
            });
            if recovered {
                self.checked += 1;
            } else {
                self.failures.push(format!(
                    "{}: code object {key} for {target} is not recovered byte for byte",
                    self.rel
                ));
            }
        }
    }
}

/// The original artifacts `--original` names, as (name, directory or tarball), sorted:
/// `original` itself when it is an artifact (the path `kpack split` took, a directory or a
/// tarball), else the artifacts directly under it (the directory holding them, what
/// `split --batch` took), else one level further down (one directory per shard). Empty
/// when there are none.
pub fn original_artifacts(original: &Path) -> Result<Vec<(String, PathBuf)>, ArtifactError> {
    if crate::tarball::is_tarball(original) {
        return Ok(vec![(tarball_stem(original)?, original.to_owned())]);
    }
    if original.join(manifest::MANIFEST).is_file() {
        let name = std::path::absolute(original)
            .map_err(ArtifactError::io(original))?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(vec![(name, original.to_owned())]);
    }
    let direct = crate::tarball::artifacts_in(original)?;
    if !direct.is_empty() {
        return Ok(direct);
    }
    let mut nested = Vec::new();
    for d in crate::sorted_subdirs(original)? {
        nested.extend(crate::tarball::artifacts_in(&d)?);
    }
    Ok(nested)
}

/// What one original entry's check found.
struct Outcome {
    file: bool,
    failures: Vec<String>,
    checked: usize,
    /// For a rewritten binary: (overlay path, how it differs from this original where a
    /// rewrite must keep it; empty when it does not).
    host: Option<(String, Vec<String>)>,
}

/// Check 8 for the original entry `rel` (an overlay path), a file read at `disk`; a fat
/// binary's bundles are decoded on `threads` workers.
fn original_outcome(
    ctx: &Ctx,
    rel: &str,
    e: &TreeEntry,
    disk: Option<&Path>,
    threads: usize,
) -> Outcome {
    let mut o = Outcome {
        file: *e == TreeEntry::File,
        failures: Vec::new(),
        checked: 0,
        host: None,
    };
    let outputs = ctx.overlay.get(rel).map(Vec::as_slice).unwrap_or_default();
    match (e, disk) {
        (TreeEntry::Symlink(t), _) if !outputs.iter().any(|(_, x)| x == e) => {
            o.failures
                .push(format!("{rel}: symlink to {} not preserved", t.display()));
        }
        (TreeEntry::File, Some(path)) => {
            let bytes = match map(path) {
                Ok(b) => b,
                Err(err) => {
                    o.failures.push(err);
                    return o;
                }
            };
            let fat = transform::check(&bytes).ok() == Some(HostState::Fat);
            let copies: Vec<usize> = outputs
                .iter()
                .filter(|(_, x)| *x == TreeEntry::File)
                .map(|(a, _)| *a)
                .collect();
            if copies.is_empty() {
                o.failures.push(format!("{rel}: missing from the output"));
                return o;
            }
            if !fat {
                let want = Some(digest(&bytes));
                let same = copies
                    .iter()
                    .any(|a| ctx.facts(*a, rel).is_some_and(|f| f.digest == want));
                if !same {
                    o.failures.push(format!("{rel}: differs from the original"));
                }
                return o;
            }
            let Some(out) = ctx.facts(copies[0], rel) else {
                o.failures
                    .push(format!("{rel}: the output is not a kpacked binary"));
                return o;
            };
            let Some((meta, _)) = &out.check.binary else {
                o.failures
                    .push(format!("{rel}: the output is not a kpacked binary"));
                return o;
            };
            let recover = || Recover {
                ctx,
                rel,
                out_bin: rel,
                meta,
                checked: 0,
                failures: Vec::new(),
            };
            let walked = source::walk_mapped_parallel(&bytes, threads, recover, |r| {
                o.checked += r.checked;
                o.failures.extend(r.failures);
            });
            if let Err(err) = walked {
                o.failures.push(format!("{rel}: original: {err}"));
            }
            let changes = if kpack_elf::is_elf(&bytes) {
                with_rewritten(ctx, copies[0], rel, |rw| host::changes(&bytes, rw))
                    .unwrap_or_else(|e| vec![e])
                    .iter()
                    .map(ToString::to_string)
                    .collect()
            } else {
                pe_changes(&bytes, meta, out)
            };
            o.host = Some((rel.to_owned(), changes));
        }
        _ => {}
    }
    o
}

pub(super) fn identity(
    ctx: &Ctx,
    original: &Path,
    spool_dir: &Path,
    threads: usize,
    report: &mut VerifyReport,
    failures: &mut Vec<String>,
) -> Result<(), ArtifactError> {
    let originals = original_artifacts(original)?;
    if originals.is_empty() {
        failures.push(format!(
            "{}: no original artifacts found",
            original.display()
        ));
        return Ok(());
    }
    // Entries read in place (everything of a directory, a tarball's directories and
    // symlinks), and per tarball the members to stream: (overlay path, times installed).
    let mut in_place: Vec<(Option<PathBuf>, String, TreeEntry)> = Vec::new();
    let mut streamed: Vec<(&Path, BTreeMap<String, usize>)> = Vec::new();
    for (_, path) in &originals {
        let tarball = crate::tarball::is_tarball(path);
        let listing = list_artifact(path, tarball)?;
        listing.prefixes?;
        let mut members = BTreeMap::new();
        for (prefix, entries) in listing.entries {
            for (rel, e) in entries? {
                let at = format!("{prefix}/{rel}");
                if tarball && e == TreeEntry::File {
                    *members.entry(at).or_default() += 1;
                } else {
                    let disk = (!tarball).then(|| path.join(&prefix).join(&rel));
                    in_place.push((disk, at, e));
                }
            }
        }
        if tarball {
            streamed.push((path, members));
        }
    }
    let mut outcomes = kpack_concurrency::threads::map(&in_place, threads, |_, (disk, rel, e)| {
        Ok::<_, ArtifactError>(original_outcome(ctx, rel, e, disk.as_deref(), threads))
    })?;
    // The tarballs one per worker, each spooling into a directory of its own: one spools a
    // member while another's members are decoded (a tarball is a stream: its members come
    // one after another).
    let streamed_outcomes =
        kpack_concurrency::threads::map(&streamed, threads, |t, (tarball, members)| {
            let spool_dir = spool_dir.join(format!("original-{t}"));
            std::fs::create_dir(&spool_dir).map_err(ArtifactError::io(&spool_dir))?;
            let mut outcomes = Vec::new();
            each_spooled_member(
                tarball,
                &spool_dir,
                &|m| members.contains_key(m),
                &mut |member, spool| {
                    let mut o =
                        original_outcome(ctx, member, &TreeEntry::File, Some(spool), threads);
                    let shown = tarball.join(member);
                    for f in &mut o.failures {
                        *f = as_member(f, spool, &shown);
                    }
                    for _ in 1..members[member] {
                        outcomes.push(Outcome {
                            file: o.file,
                            failures: o.failures.clone(),
                            checked: o.checked,
                            host: o.host.clone(),
                        });
                    }
                    outcomes.push(o);
                    Ok(())
                },
            )?;
            Ok::<_, ArtifactError>(outcomes)
        })?;
    outcomes.extend(streamed_outcomes.into_iter().flatten());
    // A rewritten binary must keep what one original has (after recombine, the primary
    // shard's); when none matches, the one it differs from least is named.
    let mut host: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for o in outcomes {
        failures.extend(o.failures);
        report.code_objects += o.checked;
        report.original_files += usize::from(o.file);
        if let Some((rel, changes)) = o.host {
            let least = host.entry(rel).or_insert(changes.clone());
            if changes.len() < least.len() {
                *least = changes;
            }
        }
    }
    for (rel, changes) in host {
        for change in changes {
            failures.push(format!(
                "{rel}: the rewritten binary differs from its original outside the device code: {change}"
            ));
        }
    }
    Ok(())
}

/// Calls `f` with the bytes of the kpacked binary `rel` of artifact `a`, mapped from its
/// directory, or from the copy kept when its tarball streamed past
/// ([`super::Facts::rewritten`]).
fn with_rewritten<R>(
    ctx: &Ctx,
    a: usize,
    rel: &str,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R, HostChange> {
    let kept = ctx.facts(a, rel).and_then(|x| x.rewritten.clone());
    map(&kept.unwrap_or_else(|| ctx.path(a, rel)))
        .map(|bytes| f(&bytes))
        .map_err(|problem| HostChange::Unreadable {
            which: "rewritten binary",
            problem,
        })
}

/// Check 8 of a rewritten PE image: kpack's own rewrite of the original, byte for byte (no
/// other tool rewrites PE images).
fn pe_changes(original: &[u8], meta: &MarkerMetadata, out: &super::Facts) -> Vec<String> {
    let same = meta
        .encode()
        .ok()
        .and_then(|m| transform::plan_host(original, &m).ok())
        .is_some_and(|rw| {
            let mut d = Digesting {
                sha: sha2::Sha256::default(),
                len: 0,
            };
            rw.write_to(original, &mut d).is_ok()
                && d.len == out.size
                && out.digest == Some(sha2::Digest::finalize(d.sha).into())
        });
    if same {
        Vec::new()
    } else {
        vec!["it is not kpack's rewrite of the original".to_owned()]
    }
}
