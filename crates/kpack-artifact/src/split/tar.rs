//! `split` of an artifact tarball, streamed in one pass: the same outputs as the directory
//! split of the unpacked tarball, byte for byte, without unpacking it or reading it twice.
//!
//! Whether a file is a fat binary is only known from its content, and a fat binary's module
//! name and the name rules of the split depend on every other fat binary of the artifact
//! (see [`crate::split`]). So the tarball is read once, as one decompressed stream, and each
//! member is written as it is read, under the names it has unless a later member changes
//! them:
//! * database files and plain files are copied from the stream straight to their outputs
//!   (an ELF member is spooled to a temporary file and classified first; a plain one is then
//!   moved to its output);
//! * each fat binary is spooled to a temporary file of its own and handed at once to one of
//!   the `--threads` workers, which splits it like a file of a directory artifact (with the
//!   module its own file name gives and the name rules of the fat binaries met so far) and
//!   removes it, while the stream reads on; the stream waits for a free worker;
//! * the members before the manifest are spooled, and written once it is read.
//!
//! Once the stream ends, the tree is planned as the directory split plans it: entries in the
//! same order and classes (directories a tarball leaves implicit are created), module names
//! and name rules from every fat binary. When they differ from those a fat binary was split
//! with (two fat binaries share a module name, or a `.dll` or `.exe` comes after a fat binary
//! split with Linux's rules), what the pass wrote is removed and the tarball read a second
//! time with the names known: rare, and the same bytes either way.
//!
//! The temporary space is a spooled member per worker and the one being spooled (and the
//! members before the manifest); memory holds the member list and what the workers' splits
//! reserve from the process-wide gates, never a member whole. The outputs are those of the
//! directory split whatever the thread count: files with the members' modes, symlinks with
//! their link text. Errors name `<tarball>/<member>`: the tarball's own first, then the
//! plan's (as the directory split reports them, before anything it writes), then the first
//! failing member's in tarball order.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use kpack_fs::NameRules;
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
    let pass = Pass {
        input,
        stage,
        component,
        opts,
        spool_dir: spool_dir.path(),
        known: None,
    };
    let mut streamed = pass.run(progress)?;
    let Some(manifest_prefixes) = &streamed.prefixes else {
        return Err(ArtifactError::invalid(
            input,
            format!(
                "no {} at the top of the tarball (members must be relative to the artifact \
                 directory)",
                manifest::MANIFEST
            ),
        ));
    };
    let prefixes = present_prefixes(manifest_prefixes, &streamed.members);
    let items = plan_items(&prefixes, &mut streamed, opts)?;
    let (modules, names) = plan::name_outputs(out, component, &items, opts)?;
    streamed.first_failure()?;
    let mut results = streamed.results(&items, &modules, names)?;
    let again: Vec<usize> = (0..items.len()).filter(|&i| results[i].is_none()).collect();
    if !again.is_empty() {
        let known = Known::new(&items, &again, &modules, names);
        let mut reread = Pass {
            known: Some(&known),
            ..pass
        }
        .run(progress)?;
        reread.first_failure()?;
        let mut written = reread.results(&items, &modules, names)?;
        for i in again {
            results[i] = written[i].take();
        }
    }
    let results = results
        .into_iter()
        .map(|done| {
            done.ok_or_else(|| {
                ArtifactError::invalid(input, "changed while split: read again, it differed")
            })
        })
        .collect::<Result<Vec<Done>, ArtifactError>>()?;
    plan::create_tree(stage, component, &prefixes, &items, opts.output)?;
    progress(items.len() as u64, items.len() as u64);
    drop(spool_dir);
    plan::finish(input, stage, component, opts, &prefixes, &items, results)
}

/// What one read of the tarball learnt and wrote.
#[derive(Default)]
struct Streamed {
    /// The manifest's prefixes, in its order.
    prefixes: Option<Vec<String>>,
    /// Every member, in tarball order.
    members: Vec<(String, TreeEntry)>,
    /// Each regular member's permission bits, which the output tarballs carry (see
    /// [`plan::recorded`]).
    modes: HashMap<String, u32>,
    /// The class of each ELF member that may be a fat binary, or why it could not be
    /// classified (reported only if the directory split would classify it too).
    checked: HashMap<String, Result<Class, ArtifactError>>,
    /// What each output written produced, by (prefix, path below it).
    written: HashMap<(String, String), Written>,
    /// Each failing member's place in the tarball (1 for the first) and error.
    failures: Vec<(usize, ArtifactError)>,
}

