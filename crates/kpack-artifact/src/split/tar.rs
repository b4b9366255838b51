//! `split` of an artifact tarball, streamed: the same outputs as the directory split of the
//! unpacked tarball, byte for byte, without unpacking it.
//!
//! A fat binary's module name depends on every other fat binary of the artifact (see
//! [`crate::split`]), and whether a file is a fat binary is only known from its content, so
//! the tarball is read twice, each time as one decompressed stream:
//! 1. **Scan**: every member is checked (`kpack-tar`'s safety rules) and listed; the
//!    manifest is read; each ELF member that may need it is spooled to one temporary file,
//!    classified (fat or not) and removed. Members the manifest's prefixes exclude, or that
//!    a database handler claims, are skipped without spooling once the manifest is known.
//! 2. **Write**: database files and plain files are copied from the stream straight to their
//!    outputs; each fat binary is spooled to a temporary file of its own and handed to one
//!    of the `--threads` workers, which splits it like a file of a directory artifact and
//!    removes it, while the stream reads on.
//!
//! So the temporary space is one ELF member during the scan and, while writing, a member per
//! worker and the one being spooled (the stream waits for a free worker); memory holds the
//! member list and what the workers' splits reserve from the process-wide gates; the
//! outputs are those of the directory split, whatever the thread count: entries in the same
//! order and classes (directories a tarball leaves implicit are created), files with the
//! members' modes, symlinks with their link text. Errors name `<tarball>/<member>`.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use kpack_tar::MemberKind;

use super::plan::{self, Class, Done, Item, Progress, SplitOptions, SplitSummary};
use kpack_package::handlers;

use crate::{ArtifactError, TreeEntry, manifest, tarball};

pub(crate) fn split_tar_into(
    input: &Path,
    out: &Path,
    stage: &Path,
    component: &str,
    opts: &SplitOptions,
    progress: Progress<'_>,
) -> Result<SplitSummary, ArtifactError> {
    let spool_dir = tempfile::Builder::new()
        .prefix(".kpack-spool-")
        .tempdir_in(stage)
        .map_err(ArtifactError::io(stage))?;
    let spool = spool_dir.path().join("member");
    let scanned = scan(input, opts, &spool)?;
    let prefixes = present_prefixes(&scanned.prefixes, &scanned.members);
    let items = plan_items(&prefixes, scanned, opts)?;
    let (modules, names) = plan::name_outputs(out, component, &items, opts)?;
    plan::create_tree(stage, component, &prefixes, &items, opts.output)?;
    let writing = Writing {
        input,
        stage,
        component,
        opts,
        spool_dir: spool_dir.path(),
        items: &items,
        modules: &modules,
        names,
    };
    let results = writing.write(progress)?;
    drop(spool_dir);
    plan::finish(input, stage, component, opts, &prefixes, &items, results)
}

/// What the first read of the tarball learns.
struct Scanned {
    /// The manifest's prefixes, in its order.
    prefixes: Vec<String>,
    /// Every member, in tarball order.
    members: Vec<(String, TreeEntry)>,
    /// Each regular member's permission bits, which the output tarballs carry (see
    /// [`plan::recorded`]).
    modes: HashMap<String, u32>,
    /// The class of each ELF member that may be a fat binary, or why it could not be
    /// classified (reported only if the directory split would classify it too).
    checked: HashMap<String, Result<Class, ArtifactError>>,
}

/// 1. Scan: every member checked and listed, the manifest read, each ELF member that may be
///    a fat binary spooled to `spool`, classified and removed.
fn scan(input: &Path, opts: &SplitOptions, spool: &Path) -> Result<Scanned, ArtifactError> {
    let shown = |member: &str| input.join(member);
    let mut prefixes: Option<Vec<String>> = None;
    let mut members: Vec<(String, TreeEntry)> = Vec::new();
    let mut modes: HashMap<String, u32> = HashMap::new();
    let mut checked: HashMap<String, Result<Class, ArtifactError>> = HashMap::new();
    kpack_tar::open(input, |m, content| -> Result<(), ArtifactError> {
        let entry = match &m.kind {
            MemberKind::Dir => TreeEntry::Dir,
            MemberKind::Symlink(t) => TreeEntry::Symlink(PathBuf::from(t)),
            MemberKind::File { size, mode } => {
                modes.insert(m.path.clone(), *mode);
                if m.path == manifest::MANIFEST {
                    prefixes = Some(manifest::read_member(content, *size, &shown(&m.path))?);
                } else if may_be_fat(prefixes.as_deref(), &opts.handlers, &m.path) {
                    let mut head = Vec::with_capacity(4);
                    content
                        .take(4)
                        .read_to_end(&mut head)
                        .map_err(ArtifactError::io(shown(&m.path)))?;
                    if head == b"\x7fELF" {
                        kpack_tar::write_file(&mut head.chain(content), spool, *mode)?;
                        let class = plan::classify(spool, &m.path, &TreeEntry::File, &[])
                            .map_err(|e| at_member(e, spool, shown(&m.path)));
                        std::fs::remove_file(spool).map_err(ArtifactError::io(spool))?;
                        checked.insert(m.path.clone(), class);
                    }
                }
                TreeEntry::File
            }
        };
        members.push((m.path.clone(), entry));
        Ok(())
    })?;
    let prefixes = prefixes.ok_or_else(|| {
        ArtifactError::invalid(
            input,
            format!(
                "no {} at the top of the tarball (members must be relative to the artifact \
                 directory)",
                manifest::MANIFEST
            ),
        )
    })?;
    Ok(Scanned {
        prefixes,
        members,
        modes,
        checked,
    })
}

