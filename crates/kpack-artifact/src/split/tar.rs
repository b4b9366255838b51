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
//!    outputs; each fat binary is spooled to one temporary file, split like a file of a
//!    directory artifact, and removed.
//!
//! So the temporary space is one member (the largest ELF member at most), memory holds the
//! member list, and the outputs are those of the directory split: entries in the same
//! order and classes (directories a tarball leaves implicit are created), files with the
//! members' modes, symlinks with their link text. Errors name `<tarball>/<member>`.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

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
    let prefixes = present_prefixes(scanned.prefixes, &scanned.members);
    let items = plan_items(&prefixes, &scanned.members, scanned.checked, opts)?;
    let (modules, names) = plan::name_outputs(out, component, &items, opts)?;
    plan::create_tree(stage, component, &prefixes, &items)?;
    let writing = Writing {
        input,
        stage,
        component,
        opts,
        spool: &spool,
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
    let mut checked: HashMap<String, Result<Class, ArtifactError>> = HashMap::new();
    kpack_tar::open(input, |m, content| -> Result<(), ArtifactError> {
        let entry = match &m.kind {
            MemberKind::Dir => TreeEntry::Dir,
            MemberKind::Symlink(t) => TreeEntry::Symlink(PathBuf::from(t)),
            MemberKind::File { size, mode } => {
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
        checked,
    })
}

/// The manifest's prefixes that the tarball holds as a directory (or, implicitly, as the
/// parent of a member), as the directory split finds them.
fn present_prefixes(prefixes: Vec<String>, members: &[(String, TreeEntry)]) -> Vec<String> {
    let mut tree: BTreeMap<&str, &TreeEntry> = BTreeMap::new();
    for (path, entry) in members {
        tree.insert(path, entry);
    }
    prefixes
        .into_iter()
        .filter(|p| match tree.get(p.as_str()) {
            Some(e) => **e == TreeEntry::Dir,
            None => members.iter().any(|(m, _)| is_below(m, p)),
        })
        .collect()
}

/// The directory split's view of the same tree: per prefix (in manifest order), every
/// entry below it sorted component-wise, implicit directories included, with its class.
fn plan_items(
    prefixes: &[String],
    members: &[(String, TreeEntry)],
    mut checked: HashMap<String, Result<Class, ArtifactError>>,
    opts: &SplitOptions,
) -> Result<Vec<Item>, ArtifactError> {
    let mut items: Vec<Item> = Vec::new();
    for prefix in prefixes {
        for (rel, entry) in tarball::tree_below(members, prefix) {
            let class = match entry {
                TreeEntry::Dir => Class::Dir,
                TreeEntry::Symlink(t) => Class::Symlink(t),
                TreeEntry::File => match handlers::classify(&opts.handlers, &rel) {
                    Some(arch) => Class::Db(arch),
                    None => match checked.get(&format!("{prefix}/{rel}")) {
                        Some(Ok(class)) => class.clone(),
                        Some(Err(_)) => {
                            return Err(checked
                                .remove(&format!("{prefix}/{rel}"))
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
    spool: &'a Path,
    items: &'a [Item],
    /// The module name of each fat binary's item.
    modules: &'a BTreeMap<usize, String>,
    /// The name rules of the split (`plan::name_outputs`).
    names: kpack_fs::NameRules,
}

impl Writing<'_> {
    /// Database files and plain files copied from the stream straight to their outputs,
    /// each fat binary spooled, split and removed; returns what each item produced.
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
        let mut done = total - by_member.values().map(|v| v.len() as u64).sum::<u64>();
        progress(done, total);
        let mut results: Vec<Option<Done>> = items.iter().map(|_| None).collect();
        kpack_tar::open(self.input, |m, content| -> Result<(), ArtifactError> {
            let Some(indices) = by_member.remove(&m.path) else {
                return Ok(());
            };
            let MemberKind::File { mode, .. } = m.kind else {
                return Err(ArtifactError::invalid(
                    self.input.join(&m.path),
                    "was a regular file on the first read of the tarball: it changed while split",
                ));
            };
            self.write_member(&m.path, mode, content, &indices, &mut |i, result| {
                results[i] = Some(result);
                done += 1;
                progress(done, total);
            })
        })?;
        if let Some(missing) = by_member.keys().min() {
            return Err(ArtifactError::invalid(
                self.input.join(missing),
                "was in the tarball on the first read, not on the second: it changed while split",
            ));
        }
        Ok(results.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// The items `indices` (one member below one or more prefixes) written from the member
    /// `path`'s `content`; `finished(i, done)` as each one is.
    fn write_member(
        &self,
        path: &str,
        mode: u32,
        content: &mut dyn Read,
        indices: &[usize],
        finished: &mut dyn FnMut(usize, Done),
    ) -> Result<(), ArtifactError> {
        let (stage, component, spool) = (self.stage, self.component, self.spool);
        let fat = indices
            .iter()
            .any(|&i| matches!(self.items[i].class, Class::Fat));
        // The first copy comes from the stream (or the spool, for a fat binary), the others
        // (a member below two nested prefixes) from it.
        let mut first: Option<PathBuf> = None;
        if fat {
            kpack_tar::write_file(content, spool, mode)?;
            first = Some(spool.to_owned());
        }
        for &i in indices {
            let item = &self.items[i];
            let result = match plan::copy_destination(stage, component, item) {
                Some(to) => {
                    let bytes = match &first {
                        Some(from) => crate::copy_file(from, &to)?,
                        None => {
                            let bytes = kpack_tar::write_file(content, &to, mode)?;
                            first = Some(to);
                            bytes
                        }
                    };
                    plan::copied(&item.class, bytes)
                }
                None => plan::split_fat(
                    spool,
                    stage,
                    component,
                    item,
                    &self.modules[&i],
                    self.opts.compression,
                    self.names,
                )
                .map_err(|e| at_member(e, spool, self.input.join(path)))?,
            };
            finished(i, result);
        }
        if fat {
            std::fs::remove_file(spool).map_err(ArtifactError::io(spool))?;
        }
        Ok(())
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