/// What one entry's output produced, the module and name rules a fat binary was split
/// with, and the files written.
struct Written {
    done: Done,
    named: Option<(String, NameRules)>,
    outputs: Vec<PathBuf>,
}

impl Streamed {
    /// The first failing member's error, in tarball order.
    fn first_failure(&mut self) -> Result<(), ArtifactError> {
        let first = (0..self.failures.len()).min_by_key(|&i| self.failures[i].0);
        match first {
            Some(i) => Err(self.failures.swap_remove(i).1),
            None => Ok(()),
        }
    }

    /// What each of `items` produced, for those whose outputs this read wrote under the
    /// names planned (`None` for the others; directories and symlinks are planned only);
    /// outputs written under other names (a fat binary's module or rules guessed wrong)
    /// are removed.
    fn results(
        mut self,
        items: &[Item],
        modules: &BTreeMap<usize, String>,
        names: NameRules,
    ) -> Result<Vec<Option<Done>>, ArtifactError> {
        let mut results = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if matches!(item.class, Class::Dir | Class::Symlink(_)) {
                results.push(Some(Done::default()));
                continue;
            }
            let key = (item.prefix.clone(), item.rel.clone());
            let planned = modules.get(&i).map(|m| (m.clone(), names));
            match self.written.remove(&key) {
                Some(written) if written.named == planned => results.push(Some(written.done)),
                Some(written) => {
                    self.written.insert(key, written);
                    results.push(None);
                }
                None => results.push(None),
            }
        }
        for written in self.written.into_values() {
            for file in written.outputs {
                std::fs::remove_file(&file).map_err(ArtifactError::io(&file))?;
            }
        }
        Ok(results)
    }
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
    streamed: &mut Streamed,
    opts: &SplitOptions,
) -> Result<Vec<Item>, ArtifactError> {
    let mut items: Vec<Item> = Vec::new();
    for prefix in prefixes {
        for (rel, entry) in tarball::tree_below(&streamed.members, prefix) {
            let path = format!("{prefix}/{rel}");
            let class = match entry {
                TreeEntry::Dir => Class::Dir,
                TreeEntry::Symlink(t) => Class::Symlink(t),
                TreeEntry::File => match handlers::classify(&opts.handlers, &rel) {
                    Some(arch) => Class::Db(arch),
                    None => match streamed.checked.remove(&path) {
                        Some(checked) => {
                            let class = checked?;
                            // A member below two prefixes is classified once.
                            streamed.checked.insert(path.clone(), Ok(class.clone()));
                            class
                        }
                        None => Class::Plain,
                    },
                },
            };
            items.push(Item {
                prefix: prefix.clone(),
                rel,
                class,
                mode: streamed.modes.get(&path).copied(),
            });
        }
    }
    Ok(items)
}

/// The outputs planned of the members a first read wrote under other names: for a second
/// read of the tarball.
struct Known<'a> {
    /// The items of each member path.
    items: HashMap<String, Vec<usize>>,
    all: &'a [Item],
    modules: &'a BTreeMap<usize, String>,
    names: NameRules,
}

impl<'a> Known<'a> {
    /// The outputs of `items[i]` for each `i` of `again`.
    fn new(
        items: &'a [Item],
        again: &[usize],
        modules: &'a BTreeMap<usize, String>,
        names: NameRules,
    ) -> Self {
        let mut by_member: HashMap<String, Vec<usize>> = HashMap::new();
        for &i in again {
            let item = &items[i];
            by_member
                .entry(format!("{}/{}", item.prefix, item.rel))
                .or_default()
                .push(i);
        }
        Known {
            items: by_member,
            all: items,
            modules,
            names,
        }
    }
}

/// One read of the tarball, writing every member as it is read.
#[derive(Clone, Copy)]
struct Pass<'a> {
    input: &'a Path,
    stage: &'a Path,
    component: &'a str,
    opts: &'a SplitOptions,
    /// Where members are spooled, one file each.
    spool_dir: &'a Path,
    /// The planned outputs, on a second read; on the first, the names are guessed.
    known: Option<&'a Known<'a>>,
}