/// The manifest's prefixes that the tarball holds as a directory (or, implicitly, as the
/// parent of a member), as the directory split finds them.
fn present_prefixes(prefixes: &[String], members: &[(String, TreeEntry)]) -> Vec<String> {
    let mut tree: BTreeMap<&str, &TreeEntry> = BTreeMap::new();
    for (path, entry) in members {
        tree.insert(path, entry);
    }
    prefixes
        .iter()
        .filter(|p| match tree.get(p.as_str()) {
            Some(e) => **e == TreeEntry::Dir,
            None => members.iter().any(|(m, _)| is_below(m, p)),
        })
        .cloned()
        .collect()
}

/// The directory split's view of the same tree: per prefix (in manifest order), every
/// entry below it sorted component-wise, implicit directories included, with its class.
fn plan_items(
    prefixes: &[String],
    mut scanned: Scanned,
    opts: &SplitOptions,
) -> Result<Vec<Item>, ArtifactError> {
    let mut items: Vec<Item> = Vec::new();
    for prefix in prefixes {
        for (rel, entry) in tarball::tree_below(&scanned.members, prefix) {
            let path = format!("{prefix}/{rel}");
            let class = match entry {
                TreeEntry::Dir => Class::Dir,
                TreeEntry::Symlink(t) => Class::Symlink(t),
                TreeEntry::File => match handlers::classify(&opts.handlers, &rel) {
                    Some(arch) => Class::Db(arch),
                    None => match scanned.checked.get(&path) {
                        Some(Ok(class)) => class.clone(),
                        Some(Err(_)) => {
                            return Err(scanned
                                .checked
                                .remove(&path)
                                .and_then(Result::err)
                                .expect("an error was found"));
                        }
                        None => Class::Plain,
                    },
                },
            };
            items.push(Item {
                prefix: prefix.clone(),
                rel,
                class,
                mode: scanned.modes.get(&path).copied(),
            });
        }
    }
    Ok(items)
}

/// 2. Write: what the second read of the tarball needs.
struct Writing<'a> {
    input: &'a Path,
    stage: &'a Path,
    component: &'a str,
    opts: &'a SplitOptions,
    /// Where fat binaries are spooled, one file per member.
    spool_dir: &'a Path,
    items: &'a [Item],
    /// The module name of each fat binary's item.
    modules: &'a BTreeMap<usize, String>,
    /// The name rules of the split (`plan::name_outputs`).
    names: kpack_fs::NameRules,
}

/// A fat binary spooled by the stream, for a worker to split.
struct Spooled {
    /// The member's place in the tarball (1 for the first), which orders errors.
    seq: usize,
    path: String,
    file: PathBuf,
    indices: Vec<usize>,
}