/// An output of a member: its item (prefix, path below it, class), and the module of a fat
/// binary.
struct Target {
    item: Item,
    module: Option<String>,
}

/// A fat binary spooled by the stream, for a worker to split.
struct Spooled {
    /// The member's place in the tarball (1 for the first), which orders errors.
    seq: usize,
    path: String,
    file: PathBuf,
    targets: Vec<Target>,
    names: NameRules,
}

/// A member's content: the stream (after the first bytes already read of it), or a file it
/// was spooled to.
enum Content<'r> {
    Stream {
        head: Vec<u8>,
        rest: &'r mut dyn Read,
    },
    Spooled(PathBuf),
}

/// What the stream keeps while it reads, for [`Pass::deliver`].
struct Reading<'p> {
    /// Hands a spooled fat binary to the workers.
    send: std::sync::mpsc::SyncSender<Spooled>,
    /// A member failed: no more fat binaries are handed over.
    failed: &'p AtomicBool,
    /// Fat binaries named `.dll` or `.exe` met so far: the split is meant for Windows.
    windows: bool,
    /// The module names of the fat binaries met so far (see [`Reading::guess_module`]).
    modules: HashSet<String>,
    /// The outputs handed over so far (the progress's total until the stream ends).
    total: &'p AtomicU64,
    /// Progress and the outputs' results.
    finished: &'p (dyn Fn(String, String, Written) + Sync),
}

impl Reading<'_> {
    /// The module of the fat binary at `rel` below its prefix, as [`plan::module_names`]
    /// names it when no later fat binary shares its module name: its file name's, or its
    /// path's when an earlier one shares it (which then is split again, under its path's).
    fn guess_module(&mut self, rel: &str) -> String {
        let plain = plan::module_name(rel.rsplit('/').next().unwrap_or(rel));
        if self.modules.insert(plain.clone()) {
            plain
        } else {
            rel.replace('/', "_")
        }
    }
}