impl Writing<'_> {
    /// Database files and plain files copied from the stream straight to their outputs;
    /// each fat binary spooled and split on a worker while the stream reads on (at most one
    /// spooled member per worker and the one being spooled: the stream waits for a free
    /// worker). Returns what each item produced. On failure, the error is the one of the
    /// first failing member in tarball order, as a split of one member at a time would
    /// report, whatever the thread count.
    fn write(&self, progress: Progress<'_>) -> Result<Vec<Done>, ArtifactError> {
        let items = self.items;
        let mut by_member: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            if matches!(item.class, Class::Plain | Class::Db(_) | Class::Fat) {
                by_member
                    .entry(format!("{}/{}", item.prefix, item.rel))
                    .or_default()
                    .push(i);
            }
        }
        let total = items.len() as u64;
        let done = AtomicU64::new(total - by_member.values().map(|v| v.len() as u64).sum::<u64>());
        progress(done.load(Ordering::Relaxed), total);
        let results: Mutex<Vec<Option<Done>>> = Mutex::new(items.iter().map(|_| None).collect());
        let finished = |i: usize, result: Done| {
            results.lock().unwrap_or_else(PoisonError::into_inner)[i] = Some(result);
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
        };
        let failures: Mutex<Vec<(usize, ArtifactError)>> = Mutex::new(Vec::new());
        let failed = AtomicBool::new(false);
        let workers = kpack_concurrency::threads::count(self.opts.threads);
        let streamed = std::thread::scope(|s| {
            let (send, receive) = std::sync::mpsc::sync_channel::<Spooled>(0);
            // Shared by the workers; dropped with the last of them, so that the stream's
            // send fails rather than waits should every worker have panicked.
            let receive = Arc::new(Mutex::new(receive));
            for _ in 0..workers {
                let receive = Arc::clone(&receive);
                let (finished, failures, failed) = (&finished, &failures, &failed);
                s.spawn(move || {
                    loop {
                        let next = receive
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .recv();
                        let Ok(member) = next else {
                            return;
                        };
                        if let Err(e) = self.split_spooled(&member, finished) {
                            failed.store(true, Ordering::Relaxed);
                            failures
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push((member.seq, e));
                        }
                    }
                });
            }
            drop(receive);
            let mut seq = 0;
            kpack_tar::open(self.input, |m, content| -> Result<(), ArtifactError> {
                seq += 1;
                let Some(indices) = by_member.remove(&m.path) else {
                    return Ok(());
                };
                let MemberKind::File { mode, .. } = m.kind else {
                    return Err(ArtifactError::invalid(
                        self.input.join(&m.path),
                        "was a regular file on the first read of the tarball: it changed while \
                         split",
                    ));
                };
                if !indices
                    .iter()
                    .any(|&i| matches!(items[i].class, Class::Fat))
                {
                    return self.write_streamed(mode, content, &indices, &finished);
                }
                if failed.load(Ordering::Relaxed) {
                    // A member before this one failed: that is the error reported.
                    return Ok(());
                }
                let file = self.spool_dir.join(format!("member-{seq}"));
                kpack_tar::write_file(content, &file, mode)?;
                // Fails only once every worker has panicked; the scope resumes the panic.
                let _ = send.send(Spooled {
                    seq,
                    path: m.path.clone(),
                    file,
                    indices,
                });
                Ok(())
            })
            .map_err(|e| (seq, e))
        });
        // A worker's failure at the member the stream stopped on came first: the stream
        // stops at the end of a member's content.
        let first = failures
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .into_iter()
            .chain(streamed.err())
            .min_by_key(|(seq, _)| *seq);
        if let Some((_, e)) = first {
            return Err(e);
        }
        if let Some(missing) = by_member.keys().min() {
            return Err(ArtifactError::invalid(
                self.input.join(missing),
                "was in the tarball on the first read, not on the second: it changed while split",
            ));
        }
        Ok(results
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect())
    }

    /// The items `indices` (one member below one or more prefixes, none a fat binary)
    /// written from the member's `content`: the first copy from the stream, the others (a
    /// member below two nested prefixes) from it.
    fn write_streamed(
        &self,
        mode: u32,
        content: &mut dyn Read,
        indices: &[usize],
        finished: &dyn Fn(usize, Done),
    ) -> Result<(), ArtifactError> {
        let mut first: Option<PathBuf> = None;
        for &i in indices {
            let item = &self.items[i];
            let to = plan::copy_destination(self.stage, self.component, item)
                .expect("a copied class: the member holds no fat binary");
            let bytes = match &first {
                Some(from) => crate::copy_file(from, &to)?,
                None => {
                    let bytes = kpack_tar::write_file(content, &to, mode)?;
                    first = Some(to);
                    bytes
                }
            };
            finished(i, plan::copied(&item.class, bytes));
        }
        Ok(())
    }

    /// The items of a spooled member: fat binaries split, copies made from the spool file,
    /// which is then removed.
    fn split_spooled(
        &self,
        member: &Spooled,
        finished: &dyn Fn(usize, Done),
    ) -> Result<(), ArtifactError> {
        let (stage, component, spooled) = (self.stage, self.component, &member.file);
        for &i in &member.indices {
            let item = &self.items[i];
            let result = match plan::copy_destination(stage, component, item) {
                Some(to) => plan::copied(&item.class, crate::copy_file(spooled, &to)?),
                None => plan::split_fat(
                    spooled,
                    stage,
                    component,
                    item,
                    &self.modules[&i],
                    self.opts.compression,
                    self.names,
                )
                .map_err(|e| at_member(e, spooled, self.input.join(&member.path)))?,
            };
            finished(i, result);
        }
        std::fs::remove_file(spooled).map_err(ArtifactError::io(spooled))
    }
}

/// Whether a regular member needs its content classified: before the manifest is known,
/// any; after, those below some prefix that a database handler does not claim there.
fn may_be_fat(prefixes: Option<&[String]>, handlers: &[handlers::Handler], path: &str) -> bool {
    let Some(prefixes) = prefixes else {
        return true;
    };
    prefixes.iter().any(|p| {
        path.strip_prefix(p.as_str())
            .and_then(|r| r.strip_prefix('/'))
            .is_some_and(|rel| handlers::classify(handlers, rel).is_none())
    })
}

fn is_below(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|r| r.starts_with('/'))
}

/// `e` with the spool file's path replaced by the member's (`<tarball>/<member>`).
fn at_member(e: ArtifactError, spool: &Path, shown: PathBuf) -> ArtifactError {
    let (spool, shown) = (spool.to_string_lossy(), shown.to_string_lossy());
    e.shown_as(&|text| text.replace(&*spool, &shown))
}