impl Pass<'_> {
    /// Reads the tarball once, writing each member as it is read (see the module doc).
    fn run(&self, progress: Progress<'_>) -> Result<Streamed, ArtifactError> {
        let total = AtomicU64::new(0);
        let done = AtomicU64::new(0);
        let written: Mutex<HashMap<(String, String), Written>> = Mutex::new(HashMap::new());
        let finished = |prefix: String, rel: String, result: Written| {
            written
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert((prefix, rel), result);
            progress(
                done.fetch_add(1, Ordering::Relaxed) + 1,
                total.load(Ordering::Relaxed),
            );
        };
        let failures: Mutex<Vec<(usize, ArtifactError)>> = Mutex::new(Vec::new());
        let failed = AtomicBool::new(false);
        let workers = kpack_concurrency::threads::count(self.opts.threads);
        let mut streamed = Streamed::default();
        let read = std::thread::scope(|s| {
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
                                .push(e);
                        }
                    }
                });
            }
            drop(receive);
            let mut reading = Reading {
                send,
                failed: &failed,
                windows: self.opts.names.windows(),
                modules: HashSet::new(),
                total: &total,
                finished: &finished,
            };
            self.read(&mut streamed, &mut reading)
        });
        read?;
        streamed.written = written.into_inner().unwrap_or_else(PoisonError::into_inner);
        streamed.failures = failures
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(streamed)
    }

    /// The stream: every member listed and delivered to its outputs as it is read; those
    /// before the manifest (on a first read) spooled until it is.
    fn read(
        &self,
        streamed: &mut Streamed,
        reading: &mut Reading<'_>,
    ) -> Result<(), ArtifactError> {
        let mut seq = 0;
        let mut before_manifest: Vec<(usize, String, u32, PathBuf)> = Vec::new();
        kpack_tar::open(self.input, |m, content| -> Result<(), ArtifactError> {
            seq += 1;
            let entry = match &m.kind {
                MemberKind::Dir => TreeEntry::Dir,
                MemberKind::Symlink(t) => TreeEntry::Symlink(PathBuf::from(t)),
                MemberKind::File { size, mode } => {
                    streamed.modes.insert(m.path.clone(), *mode);
                    if m.path == manifest::MANIFEST {
                        let shown = self.input.join(&m.path);
                        streamed.prefixes = Some(manifest::read_member(content, *size, &shown)?);
                        for (seq, path, mode, file) in std::mem::take(&mut before_manifest) {
                            let content = Content::Spooled(file);
                            self.deliver(seq, &path, mode, content, streamed, reading)?;
                        }
                    } else if self.known.is_none() && streamed.prefixes.is_none() {
                        let file = self.spool_file(seq);
                        kpack_tar::write_file(content, &file, *mode)?;
                        before_manifest.push((seq, m.path.clone(), *mode, file));
                    } else {
                        let content = Content::Stream {
                            head: Vec::new(),
                            rest: content,
                        };
                        self.deliver(seq, &m.path, *mode, content, streamed, reading)?;
                    }
                    TreeEntry::File
                }
            };
            streamed.members.push((m.path.clone(), entry));
            Ok(())
        })?;
        Ok(())
    }

    fn spool_file(&self, seq: usize) -> PathBuf {
        self.spool_dir.join(format!("member-{seq}"))
    }

    /// The file holding the `seq`th member's `content`: spooled from the stream if it was
    /// not yet.
    fn spooled(
        &self,
        seq: usize,
        mode: u32,
        content: Content<'_>,
    ) -> Result<PathBuf, ArtifactError> {
        match content {
            Content::Spooled(file) => Ok(file),
            Content::Stream { head, rest } => {
                let file = self.spool_file(seq);
                kpack_tar::write_file(&mut head.as_slice().chain(rest), &file, mode)?;
                Ok(file)
            }
        }
    }

    /// Writes the regular member `path` (`seq`th in the tarball) to its outputs: copies
    /// from `content`, or, when it holds a fat binary, spooled and handed to a worker.
    fn deliver(
        &self,
        seq: usize,
        path: &str,
        mode: u32,
        mut content: Content<'_>,
        streamed: &mut Streamed,
        reading: &mut Reading<'_>,
    ) -> Result<(), ArtifactError> {
        let shown = self.input.join(path);
        // Each output's item, its class `None` while its content decides it.
        let mut below: Vec<(Item, Option<String>)> = Vec::new();
        let names = match self.known {
            Some(known) => {
                for &i in known.items.get(path).into_iter().flatten() {
                    below.push((known.all[i].clone(), known.modules.get(&i).cloned()));
                }
                known.names
            }
            None => {
                for prefix in streamed.prefixes.iter().flatten() {
                    let Some(rel) = path
                        .strip_prefix(prefix.as_str())
                        .and_then(|r| r.strip_prefix('/'))
                    else {
                        continue;
                    };
                    let class = match handlers::classify(&self.opts.handlers, rel) {
                        Some(arch) => Class::Db(arch),
                        None => Class::Fat,
                    };
                    below.push((
                        Item {
                            prefix: prefix.clone(),
                            rel: rel.to_owned(),
                            class,
                            mode: None,
                        },
                        None,
                    ));
                }
                NameRules::for_output(reading.windows)
            }
        };
        if below.is_empty() {
            return discard(content);
        }
        // On a first read, `Fat` stands for a class the content decides.
        if self.known.is_none() && below.iter().any(|(i, _)| matches!(i.class, Class::Fat)) {
            let mut head = Vec::with_capacity(4);
            match &mut content {
                Content::Stream { head: read, rest } => {
                    rest.take(4)
                        .read_to_end(read)
                        .map_err(ArtifactError::io(&shown))?;
                    head.clone_from(read);
                }
                Content::Spooled(file) => {
                    std::fs::File::open(&*file)
                        .and_then(|f| f.take(4).read_to_end(&mut head))
                        .map_err(ArtifactError::io(&shown))?;
                }
            }
            let class = if head == b"\x7fELF" {
                let file = self.spooled(seq, mode, content)?;
                let checked = plan::classify(&file, path, &TreeEntry::File, &[])
                    .map_err(|e| at_member(e, &file, shown.clone()));
                let class = checked.as_ref().ok().cloned();
                streamed.checked.insert(path.to_owned(), checked);
                content = Content::Spooled(file);
                match class {
                    Some(class) => class,
                    // The plan reports it, as the directory split would.
                    None => return discard(content),
                }
            } else {
                Class::Plain
            };
            for (item, module) in &mut below {
                if matches!(item.class, Class::Fat) {
                    item.class = class.clone();
                    if matches!(class, Class::Fat) {
                        *module = Some(reading.guess_module(&item.rel));
                    }
                }
            }
        }
        let fat = below.iter().any(|(i, _)| matches!(i.class, Class::Fat));
        let names = match (self.known, fat) {
            (None, true) if below.iter().any(|(i, _)| plan::windows_binary(&i.rel)) => {
                reading.windows = true;
                NameRules::for_output(true)
            }
            _ => names,
        };
        reading
            .total
            .fetch_add(below.len() as u64, Ordering::Relaxed);
        let targets: Vec<Target> = below
            .into_iter()
            .map(|(item, module)| Target { item, module })
            .collect();
        if !fat {
            return self.copy(mode, content, &targets, reading.finished);
        }
        if reading.failed.load(Ordering::Relaxed) {
            // A member before this one failed: that is the error reported.
            return discard(content);
        }
        let file = self.spooled(seq, mode, content)?;
        // Fails only once every worker has panicked; the scope resumes the panic.
        let _ = reading.send.send(Spooled {
            seq,
            path: path.to_owned(),
            file,
            targets,
            names,
        });
        Ok(())
    }

    /// The `targets` of a member (none a fat binary) written from its `content`: the first
    /// from the stream or moved from the spool file, the others (a member below two nested
    /// prefixes) copied from it.
    fn copy(
        &self,
        mode: u32,
        content: Content<'_>,
        targets: &[Target],
        finished: &(dyn Fn(String, String, Written) + Sync),
    ) -> Result<(), ArtifactError> {
        let mut first: Option<PathBuf> = None;
        let mut content = Some(content);
        for Target { item, .. } in targets {
            let to = plan::copy_destination(self.stage, self.component, item)
                .expect("a copied class: the member holds no fat binary");
            let bytes = match content.take() {
                Some(Content::Stream { head, rest }) => {
                    kpack_tar::write_file(&mut head.as_slice().chain(rest), &to, mode)?
                }
                Some(Content::Spooled(file)) => {
                    crate::move_file(&file, &to)?;
                    std::fs::metadata(&to)
                        .map_err(ArtifactError::io(&to))?
                        .len()
                }
                None => crate::copy_file(first.as_deref().expect("written first"), &to)?,
            };
            let written = Written {
                done: plan::copied(&item.class, bytes),
                named: None,
                outputs: vec![to.clone()],
            };
            first = Some(to);
            finished(item.prefix.clone(), item.rel.clone(), written);
        }
        Ok(())
    }

    /// The outputs of a spooled member: fat binaries split, copies made from the spool
    /// file, which is then removed. An error comes with the member's place in the tarball.
    fn split_spooled(
        &self,
        member: &Spooled,
        finished: &(dyn Fn(String, String, Written) + Sync),
    ) -> Result<(), (usize, ArtifactError)> {
        let (stage, component, spooled) = (self.stage, self.component, &member.file);
        let at = |e| (member.seq, e);
        for Target { item, module } in &member.targets {
            let written = match (plan::copy_destination(stage, component, item), module) {
                (Some(to), _) => Written {
                    done: plan::copied(&item.class, crate::copy_file(spooled, &to).map_err(at)?),
                    named: None,
                    outputs: vec![to],
                },
                (None, module) => {
                    let module = module.as_deref().unwrap_or_default();
                    let done = plan::split_fat(
                        spooled,
                        stage,
                        component,
                        item,
                        module,
                        self.opts.compression,
                        member.names,
                    )
                    .map_err(|e| at(at_member(e, spooled, self.input.join(&member.path))))?;
                    let host = plan::fat_output(stage, component, item);
                    let outputs = std::iter::once(host).chain(done.archives.clone()).collect();
                    let named = Some((module.to_owned(), member.names));
                    Written {
                        done,
                        named,
                        outputs,
                    }
                }
            };
            finished(item.prefix.clone(), item.rel.clone(), written);
        }
        std::fs::remove_file(spooled).map_err(|e| at(ArtifactError::io(spooled)(e)))
    }
}

/// Drops a member's content: a spooled one removed (the stream skips what is not read).
fn discard(content: Content<'_>) -> Result<(), ArtifactError> {
    match content {
        Content::Stream { .. } => Ok(()),
        Content::Spooled(file) => std::fs::remove_file(&file).map_err(ArtifactError::io(&file)),
    }
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
